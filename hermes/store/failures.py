"""Turning a damaged database or a full disk into one line that says what to do.

SQLite and the operating system report these as exceptions deep inside whatever command was
running. :func:`storage_problem` recognises the ones that are about the environment (a corrupt
or foreign file, a full disk, a read-only or unreadable file) and returns a
:class:`~hermes.errors.StorageError` naming the file and the next step; anything else (a
misspelt column, a constraint we broke) is a bug and is returned as ``None`` so that it keeps
its traceback.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from hermes.errors import StorageError

# Primary SQLite result codes (the low byte of sqlite_errorcode).
SQLITE_PERM, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CORRUPT = 3, 8, 10, 11
SQLITE_FULL, SQLITE_CANTOPEN, SQLITE_NOTADB = 13, 14, 26

# errno values that mean "the disk cannot take this write".
FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# errno values that are about the file system, never about Hermes' logic.
ENVIRONMENT_ERRNOS = FULL_ERRNOS | {errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO,
                                    errno.EISDIR, errno.ENOTDIR}


def damaged(db_path: Path, why: str) -> StorageError:
    return StorageError(
        f"{db_path} is damaged ({why}). Run `hermes db check` to see what is wrong, or stop "
        "Hermes and put back a copy made with `hermes db backup`.")


def disk_full(path: Path | str | None, why: str) -> StorageError:
    where = f" writing {path}" if path else ""
    return StorageError(
        f"The disk is full{where} ({why}); the unfinished write was discarded. Free some space "
        "and run the command again (`hermes doctor` shows the free space).")


def sqlite_code(exc: sqlite3.DatabaseError) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF
    # Errors raised by sqlite3 itself before SQLite ran (or by older Pythons) carry no code.
    text = str(exc).lower()
    for needle, primary in (("malformed", SQLITE_CORRUPT), ("not a database", SQLITE_NOTADB),
                            ("disk is full", SQLITE_FULL), ("disk i/o error", SQLITE_IOERR),
                            ("unable to open database", SQLITE_CANTOPEN)):
        if needle in text:
            return primary
    return None


def storage_problem(exc: BaseException, db_path: Path) -> StorageError | None:
    """The one-line error for ``exc`` when it is about the files, else ``None`` (a bug)."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, sqlite3.DatabaseError):
        code = sqlite_code(exc)
        if code in (SQLITE_CORRUPT, SQLITE_NOTADB):
            return damaged(db_path, str(exc))
        if code == SQLITE_FULL:
            return disk_full(db_path, str(exc))
        if code == SQLITE_IOERR:
            return StorageError(
                f"Could not read or write {db_path} ({exc}): the disk may be full or failing. "
                "Run `hermes doctor`, then `hermes db check`.")
        if code in (SQLITE_CANTOPEN, SQLITE_PERM, SQLITE_READONLY):
            return StorageError(
                f"Cannot write {db_path} ({exc}): check that it and its directory are a file and "
                "a directory this user may write (`hermes doctor` checks the home).")
        return None
    if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS:
        path = exc.filename
        why = exc.strerror or str(exc)
        if exc.errno in FULL_ERRNOS:
            return disk_full(path, why)
        where = f" {path}" if path else ""
        return StorageError(f"Cannot use{where} ({why}). Check the path and its permissions.")
    return None


def is_environmental(exc: BaseException) -> bool:
    """Whether ``exc`` is about the files (damage, a full disk), not about the data or a bug.

    Code that reports a bad record and carries on must not do so for these: every later
    record would fail the same way, and the person needs the one line that says why.
    """
    return storage_problem(exc, Path("hermes.db")) is not None


def opening_problem(exc: BaseException, db_path: Path) -> StorageError | None:
    """Like :func:`storage_problem`, for errors raised while opening and migrating the file.

    A text-encoding error there comes from a damaged header (SQLite hands back garbage for a
    pragma), never from user text, so it counts as damage too.
    """
    if isinstance(exc, UnicodeDecodeError):
        return damaged(db_path, "its header is unreadable")
    return storage_problem(exc, db_path)
