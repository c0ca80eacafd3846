"""Fact search's bm25 x trust ranking from FTS5's bm25 order alone (hermes.memory.facts.search.
_best_matches): the rows of only the best matches are read, bounded by the user's highest trust
(m027's index), and the result is the order of ranking every match in one statement. Another
user's facts, forgotten ones and those below the trust floor are never returned."""

from __future__ import annotations

import random

import pytest

from hermes.config import FactsConfig
from hermes.memory.facts import search as fact_search
from hermes.memory.facts.records import ACTIVE, BM25
from hermes.memory.facts.store import FactStore, content_key

WORDS = ["kestrel", "heron", "falcon", "owl", "wren", "finch", "the", "by", "old", "tower"]


def write(db, rng: random.Random, n: int, user: str, trusts: list[float]) -> list[int]:
    """``n`` facts of ``user``, a few words each (many of one length: bm25 ties in blocks)."""
    ids = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.choice([3, 3, 3, 5, 8]))) + f" {i}"
        ids.append(db.execute(
            "INSERT INTO facts (user, content, content_key, category, kind, tags, entity_names, "
            "trust, created_at, updated_at) VALUES (?, ?, ?, 'general', 'semantic', '[]', '', ?, "
            "'2026-01-01', '2026-01-01')",
            [user, text, content_key(text), rng.choice(trusts)]).lastrowid)
    return ids


def one_statement(db, expression: str, user: str, floor: float, limit: int) -> list[tuple]:
    """Every match ranked in one statement (what fact search did before the bound)."""
    return [tuple(row) for row in db.execute(
        f"SELECT f.id, {BM25} AS bm FROM facts_fts CROSS JOIN facts f ON f.id = facts_fts.rowid "
        f"WHERE facts_fts MATCH ? AND f.user = ? AND {ACTIVE} AND f.trust >= ? "
        "ORDER BY bm * f.trust, f.trust DESC, f.id DESC LIMIT ?",
        [expression, user, floor, limit]).fetchall()]


@pytest.mark.parametrize("trusts", [[0.5], [0.2, 0.5, 0.7, 0.9, 1.0], [0.35, 0.36]])
def test_the_best_matches_are_those_of_ranking_every_match_in_one_statement(db, trusts):
    rng = random.Random(len(trusts))
    mine = write(db, rng, 400, "owner", trusts)
    write(db, rng, 300, "bob", [1.0])  # another user's, all more trusted than mine
    for fact_id in rng.sample(mine, 60):
        db.execute("UPDATE facts SET forgotten_at = '2026-02-01' WHERE id = ?", [fact_id])
    for expression in ('"kestrel"', '"kestrel" OR "heron"', '"owl" OR "tower" OR "by"',
                       '"wren" AND "finch"', '"nothing"'):
        for limit in (1, 8, 50, 500):
            for floor in (0.0, 0.4):
                expected = one_statement(db, expression, "owner", floor, limit)
                got = fact_search._best_matches(db, expression, "owner", floor, limit)
                assert got == expected, (expression, limit, floor)
    assert fact_search._best_matches(db, '"kestrel"', "carol", 0.0, 8) == []  # no facts


def test_only_the_best_matches_rows_are_read_when_trust_does_not_reorder_them(db):
    rng = random.Random(3)
    write(db, rng, 600, "owner", [0.5])
    seen: list[str] = []
    db.conn.set_trace_callback(seen.append)
    try:
        got = fact_search._best_matches(db, '"kestrel" OR "heron"', "owner", 0.0, 8)
    finally:
        db.conn.set_trace_callback(None)
    assert got == one_statement(db, '"kestrel" OR "heron"', "owner", 0.0, 8)
    matches = db.execute("SELECT count(*) FROM facts_fts WHERE facts_fts MATCH "
                         "'\"kestrel\" OR \"heron\"'").fetchone()[0]
    lookups = [sql for sql in seen if "f.id IN (" in sql]
    read = sum(sql.split("f.id IN (")[1].split(")")[0].count(",") + 1 for sql in lookups)
    assert matches > 200 and len(lookups) == 1 and read == 8 + fact_search.BOUND_BATCH


def test_search_never_returns_another_users_facts_that_outrank_mine(db, clock):
    facts = FactStore(db, FactsConfig(), clock)
    for i in range(80):  # bob's: the word twice in a short fact, the best bm25 of all
        facts.add("bob", f"kestrel kestrel {i}")
    gone = facts.add("owner", "kestrel kestrel nest").fact
    facts.forget("owner", gone.id)
    mine = [facts.add("owner", f"A kestrel was seen over the old water tower, day {i}").fact.id
            for i in range(3)]
    found = facts.search("owner", "kestrel", limit=5)
    assert sorted(f.id for f in found) == sorted(mine)
    assert all(f.user == "owner" for f in found)
