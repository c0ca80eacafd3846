"""Hermes's own front-ends, registered as a default plugin through ``register_frontends``, the
same hook a third-party front-end uses (see :mod:`hermes.plugins`). ``hermes run`` builds and
starts them in this order, before the plugins' ones; each module is imported only when its
front-end is built (discord.py and prompt-toolkit are not loaded to list the plugins)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes.hookspecs import hookimpl

if TYPE_CHECKING:
    from hermes.cron.store import CronJob
    from hermes.frontends.base import FrontendContext
    from hermes.hookspecs import RegisterFrontend


def discord(ctx: FrontendContext) -> Any:
    from hermes.frontends.discord_frontend import DiscordFrontend

    return DiscordFrontend(ctx)


class Off:
    """A built-in front-end that is off for this run, said without importing it (the REPL's
    prompt-toolkit, for a daemon with no terminal). It never starts, so it takes nothing."""

    def __init__(self, source: str, status: str) -> None:
        self.source = source
        self.status = status

    async def start(self) -> bool:
        return False

    async def stop(self) -> None:
        return None

    async def deliver(self, job: CronJob, target: str, text: str) -> None:
        raise RuntimeError(f"{self.status}: nothing is delivered")


def terminal(ctx: FrontendContext) -> Any:
    if not ctx.interactive:
        return Off("terminal", "repl: off")
    from hermes.frontends.repl import ReplFrontend

    return ReplFrontend(ctx)


def web(ctx: FrontendContext) -> Any:
    from hermes.frontends.web.server import WebPanelFrontend

    return WebPanelFrontend(ctx)


def cron(ctx: FrontendContext) -> Any:
    from hermes.cron.frontend import CronFrontend

    return CronFrontend(ctx)


def discord_channel(target: str) -> bool:
    return target.isdigit()


@hookimpl
def register_frontends(register: RegisterFrontend) -> None:
    register("discord", discord, accepts=discord_channel, deliver_form="discord:<channel id>")
    register("terminal", terminal, accepts=lambda target: target == "",  # `terminal` alone
             deliver_form="terminal")
    register("web", web, accepts=None)
    register("cron", cron, accepts=None)
