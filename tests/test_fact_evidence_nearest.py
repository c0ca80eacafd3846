"""Session search's fact evidence by meaning asks the fact store for the facts nearest the
question (FactRecall.nearest through fact_evidence.hits_for), not its fused search: a hit's
strength is its cosine alone, so a fact under the ramp's first cosine would lift nothing."""

import pytest

from hermes.memory.facts.recall import FactRecall
from hermes.memory.sessions import fact_evidence
from tests.test_session_facts import FACT, QUESTION, home, learn, stores

RAIN = "The user likes the rain"


def test_the_nearest_facts_at_the_floor_or_above_best_first_each_with_its_cosine(db, clock):
    facts, store = stores(db, clock, True)
    ids = home(store, clock)
    car = learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    learn(facts, "owner", RAIN, ids["lake"], [])
    learn(facts, "owner", "The user's dog sleeps in the car", ids["work"], [])
    recall = FactRecall(facts, clock)
    near = recall.nearest("owner", QUESTION, limit=5, floor=0.5)
    assert [f.content for f in near][0] == FACT and RAIN not in {f.content for f in near}
    assert all(f.cosine >= 0.5 and f.score == pytest.approx(f.cosine * f.trust) for f in near)
    assert [f.cosine for f in near] == sorted((f.cosine for f in near), reverse=True)
    assert len(recall.nearest("owner", QUESTION, limit=1, floor=0.5)) == 1
    assert recall.nearest("owner", QUESTION, limit=5, floor=0.999) == []
    # the text session search embedded, when given, is what is compared
    assert recall.nearest("owner", QUESTION, limit=5, floor=0.5, meaning="rain")[0].content \
        == RAIN
    # forgotten, or under the trust threshold: hidden as from the fused search
    facts.forget("owner", car.id)
    assert FACT not in {f.content for f in recall.nearest("owner", QUESTION, limit=5,
                                                              floor=0.5)}


def test_another_users_facts_are_never_near_and_untrusted_ones_hide(db, clock):
    facts, store = stores(db, clock, True)
    ids = home(store, clock)
    learn(facts, "bob", "Bob's car is a Tesla", ids["bobs"], [ids["bob_message"]])
    learn(facts, "owner", RAIN, ids["lake"], [])
    recall = FactRecall(facts, clock)
    assert recall.nearest("owner", QUESTION, limit=5, floor=0.5) == []
    assert [f.user for f in recall.nearest("bob", QUESTION, limit=5, floor=0.5)] == ["bob"]
    doubted = learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    db.execute("UPDATE facts SET trust = ? WHERE id = ?",
               [facts.config.search_min_trust / 2, doubted.id])
    assert recall.nearest("owner", QUESTION, limit=5, floor=0.5) == []


def test_none_when_meaning_cannot_rank_then_the_fused_search_answers(db, clock):
    words, store = stores(db, clock, False)
    ids = home(store, clock)
    learn(words, "owner", FACT, ids["tesla"], [ids["keys"]])
    assert FactRecall(words, clock).nearest("owner", QUESTION, limit=5, floor=0.4) is None
    facts, _ = stores(db, clock, True)
    recall = FactRecall(facts, clock)
    assert recall.nearest("carol", QUESTION, limit=5, floor=0.4) is None  # none embedded
    assert recall.nearest("owner", "我的车是什么", limit=5, floor=0.4) is None  # CJK: LIKE
    assert recall.nearest("owner", "thanks!", limit=5, floor=0.4) is None  # chatter


class Source:
    """A fact source that says which search was asked."""

    def __init__(self, near):
        self.near, self.calls = near, []

    def ranked(self, user, query, *, limit, meaning=None):
        self.calls.append(("ranked", limit, meaning))
        return ["fused"]

    def nearest(self, user, query, *, limit, floor, meaning=None):
        self.calls.append(("nearest", limit, floor, meaning))
        return self.near


def test_hits_for_asks_the_nearest_only_when_the_strength_is_the_cosine():
    from hermes.memory.embeddings.embedders import MINILM

    low = fact_evidence.RAMPS[MINILM][0]
    source = Source(["near"])
    assert fact_evidence.hits_for(source, "owner", QUESTION, "text", MINILM) == ["near"]
    assert source.calls == [("nearest", fact_evidence.MEANING_TOP_FACTS, low, "text")]
    for meaning, model in ((None, MINILM), ("text", "e5-without-a-ramp"), ("text", None)):
        source = Source(["near"])
        assert fact_evidence.hits_for(source, "owner", QUESTION, meaning, model) == ["fused"]
        assert source.calls == [("ranked", fact_evidence.FACT_HITS, meaning)]
    source = Source(None)  # the store cannot rank by meaning (no fact embedded yet)
    assert fact_evidence.hits_for(source, "owner", QUESTION, "text", MINILM) == ["fused"]
    assert [c[0] for c in source.calls] == ["nearest", "ranked"]


def test_the_homes_session_search_asks_the_nearest_facts(rt, monkeypatch):
    rt.settings.sessions.embeddings = True
    model = rt.memory.fact_vectors.model_id
    monkeypatch.setitem(fact_evidence.RAMPS, model, (0.2, 0.5))  # the toy model's cosines
    asked = []
    real = FactRecall.nearest
    monkeypatch.setattr(FactRecall, "nearest",
                        lambda self, *a, **k: asked.append(k["floor"]) or real(self, *a, **k))
    monkeypatch.setattr(FactRecall, "ranked", lambda *a, **k: pytest.fail("fused search"))
    store, facts = rt.memory.sessions, rt.memory.facts
    ids = home(store, rt.clock)
    learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    question = "Which Tesla Model do I have?"
    assert store.search("owner", question, limit=3)[0].session.id == ids["tesla"]
    assert asked == [0.2]  # the home's own fact search (Memory._fact_hits)
    hits = {h.message.id: h for h in store.search_messages("owner", question, limit=10,
                                                             facts=rt.memory._fact_hits)}
    # by meaning: the fact's own turn is lifted, not the rest of its conversation
    assert hits[ids["keys"]].parts["facts"] > 0
    assert all("facts" not in h.parts for m, h in hits.items() if m != ids["keys"])
    assert asked == [0.2, 0.2]
