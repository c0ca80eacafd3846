"""Discord as a front-end of ``hermes run``: the token, keeping the client up, draining it.

A failed start (network, a Discord outage) is retried with back-off on a fresh client; a
rejected token or a missing privileged intent stops Hermes with one clear line (``ctx.fail``),
so a service manager's ``Restart=on-failure`` applies. Without a token Discord stays off.
discord.py is imported only when there is a token (the client is in :mod:`.discord_bot`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hermes.config import read_env_file

if TYPE_CHECKING:
    from hermes.config import Settings
    from hermes.cron.store import CronJob
    from hermes.frontends.base import FrontendContext
    from hermes.frontends.discord_bot import HermesBot
    from hermes.memory.place import Place

log = logging.getLogger(__name__)

# Start-up retries: 5 s, 10 s, 20 s ... at most 5 minutes apart.
DISCORD_RETRY_FIRST = 5.0
DISCORD_RETRY_MAX = 300.0


def discord_token(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """config ``discord.token``, else ``$DISCORD_TOKEN``, else DISCORD_TOKEN in ``<home>/.env``."""
    environ = os.environ if environ is None else environ
    return (settings.discord.token or environ.get("DISCORD_TOKEN")
            or read_env_file(settings.home_path / ".env").get("DISCORD_TOKEN") or None)


class DiscordFrontend:
    source = "discord"

    def __init__(self, ctx: FrontendContext, token: str | None = None) -> None:
        self.ctx = ctx
        self.token = token if token is not None else discord_token(ctx.memory.settings)
        self.bot: HermesBot | None = None
        self._stopping = False
        self._loop: asyncio.Task[None] | None = None

    @property
    def status(self) -> str:
        return "discord: on" if self.bot is not None else "discord: off (no token)"

    async def start(self) -> bool:
        if not self.token:
            return False
        from hermes.frontends.discord_bot import HermesBot

        self.bot = HermesBot(self.ctx.memory, self.ctx.agent)
        if self.ctx.worker is not None:      # what a reply taught, added to its receipt
            self.ctx.worker.on_commit.append(self._learned)
        self._loop = asyncio.create_task(self._keep_up(), name="hermes-discord")
        return True

    def _learned(self, record: Any) -> None:
        if self.bot is not None:             # (the bot of now: a retry makes a new one)
            self.bot.learned(record)

    async def _keep_up(self) -> None:
        """Keep Discord up: a failed start is retried with backoff; a rejected token or a
        missing privileged intent stops Hermes with a clear error."""
        import discord

        assert self.bot is not None and self.token
        config = self.ctx.memory.settings.discord
        if not (config.allowed_users or config.allowed_roles or config.allowed_channels):
            log.warning("discord: no allowlist (discord.allowed_users / allowed_roles / "
                        "allowed_channels), so nobody will be served")
        delay = DISCORD_RETRY_FIRST
        while not self._stopping:
            try:
                await self.bot.start(self.token)
                if self._stopping or self.bot.is_closed():
                    return
            except discord.PrivilegedIntentsRequired:
                self._fail("discord: enable 'Message Content Intent' for the bot in the "
                           "Developer Portal (Bot settings), then start Hermes again.")
                return
            except discord.LoginFailure:
                self._fail("discord: the token was rejected; check discord.token / "
                           "DISCORD_TOKEN, then start Hermes again.")
                return
            except Exception:
                log.exception("discord: the client stopped; retrying in %.0f s", delay)
            if self._stopping:
                return
            # A client that failed to start is not reused: a fresh one, same agent.
            old = self.bot
            if not old.is_closed():
                await old.close()
            await self.ctx.sleep(delay)
            delay = min(delay * 2, DISCORD_RETRY_MAX)
            if self._stopping:
                return
            self.bot = type(old)(self.ctx.memory, old.agent)

    def _fail(self, message: str) -> None:
        if self.ctx.fail is not None:
            self.ctx.fail(message)
        else:
            log.error(message)

    async def stop(self) -> None:
        """No new messages; running turns may finish (the turn grace); then the client closes."""
        self._stopping = True
        if self.ctx.worker is not None and self._learned in self.ctx.worker.on_commit:
            self.ctx.worker.on_commit.remove(self._learned)
        if self.bot is None:
            return
        cut = await self.bot.drain(self.ctx.turn_grace)
        if cut:
            log.warning("discord: %d turn(s) did not finish in time and were stopped", cut)
        if not self.bot.is_closed():
            await self.bot.close()
        if self._loop is not None:
            self._loop.cancel()       # it may be waiting to retry
            await asyncio.gather(self._loop, return_exceptions=True)

    async def deliver(self, job: CronJob, target: str, text: str) -> None:
        assert self.bot is not None
        await self.bot.deliver(job, target, text)

    async def place_for(self, target: str) -> Place:
        """Who reads a delivery to ``discord:<target>`` (a cron job's reply is built for
        them: hermes.cron.runner)."""
        assert self.bot is not None
        return await self.bot.place_for(target)
