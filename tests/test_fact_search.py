"""Fact search: which facts are found never depends on other users' rows or on how common a
word is; ranking is bm25 x trust over every match."""

from __future__ import annotations

import json

import pytest

from hermes.config import FactsConfig
from hermes.memory.facts.store import FactStore, content_key


@pytest.fixture
def facts(db, clock) -> FactStore:
    return FactStore(db, FactsConfig(), clock)


def ids(found) -> list[int]:
    return [f.id for f in found]


def bulk(db, user: str, texts: list[str], *, trust: float = 0.5) -> list[int]:
    """Many facts at once, straight into the table (FTS triggers index them): FactStore.add
    with its duplicate checks would make thousands of rows slow to set up."""
    now = "2026-11-29T12:00:00.000000+00:00"
    with db.conn:
        first = db.execute("SELECT coalesce(max(id), 0) FROM facts").fetchone()[0] + 1
        db.conn.executemany(
            "INSERT INTO facts (user, content, content_key, tags, entity_names, trust, "
            "created_at, updated_at, valid_from, source_message_ids) "
            "VALUES (?, ?, ?, '[]', '', ?, ?, ?, ?, ?)",
            [(user, t, content_key(t), trust, now, now, now, json.dumps([])) for t in texts],
        )
    return list(range(first, first + len(texts)))


# -- 1. other users' rows and common words never hide a user's facts --------------------------


def test_another_users_facts_never_hide_mine(facts, db):
    mine = facts.add("bob", "Bob fixed docker networking on the build server").id
    assert ids(facts.search("bob", "docker kubernetes")) == [mine]
    bulk(db, "alice", [f"Alice note {i}: docker image rebuilt" for i in range(6000)])
    assert ids(facts.search("bob", "docker kubernetes")) == [mine]
    assert ids(facts.search("bob", "kubernetes docker networking")) == [mine]


def test_a_loose_search_retries_every_word_when_the_rare_ones_match_nothing(facts, db):
    notes = bulk(db, "bob", [f"Bob note {i}: docker image rebuilt" for i in range(6000)])
    found = facts.search("bob", "docker kubernetes", limit=5, explain=True)
    assert len(found) == 5 and set(ids(found)) <= set(notes)
    assert found[0].explain["mode"] == "loose"
    # a rare word that does match still ranks first
    rare = facts.add("bob", "Bob tried kubernetes once").id
    assert ids(facts.search("bob", "docker kubernetes", limit=5))[0] == rare


# -- 2. every match is ranked by bm25 x trust, not only the newest ones -----------------------


def test_an_old_trusted_fact_outranks_hundreds_of_newer_matches(facts, db):
    best = facts.add("owner", "docker docker docker: the docker daemon runs rootless").id
    for _ in range(10):
        facts.rate("owner", best, True)
    assert facts.get("owner", best).trust == 1.0
    newer = bulk(db, "owner", [f"Owner note {i} mentions docker among many other words here"
                               for i in range(400)])
    found = facts.search("owner", "docker", limit=5, explain=True)
    assert ids(found)[0] == best and found[0].score == max(f.score for f in found)
    assert all(f.score >= g.score for f, g in zip(found, found[1:], strict=False))
    every = facts.search("owner", "docker", limit=500)
    assert len(every) == 401 and set(ids(every)) == {best, *newer}


# -- 4. CJK: any run when not all of them match -------------------------------------------------


def test_cjk_search_falls_back_to_any_run(facts):
    sushi = facts.add("owner", "我喜欢吃寿司").id
    both = facts.add("owner", "寿司和拉面都好吃").id
    facts.add("owner", "今天下雨了")
    assert ids(facts.search("owner", "寿司 拉面")) == [both]
    facts.forget("owner", both)
    found = facts.search("owner", "寿司 拉面", explain=True)
    assert ids(found) == [sushi] and found[0].explain["mode"] == "loose"
    # a run that matches more of the query ranks first; Latin words count as well
    mixed = facts.add("owner", "Ramen 拉面 in Tokyo").id
    ramen_sushi = facts.add("owner", "寿司 and 拉面 ramen").id
    assert ids(facts.search("owner", "寿司 拉面 ramen sake"))[0] == ramen_sushi
    assert mixed in ids(facts.search("owner", "拉面 sake"))
    assert facts.search("owner", "天妇罗 荞麦") == []


# -- 8. a MATCH error is a bug: it propagates, never becomes "no results" ----------------------


@pytest.mark.parametrize(
    ("strict", "loose", "cjk"),
    [('"docker" AND (', None, ()),          # broken strict expression
     ('"zebra"', '"zebra" OR NEAR(', ()),   # strict finds nothing, the loose one is broken
     ('"docker" AND (', None, ("寿司",))],   # CJK path, broken word expression
)
def test_a_match_error_propagates(facts, monkeypatch, strict, loose, cjk):
    import sqlite3

    from hermes.memory.facts import search as fact_search
    from hermes.store.fts import MatchPlan, Term

    facts.add("owner", "Bob fixed docker networking 寿司")
    broken = MatchPlan(terms=(Term(("docker",)),), cjk=cjk, strict=strict, loose=loose)
    monkeypatch.setattr(fact_search, "build_match", lambda text: broken)
    with pytest.raises(sqlite3.OperationalError):
        facts.search("owner", "docker")
