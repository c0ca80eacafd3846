"""Opening the database: one SQLite file under the home, WAL mode, migrated at every entry point."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import sqlite_utils

from hermes.store.migrations import migrations

BUSY_TIMEOUT_MS = 10_000


def connect(path: str | Path) -> sqlite_utils.Database:
    """Open (creating if needed) the database at ``path`` and apply pending migrations."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # check_same_thread=False: the daemon hands a connection to worker threads, one at a time.
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    db = sqlite_utils.Database(conn, execute_plugins=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA foreign_keys=ON")
    # NORMAL is durable across application crashes in WAL mode; only a power cut can lose
    # the last transactions, and it never corrupts the file.
    db.execute("PRAGMA synchronous=NORMAL")
    migrate(db)
    return db


def migrate(db: sqlite_utils.Database) -> None:
    """Apply pending migrations, holding the write lock so two processes never race."""
    if not migrations.pending(db):
        return
    with write_transaction(db):
        # Each migration's own transaction becomes a savepoint inside this one.
        migrations.apply(db)


@contextlib.contextmanager
def write_transaction(db: sqlite_utils.Database) -> Iterator[sqlite_utils.Database]:
    """A transaction that takes the write lock up front (BEGIN IMMEDIATE).

    Read-check-write sequences (the memory cap, dedup) must run in one of these: a deferred
    transaction that reads first cannot upgrade to a writer once another process has committed,
    and two writers could both pass the same check.
    Nested use falls back to a savepoint.
    """
    conn = db.conn
    if conn.in_transaction:
        with db.atomic():
            yield db
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")
