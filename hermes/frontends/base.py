"""The ``Frontend`` protocol, what ``hermes run`` offers a front-end (:class:`FrontendContext`),
and the front-ends registered through the ``register_frontends`` plugin hook.

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
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from apscheduler.schedulers.base import BaseScheduler

    from hermes.agent.turn import Agent
    from hermes.cron.runner import CronRunner
    from hermes.cron.store import CronJob
    from hermes.learn.worker import ExtractionWorker
    from hermes.memory import Memory


@runtime_checkable
class Frontend(Protocol):
    """What ``hermes run`` needs of a front-end.

    Optional, looked up with ``getattr``: ``status`` (a ``"name: on"`` phrase for the
    ``hermes: running (…)`` line; a front-end without one gets a ``front-end NAME: started``
    line instead) and ``async finish(timeout)`` (background work left after ``stop``, such as a
    session's summary, awaited beside the extraction worker's drain, bounded by ``timeout``).
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


@dataclass
class FrontendContext:
    """What a front-end factory gets from ``hermes run``: the runtime and agent, and the
    daemon's services (stop, scheduled jobs, work at start, delivery routes)."""

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
    turn_grace: float = 60.0
    # How a front-end waits (a retry's back-off); tests pass one that does not sleep.
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @cached_property
    def runner(self) -> CronRunner:
        """The one cron runner of this process (its jobs deliver through ``deliverers``):
        built on first use, by the cron front-end or a front-end that runs jobs by hand."""
        from hermes.assembly import cron_runner

        return cron_runner(self.memory, self.agent, self.deliverers)


FrontendFactory = Callable[[FrontendContext], Any]


def no_model_notice(agent: Agent) -> str | None:
    """The one line said at start when no model is set (``hermes run`` logs it, the REPL shows
    it); None when a model is set."""
    if agent.llm.configured:
        return None
    return ("No model is set, so chat and learning are off (memory commands and the "
            f"schedule still work) until one is. {agent.llm.how_to_configure()}")


def takes_any_target(target: str) -> bool:
    return bool(target)


@dataclass
class Registered:
    factory: FrontendFactory
    # Which ``<name>:<target>`` a cron job may deliver to (``accepts("")`` for a bare
    # ``<name>``); None: not a delivery target.
    accepts: Callable[[str], bool] | None = takes_any_target
    # How a delivery to it is written, for the error that lists them (``discord:<channel id>``).
    deliver_form: str = ""


class FrontendRegistry:
    def __init__(self) -> None:
        self.frontends: dict[str, Registered] = {}

    def register(self, name: str, factory: FrontendFactory, *,
                 accepts: Callable[[str], bool] | None = takes_any_target,
                 deliver_form: str | None = None) -> None:
        """``name`` is the front-end's delivery prefix and its sessions' source; ``accepts``
        says which targets after ``name:`` a cron job may use (``""`` for ``name`` alone;
        None: the front-end takes no deliveries); ``deliver_form`` is how one is written in
        the error that lists them (default ``name:<target>``)."""
        if not name or ":" in name or not name.isidentifier():
            raise ValueError(f"register_frontends: {name!r} is not a usable delivery prefix")
        if name in self.frontends or name in RESERVED_TARGETS:
            raise ValueError(f"register_frontends: a front-end is already named {name!r}")
        self.frontends[name] = Registered(factory, accepts, deliver_form or f"{name}:<target>")


# Delivery prefixes the cron runner owns itself.
RESERVED_TARGETS = ("file",)

_registered: dict[str, Registered] | None = None


def registered() -> dict[str, Registered]:
    """Every front-end registered (the built-ins first), collected once per process."""
    global _registered
    if _registered is None:
        from hermes.plugins import call_registering

        registry = FrontendRegistry()
        call_registering("register_frontends", registry.register)
        _registered = registry.frontends
    return _registered


def registered_frontends() -> dict[str, FrontendFactory]:
    """The factories by name, in the order ``hermes run`` builds and starts them."""
    return {name: entry.factory for name, entry in registered().items()}


def accepts_delivery(kind: str, target: str) -> bool:
    """Does the front-end registered as ``kind`` take cron deliveries to ``kind:target``
    (``target`` "" for ``kind`` alone)? Each front-end judges its own targets."""
    entry = registered().get(kind)
    return entry is not None and entry.accepts is not None and bool(entry.accepts(target))


def delivery_forms() -> list[str]:
    """How each front-end that takes deliveries is written (``discord:<channel id>``)."""
    return [entry.deliver_form for entry in registered().values() if entry.accepts is not None]


def session_sources(builtin: tuple[str, ...]) -> tuple[str, ...]:
    """The session sources: the built-in ones and every registered front-end's name."""
    return builtin + tuple(name for name in registered() if name not in builtin)

