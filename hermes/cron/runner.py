"""Running cron jobs: plan each job's fire times, claim one, run its prompt through the turn
engine, deliver the reply to its target and record the run; and the APScheduler wiring.

The runner holds no schedule state itself: fire times come from the job's trigger and the last
run recorded by :class:`hermes.cron.store.CronStore` (see that module on at-most-once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hermes.aio import finish_or_cancel
from hermes.clock import Clock, parse_ts, to_ts
from hermes.cron.schedule import MAX_MISSED_RECORDS, Plan, ScheduleError, file_target, plan_runs
from hermes.cron.store import CronJob, CronRun, CronStore, trigger_for
from hermes.home import make_private_dirs, private_opener
from hermes.memory.place import PRIVATE, Place

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

    from hermes.agent.turn import Agent
    from hermes.memory.sessions.store import SessionStore

log = logging.getLogger(__name__)

SILENT = "[SILENT]"


@dataclass
class RunOutcome:
    """What running a job's prompt produced."""

    text: str
    session_id: int | None = None
    error: str | None = None


PromptRunner = Callable[[CronJob], Awaitable[RunOutcome]]
Deliverer = Callable[[CronJob, str, str], Awaitable[None]]   # (job, target, text)
Placer = Callable[[str], Awaitable[Place]]   # target -> who reads a delivery there
# The runner's own deliveries, read by the user alone.
PRIVATE_DELIVERIES = ("file", "terminal")


class CronRunner:
    """Plans, claims, runs, delivers and records cron jobs. Holds no schedule state itself."""

    def __init__(self, store: CronStore, run_prompt: PromptRunner, *, grace: timedelta,
                 deliverers: dict[str, Deliverer] | None = None) -> None:
        self.store = store
        self.run_prompt = run_prompt
        self.grace = grace
        # Routes by prefix, looked up at each delivery: `hermes run` adds a front-end's as it
        # starts (the dict is shared). The runner's own, file and terminal (stdout), come last.
        self.deliverers: dict[str, Deliverer] = {} if deliverers is None else deliverers
        self.own: dict[str, Deliverer] = {"file": self._deliver_file, "terminal": _deliver_stdout}
        self._running: set[asyncio.Task[Any]] = set()

    @property
    def clock(self) -> Clock:
        return self.store.clock

    def plan(self, job: CronJob, now: datetime | None = None) -> Plan:
        return plan_runs(trigger_for(job, self.store.timezone), now=now or self.clock.now(),
                         last_fire=self.store.last_scheduled(job.id),
                         created_at=parse_ts(job.created_at), grace=self.grace)

    async def tick(self, job_id: int) -> CronRun | None:
        """Handle whatever is due for one job now: record misses, run the due fire time once."""
        job = self.store.get_by_id(job_id)
        if job is None or not job.enabled:
            return None
        plan = self.plan(job)
        for fire in plan.missed:
            self.store.record_missed(job.id, fire, "missed: not run at its time (Hermes was "
                                     "down) and later than the grace window")
        if plan.uncounted:
            log.warning("cron job %s: more than %d missed runs; recorded the first %d",
                        job.name, MAX_MISSED_RECORDS, MAX_MISSED_RECORDS)
        for fire in plan.folded:
            self.store.record_missed(job.id, fire, f"folded into the run for {to_ts(plan.due)}"
                                     if plan.due else "folded")
        if plan.due is None:
            return None
        return await self.execute(job, plan.due)

    async def catch_up(self) -> list[CronRun]:
        """At start: runs left 'running' are failed; each job's due or missed times handled."""
        interrupted = self.store.fail_interrupted(
            "\n[interrupted: Hermes stopped during this run; it is not run again]")
        if interrupted:
            log.warning("cron: %d run(s) were interrupted by a stop; recorded as failed",
                        interrupted)
        done = []
        for job in self.store.list_jobs(enabled_only=True):
            run = await self.tick(job.id)
            if run is not None:
                done.append(run)
        return done

    async def run_now(self, name: str, *, user: str | None = None) -> CronRun:
        """A manual run (``hermes cron run``), outside the schedule."""
        job = self.store.get(name, user=user)
        run = await self.execute(job, self.clock.now(), kind="manual")
        assert run is not None  # a manual run's time is unique
        return run

    async def execute(self, job: CronJob, scheduled_for: datetime, *,
                      kind: str = "schedule") -> CronRun | None:
        run_id = self.store.claim(job.id, scheduled_for, kind=kind)
        if run_id is None:
            log.info("cron job %s at %s: already claimed, not run again", job.name,
                     to_ts(scheduled_for))
            return None
        task = asyncio.current_task()
        if task is not None:
            self._running.add(task)
        try:
            await self._run_claimed(job, run_id)
        except asyncio.CancelledError:
            self.store.finish(run_id, "failed", "[cancelled: Hermes was shutting down]")
            raise
        finally:
            if task is not None:
                self._running.discard(task)
        return self.store.get_run(run_id)

    async def _run_claimed(self, job: CronJob, run_id: int) -> None:
        log.info("cron job %s: running (run %d)", job.name, run_id)
        await self._attempt(job, run_id)
        run = self.store.get_run(run_id)
        log.log(logging.WARNING if run.status == "failed" else logging.INFO,
                "cron job %s: run %d %s", job.name, run_id, run.status)

    async def _attempt(self, job: CronJob, run_id: int) -> None:
        try:
            outcome = await self.run_prompt(job)
        except Exception as exc:
            log.exception("cron job %s: the turn failed", job.name)
            self.store.finish(run_id, "failed", f"[error: {exc}]")
            return
        if outcome.error:
            self.store.finish(run_id, "failed", f"{outcome.text}\n[error: {outcome.error}]"
                              .strip(), outcome.session_id)
            return
        if outcome.text.strip() == SILENT:
            self.store.finish(run_id, "silent", outcome.text, outcome.session_id)
            return
        try:
            await self.deliver(job, outcome.text)
        except Exception as exc:
            log.exception("cron job %s: delivery to %s failed", job.name, job.deliver)
            self.store.finish(run_id, "failed",
                              f"{outcome.text}\n[delivery to {job.deliver} failed: {exc}]",
                              outcome.session_id)
            return
        self.store.finish(run_id, "ok", outcome.text, outcome.session_id)

    async def deliver(self, job: CronJob, text: str) -> None:
        kind, _, target = job.deliver.partition(":")
        deliverer = self.deliverers.get(kind) or self.own.get(kind)
        if deliverer is None:
            raise ScheduleError(f"no {kind} delivery here (Discord delivery needs `hermes run` "
                                "with a Discord token)")
        await deliverer(job, target, text)

    async def _deliver_file(self, job: CronJob, target: str, text: str) -> None:
        path = file_target(self.store.home, target)
        make_private_dirs(path.parent)
        stamp = self.clock.now().strftime("%Y-%m-%d %H:%M UTC")
        with open(path, "a", encoding="utf-8", opener=private_opener) as handle:  # 0600
            handle.write(f"## {job.name} ({stamp})\n\n{text.rstrip()}\n\n")

    async def wait_running(self, timeout: float | None = None) -> None:
        """Let running jobs finish (at shutdown); any left are cancelled and recorded failed."""
        await finish_or_cancel({t for t in self._running if t is not asyncio.current_task()},
                               timeout)

    # ---- APScheduler wiring
    def schedule_all(self, scheduler: BaseScheduler) -> None:
        """Make the scheduler's cron jobs match the enabled jobs in the database."""
        wanted = {f"cron:{job.id}": job for job in self.store.list_jobs(enabled_only=True)}
        for existing in scheduler.get_jobs():
            if existing.id.startswith("cron:") and existing.id not in wanted:
                scheduler.remove_job(existing.id)
        for job_key, job in wanted.items():
            current = scheduler.get_job(job_key)
            signature = (job.schedule, self.store.timezone)
            if current is not None and getattr(current, "kwargs", {}).get("_sig") == signature:
                continue
            try:
                trigger = trigger_for(job, self.store.timezone)
            except ScheduleError as exc:  # changed by hand while running: that job alone waits
                log.error("cron: %s", exc)
                continue
            scheduler.add_job(
                self._scheduled, trigger, id=job_key,
                name=f"cron {job.name}", kwargs={"job_id": job.id, "_sig": signature},
                replace_existing=True, coalesce=True, max_instances=1,
                # Lateness is judged by plan_runs against cron.grace_minutes, not by APScheduler.
                misfire_grace_time=None,
            )

    async def _scheduled(self, job_id: int, _sig: tuple[str, str]) -> None:
        try:
            await self.tick(job_id)
        except Exception:
            log.exception("cron job %d: scheduling failed", job_id)


async def _deliver_stdout(job: CronJob, target: str, text: str) -> None:
    print(f"[cron {job.name}]\n{text}", flush=True)


async def delivery_place(deliver: str, placers: dict[str, Placer]) -> Place:
    """Who reads a job's reply: the runner's own deliveries (a file, the terminal) are private;
    a front-end's are where it says (``placers``, by prefix: a Discord DM is private, a server
    channel shared). A delivery no one can place is a shared place of its own (its reply holds
    only what the user marked shareable): a reply is never built from private memory for
    readers nobody could name."""
    kind, _, target = deliver.partition(":")
    if kind in PRIVATE_DELIVERIES:
        return PRIVATE
    placer = placers.get(kind)
    if placer is not None:
        try:
            return await placer(target)
        except Exception:  # noqa: BLE001 - any failure: the safe place, said in the log
            log.exception("cron: could not tell who reads %s", deliver)
    if kind == "discord" and target.isdigit():
        return Place.discord_unknown(target)
    return Place(f"{kind}:{target}")


def agent_prompt_runner(sessions: SessionStore, agent: Agent,
                        placers: dict[str, Placer] | None = None) -> PromptRunner:
    """Run a job's prompt through the turn engine, in a new ``cron`` session of the job's user,
    held where the reply will be read (:func:`delivery_place`): a job delivered into a Discord
    channel is built only from what that channel's members may see."""
    placers = {} if placers is None else placers

    async def run(job: CronJob) -> RunOutcome:
        place = await delivery_place(job.deliver, placers)
        session = sessions.create(job.user, "cron", channel_key=f"cron:{job.name}",
                                  title=job.name, place=place)
        result = await agent.turn(job.user, session.id, job.prompt, speaker="cron").run()
        return RunOutcome(text=result.text, session_id=session.id, error=result.error)

    return run
