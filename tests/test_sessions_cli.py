"""`hermes sessions`, `hermes db`, `hermes export` / `hermes import` through the real CLI."""

import io
import json
import sqlite3
import threading
from pathlib import Path

import pytest
from rich.console import Console

from hermes.memory.basic import BasicMemory
from hermes.memory.sessions.store import SessionStore
from hermes.memory.sessions.transcripts import import_sessions
from hermes.runtime import Runtime
from hermes.store.db import connect


def session_line(external_id, source, started, messages, **extra):
    return json.dumps({"source": source, "started_at": started, "external_id": external_id,
                       "messages": messages, **extra})


def msg(role, content, at, external_id=None, speaker=None):
    return {"role": role, "content": content, "created_at": at, "external_id": external_id,
            "speaker": speaker}


DOCKER = session_line("d-1", "discord", "2026-11-20T18:02:00Z", [
    msg("user", "The containers can't reach each other since the upgrade.",
        "2026-11-20T18:02:00Z", "d-1:1", "alice"),
    msg("assistant", "Are they on the default bridge network?", "2026-11-20T18:02:20Z", "d-1:2"),
    msg("user", "Yes, default bridge.", "2026-11-20T18:03:00Z", "d-1:3", "alice"),
    msg("assistant", "Create a user-defined network: docker network create homelab.",
        "2026-11-20T18:03:30Z", "d-1:4"),
    msg("user", "That fixed it, thanks!", "2026-11-20T18:05:00Z", "d-1:5", "alice"),
], title="Docker networking")
POSTGRES = session_line(None, "terminal", "2026-11-25T09:00:00Z", [
    msg("user", "Which Postgres version are we on? I think v16.2", "2026-11-25T09:00:00Z"),
    msg("assistant", "PostgreSQL 16.2; pg_upgrade to 17 is planned.", "2026-11-25T09:00:05Z"),
])
CRON = session_line("c-1", "cron", "2026-11-28T03:00:00Z", [
    msg("assistant", "Backup finished: docker volumes included.", "2026-11-28T03:00:10Z"),
], title="Nightly backup report")


@pytest.fixture
def transcripts(tmp_path):
    path = tmp_path / "sessions.jsonl"
    path.write_text("\n".join([DOCKER, POSTGRES, CRON]) + "\n", encoding="utf-8")
    return path


def test_import_list_search_show(cli, transcripts):
    result = cli("sessions", "import", str(transcripts))
    assert result.exit_code == 0, result.stderr
    assert "3 new session(s) and 8 message(s)" in result.stdout

    listed = cli("sessions", "list", "--json").json()
    assert [s["source"] for s in listed] == ["cron", "terminal", "discord"]  # newest activity
    assert {"session_id", "source", "title", "started_at", "last_active_at",
            "message_count"} <= set(listed[0])
    assert listed[1]["title"] is None
    assert listed[1]["display_title"].startswith("Which Postgres version")
    assert [s["source"] for s in cli("sessions", "list", "--source", "cron", "--json").json()] \
        == ["cron"]
    assert len(cli("sessions", "list", "--limit", "1", "--json").json()) == 1
    assert [s["source"] for s in cli("sessions", "list", "--source", "Cron", "--json").json()] \
        == ["cron"]
    # A misspelt source is a mistake, not "no sessions": for every command that filters by it.
    for command in (("sessions", "list"), ("sessions", "search", "docker"),
                    ("sessions", "summarize", "--dry-run"), ("learn", "backfill", "--dry-run")):
        wrong = cli(*command, "--source", "discrod")
        assert (wrong.exit_code, wrong.stdout) == (1, ""), command
        assert wrong.stderr == ("Error: --source 'discrod': use one of discord, terminal, cron, "
                                "import, web.\n"), command
    since = cli("sessions", "list", "--since", "2026-11-24", "--json").json()
    assert [s["source"] for s in since] == ["cron", "terminal"]

    hits = cli("sessions", "search", "how did we fix the docker networking issue?",
               "--json").json()
    assert [h["source"] for h in hits] == ["discord", "cron"]  # cron demoted
    top = hits[0]
    assert {"session_id", "source", "title", "started_at", "score", "summary", "match",
            "context"} <= set(top)
    assert set(top["match"]) >= {"id", "role", "speaker", "content", "created_at", "external_id"}
    assert top["external_id"] == "d-1" and top["match"]["external_id"] == "d-1:4"
    assert [m["external_id"] for m in top["context"]] == ["d-1:2", "d-1:3", "d-1:4", "d-1:5"]
    narrow = cli("sessions", "search", "docker network", "--context", "0", "--json").json()
    assert len(narrow[0]["context"]) == 1

    text = cli("sessions", "search", "v16.2")
    assert text.exit_code == 0 and "v16.2" in text.stdout and "#2 terminal" in text.stdout
    assert "No session mentions" in cli("sessions", "search", "kubernetes").stdout

    shown = cli("sessions", "show", str(top["session_id"]), "--json").json()
    assert [m["external_id"] for m in shown["messages"]] == [f"d-1:{i}" for i in range(1, 6)]
    window = cli("sessions", "show", str(top["session_id"]), "--around",
                 str(top["match"]["id"]), "--context", "1", "--json").json()
    assert [m["external_id"] for m in window["messages"]] == ["d-1:3", "d-1:4", "d-1:5"]
    assert "docker network create homelab" in cli("sessions", "show", "1").stdout


def test_unknown_session_is_a_clear_error(cli, transcripts):
    cli("sessions", "import", str(transcripts))
    result = cli("sessions", "show", "999")
    assert result.exit_code == 1 and result.stderr.strip() == "Error: No session 999 for user " \
        "'owner'."
    # Another user's session is as unknown as a missing one.
    other = cli("sessions", "show", "1", "--user", "bob")
    assert other.exit_code == 1 and "No session 1" in other.stderr
    assert cli("sessions", "search", "?!").exit_code == 1
    assert cli("sessions", "list", "--since", "yesterdayish").exit_code == 1


def test_two_users_are_isolated_in_list_search_show_export(cli, transcripts, tmp_path):
    assert cli("sessions", "import", str(transcripts), "--user", "alice").exit_code == 0
    assert cli("sessions", "list", "--json").json() == []
    assert cli("sessions", "search", "docker", "--json").json() == []
    assert len(cli("sessions", "list", "--user", "alice", "--json").json()) == 3
    assert cli("sessions", "show", "1").exit_code == 1
    exported = cli("export", "--user", "owner").stdout.splitlines()
    assert len(exported) == 2 and json.loads(exported[0])["user"] == "owner"
    alice = cli("export", "--user", "alice").stdout
    assert "homelab" in alice and '"user":"owner"' not in alice


def test_import_is_idempotent_and_reports_malformed_lines(cli, tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([
        DOCKER,
        '{"source": "terminal", "started_at": "2026-11-01T00:00:00Z", "messages": [',  # cut off
        POSTGRES,
        json.dumps({"source": "terminal", "started_at": "2026-11-02T00:00:00Z",
                    "messages": [{"role": "robot", "content": "beep"}]}),
        "",
        CRON,
    ]) + "\n", encoding="utf-8")
    first = cli("sessions", "import", str(path), "--json")
    assert first.exit_code == 1
    report = first.json()
    assert report["sessions_created"] == 3 and report["messages_added"] == 8
    assert [e["line"] for e in report["errors"]] == [2, 4]
    assert "not valid JSON" in report["errors"][0]["error"]
    assert "role" in report["errors"][1]["error"]
    text = cli("sessions", "import", str(path))
    assert text.exit_code == 1 and "line 2:" in text.stderr and "line 4:" in text.stderr
    again = cli("sessions", "import", str(path), "--json").json()
    assert again["sessions_created"] == 0 and again["messages_added"] == 0
    assert again["sessions_existing"] == 3 and again["messages_existing"] == 8
    stats = {t["table"]: t["rows"] for t in cli("db", "stats", "--json").json()["tables"]}
    assert stats["sessions"] == 3 and stats["messages"] == 8


def test_reimport_adds_only_new_messages(rt):
    store = rt.memory.sessions
    import_sessions(store, "owner", [DOCKER])
    longer = json.loads(DOCKER)
    longer["messages"].append(msg("assistant", "Glad it works.", "2026-11-20T18:06:00Z", "d-1:6"))
    report = import_sessions(store, "owner", [json.dumps(longer), POSTGRES, POSTGRES])
    assert (report.sessions_created, report.messages_added) == (1, 3)
    session = store.list_sessions("owner", source="discord")[0]
    assert session.message_count == 6 and session.last_active_at == "2026-11-20T18:06:00.000000Z"


def test_db_path_stats_backup(cli, transcripts, tmp_path, hermes_home):
    cli("sessions", "import", str(transcripts))
    assert cli("db", "path").stdout.strip() == str(hermes_home / "hermes.db")
    stats = cli("db", "stats", "--json").json()
    tables = {t["table"]: t for t in stats["tables"]}
    assert tables["messages"]["rows"] == 8 and tables["messages"]["user_rows"] == 8
    assert stats["bytes"] > 0 and "messages_fts_data" not in tables
    target = tmp_path / "backup.db"
    assert cli("db", "backup", str(target)).exit_code == 0
    copy = sqlite3.connect(target)
    assert copy.execute("SELECT count(*) FROM messages").fetchone()[0] == 8
    refused = cli("db", "backup", str(target))
    assert refused.exit_code == 1 and "already exists" in refused.stderr


def test_backup_is_consistent_while_another_connection_writes(rt, tmp_path):
    store = rt.memory.sessions
    session = store.create("owner", "terminal")
    for i in range(200):
        store.append("owner", session.id, "user", f"seed message {i}")
    stop = threading.Event()
    written = []

    def writer() -> None:
        # Another process's connection: its own handle on the same file.
        other = SessionStore(connect(rt.settings.db_path))
        n = 0
        while not stop.is_set() and n < 5000:
            written.append(other.append("owner", session.id, "assistant", f"written {n}").id)
            n += 1
        other.db.conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    targets = []
    try:
        while len(written) < 50 and thread.is_alive():
            pass
        for i in range(3):
            target = tmp_path / f"backup-{i}.db"
            from hermes.store.maintenance import backup

            backup(rt.db, target)
            targets.append(target)
    finally:
        stop.set()
        thread.join()
    assert written, "the writer never ran"
    for target in targets:
        copy = sqlite3.connect(target)
        assert copy.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        count, counted = copy.execute(
            "SELECT count(*), (SELECT message_count FROM sessions) FROM messages").fetchone()
        assert count == counted and count >= 200  # the trigger's count matches: one snapshot
        copy.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
        copy.close()


def _seed_every_tier(rt: Runtime, user: str) -> None:
    BasicMemory(rt.db, clock=rt.clock).add(user, "Runs Debian 13 on the home server")
    BasicMemory(rt.db, clock=rt.clock).add(user, "Prefers short answers")
    db = rt.db
    with db.conn:
        db.execute("INSERT INTO entities (id, user, name, name_key, created_at) VALUES "
                   "(1, ?, 'PostgreSQL', 'postgresql', '2026-11-01T00:00:00.000000Z')", [user])
        db.execute("INSERT INTO entity_aliases (user, alias_key, alias, entity_id) VALUES "
                   "(?, 'postgres', 'Postgres', 1)", [user])
        # Fact 1 is superseded by the later fact 2: a forward reference the import (in id
        # order) must accept.
        for fid, content, superseded in ((2, "The server runs PostgreSQL 16", None),
                                         (1, "The server runs PostgreSQL 15", 2)):
            db.execute(
                "INSERT INTO facts (id, user, content, content_key, category, tags, "
                "entity_names, trust, created_at, updated_at, superseded_by, source_message_ids) "
                "VALUES (?, ?, ?, ?, 'tool', '[\"db\"]', 'PostgreSQL', 0.6, "
                "'2026-11-01T00:00:00.000000Z', '2026-11-02T00:00:00.000000Z', ?, '[1]')",
                [fid, user, content, content.lower(), superseded],
            )
            db.execute("INSERT INTO fact_entities (fact_id, entity_id) VALUES (?, 1)", [fid])
            db.execute("INSERT INTO fact_history (fact_id, user, action, new, at) VALUES "
                       "(?, ?, 'add', ?, '2026-11-01T00:00:00.000000Z')", [fid, user, content])
    store = rt.memory.sessions
    import_sessions(store, user, [DOCKER, POSTGRES, CRON])
    store.set_summary(user, 1, title="Docker networking", summary="Fixed with a user network.")
    store.close(user, 1)
    with db.conn:
        db.execute("INSERT INTO shown_facts (message_id, fact_id) VALUES (2, 2)")
        db.execute("INSERT INTO message_refs (ref, message_id, user) VALUES ('discord:9', 2, ?)",
                   [user])


def test_export_import_round_trip_is_exact(cli, rt, tmp_path):
    _seed_every_tier(rt, "owner")
    rt.close()
    first = cli("export").stdout
    kinds = {json.loads(line)["type"] for line in first.splitlines()}
    assert kinds >= {"hermes-export", "basic_memory", "entities", "entity_aliases", "facts",
                     "fact_entities", "fact_history", "sessions", "shown_facts", "message_refs"}
    dump = tmp_path / "owner.jsonl"
    assert cli("export", "--output", str(dump)).exit_code == 0
    assert dump.read_text(encoding="utf-8") == first

    other_home = tmp_path / "other-home"
    restored = cli("--home", str(other_home), "import", str(dump))
    assert restored.exit_code == 0, restored.stderr
    assert "2 facts" in restored.stdout
    second = cli("--home", str(other_home), "export").stdout
    assert second == first
    # The indexes were rebuilt too: the restored home searches.
    hits = cli("--home", str(other_home), "sessions", "search", "homelab", "--json").json()
    assert hits[0]["summary"] == "Fixed with a user network."
    # Restoring twice changes nothing: the file is already in.
    again = cli("--home", str(other_home), "import", str(dump))
    assert again.exit_code == 0 and again.stdout.startswith("Already imported: ")
    assert cli("--home", str(other_home), "export").stdout == first


def test_import_under_another_user_and_bad_files(cli, rt, tmp_path):
    _seed_every_tier(rt, "owner")
    rt.close()
    dump = tmp_path / "owner.jsonl"
    cli("export", "--output", str(dump))
    home = tmp_path / "h2"
    assert cli("--home", str(home), "import", str(dump), "--user", "carol").exit_code == 0
    carol = cli("--home", str(home), "export", "--user", "carol").stdout
    # The same records under the new name (the end record's checksum differs with the name).
    renamed = carol.replace('"user":"carol"', '"user":"owner"').splitlines()
    assert renamed[:-1] == dump.read_text(encoding="utf-8").splitlines()[:-1]

    broken = tmp_path / "broken.jsonl"
    lines = dump.read_text(encoding="utf-8").splitlines()
    broken.write_text("\n".join(lines[:3] + ["{not json"] + lines[3:]) + "\n", encoding="utf-8")
    home3 = tmp_path / "h3"
    result = cli("--home", str(home3), "import", str(broken))
    assert result.exit_code == 1 and "line 4" in result.stderr
    assert cli("--home", str(home3), "export").stdout.count("\n") == 2  # header, end
    not_export = tmp_path / "plain.jsonl"
    not_export.write_text(DOCKER + "\n", encoding="utf-8")
    assert "Not a Hermes export" in cli("--home", str(home3), "import", str(not_export)).stderr


def test_large_import_shows_progress_and_imports_all(cli, tmp_path, monkeypatch):
    from hermes.cli import sessions as cli_sessions

    monkeypatch.setattr(cli_sessions, "PROGRESS_BYTES", 100)
    # A terminal console recording what is drawn (the real one is not a terminal under test).
    screen = io.StringIO()
    monkeypatch.setattr(cli_sessions, "err_console",
                        Console(file=screen, force_terminal=True, width=120))
    path = tmp_path / "many.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for i in range(450):  # more than two import batches
            handle.write(session_line(f"s{i}", "import", "2026-11-01T00:00:00Z",
                                      [msg("user", f"note number {i}", "2026-11-01T00:00:00Z")])
                         + "\n")
    result = cli("sessions", "import", str(path), "--json")
    assert result.exit_code == 0 and result.json()["sessions_created"] == 450
    drawn = screen.getvalue()
    assert "importing many.jsonl" in drawn and "━" in drawn  # the bar itself
    size = path.stat().st_size
    assert f"{size / 1000:.1f}/{size / 1000:.1f} kB" in drawn  # and it reached the end
    assert "importing" not in result.stdout  # stdout stays one JSON document
    assert cli("sessions", "search", "number", "--limit", "3", "--json").json()




def test_import_normalises_times_and_rejects_impossible_dates(rt):
    store = rt.memory.sessions
    line = session_line("t-1", "terminal", "2026-11-20T20:00:00+02:00", [
        msg("user", "offset time", "2026-11-20T20:00:00.5+02:00"),
        msg("assistant", "utc time", "2026-11-20T18:00:01Z"),
    ])
    bad = session_line("t-2", "terminal", "2026-02-30T00:00:00Z", [])
    report = import_sessions(store, "owner", [line, bad])
    assert [n for n, _ in report.errors] == [2]
    session = store.list_sessions("owner")[0]
    assert session.started_at == "2026-11-20T18:00:00.000000Z"
    assert [m.created_at for m in store.messages("owner", session.id)] == [
        "2026-11-20T18:00:00.500000Z", "2026-11-20T18:00:01.000000Z"]


def test_search_shows_a_session_without_messages(cli, rt):
    store = rt.memory.sessions
    empty = store.create("owner", "terminal")
    store.set_summary("owner", empty.id, title="Greenhouse plans",
                      summary="Planning the greenhouse heating.")
    rt.close()
    hits = cli("sessions", "search", "greenhouse", "--json").json()
    assert [h["session_id"] for h in hits] == [empty.id] and hits[0]["match"] is None
    text = cli("sessions", "search", "greenhouse")
    assert text.exit_code == 0 and "Greenhouse plans" in text.stdout


def test_out_of_range_numbers_are_one_line_errors(cli, transcripts):
    cli("sessions", "import", str(transcripts))
    for args in (("sessions", "show", "99999999999999999999"),
                 ("sessions", "show", "1", "--around", "99999999999999999999"),
                 ("sessions", "list", "--since", "999999999d"),
                 ("sessions", "list", "--since", "99999999999999999999w")):
        result = cli(*args)
        assert result.exit_code == 1, args
        assert result.stderr.startswith("Error: ") and len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize("query", ["", "   ", "?!"])
def test_empty_search_is_a_clear_error(cli, query):
    result = cli("sessions", "search", query)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Nothing to search for")


def test_home_that_is_a_file_is_a_config_error(cli, tmp_path, monkeypatch):
    not_a_dir = tmp_path / "plain-file"
    not_a_dir.write_text("x", encoding="utf-8")
    monkeypatch.setenv("HERMES_HOME", str(not_a_dir))
    result = cli("sessions", "list")
    assert result.exit_code == 2
    assert str(not_a_dir) in result.stderr and len(result.stderr.splitlines()) == 1
    nested = cli("--home", str(not_a_dir / "below"), "sessions", "list")
    assert nested.exit_code == 2 and str(not_a_dir) in nested.stderr


def test_db_path_and_backup_take_no_user(cli, tmp_path):
    # The database is per home, not per user: an ignored --user would only mislead.
    assert cli("db", "path").exit_code == 0
    assert cli("db", "path", "--user", "bob").exit_code == 2
    assert cli("db", "backup", str(tmp_path / "b.db"), "--user", "bob").exit_code == 2
    assert not (tmp_path / "b.db").exists()
    assert cli("db", "backup", str(tmp_path / "b.db")).exit_code == 0


def test_the_docs_example_file_gives_the_docs_lines(cli):
    """docs/sessions.md shows what `hermes sessions import/list/search` print for the example
    file in the repository."""
    example = Path(__file__).parent.parent / "scripts" / "example_transcripts.jsonl"
    readme = (Path(__file__).parent.parent / "docs" / "sessions.md").read_text(encoding="utf-8")
    assert "$ hermes sessions import scripts/example_transcripts.jsonl" in readme
    result = cli("sessions", "import", str(example))
    assert result.exit_code == 1  # its fourth line is malformed on purpose
    assert result.stdout.strip() in readme
    assert "line 4: 'started_at' is not an ISO 8601 time: 'not a date'" in result.stderr
    for line in cli("sessions", "list").stdout.splitlines():
        assert line.rstrip() in readme
    found = cli("sessions", "search", "how did we fix the docker networking issue?").stdout
    assert [ln.split("  (")[0] for ln in found.splitlines() if ln.startswith("#")] == [
        "#1 discord · 2026-11-20 18:02 · Docker networking on the home server",
        "#3 cron · 2026-11-28 03:00 · Nightly backup report"]
    for line in found.splitlines():
        if line.startswith(("  Match:", "    [", "  > [")):
            assert line in readme
