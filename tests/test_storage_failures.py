"""A damaged database, a broken config or .env: one line naming the file and what to do, exit 2.

The corrupt-database suite damages a real database in each way the adversarial pass found
(truncated, a bad header, flipped bytes, a text file, a damaged FTS index) and runs the
commands that read and write it; every run must print exactly one line, never a traceback.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from hermes.config import load_settings
from hermes.errors import ConfigError, StorageError
from hermes.store.failures import storage_problem

COMMANDS = [
    ("memory", "show"),
    ("memory", "add", "The NAS is in the hallway closet"),
    ("facts", "search", "redis"),
    ("facts", "add", "Bob likes green tea"),
    ("sessions", "search", "docker"),
    ("sessions", "list"),
    ("db", "stats"),
    ("cron", "list"),
    ("stats",),
]


def _truncate_half(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _truncate_after_header(data: bytes) -> bytes:
    return data[: 4096 + 10]


def _bad_header(data: bytes) -> bytes:
    return b"NOT A DATABASE!!" + data[16:]


def _flip_bytes(data: bytes) -> bytes:
    damaged = bytearray(data)
    rnd = random.Random(1)
    for _ in range(200):
        damaged[rnd.randrange(100, len(damaged))] ^= 0xFF
    return bytes(damaged)


def _flip_page_headers(data: bytes) -> bytes:
    damaged = bytearray(data)
    for start in range(4096, len(damaged), 4096):
        damaged[start + 8:start + 12] = b"\xff\xff\xff\xff"
    return bytes(damaged)


def _text_file(data: bytes) -> bytes:
    return b"these are my notes, not a database\n" * 50


DAMAGE = [_truncate_half, _truncate_after_header, _bad_header, _flip_bytes,
          _flip_page_headers, _text_file]


@pytest.fixture(scope="module")
def healthy_db(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a database with a few hundred rows in every FTS-indexed table."""
    from hermes.clock import FakeClock
    from hermes.config import Settings
    from hermes.runtime import Runtime

    home = tmp_path_factory.mktemp("healthy")
    rt = Runtime(Settings(home=str(home)), clock=FakeClock("2026-11-29T12:00:00+00:00"))
    facts = rt.memory.facts
    for i in range(120):
        facts.add("owner", f"Alice deployed redis number {i} for Project Atlas")
    sessions = "\n".join(
        '{"source": "terminal", "started_at": "2026-11-20T10:00:00Z", "messages": [{"role": '
        f'"user", "content": "docker networking question {i} lorem ipsum", '
        '"created_at": "2026-11-20T10:00:00Z"}]}' for i in range(150))
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.transcripts import import_sessions

    import_sessions(SessionStore(rt.db, rt.clock), "owner", sessions.splitlines())
    rt.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rt.close()
    return (home / "hermes.db").read_bytes()


def _one_line_exit_2(result, db_path: Path) -> None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.exit_code == 2, result.stderr
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert str(db_path) in lines[0]
    assert "hermes db check" in lines[0] and "hermes db backup" in lines[0]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_a_damaged_database_is_one_line_for_every_command(
    cli, hermes_home: Path, tmp_path: Path, healthy_db: bytes, damage
) -> None:
    db_path = hermes_home / "hermes.db"
    hermes_home.mkdir(parents=True, exist_ok=True)
    damaged = damage(healthy_db)
    for command in COMMANDS:
        db_path.write_bytes(damaged)
        for suffix in ("-wal", "-shm"):
            db_path.with_name(db_path.name + suffix).unlink(missing_ok=True)
        result = cli(*command)
        _one_line_exit_2(result, db_path)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    for command in (("export", "-o", str(out_dir / "owner.jsonl")),
                    ("db", "backup", str(out_dir / "backup.db"))):
        db_path.write_bytes(damaged)
        _one_line_exit_2(cli(*command), db_path)
        assert list(out_dir.iterdir()) == []


def _damage_fts(db_path: Path) -> None:
    rng = random.Random(5)  # seeded: an unlucky randomblob() can read back as a valid index
    conn = sqlite3.connect(db_path)
    conn.create_function("garbage", 1, lambda n: rng.randbytes(n))
    for (table,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%fts_data'"):
        conn.execute(f"UPDATE {table} SET block = garbage(length(block)) WHERE id > 10")
    conn.commit()
    conn.close()


@pytest.mark.parametrize("command", [("facts", "search", "redis"), ("sessions", "search",
                                                                     "docker")])
def test_a_damaged_fts_index_is_one_line(cli, hermes_home: Path, healthy_db: bytes,
                                         command) -> None:
    db_path = hermes_home / "hermes.db"
    hermes_home.mkdir(parents=True, exist_ok=True)
    db_path.write_bytes(healthy_db)
    _damage_fts(db_path)
    _one_line_exit_2(cli(*command), db_path)


def test_hermes_db_that_is_a_directory(cli, hermes_home: Path) -> None:
    (hermes_home / "hermes.db").mkdir(parents=True)
    result = cli("memory", "show")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert f"{hermes_home / 'hermes.db'} is a directory" in result.stderr


def test_a_real_bug_keeps_its_traceback(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only damage and full disks become one line: a broken query is a bug and must show."""
    from hermes.memory import basic

    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("no such column: txet")

    monkeypatch.setattr(basic.BasicMemory, "entries", broken)
    with pytest.raises(sqlite3.OperationalError):
        cli("memory", "show")


@pytest.mark.parametrize("exc", [
    sqlite3.OperationalError("no such table: factz"),
    sqlite3.IntegrityError("UNIQUE constraint failed: facts.id"),
    sqlite3.ProgrammingError("Incorrect number of bindings supplied"),
    FileNotFoundError(2, "No such file or directory"),
])
def test_bugs_are_not_storage_problems(exc: Exception, tmp_path: Path) -> None:
    assert storage_problem(exc, tmp_path / "hermes.db") is None


def test_storage_problems_name_the_file(tmp_path: Path) -> None:
    db_path = tmp_path / "hermes.db"
    full = storage_problem(sqlite3.OperationalError("database or disk is full"), db_path)
    assert isinstance(full, StorageError) and str(db_path) in str(full)
    assert "disk is full" in str(full)
    nospace = storage_problem(OSError(28, "No space left on device", str(tmp_path / "x")),
                              db_path)
    assert isinstance(nospace, StorageError) and str(tmp_path / "x") in str(nospace)


def test_a_config_that_is_not_utf8(cli, config_file: Path) -> None:
    config_file.write_bytes("memory:\n  basic_char_limit: 6000 # caf\xe9\n".encode("latin-1"))
    result = cli("memory", "show")
    assert result.exit_code == 2
    assert result.stderr == (f"Error: {config_file}: the config file is not UTF-8 text (byte "
                             "0xe9 at offset 38); save it as UTF-8\n")


def test_a_config_path_that_is_a_directory(cli, config_file: Path) -> None:
    config_file.unlink()
    config_file.mkdir()
    result = cli("memory", "show")
    assert result.exit_code == 2
    assert result.stderr == (f"Error: {config_file}: the config file is a directory; "
                             "point at a file\n")


def test_an_env_file_that_is_not_utf8(hermes_home: Path) -> None:
    from hermes.agent.llm import load_env_file
    from hermes.frontends.discord_frontend import discord_token

    hermes_home.mkdir(parents=True)
    env = hermes_home / ".env"
    env.write_bytes(b"OPENAI_API_KEY=sk-\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"\.env file is not UTF-8 text"):
        load_env_file(env)
    with pytest.raises(ConfigError, match=r"\.env file is not UTF-8 text"):
        discord_token(load_settings())


def test_ask_with_an_env_file_that_is_not_utf8(cli, hermes_home: Path, fake_model) -> None:
    hermes_home.mkdir(parents=True)
    (hermes_home / ".env").write_bytes(b"OPENAI_API_KEY=\xff\n")
    fake_model.reply("hi")
    result = cli("ask", "hello")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and ".env file is not UTF-8" in result.stderr


def test_the_daemon_logs_why_it_stopped_on_a_damaged_database(cli, hermes_home: Path) -> None:
    import logging

    hermes_home.mkdir(parents=True)
    (hermes_home / "hermes.db").write_text("not a database\n" * 100, encoding="utf-8")
    try:
        result = cli("run", "--no-repl")
    finally:
        root = logging.getLogger()
        for handler in list(root.handlers):
            if getattr(handler, "baseFilename", "").startswith(str(hermes_home)):
                root.removeHandler(handler)
                handler.close()
    # (The daemon also logs to the console, so stderr holds its log lines before the error.)
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"Error: {hermes_home / 'hermes.db'} is "
                                                     "damaged")
    log = (hermes_home / "hermes.log").read_text(encoding="utf-8")
    assert "hermes: stopped: " in log and "is damaged (file is not a database)" in log



def test_an_empty_database_file_that_is_not_new_is_refused(cli, hermes_home: Path) -> None:
    """A hermes.db cut to 0 bytes would open as a new, empty memory (SQLite's reading): every
    command refuses it in one line instead; one being created right now still opens."""
    import os
    import time

    from hermes.store.db import NEW_FILE_SECONDS, connect

    db_path = hermes_home / "hermes.db"
    hermes_home.mkdir(parents=True, exist_ok=True)
    db_path.write_bytes(b"")
    an_hour_ago = time.time() - 3600
    os.utime(db_path, (an_hour_ago, an_hour_ago))
    for command in COMMANDS:
        result = cli(*command)
        lines = result.stderr.splitlines()
        assert (result.exit_code, len(lines)) == (2, 1), result.stderr
        assert lines[0].startswith(f"Error: {db_path} is empty (0 bytes, last changed ")
        assert "delete the empty file to start with no memory" in lines[0]
        assert db_path.stat().st_size == 0  # nothing was written into it
    for command, code in ((("db", "check"), 2), (("doctor",), 2)):
        result = cli(*command)
        assert result.exit_code == code and f"{db_path} is empty (0 bytes" in result.stdout
    # The file another process created a moment ago (its header not yet written) is new.
    connect(db_path, now=lambda: an_hour_ago + NEW_FILE_SECONDS / 2).close()
    assert db_path.stat().st_size > 0
    assert cli("memory", "show").exit_code == 0
    # Deleting it, as the line says, starts a new memory.
    db_path.unlink()
    assert cli("memory", "add", "Starts afresh").exit_code == 0
