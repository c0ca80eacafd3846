"""Opening the database: one SQLite file under the home, WAL mode, migrated at every entry point."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import sqlite_utils

from hermes.errors import StorageError
from hermes.store.failures import opening_problem
from hermes.store.migrations import migrations

BUSY_TIMEOUT_MS = 10_000


def connect(
    path: str | Path,
    *,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    sleep: Callable[[float], None] = time.sleep,
) -> sqlite_utils.Database:
    """Open (creating if needed) the database at ``path`` and apply pending migrations."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        raise StorageError(f"{path} is a directory, not the database file; move it away (a new "
                           "database is created) or put back a copy made with `hermes db backup`.")
    # check_same_thread=False: the daemon hands a connection to worker threads, one at a time.
    # The timeout installs the busy handler before any statement runs.
    conn = sqlite3.connect(str(path), check_same_thread=False, timeout=busy_timeout_ms / 1000)
    try:
        db = sqlite_utils.Database(conn, execute_plugins=False)
        _enable_wal(conn, busy_timeout_ms, sleep)
        db.execute("PRAGMA foreign_keys=ON")
        # NORMAL is durable across application crashes in WAL mode; only a power cut can lose
        # the last transactions, and it never corrupts the file.
        db.execute("PRAGMA synchronous=NORMAL")
        migrate(db)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        conn.close()
        problem = opening_problem(exc, path)
        if problem is None:
            raise
        raise problem from exc
    return db


def _enable_wal(
    conn: sqlite3.Connection, budget_ms: int, sleep: Callable[[float], None]
) -> None:
    """Switch to WAL, retrying while another process holds the lock.

    Two processes opening a fresh database at once race to convert it: SQLite can refuse the
    switch with "database is locked" without calling the busy handler (it would deadlock
    waiting), so the busy timeout alone does not cover it. Retry with backoff within the same
    budget, then fail loudly; never carry on in rollback-journal mode.
    """
    waited, delay = 0.0, 0.005
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            mode = None
        if mode is not None and mode.lower() == "wal":
            return
        if waited * 1000 >= budget_ms:
            raise sqlite3.OperationalError(
                f"could not switch the database to WAL mode within {budget_ms} ms "
                f"(journal mode is {mode or 'locked'}); another process holds it"
            )
        sleep(delay)
        waited += delay
        delay = min(delay * 2, 0.1)


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
