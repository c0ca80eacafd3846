"""A full disk: one line naming the file, exit 2, and no partial file left behind.

The disk is filled for real, at the OS boundary: RLIMIT_FSIZE makes the kernel refuse any write
past a size (EFBIG; SQLite reports the short write as SQLITE_FULL), the same failure a full disk
gives, with no root and no patching of Hermes.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def disk_fills_at(size: int) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _sessions(count: int, start: int = 0) -> str:
    return "".join(json.dumps({
        "source": "terminal", "started_at": "2026-11-20T10:00:00Z", "external_id": f"s{i}",
        "title": f"Session {i}",
        "messages": [{"role": "user", "content": f"docker networking question {i} " * 20,
                      "created_at": "2026-11-20T10:00:00Z"}]}) + "\n"
        for i in range(start, start + count))


def _error_lines(result) -> list[str]:
    # (A transient progress bar leaves a blank line when stderr is not a terminal.)
    return [line for line in result.stderr.splitlines() if line.strip()]


def _assert_one_line_full(result, path: Path | str) -> None:
    assert result.exit_code == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = _error_lines(result)
    assert len(lines) == 1 and lines[0].startswith(f"Error: The disk is full writing {path}")


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def filled_home(cli, hermes_home: Path, tmp_path: Path) -> Iterator[Path]:
    """A home with 300 sessions and 40 facts (a database of a few hundred kB).

    A connection stays open, as the daemon's would, so SQLite's shared-memory file keeps its
    32 kB and a limit below that still lets the database open.
    """
    from hermes.config import load_settings
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.transcripts import import_sessions
    from hermes.runtime import Runtime

    rt = Runtime(load_settings())
    import_sessions(SessionStore(rt.db, rt.clock), "owner", _sessions(300).splitlines())
    facts = rt.memory.facts
    for i in range(40):
        facts.add("owner", f"Project Atlas milestone {i} ships in week {i}")
    rt.close()
    conn = sqlite3.connect(hermes_home / "hermes.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("SELECT count(*) FROM facts").fetchone()
    yield hermes_home
    conn.close()


def test_export_on_a_full_disk_leaves_no_partial_file(cli, filled_home: Path,
                                                      tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "owner.jsonl"
    with disk_fills_at(16_384):
        result = cli("export", "-o", str(target))
    _assert_one_line_full(result, target)
    assert list(out_dir.iterdir()) == []
    # An existing export is kept whole, not replaced by half of a new one.
    target.write_text("the previous export\n", encoding="utf-8")
    with disk_fills_at(16_384):
        _assert_one_line_full(cli("export", "-o", str(target)), target)
    assert target.read_text(encoding="utf-8") == "the previous export\n"
    assert _leftovers(out_dir) == []
    assert cli("export", "-o", str(target)).exit_code == 0
    assert target.read_text(encoding="utf-8").count("\n") > 300


def test_backup_on_a_full_disk_leaves_no_partial_file(cli, filled_home: Path,
                                                      tmp_path: Path) -> None:
    out_dir = tmp_path / "backups"
    out_dir.mkdir()
    target = out_dir / "backup.db"
    with disk_fills_at(65_536):
        result = cli("db", "backup", str(target))
    _assert_one_line_full(result, target)
    assert list(out_dir.iterdir()) == []
    assert cli("db", "backup", str(target)).exit_code == 0
    conn = sqlite3.connect(target)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_context_refresh_on_a_full_disk_keeps_the_old_file(cli, filled_home: Path) -> None:
    assert cli("context", "refresh").exit_code == 0
    path = filled_home / "context" / "owner.md"
    before = path.read_text(encoding="utf-8")
    assert len(before.encode()) > 1_000
    for i in range(40, 60):
        assert cli("facts", "add", f"Project Atlas milestone {i} ships in week {i}").exit_code == 0
    with disk_fills_at(1_000):
        result = cli("context", "refresh")
    _assert_one_line_full(result, path)
    assert path.read_text(encoding="utf-8") == before
    assert _leftovers(path.parent) == []


def _import_fills_the_disk(cli, home: Path, source: Path) -> str:
    result = cli("sessions", "import", str(source))
    assert result.exit_code == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = _error_lines(result)
    assert len(lines) == 1 and str(home / "hermes.db") in lines[0]
    return lines[0]


def _check_and_import_the_rest(cli, home: Path, source: Path) -> None:
    conn = sqlite3.connect(home / "hermes.db")
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    # Once there is room, running it again imports the rest and nothing twice.
    assert cli("sessions", "import", str(source)).exit_code == 0
    listed = cli("sessions", "list", "--limit", "5000", "--json").json()
    assert len(listed) == 1_300


def test_sessions_import_on_a_full_disk(cli, filled_home: Path, tmp_path: Path) -> None:
    """The kernel refuses the write-ahead log's growth: SQLite says "disk I/O error"."""
    more = tmp_path / "more.jsonl"
    more.write_text(_sessions(1_000, start=300), encoding="utf-8")
    limit = (filled_home / "hermes.db").stat().st_size + 200_000
    with disk_fills_at(limit):
        line = _import_fills_the_disk(cli, filled_home, more)
    assert "the disk may be full" in line
    _check_and_import_the_rest(cli, filled_home, more)


def test_sessions_import_when_sqlite_says_the_disk_is_full(
    cli, filled_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLITE_FULL, as on a full disk, from SQLite's own page limit (max_page_count)."""
    more = tmp_path / "more.jsonl"
    more.write_text(_sessions(1_000, start=300), encoding="utf-8")
    real_connect = sqlite3.connect

    def connect_with_little_room(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 20}")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect_with_little_room)
    line = _import_fills_the_disk(cli, filled_home, more)
    assert line.startswith(f"Error: The disk is full writing {filled_home / 'hermes.db'} "
                           "(database or disk is full)")
    monkeypatch.setattr(sqlite3, "connect", real_connect)
    _check_and_import_the_rest(cli, filled_home, more)
