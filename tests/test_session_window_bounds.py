"""A window wider than any session is the whole session, not an overflow (review rev6):
`hermes sessions search -C N` takes any N of 0 or more, and SQLite's integers end at 2**63."""

from hermes.memory.sessions import hits
from hermes.memory.sessions.records import read_window


def test_a_huge_context_is_the_whole_session(rt, cli):
    sessions = rt.memory.sessions
    sid = sessions.create("owner", "terminal").id
    said = [sessions.append("owner", sid, "user", f"line {i} about the heron").id
            for i in range(3)]
    theirs = sessions.create("bob", "terminal").id
    sessions.append("bob", theirs, "user", "bob's heron")
    for context in (2**62, 2**63, 10**30):
        window = read_window(rt.db, "owner", sid, said[1], context)
        assert [m.id for m in window] == said
        assert [m.id for m in hits.read_windows(rt.db, "owner", [(sid, said[1])], context)[
            said[1]]] == said
    done = cli("sessions", "search", "heron", "-C", str(2**63), "--json")
    assert done.exit_code == 0
    (hit,) = done.json()
    assert [m["id"] for m in hit["context"]] == said
