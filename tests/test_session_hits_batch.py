"""SessionStore.search reads what its hits show for all of them at once
(hermes.memory.sessions.hits): their sessions in one query, their windows in one, their snippets in
one a run of nearby rows; each the same as read one hit at a time (records.read_window, FTS5's
snippet of the one row), and another user's rows never reached."""

import pytest

from hermes.errors import NotFound
from hermes.memory.sessions import hits
from hermes.memory.sessions.bm25 import HIGHLIGHT, manual_snippet
from hermes.memory.sessions.records import read_window
from hermes.memory.sessions.store import SessionStore
from hermes.store.fts import build_match


def home(db, clock):
    """Six conversations of the owner, of 1 to 6 messages (windows cut at either end), one
    message of each about a heron; bob's heron messages between them."""
    store = SessionStore(db, clock=clock)
    sessions, bobs = [], []
    for n in range(6):
        session = store.create("owner", "terminal")
        for i in range(n + 1):
            clock.advance(minutes=1)
            text = f"the herons came back, note {n}" if i == n // 2 else f"filler {n}.{i}, river"
            store.append("owner", session.id, "user" if i % 2 == 0 else "assistant", text,
                         speaker="owner" if i % 2 == 0 else "hermes")
        theirs = store.create("bob", "terminal")
        bobs.append(store.append("bob", theirs.id, "user", "a heron of bob's, by the river"))
        sessions.append(session)
    return store, sessions, bobs


def test_windows_are_read_window_of_each_message(db, clock):
    store, sessions, _ = home(db, clock)
    around = [(s.id, m.id) for s in sessions for m in store.messages("owner", s.id)]
    for context in (0, 1, 2, 3):
        expected = {mid: read_window(db, "owner", sid, mid, context) for sid, mid in around}
        assert hits.read_windows(db, "owner", around, context) == expected
        assert hits.read_windows(db, "owner", around + around[:3], context) == expected
    assert hits.read_windows(db, "owner", [], 2) == {}


def test_windows_of_another_users_message_or_another_session_are_not_found(db, clock):
    store, sessions, bobs = home(db, clock)
    mine = store.messages("owner", sessions[3].id)
    with pytest.raises(NotFound):
        hits.read_windows(db, "owner", [(bobs[0].session_id, bobs[0].id)], 2)
    with pytest.raises(NotFound):
        hits.read_windows(db, "owner", [(sessions[3].id, mine[0].id),
                                        (bobs[1].session_id, bobs[1].id)], 0)
    with pytest.raises(NotFound):  # a message of the owner, but in another session
        hits.read_windows(db, "owner", [(sessions[2].id, mine[1].id)], 1)
    with pytest.raises(NotFound):
        hits.read_windows(db, "owner", [(sessions[2].id, 2**70)], 1)


def fts_snippet(db, expr, message_id):
    """FTS5's snippet of one row, as hits_of read it one hit at a time."""
    return db.execute(
        "SELECT snippet(messages_fts, 0, ?, ?, '…', ?) FROM messages_fts "
        "WHERE messages_fts MATCH ? AND rowid = ?",
        [*HIGHLIGHT, hits.SNIPPET_TOKENS, expr, message_id]).fetchone()[0]


def traced(db, search):
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    try:
        return search(), statements
    finally:
        db.conn.set_trace_callback(None)


def test_search_reads_its_hits_sessions_windows_and_snippets_in_one_query_each(db, clock):
    store, sessions, _ = home(db, clock)
    found, statements = traced(db, lambda: store.search("owner", "heron", limit=10, context=1))
    assert sorted(h.session.id for h in found) == sorted(s.id for s in sessions)  # bob's never
    for hit in found:
        assert hit.context == read_window(db, "owner", hit.session.id, hit.match.id, 1)
        assert all(m.session_id == hit.session.id for m in hit.context)
        assert hit.snippet == fts_snippet(db, '"heron"', hit.match.id)
        assert "**herons**" in hit.snippet  # a stem: FTS5 highlights it, a plain scan would not
    assert len([s for s in statements if "snippet(messages_fts" in s]) == 1
    assert len([s for s in statements if "WITH hit(sid, mid)" in s]) == 1
    assert len([s for s in statements if "FROM sessions s WHERE s." in s]) == 1


def test_hits_far_apart_read_their_snippets_a_run_each(db, clock, monkeypatch):
    store, _, _ = home(db, clock)
    together = store.search("owner", "heron", limit=10)
    monkeypatch.setattr(hits, "SNIPPET_SPAN", 0)  # every hit a run of its own
    apart, statements = traced(db, lambda: store.search("owner", "heron", limit=10))
    assert [h.to_json() for h in apart] == [h.to_json() for h in together]
    assert len([s for s in statements if "snippet(messages_fts" in s]) == len(apart) == 6


def test_a_match_without_highlight_keeps_its_own_text_for_a_snippet(db, clock):
    """A match on the speaker only: FTS5's snippet of the content highlights nothing, so the
    snippet is cut from the message's text (the window's copy of it)."""
    store = SessionStore(db, clock=clock)
    session = store.create("owner", "terminal")
    store.append("owner", session.id, "user", "did the delivery come?", speaker="margarethe")
    store.append("owner", session.id, "assistant", "not yet", speaker="hermes")
    (hit,) = store.search("owner", "margarethe")
    assert hit.match.content == "did the delivery come?"
    assert hit.snippet == "did the delivery come?"


def test_runs_cut_far_apart_ids_and_long_runs():
    assert hits._runs([1, 2, 5, 3000, 3001], 2000, 200) == [[1, 2, 5], [3000, 3001]]
    assert hits._runs([1, 2, 3], 10, 2) == [[1, 2], [3]]
    assert hits._runs([], 10, 2) == []


def test_a_snippet_cut_by_hand_finds_a_word_in_any_case_and_folded_letters():
    """manual_snippet skips the patterns whose word an ASCII text does not hold; a text
    outside ASCII is scanned by every pattern (case folds further there: "ſ" is an "s")."""
    plan = build_match("sun kiln")
    assert manual_snippet("the SUN is out", plan) == "the **SUN** is out"
    assert manual_snippet("the ſun is out", plan) == "the **ſun** is out"
    assert manual_snippet("a \u212aILN, hot", plan) == "a **\u212aILN**, hot"
    assert manual_snippet("nothing here", plan) == "nothing here"


def test_many_hits_are_read_a_chunk_at_a_time_the_same(db, clock, monkeypatch):
    store, _, _ = home(db, clock)
    whole = store.search("owner", "heron river", limit=10, context=2)
    monkeypatch.setattr(hits, "_CHUNK", 2)
    assert [h.to_json() for h in store.search("owner", "heron river", limit=10, context=2)] == [
        h.to_json() for h in whole]
