"""Opening the database: one SQLite file under the home, WAL mode, migrated at every entry point."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import sqlite_utils

from hermes.errors import HermesError, StorageError
from hermes.home import create_private_file, make_private_dirs
from hermes.store.failures import opening_problem
from hermes.store.migrations import migrations

BUSY_TIMEOUT_MS = 10_000
# How often a writer that found the lock held for the whole busy timeout tries again.
LOCK_RETRIES = 2
# How long one batch of BoundedWrites may hold the write lock before it commits.
WRITE_BUDGET_SECONDS = 0.05
# A database file of 0 bytes younger than this is one being created right now (by this
# process or another one opening the same new home: SQLite creates the file, then writes its
# header a moment later); an older one is a database that was lost or cut short.
NEW_FILE_SECONDS = 10.0
# Pages are read through a memory map of the file, up to this many bytes (SQLite's own cap is
# 2 GiB), rather than copied by a read() call each into the connection's 2 MB page cache: a
# turn's FTS5 doclists and index seeks on a large home miss that cache all the time.
# scripts/bench_turn.py's home (100k facts / 1M messages), its 150 later turns in one process,
# passes interleaved A B B A (load 3.2-4.4): CPU p50 25.5 -> 23.1 and 24.5 -> 20.1 ms, the
# turns without past messages 16.9 -> 15.2 and 14.8 -> 13.2, the prompts identical (--overlap
# and words only: within the noise, +-1.5 ms). The mapped
# pages are the kernel's page cache, shared and reclaimable, counted in RSS once touched.
# The one cost in failure: a file cut short by a program outside Hermes while a read is
# under way stops the process with SIGBUS (an unmapped read raises 'malformed'); SQLite
# never shrinks the file under a reader, so only an outside truncation does (README).
MMAP_BYTES = 2**31

log = logging.getLogger(__name__)


class DatabaseBusy(HermesError):
    """Another process held the write lock past every retry; nothing was written."""


def connect(
    path: str | Path,
    *,
    busy_timeout_ms: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
    now: Callable[[], float] = time.time,
) -> sqlite_utils.Database:
    """Open (creating if needed) the database at ``path`` and apply pending migrations.
    ``busy_timeout_ms`` defaults to :data:`BUSY_TIMEOUT_MS` (read at each call). An empty
    file that is not new is refused (:func:`empty_file_problem`); ``now`` is the wall clock
    its age is measured by."""
    if busy_timeout_ms is None:
        busy_timeout_ms = BUSY_TIMEOUT_MS
    path = Path(path)
    make_private_dirs(path.parent)
    if path.is_dir():
        raise StorageError(f"{path} is a directory, not the database file; move it away (a new "
                           "database is created) or put back a copy made with `hermes db backup`.")
    empty = empty_file_problem(path, now())
    if empty is not None:
        raise StorageError(empty)
    # A new database is its owner's alone (0600, whatever the umask), and SQLite gives its
    # -wal and -shm files the database file's mode.
    create_private_file(path)
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
        db.execute(f"PRAGMA mmap_size={int(MMAP_BYTES)}")
        migrate(db)
    except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
        conn.close()
        problem = opening_problem(exc, path)
        if problem is None:
            raise
        raise problem from exc
    return db


def empty_file_problem(path: Path, now: float) -> str | None:
    """Why the database file at ``path`` must not be opened, when it is empty (0 bytes) and
    older than :data:`NEW_FILE_SECONDS`; else None.

    SQLite takes an empty file for a new database, so a database lost or cut to nothing (a
    full disk, a copy that failed, a sync tool) would open as an empty memory, `hermes
    doctor` would say ok, and new memory would pile up beside the lost one. Hermes creates
    the file and writes its header in the same moment, so an older empty file is not one it
    is creating."""
    try:
        stat = path.stat()
    except OSError:
        return None  # not there: a new database (or a problem the open itself will name)
    if stat.st_size or now - stat.st_mtime < NEW_FILE_SECONDS:
        return None
    changed = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(stat.st_mtime))
    return (f"{path} is empty (0 bytes, last changed {changed}): the database was lost or cut "
            "short, so it is not opened as a new, empty memory. Put back a copy made with "
            "`hermes db backup`, or delete the empty file to start with no memory.")


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


def checkpoint_elsewhere(db: sqlite_utils.Database) -> None:
    """This connection no longer copies the WAL into the database file when a commit of its
    takes the WAL past SQLite's 1,000 pages: that copy and its fsync (30 ms on an idle machine,
    36-96 ms loaded, once per ~4 MB written: a few 64,000-character messages) ran inside
    whichever commit crossed the line, and on the daemon's event loop every user waited for
    it. The daemon runs :func:`checkpoint` on a worker thread instead; other connections (the
    workers', the CLI's) still checkpoint as they commit."""
    db.execute("PRAGMA wal_autocheckpoint=0")


def checkpoint(path: str | Path) -> tuple[int, int]:
    """Copy the WAL's committed pages into the database file, on a connection of its own, in
    PASSIVE mode: no reader or writer waits for it (pages a reader still needs are left for
    the next time). Returns (pages in the WAL, pages copied). Off the event loop: it reads,
    writes and syncs the file."""
    conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        _, pages, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        conn.close()
    return int(pages), int(copied)


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
    begin_immediate(conn)
    try:
        yield db
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def _locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def begin_immediate(conn: sqlite3.Connection, *, retries: int = LOCK_RETRIES) -> None:
    """Take the write lock. SQLite waits up to the busy timeout; when another process holds
    the lock longer than that, say so in one line (the log), wait again, and finally raise
    :class:`DatabaseBusy` (one line for the user), never a traceback."""
    for attempt in range(retries + 1):
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not _locked(exc):
                raise
            if attempt == retries:
                raise DatabaseBusy(
                    f"The database is locked by another Hermes process (waited {retries + 1} "
                    "times for its busy timeout); nothing was written. Try again in a moment."
                ) from None
            log.warning("database is locked by another writer; retrying (%d of %d)",
                        attempt + 1, retries)


class BoundedWrites:
    """Many small writes grouped into transactions that each hold the lock for at most about
    ``budget`` seconds: a long batch (an extraction run with hundreds of actions) commits as it
    goes, so a concurrent writer (``hermes facts add``) waits milliseconds, not the whole run.

    Each :meth:`step` is atomic (a failed step is rolled back to where it began, and the earlier
    steps of its batch with it); steps are committed in order. Inside an open transaction it
    adds nothing: the caller's transaction decides. ``longest`` is the longest hold seen. Use
    it off the event loop (a worker thread): it pauses between batches.
    """

    def __init__(self, db: sqlite_utils.Database, *, budget: float = WRITE_BUDGET_SECONDS,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.db = db
        self.budget = budget
        self.clock = clock
        # After each commit but the last, pause as long as the batch held the lock: a waiting
        # writer's busy handler polls with growing sleeps, and would otherwise keep missing
        # the short gaps between batches.
        self.sleep = sleep
        self.started: float | None = None
        self.transactions = 0
        self.longest = 0.0

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        conn = self.db.conn
        if self.started is None and conn.in_transaction:
            yield  # nested in the caller's transaction
            return
        if self.started is None:
            begin_immediate(conn)
            self.started = self.clock()
            self.transactions += 1
        try:
            yield
        except BaseException:
            self._end("ROLLBACK")
            raise
        if self.clock() - self.started >= self.budget:
            held = self.clock() - self.started
            self._end("COMMIT")
            self.sleep(min(held, self.budget))

    def commit(self) -> None:
        self._end("COMMIT")

    def _end(self, statement: str) -> None:
        if self.started is None:
            return
        held = self.clock() - self.started
        self.started = None
        if self.db.conn.in_transaction:
            self.db.conn.execute(statement)
        self.longest = max(self.longest, held)

    def __enter__(self) -> BoundedWrites:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self._end("COMMIT" if kind is None else "ROLLBACK")
