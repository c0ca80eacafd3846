"""The spread the session-level lifts are scaled by (session_rank.pstdev: floats instead of
statistics' exact arithmetic, ~20x cheaper a search), and the meaning stage's output built
without dataclasses.replace: the same values either way."""

import random
import statistics
from dataclasses import replace

import pytest

from hermes.memory.sessions import session_rank
from hermes.memory.sessions.rerank import RankedMessage


def test_pstdev_is_statistics_pstdev_and_ties_are_exactly_zero():
    rng = random.Random(5)
    for _ in range(500):
        values = [rng.choice([rng.random() * 10, 1.0, 0.1]) for _ in range(rng.randint(2, 60))]
        assert session_rank.pstdev(values) == pytest.approx(statistics.pstdev(values),
                                                            rel=1e-12, abs=1e-15)
    assert session_rank.pstdev([0.1] * 3) == 0.0  # the callers then fall back to another spread
    assert session_rank.pstdev([]) == session_rank.pstdev([3.0]) == 0.0
    assert session_rank.pstdev(iter([1.0, 3.0])) == 1.0  # any iterable, read once


def test_the_meaning_stage_keeps_every_field_of_a_ranked_message():
    np = pytest.importorskip("numpy")
    from hermes.memory.sessions import semantic

    class Sims:
        ids = np.array([1, 2, 3])

        def of(self, message_ids):
            return (np.array([0.9, 0.1, 0.5][: len(message_ids)]),
                    np.array([0.2, 0.3, 0.4][: len(message_ids)]))

    ranked = [RankedMessage(1, 10, 2.0, {"bm25": 2.0}, session_matched=True),
              RankedMessage(2, 11, 1.0, {"bm25": 1.0}),
              RankedMessage(3, 10, 0.5, {"bm25": 0.5}, session_matched=True)]
    out = semantic.rerank_by_meaning(ranked, Sims(), limit=3,
                                     params=replace(semantic.DEFAULT_SEMANTIC, pool=2))
    by_id = {r.message_id: r for r in out}
    assert {m: r.session_id for m, r in by_id.items()} == {1: 10, 2: 11, 3: 10}
    assert by_id[1].session_matched and by_id[3].session_matched
    assert not by_id[2].session_matched
    assert by_id[1].parts["dense"] > 0  # re-scored by meaning
    assert by_id[3].parts == {"bm25": 0.25} and by_id[3].score == 0.25  # past the pool: scaled
