"""The ``extraction_runs`` table: one row per message range a session was learned from.

The SQL behind :mod:`hermes.learn.runs` (which turns these rows into ``RunRecord`` and knows
what a consolidation is): plain rows and counts here, so the learning pipeline holds no SQL.
Every function takes the connection it runs on (the event loop's or the worker thread's own)
and the user the rows belong to; none can return another user's rows.
"""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database

# The order of a run row (``RunRecord``'s fields, in this order).
COLUMNS = ("id, user, session_id, first_message_id, last_message_id, status, reason, "
           "model_calls, created, merged, superseded, forgotten, attempts")

Row = tuple[Any, ...]
# Facts a run created, merged, superseded and forgot.
Counts = tuple[int, int, int, int]


def get(db: Database, user: str, run_id: int) -> Row | None:
    return db.execute(f"SELECT {COLUMNS} FROM extraction_runs WHERE id = ? AND user = ?",
                      [run_id, user]).fetchone()


def of_user(db: Database, user: str, session_id: int | None = None) -> list[Row]:
    where = "user = ?"
    params: list[str | int] = [user]
    if session_id is not None:
        where += " AND session_id = ?"
        params.append(session_id)
    return db.execute(f"SELECT {COLUMNS} FROM extraction_runs WHERE {where} ORDER BY id",
                      params).fetchall()


def waiting_retry(db: Database, user: str | None) -> list[Row]:
    """Runs waiting for another try: one user's, or (``None``: the daemon's job) everyone's."""
    where, params = "status = 'retry'", []
    if user is not None:
        where, params = "status = 'retry' AND user = ?", [user]
    return db.execute(f"SELECT {COLUMNS} FROM extraction_runs WHERE {where} ORDER BY id",
                      params).fetchall()


def cost(db: Database, user: str, run_id: int) -> float | None:
    """What the run's model calls cost (USD), when litellm knew it."""
    row = db.execute("SELECT cost FROM extraction_runs WHERE id = ? AND user = ?",
                     [run_id, user]).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def find(db: Database, user: str, session_id: int, first: int, last: int) -> Row | None:
    return db.execute(
        f"SELECT {COLUMNS} FROM extraction_runs WHERE user = ? AND session_id = ? "
        "AND first_message_id = ? AND last_message_id = ?", [user, session_id, first, last],
    ).fetchone()


def insert(db: Database, user: str, session_id: int, first: int, last: int, status: str, *,
           now: str, reason: str | None, raw: str | None, cost: float | None,
           model_calls: int, counts: Counts, attempts: int) -> int:
    created, merged, superseded, forgotten = counts
    cursor = db.execute(
        """
        INSERT INTO extraction_runs (user, session_id, first_message_id, last_message_id,
          status, reason, raw_output, model_calls, cost, created, merged, superseded,
          forgotten, attempts, started_at, finished_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [user, session_id, first, last, status, reason, raw, model_calls, cost,
         created, merged, superseded, forgotten, attempts, now, now],
    )
    return int(cursor.lastrowid or 0)


def finish(db: Database, user: str, run_id: int, *, status: str, reason: str | None,
           cost: float | None, counts: Counts, now: str) -> None:
    """A retried run that got its answer: its counts, one more call and attempt."""
    created, merged, superseded, forgotten = counts
    db.execute(
        "UPDATE extraction_runs SET status = ?, reason = ?, raw_output = NULL, "
        "model_calls = model_calls + 1, cost = coalesce(cost, 0) + coalesce(?, 0), "
        "created = ?, merged = ?, superseded = ?, forgotten = ?, finished_at = ?, "
        "attempts = attempts + 1 WHERE id = ? AND user = ?",
        [status, reason, cost, created, merged, superseded, forgotten, now, run_id, user],
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


# -- what learning did, in sums (``hermes stats``) -----------------------------------------------


def count_by_status(db: Database, user: str) -> dict[str, int]:
    """The user's runs per status (done | skipped | retry | failed)."""
    return {status: int(count) for status, count in db.execute(
        "SELECT status, count(*) FROM extraction_runs WHERE user = ? GROUP BY status", [user]
    ).fetchall()}


def skip_reasons(db: Database, user: str) -> dict[str, int]:
    """The gate's reasons for the user's skipped runs, most frequent first."""
    return {reason or "(none)": int(count) for reason, count in db.execute(
        "SELECT reason, count(*) FROM extraction_runs WHERE user = ? AND status = 'skipped' "
        "GROUP BY reason ORDER BY count(*) DESC, reason", [user]
    ).fetchall()}


def totals(db: Database, user: str) -> tuple[int, int, int, int, int, float | None, int]:
    """Sums over the user's runs: model calls, facts created, merged, superseded and
    forgotten, cost (None when no run knew it), and model-calling runs without a cost."""
    calls, created, merged, superseded, forgotten, cost, without = db.execute(
        "SELECT coalesce(sum(model_calls), 0), coalesce(sum(created), 0), "
        "coalesce(sum(merged), 0), coalesce(sum(superseded), 0), coalesce(sum(forgotten), 0), "
        "sum(cost), sum(CASE WHEN model_calls > 0 AND cost IS NULL THEN 1 ELSE 0 END) "
        "FROM extraction_runs WHERE user = ?", [user]
    ).fetchone()
    return (int(calls), int(created), int(merged), int(superseded), int(forgotten),
            None if cost is None else float(cost), int(without or 0))


def last_failure(db: Database, user: str) -> str | None:
    """Why the user's latest run waiting for a retry (or failed for good) did not finish."""
    row = db.execute(
        "SELECT reason FROM extraction_runs WHERE user = ? AND status IN ('retry', 'failed') "
        "ORDER BY id DESC LIMIT 1", [user]
    ).fetchone()
    return row[0] if row else None


def unanswered(db: Database, user: str) -> int:
    """The user's failed runs whose model call got no answer at all (provider down): not
    counted in model_calls, and what they cost, if anything, is not known."""
    return int(db.execute(
        "SELECT count(*) FROM extraction_runs WHERE user = ? AND status IN ('retry', 'failed') "
        "AND raw_output IS NULL AND model_calls = 0", [user]
    ).fetchone()[0])
