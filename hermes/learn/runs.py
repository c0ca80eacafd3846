"""Extraction runs: one row per message range a session was learned from, and its outcome.

The records behind idempotence (a range is extracted once), retries (``retry`` until
``MAX_ATTEMPTS``), ``hermes stats`` and the doctor. Every function takes the connection it runs
on (the event loop's or the worker thread's own) and the user the rows belong to. The SQL is
the store's (:mod:`hermes.store.extraction_runs`); this module turns its rows into records.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlite_utils import Database

from hermes.learn.consolidate import Consolidation
from hermes.store import extraction_runs as table
from hermes.store.extraction_runs import (
    cost,
    count_by_status,
    last_failure,
    record_retry,
    skip_reasons,
    totals,
    unanswered,
)

__all__ = ["RunRecord", "get", "of_user", "waiting_retry", "cost", "find", "insert", "finish",
           "record_retry", "count_by_status", "skip_reasons", "totals", "last_failure",
           "unanswered"]


@dataclass
class RunRecord:
    id: int
    user: str
    session_id: int
    first_message_id: int
    last_message_id: int
    status: str          # done | skipped | retry | failed
    reason: str | None
    model_calls: int
    created: int
    merged: int
    superseded: int
    forgotten: int
    attempts: int
    # What a run that just committed wrote (set on the record ``on_commit`` listeners get).
    changes: Consolidation | None = None


def _counts(changes: Consolidation) -> table.Counts:
    return changes.created, changes.merged, changes.superseded, changes.forgotten


def get(db: Database, user: str, run_id: int) -> RunRecord:
    row = table.get(db, user, run_id)
    if row is None:  # callers pass ids they just wrote or read for this user
        raise LookupError(f"no extraction run {run_id} of this user")
    return RunRecord(*row)


def of_user(db: Database, user: str, session_id: int | None = None) -> list[RunRecord]:
    return [RunRecord(*row) for row in table.of_user(db, user, session_id)]


def waiting_retry(db: Database, user: str | None) -> list[RunRecord]:
    """Runs waiting for another try: one user's, or (``None``: the daemon's job) everyone's."""
    return [RunRecord(*row) for row in table.waiting_retry(db, user)]


def find(db: Database, user: str, session_id: int, first: int, last: int) -> RunRecord | None:
    row = table.find(db, user, session_id, first, last)
    return RunRecord(*row) if row else None


def insert(db: Database, user: str, session_id: int, first: int, last: int, status: str, *,
           now: str, reason: str | None = None, raw: str | None = None,
           cost: float | None = None, model_calls: int = 0,
           changes: Consolidation | None = None, attempts: int = 1) -> int:
    return table.insert(db, user, session_id, first, last, status, now=now, reason=reason,
                        raw=raw, cost=cost, model_calls=model_calls,
                        counts=_counts(changes or Consolidation()), attempts=attempts)


def finish(db: Database, user: str, run_id: int, *, status: str, reason: str | None,
           cost: float | None, changes: Consolidation, now: str) -> None:
    """A retried run that got its answer: its counts, one more call and attempt."""
    table.finish(db, user, run_id, status=status, reason=reason, cost=cost,
                 counts=_counts(changes), now=now)
