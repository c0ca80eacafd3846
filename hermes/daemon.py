"""`hermes run`: Discord, the terminal REPL, the web panel and the scheduler in one asyncio process.

The daemon only wires things together: it owns the event loop, the lock on the home, logging,
the scheduler and the front-ends, and holds no memory logic. Built-in jobs: the cross-thread
context refresh every ``context.refresh_hours`` for every user (and at start for files older
than that), closing and summarising idle sessions, and retrying failed extraction runs.

Shutdown (SIGINT, SIGTERM, or leaving the REPL) stops taking messages and jobs, lets running
turns and cron runs finish (or records them as failed after a grace period), waits for
background extraction (which records what it could not finish, for retry), and closes the
database.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hermes.aio import finish_or_cancel
from hermes.assembly import build_agent
from hermes.config import read_env_file
from hermes.cron.runner import CronRunner, agent_prompt_runner
from hermes.cron.schedule import timezone_for
from hermes.cron.store import CronJob, CronStore
from hermes.errors import HermesError
from hermes.local_socket import SocketServer
from hermes.memory.secrets import RedactingFilter
from hermes.store.db import connect
from hermes.store.failures import storage_problem

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from hermes.agent.turn import Agent
    from hermes.config import Settings
    from hermes.frontends.base import Frontend
    from hermes.frontends.discord_bot import HermesBot
    from hermes.frontends.repl import Repl
    from hermes.frontends.web import WebFrontend
    from hermes.learn.worker import ExtractionWorker
    from hermes.runtime import Runtime

log = logging.getLogger("hermes.daemon")

# How long shutdown waits for running turns, cron runs and background work.
TURN_GRACE_SECONDS = 60.0
BACKGROUND_GRACE_SECONDS = 30.0
IDLE_CHECK_MINUTES = 10
EXTRACTION_RETRY_MINUTES = 30
CRON_RELOAD_SECONDS = 60
VECTOR_INDEX_MINUTES = 5
# Discord start-up retries: 5 s, 10 s, 20 s ... at most 5 minutes apart.
DISCORD_RETRY_FIRST = 5.0
DISCORD_RETRY_MAX = 300.0


# --------------------------------------------------------------------------- one per home
class HomeLock:
    """An exclusive ``fcntl`` lock on ``<home>/hermes.lock``: one daemon per home.

    The kernel drops the lock when the process dies, so a crash never leaves a stale lock.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / "hermes.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise HermesError(
                f"Another Hermes daemon (pid {holder}) is already running on "
                f"{self.path.parent}; only one may run per home.") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


# --------------------------------------------------------------------------- set-up helpers
def setup_logging(settings: Settings, *, console: TextIO | None = None,
                  repl: bool = False) -> None:
    """Log to ``<home>/hermes.log`` and the console, at the configured levels.

    With the REPL on the terminal, the console gets errors only: the REPL shows the
    conversation, and log lines (fast-lane writes, cron runs) go to the file."""
    from hermes import logs

    config = settings.logging
    settings.home_path.mkdir(parents=True, exist_ok=True)
    console_handler = logging.StreamHandler(console or sys.stderr)
    console_handler.setLevel("ERROR" if repl else config.level)
    console_handler.setFormatter(logging.Formatter(logs.FORMAT))
    handlers = [logs.file_handler(settings), console_handler]
    for handler in handlers:
        handler.addFilter(RedactingFilter())  # no secret is ever written to a log
    logs.replace_handlers(
        handlers, min(logging.getLevelName(config.level), logging.getLevelName(config.file_level)))
    logs.quiet_libraries(settings)


def read_dotenv(path: Path, key: str) -> str | None:
    """One value from a ``.env`` file (python-dotenv syntax, as for the model keys), if there."""
    return read_env_file(path).get(key) or None


def discord_token(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """config ``discord.token``, else ``$DISCORD_TOKEN``, else DISCORD_TOKEN in ``<home>/.env``."""
    environ = os.environ if environ is None else environ
    return (settings.discord.token or environ.get("DISCORD_TOKEN")
            or read_dotenv(settings.home_path / ".env", "DISCORD_TOKEN"))


# --------------------------------------------------------------------------- the daemon
class Daemon:
    def __init__(self, rt: Runtime, *, repl: bool, token: str | None = None, web: bool = False,
                 turn_grace: float = TURN_GRACE_SECONDS,
                 background_grace: float = BACKGROUND_GRACE_SECONDS,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.rt = rt
        self.sleep = sleep
        # Set when something fatal (a rejected Discord token) stops the daemon: `hermes run`
        # then exits non-zero with this line, so systemd's Restart=on-failure applies.
        self.failure: str | None = None
        self.want_repl = repl
        self.want_web = web
        self.web: WebFrontend | None = None
        self.frontends: dict[str, Frontend] = {}  # the plugins' front-ends that started
        self.token = token
        self.turn_grace = turn_grace
        self.background_grace = background_grace
        self.lock = HomeLock(rt.settings.home_path)
        self.bot: HermesBot | None = None
        self.repl: Repl | None = None
        self.socket: SocketServer | None = None
        self.worker: ExtractionWorker | None = None
        self.scheduler: AsyncIOScheduler | None = None
        self.runner: CronRunner | None = None
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._jobs: set[asyncio.Task[None]] = set()

    def request_stop(self, why: str = "request") -> None:
        if not self._stop.is_set():
            log.info("hermes: stopping (%s)", why)
        self._stop.set()

    def _spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def run(self) -> None:
        """Run until stopped. Raises HermesError when another daemon holds the home."""
        self.lock.acquire()
        try:
            await self._run()
        finally:
            self.lock.release()

    async def _run(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        try:
            await self._preload()
            agent, self.worker = build_agent(self.rt)
            CronStore.from_runtime(self.rt).sync_config(self.rt.settings.cron.jobs)
            deliverers: dict[str, Callable[[CronJob, str, str], Awaitable[None]]] = {
                "terminal": self._deliver_terminal}
            if self.token:
                from hermes.frontends.discord_bot import HermesBot

                self.bot = HermesBot(self.rt, agent)
                deliverers["discord"] = self._deliver_discord
                self._spawn(self._run_discord(), "hermes-discord")
            self.runner = CronRunner.from_runtime(self.rt, agent_prompt_runner(self.rt, agent),
                                                  deliverers)
            self.scheduler = AsyncIOScheduler(
                timezone=timezone_for(self.rt.settings.cron.timezone))
            self._add_builtin_jobs(agent)
            self.scheduler.start()
            self.runner.schedule_all(self.scheduler)
            if self.want_web:
                await self._start_web(agent)
            await self._start_frontends(agent)
            # `hermes ask` and `hermes chat` run their turns here (hermes/local_socket.py).
            socket = SocketServer(self.rt, agent)
            if await socket.start():
                self.socket = socket
            self._spawn(self._startup_work(agent), "hermes-startup")
            if self.want_repl:
                from hermes.frontends.repl import Repl

                self.repl = Repl(self.rt, agent)
                self._spawn(self._run_repl(), "hermes-repl")
            log.info("hermes: running (discord: %s, repl: %s, web: %s, cron jobs: %d, home: %s)",
                     "on" if self.bot else "off (no token)", "on" if self.repl else "off",
                     self.web.url if self.web else "off",
                     len(CronStore.from_runtime(self.rt).list_jobs(enabled_only=True)),
                     self.rt.settings.home_path)
            if not agent.llm.configured:
                self._no_model_notice(agent)
            await self._stop.wait()
        finally:
            await self._shutdown()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    async def _preload(self) -> None:
        """Import litellm (5-10 s on a cold disk) in a thread now, before Discord, the REPL or a
        job could first touch it on the event loop and stall everything else that long."""
        from hermes.agent import llm

        started = time.monotonic()
        await asyncio.to_thread(llm.load_litellm)
        log.debug("hermes: model library loaded in %.1f s", time.monotonic() - started)

    # ------------------------------------------------------------------ front-ends
    async def _run_discord(self) -> None:
        """Keep Discord up: a failed start (network, Discord outage) is retried with backoff;
        a rejected token or a missing privileged intent stops Hermes with a clear error."""
        import discord

        config = self.rt.settings.discord
        if not (config.allowed_users or config.allowed_roles or config.allowed_channels):
            log.warning("discord: no allowlist (discord.allowed_users / allowed_roles / "
                        "allowed_channels), so nobody will be served")
        delay = DISCORD_RETRY_FIRST
        while not self._stop.is_set():
            try:
                await self.bot.start(self.token)
                if self._stop.is_set() or self.bot.is_closed():
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
            if self._stop.is_set():
                return
            # A client that failed to start is not reused: a fresh one, same agent.
            old = self.bot
            if not old.is_closed():
                await old.close()
            await self.sleep(delay)
            delay = min(delay * 2, DISCORD_RETRY_MAX)
            if self._stop.is_set():
                return
            self.bot = type(old)(self.rt, old.agent)

    def _no_model_notice(self, agent: Agent) -> None:
        """One line at start: without a model Hermes runs, but cannot chat or learn."""
        text = ("No model is set, so chat and learning are off (memory commands and the "
                f"schedule still work) until one is. {agent.llm.how_to_configure()}")
        if self.repl is not None:
            log.info("%s", text)                  # the file; the terminal shows it once, below
            self.repl.emit("error", text)
        else:
            log.warning("%s", text)

    async def _start_web(self, agent: Agent) -> None:
        from hermes.frontends.web import WebFrontend

        web = WebFrontend(self.rt, agent, worker=self.worker, runner=self.runner)
        if not await web.start():
            return
        self.web = web
        link = web.first_login()
        if link:
            # The token is shown this once (only its hash is kept): on the console, not the log.
            print(f"Web panel: log in at {link}", file=sys.stderr, flush=True)
        else:
            log.info("web: log in with the link `hermes web token` prints")

    async def _start_frontends(self, agent: Agent) -> None:
        """Start every front-end a plugin registered; one that fails stays off, logged."""
        from hermes.frontends.base import FrontendContext, registered_frontends

        assert self.runner is not None
        ctx = FrontendContext(self.rt, agent, worker=self.worker, runner=self.runner,
                              request_stop=self.request_stop)
        for name, factory in registered_frontends().items():
            try:
                frontend = factory(ctx)
                if frontend is None or not await frontend.start():
                    log.info("front-end %s: off", name)
                    continue
            except Exception:
                log.exception("front-end %s: failed to start; it stays off", name)
                continue
            self.frontends[name] = frontend
            self.runner.deliverers[name] = frontend.deliver
            log.info("front-end %s: started", name)

    async def _stop_frontends(self) -> None:
        async def stop(name: str, frontend: Frontend) -> None:
            try:
                await frontend.stop()
            except Exception:
                log.exception("front-end %s: failed to stop cleanly", name)

        await asyncio.gather(*(stop(n, f) for n, f in self.frontends.items()))

    def _fail(self, message: str) -> None:
        log.error(message)
        self.failure = message
        self.request_stop("fatal error")

    async def _deliver_discord(self, job: CronJob, target: str, text: str) -> None:
        await self.bot.deliver(job, target, text)

    async def _run_repl(self) -> None:
        try:
            await self.repl.run()
        finally:
            self.request_stop("the REPL was closed")

    async def _deliver_terminal(self, job: CronJob, target: str, text: str) -> None:
        if self.repl is not None:
            self.repl.emit("cron", f"[cron {job.name}]\n{text}")
        else:
            print(f"[cron {job.name}]\n{text}", flush=True)

    # ------------------------------------------------------------------ built-in jobs
    def _job(self, name: str, work: Callable[[], Awaitable[object]], *,
             track: bool = True) -> Callable[[], Awaitable[None]]:
        """A job that logs its failure instead of raising; ``track``: shutdown waits for it."""

        async def job() -> None:
            task = asyncio.current_task()
            if task is not None and track:
                self._jobs.add(task)
            try:
                await work()
            except asyncio.CancelledError:
                log.warning("%s: cancelled by shutdown; it runs again at the next start", name)
                raise
            except Exception:
                log.exception("%s failed; it runs again at its next time", name)
            finally:
                if task is not None:
                    self._jobs.discard(task)

        job.__name__ = name
        return job

    def _add_builtin_jobs(self, agent: Agent) -> None:
        settings = self.rt.settings
        add = self.scheduler.add_job
        defaults = {"coalesce": True, "max_instances": 1, "misfire_grace_time": None,
                    "replace_existing": True}
        add(self._job("context refresh", lambda: self.refresh_contexts(agent)), "interval",
            hours=settings.context.refresh_hours, id="builtin:context", **defaults)
        add(self._job("idle sessions", lambda: self.close_idle(agent)), "interval",
            minutes=IDLE_CHECK_MINUTES, id="builtin:idle", **defaults)
        if self.worker is not None:
            add(self._job("extraction retry", self.worker.retry_failed), "interval",
                minutes=EXTRACTION_RETRY_MINUTES, id="builtin:extraction-retry", **defaults)
        add(self._job("cron reload", self._reload_cron), "interval",
            seconds=CRON_RELOAD_SECONDS, id="builtin:cron-reload", **defaults)
        if settings.sessions.embeddings:
            add(self._job("message vectors", self.index_vectors), "interval",
                minutes=VECTOR_INDEX_MINUTES, id="builtin:vectors", **defaults)

    async def index_vectors(self) -> int:
        """Hybrid recall: embed the facts and messages that have no vector yet, in a worker
        thread on its own connection, so that a search never has to embed a day's messages
        itself. Stops between batches at shutdown (what is done is kept; the rest waits for
        the next run)."""
        settings = self.rt.settings
        if not settings.sessions.embeddings:
            return 0
        users = self._users()
        stopping = self._stop.is_set
        memory = self.rt.memory  # built here, on the loop's thread and connection

        def work() -> int:
            from hermes.memory.facts.vectors import FactVectors

            db = connect(settings.db_path)
            try:
                # The home's memory on this thread's connection, with the loop's models.
                vectors = memory.on(db).message_vectors
                assert vectors is not None  # sessions.embeddings is on
                facts = FactVectors(db, vectors.embedder)
                return sum(facts.index(user, stop=stopping) + vectors.index(user, stop=stopping)
                           for user in users)
            finally:
                db.conn.close()

        done = await asyncio.to_thread(work)
        if done:
            log.info("message vectors: %d message(s) embedded", done)
        return done

    async def _reload_cron(self) -> None:
        assert self.runner is not None
        self.runner.schedule_all(self.scheduler)

    def _users(self) -> list[str]:
        return self.rt.memory.sessions.users()

    async def refresh_contexts(self, agent: Agent, *, only_stale: bool = False) -> list[str]:
        """Rewrite each user's context file (at start: only those older than the period)."""
        from hermes.memory import context

        max_age = timedelta(hours=self.rt.settings.context.refresh_hours)
        oldest = self.rt.clock.now().timestamp() - max_age.total_seconds()
        done = []
        for user in self._users():
            path = context.path_for(self.rt, user)
            if only_stale and path.exists() and path.stat().st_mtime > oldest:
                continue
            try:
                await context.refresh(self.rt, user, agent.background_llm)
                done.append(user)
            except Exception:
                log.exception("context refresh for %s failed; the old file stays", user)
        if done:
            log.info("context refreshed for %d user(s)", len(done))
        return done

    async def close_idle(self, agent: Agent) -> None:
        from hermes.agent import summarize

        outcomes = await summarize.close_idle(self.rt, agent.background_llm)
        if outcomes:
            log.info("idle sessions: %d summarised", len(outcomes))

    async def _startup_work(self, agent: Agent) -> None:
        """Catch up what happened while Hermes was down; each step skipped once stopping."""
        assert self.runner is not None
        runner = self.runner

        async def catch_up() -> None:
            done = await runner.catch_up()
            log.info("cron catch-up done (%d run(s))", len(done))

        steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("cron catch-up", catch_up),
            ("context refresh at start", lambda: self.refresh_contexts(agent, only_stale=True)),
            ("idle sessions at start", lambda: self.close_idle(agent)),
            ("message vectors at start", self.index_vectors),
        ]
        if self.worker is not None:
            worker = self.worker

            async def extraction_catch_up() -> None:
                worker.catch_up()

            steps.append(("extraction catch-up", extraction_catch_up))
        for name, work in steps:
            if self._stop.is_set():
                return
            # Untracked: a cron run in here is waited for as a cron run (turn grace).
            await self._job(name, work, track=False)()

    # ------------------------------------------------------------------ shutdown
    async def _shutdown(self) -> None:
        log.info("hermes: no longer taking messages or starting jobs")
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.pause()
        if self.bot is not None:
            self.bot.accepting = False
        # Running turns (Discord, REPL, cron) and built-in jobs finish side by side; then the
        # extraction they scheduled. Worst case: turn_grace + background_grace.
        await asyncio.gather(self._drain_bot(), self._drain_repl(), self._drain_cron(),
                             self._drain_jobs(), self._stop_web(), self._stop_frontends(),
                             self._drain_socket())
        # The person at the terminal has left: their session ends and is summarised while
        # extraction finishes (a summary cut short is written at the next start).
        if self.repl is not None:
            self.repl.leave()
        await asyncio.gather(self._drain_extraction(), self._drain_summaries())
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        if self.bot is not None and not self.bot.is_closed():
            await self.bot.close()
        for task in list(self._tasks):
            if task is not asyncio.current_task() and not task.done():
                task.cancel()
        await asyncio.gather(*[t for t in self._tasks if t is not asyncio.current_task()],
                             return_exceptions=True)
        self.rt.close()
        log.info("hermes: stopped cleanly")


    async def _drain_socket(self) -> None:
        if self.socket is not None:
            await self.socket.stop(self.turn_grace)

    async def _stop_web(self) -> None:
        if self.web is not None:
            await self.web.stop()

    async def _drain_bot(self) -> None:
        if self.bot is not None:
            cut = await self.bot.drain(self.turn_grace)
            if cut:
                log.warning("discord: %d turn(s) did not finish in time and were stopped", cut)

    async def _drain_repl(self) -> None:
        reply = getattr(self.repl, "_reply", None)
        if reply is None or reply.done():
            return
        _, late = await asyncio.wait({reply}, timeout=self.turn_grace)
        if late:
            self.repl.stop_reply()
            await self.repl.wait_reply()

    async def _drain_extraction(self) -> None:
        if self.worker is not None:
            cancelled = await self.worker.drain(self.background_grace)
            if cancelled:
                log.warning("extraction: %d run(s) cut short; recorded for retry", cancelled)

    async def _drain_summaries(self) -> None:
        if self.repl is not None:
            late = await finish_or_cancel(self.repl.background, self.background_grace)
            if late:
                log.warning("summary of the terminal session cut short; written at next start")

    async def _drain_cron(self) -> None:
        if self.runner is not None:
            await self.runner.wait_running(self.turn_grace)

    async def _drain_jobs(self) -> None:
        await finish_or_cancel(self._jobs, self.background_grace)


def run_daemon(rt: Runtime, *, repl: bool) -> None:
    """Entry point for `hermes run`: logging, the token, and the loop."""
    token = discord_token(rt.settings)
    if repl:
        from prompt_toolkit.patch_stdout import patch_stdout

        daemon = Daemon(rt, repl=True, token=token, web=rt.settings.web.enabled)
        with patch_stdout(raw=True):
            setup_logging(rt.settings, console=sys.stderr, repl=True)
            _run_logged(rt, daemon)
    else:
        daemon = Daemon(rt, repl=False, token=token, web=rt.settings.web.enabled)
        setup_logging(rt.settings)
        _run_logged(rt, daemon)
    if daemon.failure:
        raise HermesError(daemon.failure)


def _run_logged(rt: Runtime, daemon: Daemon) -> None:
    """Run the loop; an error that stops the daemon is written to hermes.log before it leaves
    (the one line on stderr alone is lost under a service manager)."""
    try:
        asyncio.run(daemon.run())
    except Exception as exc:
        problem = exc if isinstance(exc, HermesError) else storage_problem(exc, rt.settings.db_path)
        if problem is not None:
            log.error("hermes: stopped: %s", problem)
        else:
            log.exception("hermes: stopped by an unexpected error")
        raise
