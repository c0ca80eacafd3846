"""`hermes import` keeps the good records of a file with bad ones, names each bad one by its
line, commits in batches, and --dry-run writes nothing."""

from __future__ import annotations

import json

import pytest

from hermes.memory.basic import BasicMemory
from hermes.memory.transfer import EXPORT_END, export_user, import_user, restore, sealed_lines
from tests.test_transfer import write


@pytest.fixture
def exported(rt):
    """An honest export: a basic-memory entry, three facts, five sessions of four messages."""
    BasicMemory(rt.db, clock=rt.clock).add("owner", "Runs Debian 13 on the home server")
    facts = rt.memory.facts
    for text in ("The server runs PostgreSQL 16", "The user's cat is called Miso",
                 "The backup runs at 02:00"):
        facts.add("owner", text)
    store = rt.memory.sessions
    for n in range(5):
        session = store.create("owner", "terminal")
        for m in range(4):
            store.append("owner", session.id, "user" if m % 2 == 0 else "assistant",
                         f"session {n} message {m}")
    lines = list(export_user(rt.db, "owner"))
    rt.close()
    return lines


def _export(cli, home) -> str:
    return cli("--home", str(home), "export").stdout


def test_a_damaged_line_refuses_the_file_unless_asked_then_the_rest_is_kept(cli, tmp_path,
                                                                            exported):
    lines = list(exported)
    fact_line = next(i for i, line in enumerate(lines)
                     if "Miso" in line and line.startswith('{"type":"facts"'))
    lines[fact_line] = "[" * 50_000  # damaged in place: the file no longer matches its end
    path = tmp_path / "damaged.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    home = tmp_path / "fresh"

    result = cli("--home", str(home), "import", str(path))
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1
    assert "checksum does not match" in result.stderr or "records are missing" in result.stderr
    assert f"line {fact_line + 1}: JSON nested too deeply" in result.stderr
    assert "--allow-incomplete" in result.stderr and "Nothing was imported" in result.stderr
    assert _export(cli, home).count("\n") == 2

    result = cli("--home", str(home), "import", str(path), "--allow-incomplete")
    assert result.exit_code == 1
    warning, head, *refused = result.stderr.splitlines()
    assert warning == ("Warning: the end record counts 3 facts, but the file holds 2 facts: "
                       "records are missing or were added; what could be read was imported "
                       "(--allow-incomplete).")
    assert head == "Refused 3 line(s):"
    assert refused[0] == f"  line {fact_line + 1}: JSON nested too deeply to read"
    # What pointed at the lost fact (its entity links, its history) is refused by name.
    assert [line.split(": ", 1)[1].split(" is ")[0] for line in refused[1:]] == [
        "fact_entities.fact_id 2", "fact_history.fact_id 2"]
    assert refused[1].endswith("a line that could not be read may have held it)")
    kept = _export(cli, home)
    assert "cat is called Miso" not in kept
    assert "PostgreSQL 16" in kept and "The backup runs at 02:00" in kept
    assert kept.count('"type":"sessions"') == 5 and "session 4 message 3" in kept


def test_a_refused_session_takes_only_what_points_at_it(cli, tmp_path, exported):
    records = [json.loads(line) for line in exported if EXPORT_END not in line]
    sessions = [r for r in records if r["type"] == "sessions"]
    sessions[2]["messages"][1]["role"] = {"not": "a role"}  # one message deep inside is bad
    path = write(tmp_path, records)
    home = tmp_path / "fresh"
    result = cli("--home", str(home), "import", str(path), "--json")
    assert result.exit_code == 1
    report = result.json()
    assert [e["line"] for e in report["errors"]] == [records.index(sessions[2]) + 1]
    assert report["counts"]["sessions"] == 4 and report["counts"]["messages"] == 16
    kept = _export(cli, home)
    assert "session 2 message" not in kept and "session 3 message 3" in kept


def test_rows_are_committed_in_batches(rt, tmp_path, exported, monkeypatch):
    """A long import never holds the write lock for all of it: one transaction per batch."""
    monkeypatch.setattr(restore, "BATCH_ROWS", 5)
    statements: list[str] = []
    rt.db.conn.set_trace_callback(statements.append)
    report = import_user(rt.db, exported, user="alice")
    rt.db.conn.set_trace_callback(None)
    assert not report.errors and report.counts["messages"] == 20
    commits = [s for s in statements if s.strip().upper() == "COMMIT"]
    begins = [s for s in statements if s.strip().upper().startswith("BEGIN IMMEDIATE")]
    rows = sum(report.counts.values()) - report.counts["messages"] + 20
    assert len(commits) == len(begins) >= rows // (5 + 4)  # at most a batch and one record
    assert BasicMemory(rt.db).entries("alice")[0].text == "Runs Debian 13 on the home server"


def test_dry_run_checks_everything_and_writes_nothing(cli, tmp_path, exported):
    records = [json.loads(line) for line in exported if EXPORT_END not in line]
    next(r for r in records if r["type"] == "facts")["row"]["trust"] = 7.0
    path = tmp_path / "x.jsonl"
    path.write_text("".join(line + "\n" for line in sealed_lines(records)), encoding="utf-8")
    home = tmp_path / "fresh"
    result = cli("--home", str(home), "import", str(path), "--dry-run")
    assert result.exit_code == 1
    assert result.stdout.startswith("Would import (--dry-run: nothing was written) for "
                                    "'owner': 1 basic_memory")
    assert "trust must be in [0, 1]" in result.stderr
    assert _export(cli, home).count("\n") == 2
    # ... and the real import then does what the dry run said.
    assert cli("--home", str(home), "import", str(path)).stdout.replace(
        "Imported", "Would import (--dry-run: nothing was written)") == result.stdout


def test_a_file_that_is_not_an_export_names_the_command_that_reads_it(cli, tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"source": "import", "started_at": "2025-01-01T00:00:00Z", '
                          '"messages": []}\n', encoding="utf-8")
    chat_export = tmp_path / "conversations.json"
    chat_export.write_text('[{"uuid": "c-1", "chat_messages": []}]', encoding="utf-8")
    for path in (transcript, chat_export):
        result = cli("import", str(path))
        assert result.exit_code == 1 and result.stderr.count("\n") == 1
        assert result.stderr.startswith("Error: Not a Hermes export")
        assert "`hermes sessions import`" in result.stderr


def test_bytes_that_are_not_utf8_in_an_export_are_said_by_their_lines(cli, tmp_path, exported):
    """Review item 9, `hermes import`: a byte that is not UTF-8 damages the file (its end record
    no longer matches); imported with --allow-incomplete, what was read as U+FFFD is said in one
    line, by line number."""
    lines = [line.encode() for line in exported]
    miso = next(i for i, line in enumerate(lines) if b"Miso" in line)
    lines[miso] = lines[miso].replace(b"Miso", b"Mi\xffso")
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    result = cli("--home", str(tmp_path / "fresh"), "import", str(path), "--allow-incomplete")
    assert result.exit_code == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "not UTF-8" in line] == [
        f"Note: 1 line(s) of bytes.jsonl held bytes that are not UTF-8 (line {miso + 1}): each "
        "such sequence (1 in all) was read as U+FFFD (\ufffd) and imported with the rest of its "
        "line."]
    assert "Mi\ufffdso" in _export(cli, tmp_path / "fresh")
