"""Where an import of one file stands, so that `hermes import` run again goes on from there.

An import commits in batches (:mod:`hermes.memory.restore`). One stopped part-way (Ctrl-C, a
crash, a full disk, the machine going down) leaves its committed batches behind, and the user
now has memory in this home, which a new import refuses. The ledger (``restores``, m021) holds,
per user and file (the sha256 of its lines), the last line whose batch is committed, and
(``restore_ids``) the row each id of the file became here, written in the same transaction as
the rows themselves: what is committed and what the ledger says never disagree. The same file
for the same user resumes after that line with the ids it had; a different file into a home
where that user has memory is still refused; the same file once finished is "already imported".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlite_utils

from hermes.clock import Clock, to_ts
from hermes.errors import RefusedWrite
from hermes.memory.transfer.file import NOTHING


class TakenOver(Exception):
    """Another `hermes import` of the same file committed in between: it goes on, this one
    stops (two of them writing the same lines would import them twice)."""


@dataclass
class RestoreLedger:
    """One user's import of one file, inside the importing transaction."""

    db: sqlite_utils.Database
    id: int
    user: str
    through_line: int  # lines up to here were committed (by an earlier run, when resuming)
    started_at: str
    finished_at: str | None = None
    resumed: bool = False
    # (table, id in the file, id here) of the batch being written, saved as it commits
    pending: list[tuple[str, int, int]] = field(default_factory=list)

    @classmethod
    def open(cls, db: sqlite_utils.Database, user: str, sha256: str,
             clock: Clock) -> RestoreLedger:
        """This import's ledger: the same file's unfinished one (resumed whatever the user
        has: its first batches may hold only entities); else new for a user with no memory
        here; else the same file's finished one; any other file is refused."""
        found = cls.find(db, user, sha256)
        if found is not None and found.finished_at is None:
            return found
        if not _has_memory(db, user):
            return cls.start(db, user, sha256, clock)
        if found is None:
            raise RefusedWrite(f"Refused: user {user!r} already has memory in this home; "
                               "`hermes import` restores into an empty one (or resumes the "
                               f"import of the same file that stopped part-way). {NOTHING}")
        return found

    @classmethod
    def find(cls, db: sqlite_utils.Database, user: str, sha256: str) -> RestoreLedger | None:
        row = db.execute(
            "SELECT id, through_line, started_at, finished_at FROM restores "
            "WHERE user = ? AND file_sha256 = ?", [user, sha256]).fetchone()
        if row is None:
            return None
        return cls(db, row[0], user, row[1], row[2], row[3], resumed=True)

    @classmethod
    def start(cls, db: sqlite_utils.Database, user: str, sha256: str,
              clock: Clock) -> RestoreLedger:
        """A new import (an older record of the same file, for a user whose memory has
        since gone, is dropped)."""
        db.execute("DELETE FROM restores WHERE user = ? AND file_sha256 = ?", [user, sha256])
        started = to_ts(clock.now())
        cursor = db.execute(
            "INSERT INTO restores (user, file_sha256, started_at) VALUES (?, ?, ?)",
            [user, sha256, started])
        return cls(db, int(cursor.lastrowid or 0), user, 0, started)

    def ids(self) -> dict[str, dict[int, int]]:
        """What the committed part wrote: table -> {id in the file: id here}."""
        found: dict[str, dict[int, int]] = {}
        for table, old, new in self.db.execute(
                "SELECT i.tbl, i.old_id, i.new_id FROM restore_ids i "
                "JOIN restores r ON r.id = i.restore_id WHERE r.id = ? AND r.user = ?",
                [self.id, self.user]):
            found.setdefault(table, {})[old] = new
        return found

    def wrote(self, table: str, old: int, new: int) -> None:
        """Row ``old`` of the file is row ``new`` here. Kept until the batch commits (a
        refused record takes its own back: :meth:`forget_since`)."""
        self.pending.append((table, old, new))

    def forget_since(self, mark: int) -> None:
        del self.pending[mark:]

    def check_still_mine(self) -> None:
        """At the start of each batch: no other import of this file committed since ours."""
        row = self.db.execute("SELECT through_line, finished_at FROM restores "
                              "WHERE id = ? AND user = ?", [self.id, self.user]).fetchone()
        if row is None or row[0] != self.through_line or row[1] is not None:
            raise TakenOver

    def reached(self, line: int) -> None:
        """Just before a batch commits: every line up to ``line`` is in it or before it."""
        self.through_line = line
        self.db.execute("UPDATE restores SET through_line = ? WHERE id = ? AND user = ?",
                        [line, self.id, self.user])
        self.db.conn.executemany(
            "INSERT INTO restore_ids (restore_id, tbl, old_id, new_id) VALUES (?, ?, ?, ?)",
            [(self.id, *ids) for ids in self.pending])
        self.pending.clear()

    def finish(self, line: int, clock: Clock) -> None:
        """The whole file is in: the id map is no longer needed, the record stays (the same
        file again is "already imported")."""
        self.finished_at = to_ts(clock.now())
        self.db.execute("UPDATE restores SET through_line = ?, finished_at = ? "
                        "WHERE id = ? AND user = ?", [line, self.finished_at, self.id, self.user])
        self.db.execute("DELETE FROM restore_ids WHERE restore_id = ?", [self.id])
        self.pending.clear()


def _has_memory(db: sqlite_utils.Database, user: str) -> bool:
    for table in ("basic_memory", "facts", "sessions"):
        if db.execute(f"SELECT 1 FROM {table} WHERE user = ? LIMIT 1", [user]).fetchone():
            return True
    return False
