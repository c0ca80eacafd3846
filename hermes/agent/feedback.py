"""Rating a reply: a 👍/👎 on Discord or /rate in the terminal reaches exactly the facts that
reply was built from (the ``shown_facts`` recorded by the turn). Front-ends keep their own handle
on a reply (a Discord message id) in ``message_refs``.
"""

from __future__ import annotations

import json

from hermes.clock import to_ts
from hermes.errors import NotFound
from hermes.memory.facts.store import FactStore, RateResult
from hermes.runtime import Runtime
from hermes.store.db import write_transaction


def _check_message(rt: Runtime, user: str, message_id: int) -> None:
    row = rt.db.execute("SELECT role FROM messages WHERE id = ? AND user = ?",
                        [message_id, user]).fetchone()
    if row is None:
        raise NotFound(f"No message {message_id} for user {user!r}.")


def shown_fact_ids(rt: Runtime, user: str, message_id: int) -> list[int]:
    """The facts the model was shown for this reply (this user's only)."""
    rows = rt.db.execute(
        "SELECT s.fact_id FROM shown_facts s JOIN facts f ON f.id = s.fact_id "
        "JOIN messages m ON m.id = s.message_id "
        "WHERE s.message_id = ? AND m.user = ? AND f.user = ? ORDER BY s.fact_id",
        [message_id, user, user],
    ).fetchall()
    return [int(row[0]) for row in rows]


def rate_reply(rt: Runtime, user: str, message_id: int, helpful: bool) -> list[RateResult]:
    """Rate every fact shown for the reply ``message_id``. Empty when it used no facts."""
    _check_message(rt, user, message_id)
    facts = rt.memory.facts
    return [facts.rate(user, fact_id, helpful) for fact_id in shown_fact_ids(rt, user, message_id)]


def set_reply_rating(rt: Runtime, user: str, message_id: int, rater: str,
                     helpful: bool | None) -> list[RateResult]:
    """Idempotent rating of a reply by one person (``rater``, e.g. ``discord:<id>``).

    At most one rating per (reply, rater) is in effect: the same rating again changes nothing;
    the other rating first withdraws the old one, then rates; ``helpful=None`` withdraws.
    Withdrawing subtracts the trust change each fact actually got (kept in ``reply_ratings``),
    so 👍 then 👎 ends exactly where a single 👎 would. Returns the trust changes made now.
    """
    _check_message(rt, user, message_id)
    facts = rt.memory.facts
    changes: list[RateResult] = []
    with write_transaction(rt.db):
        row = rt.db.execute(
            "SELECT helpful, applied FROM reply_ratings WHERE message_id = ? AND rater = ? "
            "AND user = ?", [message_id, rater, user]).fetchone()
        if row is not None and helpful is not None and bool(row[0]) == helpful:
            return []
        if row is not None:
            changes += _withdraw(facts, user, bool(row[0]), json.loads(row[1]))
            rt.db.execute("DELETE FROM reply_ratings WHERE message_id = ? AND rater = ? "
                          "AND user = ?", [message_id, rater, user])
        if helpful is not None:
            rated = [facts.rate(user, fact_id, helpful)
                     for fact_id in shown_fact_ids(rt, user, message_id)]
            changes += rated
            applied = {str(r.id): round(r.new_trust - r.old_trust, 6) for r in rated}
            rt.db.execute(
                "INSERT INTO reply_ratings (message_id, rater, user, helpful, applied, rated_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [message_id, rater, user, int(helpful), json.dumps(applied),
                 to_ts(rt.clock.now())])
    return changes


def _withdraw(facts: FactStore, user: str, helpful: bool, applied: dict[str, float]
              ) -> list[RateResult]:
    """Undo a recorded reply rating: its exact trust changes and its counts."""
    undone = [facts.withdraw_rating(user, int(key), helpful, delta)
              for key, delta in applied.items()]
    return [r for r in undone if r is not None]      # a purged fact has nothing to undo


def link_ref(rt: Runtime, user: str, ref: str, message_id: int) -> None:
    """Remember that a front-end's ``ref`` (e.g. ``discord:<id>``) shows ``message_id``."""
    _check_message(rt, user, message_id)
    with write_transaction(rt.db):
        rt.db.execute(
            "INSERT INTO message_refs (ref, message_id, user) VALUES (?, ?, ?) "
            # A ref is one front-end message: it never moves to another user's message.
            "ON CONFLICT(ref) DO UPDATE SET message_id = excluded.message_id "
            "WHERE message_refs.user = excluded.user",
            [ref, message_id, user],
        )


def message_for_ref(rt: Runtime, user: str, ref: str) -> int | None:
    """The message behind a front-end's ``ref``, or None (also for another user's ref)."""
    row = rt.db.execute("SELECT message_id FROM message_refs WHERE ref = ? AND user = ?",
                        [ref, user]).fetchone()
    return int(row[0]) if row else None


def reply_rating(rt: Runtime, user: str, message_id: int, rater: str) -> bool | None:
    """The rating in effect for a reply by ``rater``: True (👍), False (👎) or None."""
    row = rt.db.execute("SELECT helpful FROM reply_ratings WHERE message_id = ? AND rater = ? "
                        "AND user = ?", [message_id, rater, user]).fetchone()
    return None if row is None else bool(row[0])
