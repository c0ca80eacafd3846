"""The web panel as a front-end: uvicorn serving the app on the daemon's own event loop.

``WebFrontend.start()`` binds the socket itself (a port in use is one logged line and the panel
stays off; the rest of Hermes runs on), attaches the live sidebar to the extraction worker and
serves in a task; ``stop()`` ends the event streams and the server. Loopback by default; any
other address must be set as ``web.host`` and is warned about.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from hermes.frontends.web.app import WebContext
from hermes.frontends.web.routes_chat import SOURCE, extraction_listener
from hermes.frontends.web.site import build_app

if TYPE_CHECKING:
    from hermes.agent.turn import Agent
    from hermes.cron.runner import CronRunner
    from hermes.frontends.base import FrontendContext
    from hermes.learn.worker import ExtractionWorker
    from hermes.memory import Memory

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
STOP_GRACE_SECONDS = 5


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn without its own signal handling: the daemon owns SIGINT and SIGTERM."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server


class WebFrontend:
    source = SOURCE

    def __init__(self, memory: Memory, agent: Agent | None, *,
                 worker: ExtractionWorker | None = None, runner: CronRunner | None = None,
                 host: str | None = None, port: int | None = None, alone: bool = False) -> None:
        config = memory.settings.web
        # `hermes web` (alone): a failure to listen stops it with the `Error:` line, so the
        # log line is for hermes.log only; in `hermes run` it is the one console line.
        self.alone = alone
        self.failure: str | None = None
        self.memory = memory
        self.host = host or config.host or LOOPBACK
        self.port = config.port if port is None else port
        self.ctx = WebContext(memory, agent=agent, worker=worker, runner=runner)
        self.app = build_app(self.ctx)
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None
        self._socket: socket.socket | None = None
        self._listener = extraction_listener(self.ctx)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def login_url(self, token: str) -> str:
        return f"{self.url}/login?token={token}"

    def first_login(self) -> str | None:
        """A login link for the default user when none has a token yet (shown once)."""
        user = self.memory.settings.users.default
        if self.ctx.tokens.has_token(user):
            return None
        return self.login_url(self.ctx.tokens.create(user))

    async def start(self) -> bool:
        """Serve in the background; False (logged) when the address cannot be bound."""
        import uvicorn

        if not is_loopback(self.host):
            log.warning("web: serving on %s, not only this machine: anyone who can reach it "
                        "and has a login token gets in. Prefer 127.0.0.1 behind an SSH tunnel "
                        "or a TLS proxy.", self.host)
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            self.failure = f"cannot listen on {self.host}:{self.port} ({exc.strerror or exc})"
            log.error("web: %s; the web panel is off. Set web.port to a free port, or "
                      "web.enabled: false.", self.failure, extra={"file_only": self.alone})
            return False
        sock.listen(64)
        sock.setblocking(False)
        self._socket = sock
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app, lifespan="off", log_level="warning",
                                access_log=False, timeout_graceful_shutdown=STOP_GRACE_SECONDS)
        self._server = _server_class()(config)
        if self.ctx.worker is not None:
            self.ctx.worker.on_commit.append(self._listener)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="hermes-web")
        while not self._server.started and not self._task.done():
            await asyncio.sleep(0.01)
        log.info("web: panel at %s", self.url)
        return True

    async def stop(self) -> None:
        self.ctx.hub.close()
        if self.ctx.worker is not None and self._listener in self.ctx.worker.on_commit:
            self.ctx.worker.on_commit.remove(self._listener)
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._task, STOP_GRACE_SECONDS + 2)
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    async def deliver(self, job: Any, target: str, text: str) -> None:
        """Cron delivery to the panel: not a target yet (jobs deliver to discord, terminal,
        file); kept so the front-end has the shape the others have."""
        raise NotImplementedError("the web panel is not a cron delivery target")


class WebPanelFrontend:
    """The web panel as a front-end of ``hermes run`` (``web.enabled``): the panel on the
    daemon's loop, with the daemon's cron runner for "run now", and the first login link
    printed once on the console (only its hash is kept, so never in the log)."""

    source = SOURCE

    def __init__(self, ctx: FrontendContext) -> None:
        self.ctx = ctx
        self.panel: WebFrontend | None = None

    @property
    def status(self) -> str:
        return f"web: {self.panel.url}" if self.panel is not None else "web: off"

    async def start(self) -> bool:
        ctx = self.ctx
        if not ctx.memory.settings.web.enabled:
            return False
        panel = WebFrontend(ctx.memory, ctx.agent, worker=ctx.worker, runner=ctx.runner)
        if not await panel.start():
            return False
        self.panel = panel
        link = panel.first_login()
        if link:
            print(f"Web panel: log in at {link}", file=sys.stderr, flush=True)
        else:
            log.info("web: log in with the link `hermes web token` prints")
        return True

    async def stop(self) -> None:
        if self.panel is not None:
            await self.panel.stop()

    async def deliver(self, job: Any, target: str, text: str) -> None:
        raise NotImplementedError("the web panel is not a cron delivery target")
