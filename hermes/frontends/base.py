"""The ``Frontend`` protocol and the front-ends registered through the ``register_frontends``
plugin hook.

A front-end is what ``hermes run`` starts beside the scheduler: it takes messages to the agent
and takes cron deliveries whose target starts with its registered name (``name:target``).
``hermes run`` starts every registered front-end, stops it at shutdown (its ``stop`` drains
what it has in flight) and needs no edit for a new one. The web panel
(:class:`hermes.frontends.web.WebFrontend`) has this shape; Discord, the REPL and the web panel
are still wired by name in :mod:`hermes.daemon`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from hermes.agent.turn import Agent
    from hermes.cron.runner import CronRunner
    from hermes.cron.store import CronJob
    from hermes.learn.worker import ExtractionWorker
    from hermes.runtime import Runtime


@runtime_checkable
class Frontend(Protocol):
    source: str  # the name its sessions are recorded under

    async def start(self) -> bool:
        """Start serving in the background; False (logged by the front-end) to stay off."""
        ...

    async def stop(self) -> None:
        """Stop taking messages and let what is in flight finish (its own grace)."""
        ...

    async def deliver(self, job: CronJob, target: str, text: str) -> None:
        """A cron job's output for ``<name>:<target>``."""
        ...


@dataclass
class FrontendContext:
    """What a front-end factory gets from ``hermes run``."""

    rt: Runtime
    agent: Agent
    worker: ExtractionWorker | None = None
    runner: CronRunner | None = None
    request_stop: Callable[[str], None] | None = None


FrontendFactory = Callable[[FrontendContext], Any]


class FrontendRegistry:
    def __init__(self) -> None:
        self.factories: dict[str, FrontendFactory] = {}

    def register(self, name: str, factory: FrontendFactory) -> None:
        if not name or ":" in name or not name.isidentifier():
            raise ValueError(f"register_frontends: {name!r} is not a usable delivery prefix")
        if name in self.factories or name in BUILTIN_TARGETS:
            raise ValueError(f"register_frontends: a front-end is already named {name!r}")
        self.factories[name] = factory


# Delivery prefixes the daemon and the cron runner already own.
BUILTIN_TARGETS = ("discord", "terminal", "file", "web")

_registered: dict[str, FrontendFactory] | None = None


def registered_frontends() -> dict[str, FrontendFactory]:
    """Every plugin's front-end factories by name, collected once per process."""
    global _registered
    if _registered is None:
        from hermes.plugins import manager

        registry = FrontendRegistry()
        manager().hook.register_frontends(register=registry.register)
        _registered = registry.factories
    return _registered
