"""Whole-database upkeep: consistent backups and row counts."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import sqlite_utils

from hermes.errors import HermesError, RefusedWrite
from hermes.home import FILE_MODE
from hermes.store.failures import SQLITE_FULL, SQLITE_IOERR, disk_full, sqlite_code
from hermes.store.files import discard, publish, temp_path_beside


def table_columns(db: sqlite_utils.Database, table: str) -> set[str]:
    """The column names of ``table``."""
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def backup(db: sqlite_utils.Database, target: Path) -> int:
    """A consistent copy of the whole database at ``target`` (VACUUM INTO). Returns its size."""
    target = target.expanduser()
    if target.exists():
        raise RefusedWrite(f"Refused: {target} already exists; choose a new file name.")
    if not target.parent.exists():
        raise HermesError(f"No such directory: {target.parent}")
    # VACUUM INTO a temp name beside the target, renamed only once complete: a full disk or a
    # damaged page part-way through leaves no partial backup that looks like a good one.
    tmp = temp_path_beside(target)
    try:
        db.execute("VACUUM INTO ?", [str(tmp)])
        os.chmod(tmp, FILE_MODE)  # the whole memory: its owner's alone, whatever the umask
        publish(tmp, target, replace=False)
    except sqlite3.DatabaseError as exc:
        discard(tmp)
        if sqlite_code(exc) in (SQLITE_FULL, SQLITE_IOERR):
            raise disk_full(target, str(exc)) from exc
        raise
    except BaseException:
        discard(tmp)
        raise
    return target.stat().st_size


@dataclass
class TableStats:
    table: str
    rows: int
    user_rows: int | None  # rows of the given user, when the table has a user column


def table_stats(db: sqlite_utils.Database, user: str | None = None) -> list[TableStats]:
    """Row counts of the real tables (not FTS shadow tables or migrations bookkeeping)."""
    stats = []
    for row in db.execute("PRAGMA table_list").fetchall():
        schema, name, kind = row[0], row[1], row[2]
        if schema != "main" or kind != "table" or name.startswith("sqlite_"):
            continue
        rows = db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
        user_rows = None
        if user is not None and "user" in table_columns(db, name):
            user_rows = db.execute(
                f'SELECT count(*) FROM "{name}" WHERE user = ?', [user]
            ).fetchone()[0]
        stats.append(TableStats(name, rows, user_rows))
    return sorted(stats, key=lambda s: s.table)
