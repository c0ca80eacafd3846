"""Tombstones: what was forgotten stays forgotten.

Forgetting, correcting (a new version supersedes) or purging a fact leaves a tombstone: its
text, what happened, and when. A write that would store the same or a near-same statement
(:func:`hermes.memory.facts.dedup.differs_in_meaning` and the merge threshold, as duplicates
are found) *from something said before that moment* is refused with :class:`Forgotten`:
extraction and consolidation of older messages, ``hermes learn backfill``, a re-imported
conversation. What the user says again afterwards is newer than the tombstone and is stored
(explicit wins): a write without a time (a person's own ``facts add``, ``/remember``) is now.

Tombstones are the user's memory too: listed by ``hermes facts tombstones``, shown in ``facts
history``, exported and imported; removing one (``--remove``) lets older messages teach the
statement again. Every read and write takes the user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sqlite_utils
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from hermes.errors import NotFound, RefusedWrite
from hermes.memory.facts.dedup import differs_in_meaning
from hermes.memory.facts.records import content_key

# The user's newest tombstones compared with rapidfuzz per write (an exact match is found
# through the index whatever its age).
NEAR_CANDIDATES = 500


class Forgotten(RefusedWrite):
    """A write refused because the statement was forgotten after it was said."""

    def __init__(self, message: str, tombstone: Tombstone) -> None:
        super().__init__(message)
        self.tombstone = tombstone


@dataclass
class Tombstone:
    id: int
    user: str
    fact_id: int | None     # None once the fact is purged
    content: str
    action: str             # forget | correct | purge
    reason: str | None
    at: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "fact_id": self.fact_id, "content": self.content,
                "action": self.action, "reason": self.reason, "at": self.at}


_COLUMNS = "id, user, fact_id, content, action, reason, at"


def _row(row: Any) -> Tombstone:
    return Tombstone(int(row[0]), row[1], None if row[2] is None else int(row[2]), row[3],
                     row[4], row[5], row[6])


class Tombstones:
    def __init__(self, db: sqlite_utils.Database, merge_threshold: float) -> None:
        self.db = db
        self.merge_threshold = merge_threshold

    def record(self, user: str, fact_id: int | None, content: str, action: str,
               reason: str | None, at: str) -> None:
        """A tombstone for ``content`` (inside the caller's transaction)."""
        self.db.execute(
            "INSERT INTO fact_tombstones (user, fact_id, content, content_key, action, reason, "
            "at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [user, fact_id, content, content_key(content), action, reason, at])

    def matching(self, user: str, content: str, said_at: str) -> Tombstone | None:
        """The tombstone, newer than ``said_at``, of this statement or a near-same one."""
        key = content_key(content)
        exact = self.db.execute(
            f"SELECT {_COLUMNS} FROM fact_tombstones WHERE user = ? AND content_key = ? "
            "AND at > ? ORDER BY at DESC LIMIT 1", [user, key, said_at]).fetchone()
        if exact is not None:
            return _row(exact)
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM fact_tombstones WHERE user = ? AND at > ? "
            "ORDER BY id DESC LIMIT ?", [user, said_at, NEAR_CANDIDATES]).fetchall()
        for row in rows:
            similarity = fuzz.token_set_ratio(content, row[3], processor=default_process)
            if similarity >= self.merge_threshold and not differs_in_meaning(content, row[3]):
                return _row(row)
        return None

    def check(self, user: str, content: str, said_at: str | None) -> None:
        """Forgotten when ``content``, said at ``said_at``, was forgotten since (None: said
        now, by the user: never refused)."""
        if said_at is None:
            return
        tombstone = self.matching(user, content, said_at)
        if tombstone is not None:
            raise Forgotten(
                f"Refused: {tombstone.content!r} was {_past(tombstone.action)} on "
                f"{tombstone.at[:10]} (tombstone {tombstone.id}); what was said before that is "
                "not learned again. Nothing was changed.", tombstone)

    def of_user(self, user: str, *, limit: int = 100) -> list[Tombstone]:
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM fact_tombstones WHERE user = ? ORDER BY id DESC LIMIT ?",
            [user, int(limit)]).fetchall()
        return [_row(r) for r in rows]

    def of_fact(self, user: str, fact_id: int) -> list[Tombstone]:
        rows = self.db.execute(
            f"SELECT {_COLUMNS} FROM fact_tombstones WHERE user = ? AND fact_id = ? ORDER BY id",
            [user, int(fact_id)]).fetchall()
        return [_row(r) for r in rows]

    def purged(self, user: str, fact_ids: list[int]) -> None:
        """The facts are gone: their tombstones stay, no longer pointing at them."""
        if not fact_ids:
            return
        marks = ",".join("?" * len(fact_ids))
        self.db.execute(f"UPDATE fact_tombstones SET fact_id = NULL WHERE user = ? "
                        f"AND fact_id IN ({marks})", [user, *fact_ids])

    def restored(self, user: str, fact_id: int) -> None:
        """A forgotten fact restored: its forgetting is undone, tombstone and all."""
        self.db.execute("DELETE FROM fact_tombstones WHERE user = ? AND fact_id = ? "
                        "AND action = 'forget'", [user, int(fact_id)])

    def remove(self, user: str, tombstone_id: int) -> Tombstone:
        """Delete one tombstone: older messages may teach its statement again."""
        row = self.db.execute(f"SELECT {_COLUMNS} FROM fact_tombstones WHERE user = ? AND id = ?",
                              [user, int(tombstone_id)]).fetchone()
        if row is None:
            raise NotFound(f"No tombstone with id {tombstone_id} for user {user!r}.")
        self.db.execute("DELETE FROM fact_tombstones WHERE user = ? AND id = ?",
                        [user, int(tombstone_id)])
        return _row(row)


def _past(action: str) -> str:
    return {"forget": "forgotten", "correct": "corrected", "purge": "purged"}.get(action, action)
