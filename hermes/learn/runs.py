"""Extraction runs: one row per message range a session was learned from, and its outcome.

The records behind idempotence (a range is extracted once), retries (``retry`` until
``MAX_ATTEMPTS``), ``hermes stats`` and the doctor. Every function takes the connection it runs
on (the event loop's or the worker thread's own) and the user the rows belong to.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlite_utils import Database

from hermes.learn.consolidate import Consolidation

COLUMNS = ("id, user, session_id, first_message_id, last_message_id, status, reason, "
           "model_calls, created, merged, superseded, forgotten, attempts")


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


def get(db: Database, user: str, run_id: int) -> RunRecord:
    row = db.execute(f"SELECT {COLUMNS} FROM extraction_runs WHERE id = ? AND user = ?",
                     [run_id, user]).fetchone()
    return RunRecord(*row)


def of_user(db: Database, user: str, session_id: int | None = None) -> list[RunRecord]:
    where = "user = ?"
    params: list[str | int] = [user]
    if session_id is not None:
        where += " AND session_id = ?"
        params.append(session_id)
    rows = db.execute(f"SELECT {COLUMNS} FROM extraction_runs WHERE {where} ORDER BY id",
                      params).fetchall()
    return [RunRecord(*r) for r in rows]


def waiting_retry(db: Database, user: str | None) -> list[RunRecord]:
    """Runs waiting for another try: one user's, or (``None``: the daemon's job) everyone's."""
    where, params = "status = 'retry'", []
    if user is not None:
        where, params = "status = 'retry' AND user = ?", [user]
    rows = db.execute(f"SELECT {COLUMNS} FROM extraction_runs WHERE {where} ORDER BY id",
                      params).fetchall()
    return [RunRecord(*row) for row in rows]


def find(db: Database, user: str, session_id: int, first: int, last: int) -> RunRecord | None:
    row = db.execute(
        f"SELECT {COLUMNS} FROM extraction_runs WHERE user = ? AND session_id = ? "
        "AND first_message_id = ? AND last_message_id = ?", [user, session_id, first, last],
    ).fetchone()
    return RunRecord(*row) if row else None


def insert(db: Database, user: str, session_id: int, first: int, last: int, status: str, *,
           now: str, reason: str | None = None, raw: str | None = None,
           cost: float | None = None, model_calls: int = 0,
           changes: Consolidation | None = None, attempts: int = 1) -> int:
    changes = changes or Consolidation()
    cursor = db.execute(
        """
        INSERT INTO extraction_runs (user, session_id, first_message_id, last_message_id,
          status, reason, raw_output, model_calls, cost, created, merged, superseded,
          forgotten, attempts, started_at, finished_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [user, session_id, first, last, status, reason, raw, model_calls, cost,
         changes.created, changes.merged, changes.superseded, changes.forgotten, attempts,
         now, now],
    )
    return int(cursor.lastrowid or 0)


def finish(db: Database, user: str, run_id: int, *, status: str, reason: str | None,
           cost: float | None, changes: Consolidation, now: str) -> None:
    """A retried run that got its answer: its counts, one more call and attempt."""
    db.execute(
        "UPDATE extraction_runs SET status = ?, reason = ?, raw_output = NULL, "
        "model_calls = model_calls + 1, cost = coalesce(cost, 0) + coalesce(?, 0), "
        "created = ?, merged = ?, superseded = ?, forgotten = ?, finished_at = ?, "
        "attempts = attempts + 1 WHERE id = ? AND user = ?",
        [status, reason, cost, changes.created, changes.merged, changes.superseded,
         changes.forgotten, now, run_id, user],
    )


def record_retry(db: Database, user: str, run_id: int, *, status: str, reason: str,
                 raw: str | None, attempts: int, cost: float | None, now: str) -> None:
    """A run that failed again: its reason, raw output (kept for the next try) and attempts."""
    db.execute(
        "UPDATE extraction_runs SET status = ?, reason = ?, raw_output = ?, "
        "attempts = ?, model_calls = model_calls + ?, cost = coalesce(cost, 0) + "
        "coalesce(?, 0), finished_at = ? WHERE id = ? AND user = ?",
        [status, reason, raw, attempts, int(raw is not None), cost, now, run_id, user],
    )
