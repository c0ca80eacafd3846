"""Checking a database file without changing it: `hermes db check` and `hermes doctor`.

The file is opened as it is (no migration, no WAL switch), so a damaged or foreign file can be
examined. SQLite's ``integrity_check`` reads every page and index; it does not look inside
FTS5's index blobs, so each full-text table also gets FTS5's own ``integrity-check``, which
compares the index with the table it indexes. A damaged full-text index loses nothing (the
text lives in the table), and ``repair_fts`` rebuilds it; a damaged table can only be restored
from a backup.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from hermes.store.db import empty_file_problem
from hermes.store.migrations import migrations

MAX_PROBLEMS = 5  # integrity_check lines shown (it can list thousands)



def restore_hint(path: Path) -> str:
    return (f"stop Hermes and put back a copy made with `hermes db backup` (or salvage rows "
            f"with `sqlite3 {path} .recover`)")


@dataclass
class Finding:
    """One check of one thing: ``ok``, and a line that says what was found."""

    name: str
    ok: bool
    detail: str
    repaired: bool = False


def fts_tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE "
        "'CREATE VIRTUAL TABLE % USING fts5(%' ORDER BY name").fetchall()
    return [row[0] for row in rows]


def _integrity(conn: sqlite3.Connection, path: Path) -> Finding:
    rows = [row[0] for row in conn.execute(
        f"PRAGMA integrity_check({MAX_PROBLEMS})").fetchall()]
    if rows == ["ok"]:
        return Finding("integrity", True, "every page and index reads back (integrity_check)")
    return Finding("integrity", False, f"{'; '.join(rows)}. To fix: {restore_hint(path)}")


def _rebuild_fts(conn: sqlite3.Connection, table: str) -> None:
    """Empty ``table``'s index and rebuild it from the table it indexes.

    FTS5's own 'rebuild' needs the index's structure record to load; when that record is what
    is damaged, the shadow tables are emptied and given the records of a freshly created index
    (taken from an identical table in memory) first. The indexed text is never touched.
    """
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", [table]).fetchone()[0]
    fresh = sqlite3.connect(":memory:")
    try:
        fresh.execute(sql)
        records = fresh.execute(f'SELECT id, block FROM "{table}_data"').fetchall()
    finally:
        fresh.close()
    shadows = {row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?, ?)",
        [f"{table}_data", f"{table}_idx", f"{table}_docsize"])}
    for shadow in sorted(shadows):
        conn.execute(f'DELETE FROM "{shadow}"')
    conn.executemany(f'INSERT INTO "{table}_data" (id, block) VALUES (?, ?)', records)
    conn.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'rebuild\')')


def _fts(conn: sqlite3.Connection, table: str, repair: bool, path: Path) -> Finding:
    def check() -> str | None:
        try:
            conn.execute(f'INSERT INTO "{table}"("{table}") VALUES (\'integrity-check\')')
        except sqlite3.DatabaseError as exc:
            return str(exc)
        except MemoryError:
            # A garbled length in an index blob makes FTS5 ask for an absurd allocation
            # (SQLITE_NOMEM): the index is damaged, not the machine out of memory.
            return "reading it asked for more memory than it can hold"
        return None

    problem = check()
    if problem is None:
        return Finding(table, True, "the full-text index matches its table")
    if repair:
        try:
            with conn:
                _rebuild_fts(conn, table)
        except sqlite3.DatabaseError as exc:
            return Finding(table, False, f"the full-text index is damaged ({problem}) and could "
                           f"not be rebuilt ({exc}). To fix: {restore_hint(path)}")
        after = check()
        if after is None:
            return Finding(table, True, f"the full-text index was damaged ({problem}) and has "
                           "been rebuilt from its table", repaired=True)
        problem = f"{problem}; still damaged after a rebuild ({after})"
    return Finding(table, False, f"the full-text index is damaged ({problem}). To fix: "
                   "`hermes db check --repair` rebuilds it from its table (nothing is lost)")


VECTOR_TABLES = {"message_vectors": "message_id", "fact_vectors": "fact_id"}


def _vectors(conn: sqlite3.Connection, repair: bool) -> Finding | None:
    """Stored vectors of another size than their model's others (a damaged or hand-edited row):
    searches leave them out and embed them again; ``repair`` deletes them (derived data: each
    is embedded again by the next index run, nothing is lost). None: no vector tables yet."""
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not present & set(VECTOR_TABLES):
        return None
    bad: list[tuple[str, str, int, int]] = []  # (table, model, size, rows)
    for table in VECTOR_TABLES:
        if table not in present:
            continue
        by_model: dict[str, dict[int, int]] = {}
        for model, size, count in conn.execute(
                f"SELECT model, coalesce(length(vector), 0), count(*) FROM {table} GROUP BY 1, 2"):
            by_model.setdefault(model, {})[int(size)] = int(count)
        for model, counts in by_model.items():
            usual = max(((c, n) for n, c in counts.items() if n and not n % 2), default=(0, -1))[1]
            bad += [(table, model, n, c) for n, c in counts.items() if n != usual]
    if not bad:
        return Finding("vectors", True, "every stored vector has its model's size")
    said = ", ".join(f"{sum(c for t, _, _, c in bad if t == table)} in {table}"
                     for table in dict.fromkeys(t for t, _, _, _ in bad))
    if repair:
        with conn:
            for table, model, size, _ in bad:
                conn.execute(f"DELETE FROM {table} WHERE model = ? AND "
                             "coalesce(length(vector), 0) = ?", [model, size])
        return Finding("vectors", True, f"{said} had the wrong size (damaged) and were deleted; "
                       "they are embedded again by the next index run", repaired=True)
    return Finding("vectors", False, f"{said} have the wrong size (damaged; searches find those "
                   "rows by their words only). To fix: `hermes db check --repair` deletes them "
                   "(embedded again by the next index run, nothing is lost)")


def _migrations(conn: sqlite3.Connection) -> Finding:
    db = sqlite_utils.Database(conn, execute_plugins=False)
    known = [m.name for m in migrations._migrations]
    applied = {m.name for m in migrations.applied(db)} if db["_sqlite_migrations"].exists() \
        else set()
    pending = [name for name in known if name not in applied]
    unknown = sorted(applied - set(known))
    if unknown:
        return Finding("migrations", False, f"written by a newer Hermes (unknown migrations: "
                       f"{', '.join(unknown)}); upgrade Hermes before using this database")
    if pending:
        return Finding("migrations", True, f"{len(pending)} pending ({', '.join(pending)}); "
                       "applied by the next command that opens the database")
    return Finding("migrations", True, f"all {len(known)} applied")


def check_database(path: Path, *, repair_fts: bool = False,
                   now: Callable[[], float] = time.time) -> list[Finding]:
    """Every check of the file at ``path``. Only ``repair_fts`` writes (it rebuilds indexes and
    deletes damaged vectors, which are embedded again).
    ``now``: the wall clock an empty file's age is measured by."""
    if path.is_dir():
        return [Finding("file", False, f"{path} is a directory, not a database file; move it "
                        "away (a new database is created) or put back a backup")]
    if not path.exists():
        return [Finding("file", True, f"{path} does not exist yet (created on first use)")]
    empty = empty_file_problem(path, now())
    if empty is not None:
        return [Finding("file", False, empty)]
    try:
        conn = sqlite3.connect(str(path), timeout=10)
    except sqlite3.DatabaseError as exc:
        return [Finding("file", False, f"cannot open {path} ({exc})")]
    try:
        try:
            findings = [_integrity(conn, path)]
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            # (SQLite hands back undecodable text when the header itself is damaged.)
            why = "its header is damaged" if isinstance(exc, UnicodeDecodeError) else str(exc)
            return [Finding("integrity", False, f"{path} is not a readable database ({why}). "
                            f"To fix: {restore_hint(path)}")]
        try:
            tables = fts_tables(conn)
        except sqlite3.DatabaseError as exc:
            return [*findings, Finding("fts", False, f"cannot list the full-text indexes ({exc})")]
        findings += [_fts(conn, table, repair_fts, path) for table in tables]
        try:
            vectors = _vectors(conn, repair_fts)
        except sqlite3.DatabaseError as exc:
            vectors = Finding("vectors", False, f"cannot read them ({exc})")
        if vectors is not None:
            findings.append(vectors)
        try:
            findings.append(_migrations(conn))
        except sqlite3.DatabaseError as exc:
            findings.append(Finding("migrations", False, f"cannot read them ({exc})"))
        return findings
    finally:
        conn.close()


@dataclass
class BackgroundFailures:
    """Background work that failed since a time, across every user of the home."""

    extraction_runs: int
    last_extraction_reason: str | None
    cron_runs: int
    summaries: int


def background_failures(conn: sqlite3.Connection, since: str) -> BackgroundFailures:
    """Counts of failed extraction runs, cron runs and session summaries since ``since``."""
    def count(sql: str) -> int:
        return int(conn.execute(sql, [since]).fetchone()[0])

    last = conn.execute(
        "SELECT reason FROM extraction_runs WHERE status IN ('failed', 'retry') AND "
        "started_at >= ? ORDER BY id DESC LIMIT 1", [since]).fetchone()
    return BackgroundFailures(
        extraction_runs=count("SELECT count(*) FROM extraction_runs WHERE status IN "
                              "('failed', 'retry') AND started_at >= ?"),
        last_extraction_reason=last[0] if last else None,
        cron_runs=count("SELECT count(*) FROM cron_runs WHERE status = 'failed' AND "
                        "coalesce(started_at, scheduled_for) >= ?"),
        summaries=count("SELECT count(*) FROM sessions WHERE summary_status = 'failed' AND "
                        "last_active_at >= ?"),
    )
