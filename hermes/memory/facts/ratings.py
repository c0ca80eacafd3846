"""Ratings of replies: the facts a reply was built from (``shown_facts``, recorded by the turn)
and the rating each person gave it (``reply_ratings``, at most one per reply and rater).

A 👍/👎 reaches the facts that reply relied on (extraction says which, ``shown_facts.relied``;
until it has, every fact shown for it), through ``FactStore.rate``; taking a
rating back goes through ``FactStore.withdraw_rating``, so both share the clamping, the
rounding, the counters and the history row. Every read and write is scoped to one user: a
reply, a fact or a rating of another user is never reached.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import sqlite_utils

from hermes.clock import Clock, to_ts
from hermes.errors import NotFound
from hermes.memory.facts.store import FactStore, RateResult
from hermes.store.db import write_transaction


class ReplyRatings:
    def __init__(self, db: sqlite_utils.Database, facts: FactStore, clock: Clock) -> None:
        self.db = db
        self.facts = facts
        self.clock = clock

    def check_message(self, user: str, message_id: int) -> None:
        """NotFound unless ``message_id`` is a message of ``user``."""
        row = self.db.execute("SELECT 1 FROM messages WHERE id = ? AND user = ?",
                              [message_id, user]).fetchone()
        if row is None:
            raise NotFound(f"No message {message_id} for user {user!r}.")

    # -- what a reply was built from ---------------------------------------------------------

    def record_shown(self, user: str, message_id: int, fact_ids: Iterable[int]) -> None:
        """Remember that the reply ``message_id`` was built from ``fact_ids``. Only this
        user's facts, on this user's message: a stray id never links across users."""
        ids = list(dict.fromkeys(int(i) for i in fact_ids))
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with write_transaction(self.db):
            self.db.execute(
                f"INSERT OR IGNORE INTO shown_facts (message_id, fact_id) "
                f"SELECT ?, id FROM facts WHERE user = ? AND id IN ({marks}) "
                f"AND EXISTS (SELECT 1 FROM messages WHERE id = ? AND user = ?)",
                [message_id, user, *ids, message_id, user],
            )

    def _shown(self, user: str, message_id: int) -> list[tuple[int, bool]]:
        """Each fact the model was shown for this reply (this user's only), and whether the
        reply relied on it."""
        rows = self.db.execute(
            "SELECT s.fact_id, s.relied FROM shown_facts s JOIN facts f ON f.id = s.fact_id "
            "JOIN messages m ON m.id = s.message_id "
            "WHERE s.message_id = ? AND m.user = ? AND f.user = ? ORDER BY s.fact_id",
            [message_id, user, user],
        ).fetchall()
        return [(int(fact_id), bool(relied)) for fact_id, relied in rows]

    def shown_fact_ids(self, user: str, message_id: int) -> list[int]:
        """The facts the model was shown for this reply (this user's only)."""
        return [fact_id for fact_id, _ in self._shown(user, message_id)]

    def rated_fact_ids(self, user: str, message_id: int) -> list[int]:
        """The facts a rating of this reply reaches: those the reply relied on, once its
        extraction has said which (``shown_facts.relied``); until then every fact shown."""
        shown = self._shown(user, message_id)
        return [f for f, relied in shown if relied] or [f for f, _ in shown]

    # -- rating ------------------------------------------------------------------------------

    def rate_reply(self, user: str, message_id: int, helpful: bool) -> list[RateResult]:
        """Rate the facts the reply ``message_id`` relied on (every fact shown for it until its
        extraction says which). Empty when it used no facts."""
        self.check_message(user, message_id)
        return [self.facts.rate(user, fact_id, helpful)
                for fact_id in self.rated_fact_ids(user, message_id)]

    def rating(self, user: str, message_id: int, rater: str) -> bool | None:
        """The rating in effect for a reply by ``rater``: True (👍), False (👎) or None."""
        row = self.db.execute("SELECT helpful FROM reply_ratings WHERE message_id = ? "
                              "AND rater = ? AND user = ?", [message_id, rater, user]).fetchone()
        return None if row is None else bool(row[0])

    def set_rating(self, user: str, message_id: int, rater: str,
                   helpful: bool | None) -> list[RateResult]:
        """Idempotent rating of a reply by one person (``rater``, e.g. ``discord:<id>``).

        At most one rating per (reply, rater) is in effect: the same rating again changes
        nothing; the other rating first withdraws the old one, then rates; ``helpful=None``
        withdraws. Withdrawing takes back the trust change each fact actually got (kept in
        ``reply_ratings``), so 👍 then 👎 ends exactly where a single 👎 would. Returns the
        trust changes made now.
        """
        self.check_message(user, message_id)
        changes: list[RateResult] = []
        with write_transaction(self.db):
            row = self.db.execute(
                "SELECT helpful, applied FROM reply_ratings WHERE message_id = ? AND rater = ? "
                "AND user = ?", [message_id, rater, user]).fetchone()
            if row is not None and helpful is not None and bool(row[0]) == helpful:
                return []
            if row is not None:
                changes += self._withdraw(user, bool(row[0]), json.loads(row[1]))
                self.db.execute("DELETE FROM reply_ratings WHERE message_id = ? AND rater = ? "
                                "AND user = ?", [message_id, rater, user])
            if helpful is not None:
                rated = [self.facts.rate(user, fact_id, helpful)
                         for fact_id in self.rated_fact_ids(user, message_id)]
                changes += rated
                applied = {str(r.id): round(r.new_trust - r.old_trust, 6) for r in rated}
                self.db.execute(
                    "INSERT INTO reply_ratings (message_id, rater, user, helpful, applied, "
                    "rated_at) VALUES (?, ?, ?, ?, ?, ?)",
                    [message_id, rater, user, int(helpful), json.dumps(applied),
                     to_ts(self.clock.now())])
        return changes

    def _withdraw(self, user: str, helpful: bool, applied: dict[str, float]
                  ) -> list[RateResult]:
        """Undo a recorded reply rating: its exact trust changes and its counts."""
        undone = [self.facts.withdraw_rating(user, int(key), helpful, delta)
                  for key, delta in applied.items()]
        return [r for r in undone if r is not None]      # a purged fact has nothing to undo
