"""Session search's fact evidence by meaning (hermes.memory.sessions.fact_evidence): with the
facts' cosines to the question, a fact lifts the turn it was learned from as much as it is close
in meaning, whatever its rank among the hits (a home with few facts has a weak best hit)."""

from dataclasses import dataclass

import pytest

from hermes.memory.sessions import fact_evidence
from hermes.memory.sessions.rerank import RankedMessage
from tests.test_session_facts import FACT, QUESTION, home, learn, stores

RAMP = (0.4, 0.8)


@dataclass
class Hit:
    score: float | None
    source_session_id: int | None
    source_message_ids: list[int]
    cosine: float | None = None
    trust: float | None = 0.5


def first_message(db, session_id):
    return db.execute("SELECT min(id) FROM messages WHERE session_id = ?",
                      [session_id]).fetchone()[0]


def test_a_facts_strength_is_its_closeness_in_meaning_not_its_rank(db, clock):
    _, store = stores(db, clock, False)
    ids = home(store, clock)
    lake, work = first_message(db, ids["lake"]), first_message(db, ids["work"])
    weak = Hit(0.9, ids["lake"], [lake], cosine=0.35)  # ranked first, far in meaning
    close = Hit(0.5, ids["tesla"], [ids["keys"]], cosine=0.8)
    halfway = Hit(0.4, ids["work"], [work], cosine=0.6)
    evidence = fact_evidence.gather(db, "owner", [weak, close, halfway], ramp=RAMP)
    assert evidence.messages == {ids["keys"]: (ids["tesla"], 1.0),
                                 work: (ids["work"], pytest.approx(0.5))}
    assert ids["lake"] not in evidence.sessions
    assert evidence.weights == (fact_evidence.MEANING_SESSION_WEIGHT,
                                fact_evidence.MEANING_MESSAGE_WEIGHT)
    # no calibrated ramp (another model, or words only): by the hits' scores, as before
    by_score = fact_evidence.gather(db, "owner", [weak, close, halfway], ramp=None)
    assert by_score.messages[lake] == (ids["lake"], 1.0)
    assert by_score.weights == (fact_evidence.SESSION_WEIGHT, fact_evidence.MESSAGE_WEIGHT)
    # nothing close enough: no evidence at all
    assert not fact_evidence.gather(db, "owner", [weak], ramp=RAMP)


def test_trust_still_multiplies_and_another_users_turns_are_never_reached(db, clock):
    _, store = stores(db, clock, False)
    ids = home(store, clock)
    doubted = Hit(0.5, ids["tesla"], [ids["keys"]], cosine=0.8, trust=0.25)
    assert fact_evidence.gather(db, "owner", [doubted], ramp=RAMP).messages == {
        ids["keys"]: (ids["tesla"], pytest.approx(0.5))}
    trusted = Hit(0.5, ids["tesla"], [ids["keys"]], cosine=0.8, trust=0.9)  # at most 1
    assert fact_evidence.gather(db, "owner", [trusted], ramp=RAMP).messages == {
        ids["keys"]: (ids["tesla"], 1.0)}
    forged = Hit(0.9, ids["bobs"], [ids["bob_message"]], cosine=0.95)  # bob's rows
    assert not fact_evidence.gather(db, "owner", [forged], ramp=RAMP)
    assert fact_evidence.gather(db, "bob", [forged], ramp=RAMP)


def test_by_meaning_only_the_turn_a_fact_came_from_is_lifted(db, clock):
    _, store = stores(db, clock, False)
    ids = home(store, clock)
    other = db.execute("SELECT id FROM messages WHERE session_id = ? AND id != ?",
                       [ids["tesla"], ids["keys"]]).fetchone()[0]
    ranked = [RankedMessage(other, ids["tesla"], 1.0, {}),
              RankedMessage(first_message(db, ids["lake"]), ids["lake"], 0.5, {})]
    evidence = fact_evidence.gather(
        db, "owner", [Hit(0.5, ids["tesla"], [ids["keys"]], cosine=0.8)], ramp=RAMP)
    lifted = {r.message_id: r for r in fact_evidence.lift(ranked, evidence)}
    assert lifted[other].score == 1.0  # its session holds the fact's turn: no session weight
    assert lifted[ids["keys"]].parts["facts"] > 0  # joined the pool, lifted


def test_the_fact_store_says_each_hits_cosine_and_search_reads_it(db, clock, monkeypatch):
    facts, store = stores(db, clock, True)
    ids = home(store, clock)
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    learn(facts, "owner", "The user likes the rain", ids["lake"],
          [first_message(db, ids["lake"])])
    hits = facts.search("owner", QUESTION, limit=5)
    cosines = {h.content: h.cosine for h in hits}
    assert cosines[FACT] > 0.75 and cosines.get("The user likes the rain", 0.0) < 0.3
    monkeypatch.setitem(fact_evidence.RAMPS, store.vectors.embedder.model_id, (0.4, 0.75))
    found = store.search_messages("owner", QUESTION, limit=10, facts=hits)
    keys = next(h for h in found if h.message.id == ids["keys"])
    assert keys.parts["facts"] > 0
    assert all("facts" not in h.parts for h in found if h.message.id != ids["keys"])
    # words only: no cosine on the hits
    words, _ = stores(db, clock, False)
    assert all(h.cosine is None for h in words.search("owner", QUESTION, limit=5))
