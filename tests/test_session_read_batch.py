"""search_messages reads the sessions of its hits in one query (records.read_sessions), each the
same Session read_session gives; another user's session, or a gone one, is NotFound as there."""

import pytest

from hermes.errors import NotFound
from hermes.memory.sessions.records import read_session, read_sessions
from hermes.memory.sessions.store import SessionStore


def home(db, clock):
    store = SessionStore(db, clock=clock)
    ids = []
    for i in range(4):
        session = store.create("owner", "discord")
        store.append("owner", session.id, "user", f"the heron came back, day {i}")
        ids.append(session.id)
    other = store.create("bob", "discord")
    store.append("bob", other.id, "user", "a heron of mine")
    return store, ids, other.id


def test_read_sessions_is_read_session_for_each_and_another_users_is_not_found(db, clock):
    _, ids, bobs = home(db, clock)
    assert read_sessions(db, "owner", [*ids, ids[0]]) == {
        s: read_session(db, "owner", s) for s in ids}
    assert read_sessions(db, "owner", []) == {}
    with pytest.raises(NotFound):
        read_sessions(db, "owner", [ids[0], bobs])
    with pytest.raises(NotFound):
        read_sessions(db, "owner", [2**70])


def test_search_messages_reads_its_sessions_in_one_query(db, clock):
    store, ids, bobs = home(db, clock)
    statements = []
    db.conn.set_trace_callback(statements.append)
    try:
        hits = store.search_messages("owner", "heron", limit=10)
    finally:
        db.conn.set_trace_callback(None)
    assert sorted({h.session.id for h in hits}) == ids  # bob's never
    assert all(h.session == read_session(db, "owner", h.session.id) for h in hits)
    assert len([s for s in statements if "FROM sessions s WHERE s." in s]) == 1
