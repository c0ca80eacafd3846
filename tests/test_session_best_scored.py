"""The user's best matches by FTS5's bm25 in two steps (hermes.memory.sessions.bm25.best_scored):
the rows the joined query finds, in its order, whoever else shares the index; another user's
rows never; a home where the user's rows are few goes to the joined query and stays there a
while (by the clock)."""

import pytest

from hermes.memory.sessions import bm25
from hermes.memory.sessions.search import MESSAGE_WEIGHTS
from hermes.memory.sessions.store import SessionStore

JOINED = (
    "SELECT m.id, m.session_id, -bm25(messages_fts, ?, ?) AS score FROM messages_fts "
    "CROSS JOIN messages m ON m.id = messages_fts.rowid WHERE messages_fts MATCH ? "
    "AND m.user = ? AND (? IS NULL OR (SELECT source FROM sessions WHERE id = m.session_id) = ?) "
    "ORDER BY score DESC, m.id LIMIT ?")


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock)


def said(store, clock, user, lines, source="terminal"):
    session = store.create(user, source)
    for line in lines:
        clock.advance(minutes=1)
        store.append(user, session.id, "user", line)
    return session


def joined(store, user, expr, limit, source=None):
    return store.db.execute(JOINED, [*MESSAGE_WEIGHTS, expr, user, source, source,
                                     limit]).fetchall()


def best(store, clock, user, expr, limit, source=None):
    return bm25.best_scored(store.db, expr, user, source, limit, MESSAGE_WEIGHTS,
                            clock.now().timestamp())


def statements(store):
    """The statements run from here on, as SQLite traces them (not FTS5's own, "-- ...")."""
    seen: list[str] = []
    store.db.conn.set_trace_callback(lambda sql: sql.startswith("--") or seen.append(sql))
    return seen


def history(store, clock):
    # Messages of every strength for "kettle" (one to four times, long and short), and a
    # few words more: ties and a real order to keep.
    for i in range(12):
        said(store, clock, "owner", [
            "kettle " * (1 + i % 4) + "descaled on the stove" + " again" * (i % 3),
            f"the kettle whistles, note {i}", "nothing to do with it"])


def test_two_steps_find_the_rows_of_the_joined_query_in_its_order(store, clock, monkeypatch):
    history(store, clock)
    said(store, clock, "bob", ["kettle kettle kettle", "a kettle"])
    monkeypatch.setattr(bm25, "WIDER", 2)  # the wide step holds fewer than every match
    for limit in (1, 3, 5, 10):
        trace = statements(store)
        found = best(store, clock, "owner", '"kettle"', limit)
        assert not any("CROSS JOIN" in s for s in trace)  # answered by the two steps
        assert found == joined(store, "owner", '"kettle"', limit)
    assert best(store, clock, "owner", '"descaled" OR "whistles"', 4) == joined(
        store, "owner", '"descaled" OR "whistles"', 4)
    assert best(store, clock, "owner", '"teapot"', 5) == []


def test_another_users_rows_are_never_returned_and_crowding_falls_back(store, clock,
                                                                       monkeypatch):
    # bob's matches fill most of the index's best 4: the owner's two, weaker, are found all the
    # same (the best of them among those 4, the other only by the joined query).
    monkeypatch.setattr(bm25, "WIDER", 2)
    said(store, clock, "bob", ["kettle kettle kettle kettle"] * 3)
    mine = said(store, clock, "owner", ["the old kettle leaks", "a kettle again, kettle"])
    trace = statements(store)
    found = best(store, clock, "owner", '"kettle"', 2)
    assert any("CROSS JOIN" in s for s in trace)
    assert found == joined(store, "owner", '"kettle"', 2)
    assert [sid for _, sid, _ in found] == [mine.id, mine.id]
    # The owner's next searches go to the joined query at once, until JOINED_SECONDS pass.
    trace.clear()
    assert best(store, clock, "owner", '"kettle"', 2) == found
    assert len(trace) == 1 and "CROSS JOIN" in trace[0]
    clock.advance(seconds=bm25.JOINED_SECONDS + 1)
    trace.clear()
    assert best(store, clock, "owner", '"kettle"', 2) == found
    assert "CROSS JOIN" not in trace[0]
    # bob's own searches were never sent to the joined query by the owner's.
    trace.clear()
    bobs = best(store, clock, "bob", '"kettle"', 2)
    assert not any("CROSS JOIN" in s for s in trace)
    assert bobs == joined(store, "bob", '"kettle"', 2)


def test_a_source_filter_keeps_only_that_sources_rows(store, clock, monkeypatch):
    monkeypatch.setattr(bm25, "WIDER", 2)
    history(store, clock)
    cron = said(store, clock, "owner", ["kettle report: descaled"], source="cron")
    found = best(store, clock, "owner", '"kettle"', 3, source="cron")
    assert found == joined(store, "owner", '"kettle"', 3, source="cron")
    assert [sid for _, sid, _ in found] == [cron.id]


def test_with_few_matches_for_the_rows_read_the_joined_query_runs_at_once(store, clock,
                                                                            monkeypatch):
    monkeypatch.setattr(bm25, "WIDER", 2)
    history(store, clock)
    matches = store.db.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?",
                               ['"kettle"']).fetchone()[0]
    # A limit whose first step would read more than a third of the matches.
    few = matches // (bm25.TWO_STEP_MATCHES * bm25.WIDER) + 1
    trace = statements(store)
    found = bm25.best_scored(store.db, '"kettle"', "owner", None, few, MESSAGE_WEIGHTS,
                             clock.now().timestamp(), matches)
    assert len(trace) == 1 and "CROSS JOIN" in trace[0]
    assert found == joined(store, "owner", '"kettle"', few)
    # Enough matches for the rows read: the two steps, and nothing remembered by the join above.
    trace.clear()
    many = matches // (bm25.TWO_STEP_MATCHES * bm25.WIDER)
    assert bm25.best_scored(store.db, '"kettle"', "owner", None, many, MESSAGE_WEIGHTS,
                            clock.now().timestamp(), matches) == joined(store, "owner",
                                                                        '"kettle"', many)
    assert not any("CROSS JOIN" in s for s in trace[:2])
