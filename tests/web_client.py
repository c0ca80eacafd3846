"""Helpers for the web panel's tests: the app on an in-process ASGI client, logged in."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from hermes.frontends.web.app import WebContext
from hermes.frontends.web.site import build_app

CSRF = re.compile(r'name="csrf" content="([^"]+)"')


class Panel:
    """An httpx client on the app, and the CSRF token of its logged-in session."""

    def __init__(self, ctx: WebContext) -> None:
        self.ctx = ctx
        self.app = build_app(ctx)
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                        base_url="http://testserver")
        self.csrf = ""

    async def login(self, user: str = "owner") -> Panel:
        token = self.ctx.tokens.create(user)
        response = await self.client.get(f"/login?token={token}")
        assert response.status_code == 303, response.text
        page = await self.client.get("/chat")
        self.csrf = CSRF.search(page.text).group(1)
        return self

    async def get(self, url: str, **kw) -> httpx.Response:
        return await self.client.get(url, **kw)

    async def post(self, url: str, data: dict | None = None, *, csrf: bool = True,
                   **kw) -> httpx.Response:
        form = dict(data or {})
        if csrf:
            form["csrf"] = self.csrf
        return await self.client.post(url, data=form, **kw)

    async def close(self) -> None:
        await self.client.aclose()


REPO = Path(__file__).resolve().parent.parent


def hermes_env(home: Path, config: Path, **extra: str) -> dict[str, str]:
    """The environment for Hermes in a subprocess: this home and config, the web panel on a free
    port, nothing of the developer's own HERMES_* settings."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HERMES_") and k != "DISCORD_TOKEN"}
    env.update(HERMES_HOME=str(home), HERMES_CONFIG=str(config), PYTHONPATH=str(REPO),
               HERMES_WEB__PORT="0", **extra)
    return env


class HermesProcess:
    """``hermes ARGS`` through tests.daemon_harness (the scripted model from
    HERMES_TEST_REPLIES) in a subprocess; its output lines in a queue."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.env = env
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.daemon_harness", *args], env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        while True:
            line = self.lines.get(timeout=timeout)
            if line is None:
                raise AssertionError("hermes exited:\n" + "\n".join(self.seen))
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found

    def cli(self, *args: str, **env: str) -> str:
        """Another `hermes ARGS` on the same home (no chat model), e.g. to add a fact a test
        reads, with these settings on top; its output (a failure raises with it)."""
        done = subprocess.run([sys.executable, "-m", "hermes", *args], env={**self.env, **env},
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    def stop(self) -> int:
        """SIGTERM, then the exit code (killed after 60 s)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        code = self.proc.wait()
        while (line := self.lines.get(timeout=10)) is not None:
            self.seen.append(line)
        return code
