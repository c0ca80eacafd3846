"""The grouping by session asks the ranking without the parts' detail (rerank.rerank and
semantic.rerank_by_meaning with ``detail=False``): the same order, scores and hits as with it."""

import itertools

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.sessions import rerank, semantic  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from tests.histories import say  # noqa: E402
from tests.test_embeddings import ToyEmbedder  # noqa: E402

READ = ("bm25", "date", "title/summary")


def test_the_parts_read_after_the_ranking_are_its_parts():
    for values in itertools.product((0.0, 0.25), repeat=6):
        full = rerank._parts(values)
        assert rerank._read_parts(values) == {k: v for k, v in full.items() if k in READ}
    for value in (0.0, 0.5):
        assert rerank._read_parts((value,)) == rerank._parts((value,))


def test_rerank_by_meaning_without_detail_keeps_order_scores_and_matches():
    ranked = [rerank.RankedMessage(1, 10, 1.0, {"bm25": 0.6, "date": 0.3}),
              rerank.RankedMessage(2, 20, 0.9, {"title/summary": 0.9}, True),
              rerank.RankedMessage(3, 20, 0.8, {"bm25": 0.2, "neighbours": 0.1}),
              rerank.RankedMessage(4, 30, 0.1, {"dense": 0.1}, matched=""),
              rerank.RankedMessage(5, 30, 0.05, {"bm25": 0.05})]
    sims = semantic.Similarities(
        np.array([1, 2, 3, 4, 5]), np.array([0.2, 0.1, 0.9, 0.8, 0.3], np.float32),
        np.array([0.3, 0.2, 0.5, 0.7, 0.1], np.float32))
    for params in (semantic.DEFAULT_SEMANTIC, semantic.SemanticParams(pool=3)):
        full = semantic.rerank_by_meaning(ranked, sims, limit=5, params=params, floor=0.3)
        light = semantic.rerank_by_meaning(ranked, sims, limit=5, params=params, floor=0.3,
                                           detail=False)
        assert [(r.message_id, r.score, r.matched, r.session_matched) for r in light] == \
            [(r.message_id, r.score, r.matched, r.session_matched) for r in full]
        for a, b in zip(light, full, strict=True):
            assert ("title/summary" in a.parts) == ("title/summary" in b.parts)


def test_the_grouping_finds_what_it_found_with_every_part(db, clock, monkeypatch):
    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))
    say(store, clock, "owner", "the vehicle inspection is due", "on Monday")
    say(store, clock, "owner", "the dog inspection passed", "my car is blue")
    say(store, clock, "owner", "rain all day", "hello there")
    titled = store.create("owner", "discord")
    store.set_title("owner", titled.id, "automobile plans")
    (bobs,) = say(store, clock, "bob", "my automobile inspection")
    queries = ("automobile inspection", "car", "when is the vehicle inspection", "dog rain")

    def hits():
        return [[(h.to_json(), h.score) for h in store.search("owner", q, limit=10)]
                for q in queries]

    light = hits()
    for module, name in ((rerank, "rerank"), (semantic, "rerank_by_meaning")):
        whole = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _f=whole, **k: _f(*a, **{**k,
                                                                           "detail": True}))
    assert hits() == light
    assert any(h for q in light for h in q)
    bob = db.execute("SELECT session_id FROM messages WHERE id = ?", [bobs]).fetchone()[0]
    assert all(h["session_id"] != bob for q in light for h, _ in q)
