"""Cron as a front-end of ``hermes run``: its jobs are put on the daemon's scheduler, caught up
at start, re-read every minute (``hermes cron add`` and ``pause`` from another process), and
waited for at shutdown. Its turns are sessions of source ``cron``; it takes no deliveries
itself (its jobs deliver to the other front-ends, ``file:`` and ``terminal``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from hermes.cron.schedule import ScheduleError

if TYPE_CHECKING:
    from hermes.cron.store import CronJob
    from hermes.frontends.base import FrontendContext

log = logging.getLogger(__name__)

# hermes cron add / pause in another process are picked up within this.
CRON_RELOAD_SECONDS = 60


class CronFrontend:
    source = "cron"

    def __init__(self, ctx: FrontendContext) -> None:
        assert ctx.runner is not None, "hermes run gives every front-end its cron runner"
        self.ctx = ctx
        self.runner = ctx.runner
        # cron.jobs from the config, before anything starts (a bad job stops `hermes run`).
        self.runner.store.sync_config(ctx.memory.settings.cron.jobs, ctx.memory.settings.source)

    @property
    def status(self) -> str:
        return f"cron jobs: {len(self.runner.store.list_jobs(enabled_only=True))}"

    async def start(self) -> bool:
        ctx = self.ctx
        assert ctx.scheduler is not None and ctx.add_job is not None
        ctx.add_job("cron reload", self._reload, id="builtin:cron-reload", trigger="interval",
                    seconds=CRON_RELOAD_SECONDS)
        self.runner.schedule_all(ctx.scheduler)
        ctx.at_start.append(("cron catch-up", self._catch_up))
        return True

    async def _reload(self) -> None:
        assert self.ctx.scheduler is not None
        self.runner.schedule_all(self.ctx.scheduler)

    async def _catch_up(self) -> None:
        done = await self.runner.catch_up()
        log.info("cron catch-up done (%d run(s))", len(done))

    async def stop(self) -> None:
        """Running cron turns may finish (the turn grace); the rest are recorded as failed."""
        await self.runner.wait_running(self.ctx.turn_grace)

    async def deliver(self, job: CronJob, target: str, text: str) -> Any:
        raise ScheduleError("cron is not a delivery target")
