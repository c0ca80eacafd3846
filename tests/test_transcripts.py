"""Transcript import (JSON Lines): what is merged, what is refused, and what is reported."""

import json

from hermes.memory.sessions.transcripts import import_sessions


def line(messages, **fields):
    return json.dumps({"source": "terminal", "started_at": "2026-11-01T00:00:00Z",
                       "messages": messages, **fields})


def msg(content, external_id=None, at="2026-11-01T00:00:01Z"):
    return {"role": "user", "content": content, "created_at": at, "external_id": external_id}


def test_sessions_without_external_id_are_never_merged_with_each_other(rt):
    store = rt.memory.sessions
    first = line([msg("about the garden")])
    second = line([msg("about the car")])
    report = import_sessions(store, "owner", [first, second])
    assert (report.sessions_created, report.sessions_existing) == (2, 0)
    assert report.messages_added == 2
    assert len(store.list_sessions("owner")) == 2
    # Re-importing the same file still adds nothing.
    again = import_sessions(store, "owner", [first, second])
    assert (again.sessions_created, again.sessions_existing, again.messages_added) == (0, 2, 0)
    assert len(store.list_sessions("owner")) == 2


def test_duplicate_message_external_ids_in_one_line_are_a_line_error(rt):
    store = rt.memory.sessions
    bad = line([msg("one", "m-1"), msg("two", "m-1")], external_id="s-1")
    good = line([msg("fine", "m-1")], external_id="s-2")
    report = import_sessions(store, "owner", [bad, good])
    assert [n for n, _ in report.errors] == [1]
    assert "m-1" in report.errors[0][1]
    assert report.messages_added == 1 and report.sessions_created == 1
    count = rt.db.execute("SELECT count(*) FROM messages").fetchone()[0]
    assert count == report.messages_added


def test_file_with_a_byte_order_mark_imports(cli, tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes("\ufeff".encode() + (line([msg("hello")], external_id="b-1") + "\n").encode())
    result = cli("sessions", "import", str(path), "--json")
    assert result.exit_code == 0, result.stdout
    assert result.json()["sessions_created"] == 1


def test_source_is_validated_and_normalised(rt):
    store = rt.memory.sessions
    report = import_sessions(store, "owner", [
        line([msg("cron docker report")], source="CRON", external_id="c"),
        line([msg("docker chat")], source=" Discord ", external_id="d"),
        line([msg("docker elsewhere")], source="slack", external_id="x"),
    ])
    assert [n for n, _ in report.errors] == [3]
    assert "source" in report.errors[0][1]
    assert sorted(s.source for s in store.list_sessions("owner")) == ["cron", "discord"]
    hits = store.search("owner", "docker")
    assert [h.session.source for h in hits] == ["discord", "cron"]  # cron demoted


def test_a_line_refused_at_its_messages_counts_nothing(rt):
    """The session insert succeeds, a message insert fails: the line is rolled back, so it is
    reported as skipped and counted nowhere else (it was `sessions_created: 1`, 0 rows)."""
    store = rt.memory.sessions
    rt.db.execute("CREATE TRIGGER refuse_boom BEFORE INSERT ON messages WHEN NEW.content = "
                  "'boom' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
    good = line([msg("fine")], external_id="a")
    bad = line([msg("first"), msg("boom", at="2026-11-01T00:00:02Z")], external_id="b")
    report = import_sessions(store, "owner", [good, bad])
    assert (report.sessions_created, report.messages_added, report.skipped) == (1, 1, 1)
    assert report.errors[0][0] == 2 and "refused by the test" in report.errors[0][1]
    assert [s.external_id for s in store.list_sessions("owner")] == ["a"]
    # again, with the session already there: its existing-count is not kept either
    again = import_sessions(store, "owner", [line([msg("fine"), msg("boom")], external_id="a")])
    assert (again.sessions_existing, again.messages_existing, again.skipped) == (0, 0, 1)


def test_an_endless_line_is_refused_in_one_line_not_read_whole(cli, rt, tmp_path, monkeypatch):
    """Issue 30: an import file is read line by line; a line of any length was read whole."""
    from hermes.memory.sessions import transcripts

    monkeypatch.setattr(transcripts, "MAX_LINE_BYTES", 1024 * 1024)
    path = tmp_path / "endless.jsonl"
    path.write_text("x" * (1024 * 1024 + 1), encoding="utf-8")
    for command in (("sessions", "import", str(path)), ("import", str(path))):
        result = cli(*command)
        assert result.exit_code == 1, result.stderr
        # (a file this size gets a progress bar, which ends its line first)
        assert result.stderr.strip() == (
            "Error: endless.jsonl: line 1 is over the import limit of 1 MiB a line (is it a "
            "file Hermes wrote?); it and the lines after it were not imported.")
    assert rt.memory.sessions.list_sessions("owner") == []


def test_a_line_with_one_huge_message_is_refused_whole_and_the_others_import(cli, rt, tmp_path,
                                                                            monkeypatch):
    """Issue 30: one message over MAX_IMPORT_MESSAGE_CHARS (scaled down here) refuses its line
    in one line, before its secret screen; nothing of it is stored, the others are."""
    from hermes.memory.sessions import transcripts

    monkeypatch.setattr(transcripts, "MAX_IMPORT_MESSAGE_CHARS", 1000)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([
        line([msg("fine")], external_id="a"),
        line([msg("first"), msg("y" * 1001)], external_id="b", title="Pasted log"),
        line([msg("a tool's arguments")] + [{**msg("call"), "tool_args": "z" * 1001}],
             external_id="c"),
        line([msg("x" * 1000)], external_id="d"),
    ]) + "\n", encoding="utf-8")
    result = cli("sessions", "import", str(path))
    assert result.exit_code == 1
    assert result.stderr.splitlines()[1:] == [
        "  line 2: 'Pasted log': message 2 of 2 is 1,001 characters, over the import limit of "
        "1,000 a message; none of this session was imported.",
        "  line 3: message 2 of 2 is 1,001 characters, over the import limit of 1,000 a "
        "message; none of this session was imported."]
    store = rt.memory.sessions
    assert sorted(s.external_id for s in store.list_sessions("owner")) == ["a", "d"]
    assert rt.db.execute("SELECT count(*) FROM messages").fetchone()[0] == 2


def test_a_batch_ends_at_its_size_in_characters(rt, monkeypatch):
    """Sessions wait in memory until their batch is written: a batch of large ones ends at
    IMPORT_BATCH_CHARS, not only at IMPORT_BATCH sessions."""
    from hermes.memory.sessions import transcripts

    monkeypatch.setattr(transcripts, "IMPORT_BATCH_CHARS", 2500)
    done: list[int] = []
    lines = [line([msg(str(n) * 1000)], external_id=str(n)) for n in range(1, 8)]
    report = import_sessions(rt.memory.sessions, "owner", lines, progress=done.append)
    assert report.sessions_created == 7
    assert done == [3, 6, 7]
