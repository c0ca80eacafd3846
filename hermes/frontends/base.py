"""The ``Frontend`` protocol, what ``hermes run`` offers a front-end (:class:`FrontendContext`),
and the factory a front-end registers through the ``register_frontends`` plugin hook
(``hermes.plugins.loaded().frontends`` holds them).

A front-end is what ``hermes run`` starts beside the scheduler: it takes messages to the agent
(or, for cron, runs prompts on a schedule) and takes cron deliveries whose target starts with
its registered name (``name:target``). ``hermes run`` builds every registered front-end, starts
it, routes deliveries to it by prefix and stops it at shutdown (its ``stop`` drains what it has
in flight); it names none of them. Hermes's own, Discord, the terminal REPL, the web panel and
cron, are registered the same way, by the default plugin :mod:`hermes.frontends.builtin`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

    from hermes.agent.turn import Agent
    from hermes.cron.runner import CronRunner
    from hermes.cron.store import CronJob
    from hermes.learn.worker import ExtractionWorker
    from hermes.memory import Memory
    from hermes.memory.place import Place


@runtime_checkable
class Frontend(Protocol):
    """What ``hermes run`` needs of a front-end.

    Optional, looked up with ``getattr``: ``status`` (a ``"name: on"`` phrase for the
    ``hermes: running (…)`` line; a front-end without one gets a ``front-end NAME: started``
    line instead), ``async finish(timeout)`` (background work left after ``stop``, such as a
    session's summary, awaited beside the extraction worker's drain, bounded by ``timeout``)
    and ``async place_for(target)`` (who reads a delivery to ``<name>:<target>``: a
    :class:`~hermes.memory.place.Place`; a cron job's reply is built only from what they may
    see. Without it, a delivery to the front-end is a shared place of its own: only what the
    user marked shareable).
    """

    source: str  # the name its sessions are recorded under

    async def start(self) -> bool:
        """Start serving in the background; False (logged by the front-end) to stay off."""
        ...

    async def stop(self) -> None:
        """Stop taking messages and let what is in flight finish (``ctx.turn_grace``)."""
        ...

    async def deliver(self, job: CronJob, target: str, text: str) -> None:
        """A cron job's output for ``<name>:<target>``."""
        ...


Deliverer = Callable[["CronJob", str, str], Awaitable[None]]   # (job, target, text)
Placer = Callable[[str], Awaitable["Place"]]   # target -> who reads a delivery there


@dataclass
class FrontendContext:
    """What a front-end factory gets from ``hermes run``: the home's memory (its settings,
    clock and stores) and the agent, and the daemon's services (stop, scheduled jobs, work at
    start, delivery routes, the cron runner)."""

    memory: Memory
    agent: Agent
    worker: ExtractionWorker | None = None
    request_stop: Callable[[str], None] | None = None
    # Stop Hermes with this one line and a non-zero exit (a rejected Discord token).
    fail: Callable[[str], None] | None = None
    # ``hermes run`` owns a terminal (started on one, without --no-repl).
    interactive: bool = False
    scheduler: BaseScheduler | None = None
    # add_job(name, work, id, **trigger): a scheduled job whose failure is logged and that
    # shutdown waits for.
    add_job: Callable[..., None] | None = None
    # (name, work) run once, in order, at start, before the daemon's own catch-up.
    at_start: list[tuple[str, Callable[[], Awaitable[object]]]] = field(default_factory=list)
    # Cron delivery routes of the front-ends that started, by prefix (filled by the daemon).
    deliverers: dict[str, Deliverer] = field(default_factory=dict)
    # Who reads a delivery, by prefix, of the front-ends that say (filled by the daemon).
    placers: dict[str, Placer] = field(default_factory=dict)
    # The one cron runner of this process (its jobs deliver through ``deliverers``), for the
    # cron front-end and a front-end that runs jobs by hand.
    runner: CronRunner | None = None
    turn_grace: float = 60.0
    # How a front-end waits (a retry's back-off); tests pass one that does not sleep.
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep


FrontendFactory = Callable[[FrontendContext], Any]


def no_model_notice(agent: Agent) -> str | None:
    """The one line said at start when no model is set (``hermes run`` logs it, the REPL shows
    it); None when a model is set."""
    if agent.llm.configured:
        return None
    return ("No model is set, so chat and learning are off (memory commands and the "
            f"schedule still work) until one is. {agent.llm.how_to_configure()}")
