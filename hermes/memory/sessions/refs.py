"""Front-ends' own handles on stored messages (``message_refs``): a Discord message id names
the reply it shows, so a reaction on it finds the reply again. Scoped to one user: a ref never
moves to, or finds, another user's message."""

from __future__ import annotations

import sqlite_utils

from hermes.errors import NotFound
from hermes.store.db import write_transaction


class MessageRefs:
    def __init__(self, db: sqlite_utils.Database) -> None:
        self.db = db

    def link(self, user: str, ref: str, message_id: int) -> None:
        """Remember that a front-end's ``ref`` (e.g. ``discord:<id>``) shows ``message_id``."""
        with write_transaction(self.db):
            if self.db.execute("SELECT 1 FROM messages WHERE id = ? AND user = ?",
                               [message_id, user]).fetchone() is None:
                raise NotFound(f"No message {message_id} for user {user!r}.")
            self.db.execute(
                "INSERT INTO message_refs (ref, message_id, user) VALUES (?, ?, ?) "
                # A ref is one front-end message: it never moves to another user's message.
                "ON CONFLICT(ref) DO UPDATE SET message_id = excluded.message_id "
                "WHERE message_refs.user = excluded.user",
                [ref, message_id, user],
            )

    def message_for(self, user: str, ref: str) -> int | None:
        """The message behind a front-end's ``ref``, or None (also for another user's ref)."""
        row = self.db.execute("SELECT message_id FROM message_refs WHERE ref = ? AND user = ?",
                              [ref, user]).fetchone()
        return int(row[0]) if row else None
