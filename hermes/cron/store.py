"""Cron jobs and their runs in the database, and the claim that runs each fire time at most once.

A job is a prompt run through the turn engine as a ``cron`` session on a schedule (a cron
expression or an interval such as ``every 30m``, in ``cron.timezone``) and delivered to a
Discord channel, the terminal or a file under the home's outbox/. Jobs come from ``config.yaml``
(``cron.jobs``, synced at every entry point) or from ``hermes cron add``.

At most once per scheduled time: before a job runs, its run row ``(job_id, scheduled_for)`` is
inserted; the UNIQUE key makes a second claim of the same fire time fail, whether it comes from
the same process, a restarted one, or a manual run racing the scheduler. Fire times are
computed from the job's trigger and the last recorded scheduled run, never from APScheduler's
in-memory state, so a restart knows exactly what it missed.
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import sqlite_utils
from apscheduler.triggers.base import BaseTrigger

from hermes.clock import Clock, SystemClock, parse_ts, to_ts
from hermes.config import DEFAULT_USER, CronJobConfig
from hermes.cron.schedule import (
    MAX_MISSED_RECORDS,
    ScheduleError,
    check_deliver,
    parse_schedule,
    repeated_wall_time,
)
from hermes.errors import ConfigError, NotFound
from hermes.safety.guard import check_field, find_problem
from hermes.store.db import write_transaction

# How far a resume looks for fire times that passed while the job was paused.
MAX_SKIP_SCAN = 100_000

RunStatus = Literal["running", "ok", "silent", "failed", "missed"]


# --------------------------------------------------------------------------- records
@dataclass
class CronJob:
    id: int
    name: str
    user: str
    schedule: str
    prompt: str
    deliver: str
    enabled: bool
    origin: str          # cli | config | builtin
    created_at: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CronRun:
    id: int
    job_id: int
    job_name: str
    scheduled_for: str
    kind: str            # schedule | manual
    status: RunStatus
    output: str | None
    session_id: int | None
    started_at: str | None
    finished_at: str | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def trigger_for(job: CronJob, tz: str) -> BaseTrigger:
    """The job's trigger; a stored schedule that cannot be used (written by an older Hermes or
    by hand: `hermes cron add` checks it) is a ScheduleError that names the job and its fix."""
    try:
        return parse_schedule(job.schedule, tz, anchor=parse_ts(job.created_at))
    except ScheduleError as exc:
        raise ScheduleError(
            f"cron job {job.name!r} of {job.user}: {exc}. Remove it (`hermes cron remove "
            f"{job.name} --user {job.user}`) and add it again with a valid schedule.") from None


def check_stored_jobs(store: CronStore) -> None:
    """ScheduleError for the first enabled job of the database whose schedule cannot be used:
    `hermes run` says so in one line before it loads anything, as for cron.jobs, rather than
    logging a traceback and running with every job off. Jobs of cron.jobs are left to
    :func:`check_config_jobs` (the config, synced at start, decides them)."""
    for job in store.list_jobs(enabled_only=True):
        if job.origin != "config":
            trigger_for(job, store.timezone)


# --------------------------------------------------------------------------- the store
def _job(row: dict[str, Any]) -> CronJob:
    return CronJob(id=row["id"], name=row["name"], user=row["user"], schedule=row["schedule"],
                   prompt=row["prompt"], deliver=row["deliver"], enabled=bool(row["enabled"]),
                   origin=row["origin"], created_at=row["created_at"])


def _run(row: dict[str, Any]) -> CronRun:
    return CronRun(id=row["id"], job_id=row["job_id"], job_name=row["name"],
                   scheduled_for=row["scheduled_for"], kind=row["kind"], status=row["status"],
                   output=row["output"], session_id=row["session_id"],
                   started_at=row["started_at"], finished_at=row["finished_at"])


def check_config_jobs(jobs: list[CronJobConfig], source: str, *, timezone: str, home: Path,
                      default_user: str = DEFAULT_USER) -> None:
    """ConfigError (starting with ``source``) for the first bad job of ``cron.jobs``: its
    schedule, delivery target or prompt, or two jobs of one user with one name. Needs no
    database: `hermes run` calls it before it loads anything, so its one Error line comes
    first."""
    for number, job in enumerate(jobs):
        key = f"{source}: cron.jobs.{number}"
        try:
            parse_schedule(job.schedule, timezone)
        except ScheduleError as exc:
            raise ConfigError(f"{key}.schedule ({job.name!r}): {exc}") from None
        try:
            check_deliver(job.deliver, home)
        except ScheduleError as exc:
            raise ConfigError(f"{key}.deliver ({job.name!r}): {exc}") from None
        problem = find_problem(job.prompt)
        if problem:
            raise ConfigError(f"{key}.prompt ({job.name!r}): {problem}")
    # Names are unique per user: two users may each have a "digest".
    keys = [(job.user or default_user, job.name) for job in jobs]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"{source}: cron.jobs: two jobs of the same user have the same name")


class CronStore:
    """Cron jobs and their runs. Jobs are the operator's configuration, named uniquely."""

    def __init__(self, db: sqlite_utils.Database, *, timezone: str = "UTC", home: Path,
                 clock: Clock | None = None, default_user: str = DEFAULT_USER) -> None:
        self.db = db
        self.timezone = timezone
        self.default_user = default_user  # for config jobs without `user:`
        self.home = home
        self.clock = clock or SystemClock()

    def _rows(self, sql: str, params: tuple | dict = ()) -> list[dict[str, Any]]:
        cursor = self.db.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    # ---- jobs
    def add(self, name: str, user: str, schedule: str, prompt: str, deliver: str = "terminal",
            *, enabled: bool = True, origin: str = "cli") -> CronJob:
        name = name.strip()
        if not name or not prompt.strip():
            raise ScheduleError("a cron job needs a name and a prompt")
        check_field("cron prompt", prompt)  # replayed to the model on every run
        parse_schedule(schedule, self.timezone)
        check_deliver(deliver, self.home)
        with write_transaction(self.db):
            try:
                self.db.execute(
                    "INSERT INTO cron_jobs (name, user, schedule, prompt, deliver, enabled, "
                    "origin, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, user, schedule, prompt, deliver, int(enabled), origin,
                     to_ts(self.clock.now())),
                )
            except sqlite3.IntegrityError:
                raise ScheduleError(f"{user} already has a cron job named {name!r}; remove it "
                                    "first or pick another name") from None
        return self.get(name, user=user)

    def get(self, name: str, *, user: str | None = None) -> CronJob:
        """The job ``name`` of ``user``; without a user, the only job of that name."""
        if user is not None:
            rows = self._rows("SELECT * FROM cron_jobs WHERE name = ? AND user = ?", (name, user))
        else:
            rows = self._rows("SELECT * FROM cron_jobs WHERE name = ? ORDER BY user", (name,))
        if not rows:
            owner = f" for {user}" if user is not None else ""
            raise NotFound(f"no cron job named {name!r}{owner} (see `hermes cron list`)")
        if len(rows) > 1:
            users = ", ".join(r["user"] for r in rows)
            raise ScheduleError(f"several users have a cron job named {name!r} ({users}); say "
                                "whose with --user")
        return _job(rows[0])

    def get_by_id(self, job_id: int) -> CronJob | None:
        rows = self._rows("SELECT * FROM cron_jobs WHERE id = ?", (job_id,))
        return _job(rows[0]) if rows else None

    def list_jobs(self, *, user: str | None = None, enabled_only: bool = False) -> list[CronJob]:
        sql = "SELECT * FROM cron_jobs WHERE 1"
        params: list[Any] = []
        if user is not None:
            sql += " AND user = ?"
            params.append(user)
        if enabled_only:
            sql += " AND enabled = 1"
        return [_job(r) for r in self._rows(sql + " ORDER BY name", tuple(params))]

    def remove(self, name: str, *, user: str | None = None) -> CronJob:
        job = self.get(name, user=user)
        if job.origin == "config":
            raise ScheduleError(f"cron job {name!r} comes from config.yaml; remove it there "
                                "(or pause it with `hermes cron pause`)")
        with write_transaction(self.db):
            self.db.execute("DELETE FROM cron_jobs WHERE id = ?", (job.id,))
        return job

    def set_enabled(self, name: str, enabled: bool, *, user: str | None = None) -> CronJob:
        """Pause or resume. Fire times that passed while paused are recorded as skipped, so a
        resume never runs one of them."""
        job = self.get(name, user=user)
        if enabled and not job.enabled:
            self._skip_paused(job)
        with write_transaction(self.db):
            self.db.execute("UPDATE cron_jobs SET enabled = ? WHERE id = ?", (int(enabled), job.id))
        return self.get(name, user=job.user)

    def _skip_paused(self, job: CronJob) -> None:
        now = self.clock.now()
        trigger = trigger_for(job, self.timezone)
        last = self.last_scheduled(job.id)
        fire = (trigger.get_next_fire_time(last, now) if last is not None else
                trigger.get_next_fire_time(None, parse_ts(job.created_at)
                                           + timedelta(microseconds=1)))
        skipped: list[datetime] = []
        for _ in range(MAX_SKIP_SCAN):
            if fire is None or fire > now:
                break
            if not repeated_wall_time(trigger, fire):
                skipped = [*skipped[-(MAX_MISSED_RECORDS - 1):], fire]
            fire = trigger.get_next_fire_time(fire, fire)
        for when in skipped:      # the latest ones: the newest bounds what a resume may run
            self.record_missed(job.id, when, "skipped: the job was paused")

    def sync_config(self, jobs: list[CronJobConfig], source: str = "config") -> None:
        """Make the database's config jobs match ``cron.jobs``.

        Schedule, prompt, user (default: ``users.default``) and delivery follow the config.
        ``enabled`` follows the config whenever the config's value changed since the last sync;
        otherwise a pause or resume from the command line stands (``enabled: false`` in the
        config still always pauses). A bad job is a ConfigError that starts with ``source``
        (the config file, ``Settings.source``), as the errors found at load do.
        """
        check_config_jobs(jobs, source, timezone=self.timezone, home=self.home,
                          default_user=self.default_user)
        keys = [(job.user or self.default_user, job.name) for job in jobs]
        with write_transaction(self.db):
            existing = {(r["user"], r["name"]): r for r in self._rows("SELECT * FROM cron_jobs")}
            for job in jobs:
                user = job.user or self.default_user
                row = existing.get((user, job.name))
                if row is None:
                    self.db.execute(
                        "INSERT INTO cron_jobs (name, user, schedule, prompt, deliver, enabled, "
                        "config_enabled, origin, created_at) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, 'config', ?)",
                        (job.name, user, job.schedule, job.prompt, job.deliver,
                         int(job.enabled), int(job.enabled), to_ts(self.clock.now())),
                    )
                elif row["origin"] != "config":
                    raise ConfigError(f"{source}: cron.jobs: {job.name!r} of {user} is also a "
                                      "job added with `hermes cron add`; rename one of them")
                else:
                    if row["config_enabled"] is None or bool(row["config_enabled"]) != job.enabled:
                        enabled = job.enabled
                    else:
                        enabled = bool(row["enabled"]) and job.enabled
                    self.db.execute(
                        "UPDATE cron_jobs SET user = ?, schedule = ?, prompt = ?, deliver = ?, "
                        "enabled = ?, config_enabled = ? WHERE id = ?",
                        (user, job.schedule, job.prompt, job.deliver, int(enabled),
                         int(job.enabled), row["id"]),
                    )
            wanted = set(keys)
            for user_and_name, row in existing.items():
                if row["origin"] == "config" and user_and_name not in wanted:
                    self.db.execute("DELETE FROM cron_jobs WHERE id = ?", (row["id"],))

    # ---- runs
    def runs(self, *, name: str | None = None, user: str | None = None,
             limit: int = 20) -> list[CronRun]:
        sql = ("SELECT r.*, j.name FROM cron_runs r JOIN cron_jobs j ON j.id = r.job_id "
               "WHERE 1")
        params: list[Any] = []
        if name is not None:
            sql += " AND j.name = ?"
            params.append(name)
        if user is not None:
            sql += " AND j.user = ?"
            params.append(user)
        sql += " ORDER BY r.scheduled_for DESC, r.id DESC LIMIT ?"
        params.append(limit)
        return [_run(r) for r in self._rows(sql, tuple(params))]

    def get_run(self, run_id: int) -> CronRun:
        rows = self._rows("SELECT r.*, j.name FROM cron_runs r JOIN cron_jobs j "
                          "ON j.id = r.job_id WHERE r.id = ?", (run_id,))
        if not rows:
            raise NotFound(f"no cron run {run_id}")
        return _run(rows[0])

    def last_scheduled(self, job_id: int) -> datetime | None:
        """The latest fire time already handled (run, running, failed or missed)."""
        row = self.db.execute(
            "SELECT max(scheduled_for) FROM cron_runs WHERE job_id = ? AND kind = 'schedule'",
            (job_id,),
        ).fetchone()
        return parse_ts(row[0]) if row and row[0] else None

    def claim(self, job_id: int, scheduled_for: datetime, *, kind: str = "schedule") -> int | None:
        """Insert the run row for this fire time; None when it was already claimed."""
        with write_transaction(self.db):
            cursor = self.db.execute(
                "INSERT OR IGNORE INTO cron_runs (job_id, scheduled_for, kind, status, "
                "started_at) VALUES (?, ?, ?, 'running', ?)",
                (job_id, to_ts(scheduled_for), kind, to_ts(self.clock.now())),
            )
            return cursor.lastrowid if cursor.rowcount == 1 else None

    def record_missed(self, job_id: int, scheduled_for: datetime, note: str) -> bool:
        with write_transaction(self.db):
            cursor = self.db.execute(
                "INSERT OR IGNORE INTO cron_runs (job_id, scheduled_for, kind, status, output, "
                "finished_at) VALUES (?, ?, 'schedule', 'missed', ?, ?)",
                (job_id, to_ts(scheduled_for), note, to_ts(self.clock.now())),
            )
            return cursor.rowcount == 1

    def finish(self, run_id: int, status: RunStatus, output: str | None,
               session_id: int | None = None) -> None:
        with write_transaction(self.db):
            self.db.execute(
                "UPDATE cron_runs SET status = ?, output = ?, session_id = ?, finished_at = ? "
                "WHERE id = ?",
                (status, output, session_id, to_ts(self.clock.now()), run_id),
            )

    def fail_interrupted(self, note: str) -> int:
        """Runs left 'running' by a process that stopped: recorded as failed, never re-run."""
        with write_transaction(self.db):
            cursor = self.db.execute(
                "UPDATE cron_runs SET status = 'failed', output = coalesce(output, '') || ?, "
                "finished_at = ? WHERE status = 'running'",
                (note, to_ts(self.clock.now())),
            )
            return cursor.rowcount
