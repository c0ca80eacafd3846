"""Schedules: cron expressions and intervals as APScheduler triggers, delivery targets, and
the plan of which fire times are due, folded or missed at a given moment.

Triggers are pure (``get_next_fire_time(previous, now)`` depends only on its arguments), so the
plan is computed for any ``now``: the scheduler's wake-ups and the catch-up at start use the same
arithmetic, and tests use a fake clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.combining import OrTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from hermes.clock import SystemClock
from hermes.errors import ConfigError, HermesError

# The live scheduler calls us a few milliseconds after a fire time; never call that "missed".
MIN_GRACE = timedelta(minutes=1)
MAX_INTERVAL = timedelta(days=366)
# After a long outage, record at most this many missed fire times per job (the rest are logged).
MAX_MISSED_RECORDS = 100

_INTERVAL = re.compile(
    r"^every\s+(\d+)\s*(m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)$", re.IGNORECASE
)
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
# APScheduler 3 numbers weekdays from Monday=0 and rejects 7; crontab has Sunday=0 (and 7).
# Rewriting numeric weekdays to names gives crontab meaning in both.
_CRON_DOW = {"0": "sun", "1": "mon", "2": "tue", "3": "wed", "4": "thu", "5": "fri", "6": "sat",
             "7": "sun"}
SCHEDULE_HELP = "use a cron expression like '0 8 * * *' or an interval like 'every 30m'"


class ScheduleError(HermesError):
    """A schedule or delivery target that cannot be used."""


def timezone_for(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"cron.timezone: unknown time zone {name!r} (e.g. UTC, "
                          "Europe/Berlin)") from None


def _crontab_weekdays(field_text: str) -> str:
    pieces = []
    for piece in field_text.split(","):
        base, slash, step = piece.partition("/")
        lo, dash, hi = base.partition("-")
        lo = _CRON_DOW.get(lo, lo)
        hi = _CRON_DOW.get(hi, hi)
        pieces.append((f"{lo}-{hi}" if dash else lo) + (f"/{step}" if slash else ""))
    return ",".join(pieces)


def parse_schedule(schedule: str, tz: str, *, anchor: datetime | None = None) -> BaseTrigger:
    """A trigger for ``schedule``: a 5-field cron expression or ``every N m|h|d|w``.

    Intervals count from ``anchor`` (the job's creation): the first run is one interval later.
    """
    zone = timezone_for(tz)
    text = " ".join(schedule.split())
    match = _INTERVAL.match(text)
    if match:
        amount = int(match.group(1))
        if amount <= 0:
            raise ScheduleError(f"schedule {schedule!r}: the interval must be positive")
        unit = _UNITS[match.group(2)[0].lower()]
        # Checked before timedelta sees it: 'every 99999999999999999999h' overflows C ints, and
        # a huge interval overflows the date of its first run.
        if amount > MAX_INTERVAL / timedelta(**{unit: 1}):
            raise ScheduleError(f"schedule {schedule!r}: the interval must be at most a year "
                                "(every 366d); use a cron expression for rarer runs")
        delta = timedelta(**{unit: amount})
        start = (anchor or SystemClock().now()) + delta
        return IntervalTrigger(seconds=int(delta.total_seconds()), start_date=start,
                               timezone=zone)
    fields = text.split(" ")
    if len(fields) != 5:
        raise ScheduleError(f"schedule {schedule!r}: {SCHEDULE_HELP}")
    fields[4] = _crontab_weekdays(fields[4])
    try:
        if fields[2].startswith("*") or fields[4].startswith("*"):
            return CronTrigger.from_crontab(" ".join(fields), timezone=zone)
        # Both day-of-month and day-of-week restricted: crontab fires when EITHER matches,
        # APScheduler only when both do. One trigger for each, firing at the earlier.
        by_day = CronTrigger.from_crontab(" ".join([*fields[:4], "*"]), timezone=zone)
        by_weekday = CronTrigger.from_crontab(" ".join([*fields[:2], "*", *fields[3:]]),
                                              timezone=zone)
        return OrTrigger([by_day, by_weekday])
    except ValueError as exc:
        raise ScheduleError(f"schedule {schedule!r}: {exc}; {SCHEDULE_HELP}") from None


OUTBOX = "outbox"


def file_target(home: Path, target: str) -> Path:
    """The file a ``file:<path>`` delivery writes to: always under ``<home>/outbox/``.

    A path is taken relative to the outbox. ``..`` is refused outright, and the resolved path
    (symlinks followed) must still be inside the outbox, so a job can never write a context
    file, the ``.env`` loaded at start, or anything outside the home.
    """
    outbox = home / OUTBOX
    path = Path(target).expanduser()
    if ".." in path.parts:
        raise ScheduleError(f"deliver file:{target}: '..' is not allowed; the file goes under "
                            f"{outbox}")
    resolved = (path if path.is_absolute() else outbox / path).resolve()
    if not resolved.is_relative_to(outbox.resolve()) or resolved == outbox.resolve():
        raise ScheduleError(f"deliver file:{target}: the file must be under the outbox "
                            f"({outbox}); give a path relative to it, like file:digest.md")
    return resolved


def check_deliver(deliver: str, home: Path) -> str:
    """Validate a delivery target: ``file:<path>`` (the runner's own), or one a registered
    front-end accepts, judged by that front-end (``discord:<channel id>``, ``terminal``, a
    plugin's ``<name>:<target>``)."""
    # The registry loads the plugins: only here, when a job is added or synced.
    from hermes import plugins

    frontends = plugins.loaded().frontends

    kind, _, rest = deliver.partition(":")
    if kind == "file" and rest:
        file_target(home, rest)
        return deliver
    if kind != "file" and frontends.accepts(kind, rest):
        return deliver
    forms = [*frontends.delivery_forms(), "file:<path under the home's outbox/>"]
    raise ScheduleError(f"deliver {deliver!r}: use {', '.join(forms[:-1])} or {forms[-1]}")


@dataclass
class Plan:
    due: datetime | None = None                             # run this fire time now
    missed: list[datetime] = field(default_factory=list)   # record these as missed
    folded: list[datetime] = field(default_factory=list)   # within grace, folded into `due`
    uncounted: bool = False                                 # more missed than recorded


def repeated_wall_time(trigger: BaseTrigger, fire: datetime) -> bool:
    """``fire`` is the second pass of a local time when the clocks go back (01:30 EST after
    01:30 EDT) and the job runs at set hours ("30 1 * * *"): like crontab, such a job runs once
    that night. A job that runs every hour runs in both passes (they are an hour apart)."""
    if not getattr(fire, "fold", 0):
        return False
    triggers = trigger.triggers if isinstance(trigger, OrTrigger) else [trigger]
    return all(isinstance(t, CronTrigger)
               and str(next(f for f in t.fields if f.name == "hour")) != "*"
               for t in triggers)


def plan_runs(trigger: BaseTrigger, *, now: datetime, last_fire: datetime | None,
              created_at: datetime, grace: timedelta) -> Plan:
    """Which fire times after ``last_fire`` (or since ``created_at``) are due, missed, folded.

    The latest fire time no older than ``grace`` runs once; earlier ones in the window are
    folded into it (a catch-up runs a job once, not once per missed time); older ones are missed.
    """
    grace = max(grace, MIN_GRACE)
    window_start = now - grace
    plan = Plan()
    # Missed: from the last run (or creation) to the start of the grace window, capped.
    fire = (trigger.get_next_fire_time(last_fire, now) if last_fire is not None
            else trigger.get_next_fire_time(None, created_at + timedelta(microseconds=1)))
    while fire is not None and fire < window_start:
        if len(plan.missed) >= MAX_MISSED_RECORDS:
            plan.uncounted = True
            break
        if not repeated_wall_time(trigger, fire):
            plan.missed.append(fire)
        fire = trigger.get_next_fire_time(fire, now)
    # Due: fire times inside the window (jump there directly after a long outage).
    if plan.uncounted:
        fire = trigger.get_next_fire_time(None, window_start)
    in_window: list[datetime] = []
    while fire is not None and fire <= now:
        if (last_fire is None or fire > last_fire) and not repeated_wall_time(trigger, fire):
            in_window.append(fire)
        fire = trigger.get_next_fire_time(fire, fire)
    if in_window:
        plan.due = in_window[-1]
        plan.folded = in_window[:-1]
    return plan
