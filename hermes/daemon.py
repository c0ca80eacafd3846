"""`hermes run`: every registered front-end and the scheduler in one asyncio process.

The daemon only wires things together: it owns the event loop, the lock on the home, logging,
the scheduler and the front-ends registered through the ``register_frontends`` hook (Discord,
the terminal REPL, the web panel and cron are default plugins, see
:mod:`hermes.frontends.builtin`): it starts each, routes cron deliveries to it by prefix and
stops it at shutdown, without knowing which exist. It holds no memory logic. Built-in jobs: the
cross-thread context refresh every ``context.refresh_hours`` for every user (and at start for
files older than that), closing and summarising idle sessions, and retrying failed extraction
runs.

Shutdown (SIGINT, SIGTERM, or leaving the REPL) stops taking messages and jobs, lets running
turns and cron runs finish (or records them as failed after a grace period), waits for
background extraction (which records what it could not finish, for retry), and closes the
database.
"""

from __future__ import annotations

import asyncio
import fcntl
import functools
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hermes.aio import finish_or_cancel
from hermes.assembly import build_agent
from hermes.cron.schedule import timezone_for
from hermes.daemon_calls import Services, answer
from hermes.errors import HermesError
from hermes.frontends.base import no_model_notice
from hermes.home import make_home, make_private_dirs
from hermes.local_socket import SocketServer
from hermes.safety.secrets import RedactingFilter
from hermes.store.db import checkpoint, checkpoint_elsewhere, connect
from hermes.store.failures import storage_problem

if TYPE_CHECKING:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from hermes.agent.turn import Agent
    from hermes.config import Settings
    from hermes.frontends.base import Frontend, FrontendContext
    from hermes.learn.worker import ExtractionWorker
    from hermes.runtime import Runtime

log = logging.getLogger("hermes.daemon")

# How long shutdown waits for running turns, cron runs and background work.
TURN_GRACE_SECONDS = 60.0
BACKGROUND_GRACE_SECONDS = 30.0
IDLE_CHECK_MINUTES = 10
EXTRACTION_RETRY_MINUTES = 30
VECTOR_INDEX_MINUTES = 5
# How often the WAL is copied into the database file, off the loop (hermes.store.db.checkpoint):
# the loop's connection no longer does it inside its commits.
CHECKPOINT_SECONDS = 30


# --------------------------------------------------------------------------- one per home
class HomeLock:
    """An exclusive ``fcntl`` lock on ``<home>/hermes.lock``: one daemon per home.

    The kernel drops the lock when the process dies, so a crash never leaves a stale lock.
    """

    def __init__(self, home: Path) -> None:
        self.path = home / "hermes.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        make_private_dirs(self.path.parent)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
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
    make_home(settings.home_path)
    console_handler = logging.StreamHandler(console or sys.stderr)
    console_handler.setLevel("ERROR" if repl else config.level)
    console_handler.setFormatter(logging.Formatter(logs.FORMAT))
    # A line meant for hermes.log alone (the error that stops the daemon is also printed as
    # `Error: ...`): once on the terminal, not twice.
    console_handler.addFilter(lambda record: not getattr(record, "file_only", False))
    handlers = [logs.file_handler(settings), console_handler]
    for handler in handlers:
        handler.addFilter(RedactingFilter())  # no secret is ever written to a log
    logs.replace_handlers(
        handlers, min(logging.getLevelName(config.level), logging.getLevelName(config.file_level)))
    logs.quiet_libraries(settings)


# --------------------------------------------------------------------------- the daemon
class Daemon:
    """Runs the registered front-ends (:mod:`hermes.frontends.base`) on one loop, beside the
    scheduler and the built-in jobs, and stops them at shutdown. It names none of them: Discord,
    the REPL, the web panel and cron arrive as default plugins, like any other front-end."""

    def __init__(self, rt: Runtime, *, interactive: bool = False,
                 turn_grace: float = TURN_GRACE_SECONDS,
                 background_grace: float = BACKGROUND_GRACE_SECONDS,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.rt = rt
        self.sleep = sleep
        # Set when something fatal (a rejected Discord token) stops the daemon: `hermes run`
        # then exits non-zero with this line, so systemd's Restart=on-failure applies.
        self.failure: str | None = None
        self.interactive = interactive     # it owns the terminal (no --no-repl, a tty)
        self.built: dict[str, Frontend] = {}      # every registered front-end, on or off
        self.frontends: dict[str, Frontend] = {}  # those that started
        self.turn_grace = turn_grace
        self.background_grace = background_grace
        self.lock = HomeLock(rt.settings.home_path)
        self.socket: SocketServer | None = None
        self.worker: ExtractionWorker | None = None
        self.scheduler: AsyncIOScheduler | None = None
        self.ctx: FrontendContext | None = None
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

        self._preflight()  # nothing started yet: nothing to stop
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self.request_stop, sig.name)
        try:
            agent, self.worker = build_agent(self.rt)
            self.scheduler = AsyncIOScheduler(
                timezone=timezone_for(self.rt.settings.cron.timezone))
            self._add_builtin_jobs(agent)
            self.scheduler.start()
            await self._start_frontends(agent)
            # `hermes ask` and `hermes chat` run their turns here (hermes/local_socket.py).
            # ... and the searches and `cron run` of the CLI (hermes/daemon_calls.py), with the
            # one cron runner of this process (its deliveries go through the front-ends).
            services = Services(self.rt.memory, agent, self.ctx.runner if self.ctx else None)
            socket = SocketServer(self.rt.memory, agent,
                                  calls=functools.partial(answer, services))
            if await socket.start():
                self.socket = socket
            self._spawn(self._startup_work(agent), "hermes-startup")
            statuses = [s for f in self.built.values() if (s := getattr(f, "status", None))]
            log.info("hermes: running (%s)", ", ".join(
                [*statuses, f"home: {self.rt.settings.home_path}"]))
            self._preload()
            notice = no_model_notice(agent)
            if notice:
                log.warning("%s", notice)
            await self._stop.wait()
        finally:
            await self._shutdown()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    def _preflight(self) -> None:
        """What stops `hermes run`, checked before anything loads, so that its one Error line
        comes first (it came after the model had loaded and its INFO lines): the database
        opens (a folder, an empty file), and every job of cron.jobs and of the database is
        valid."""
        from hermes.assembly import cron_store
        from hermes.cron.store import check_config_jobs, check_stored_jobs

        settings = self.rt.settings
        # (opening it is the check) Its commits no longer checkpoint the WAL on the event
        # loop: a job does, on a worker thread (checkpoint_wal).
        checkpoint_elsewhere(self.rt.db)
        check_config_jobs(settings.cron.jobs, settings.source, timezone=settings.cron.timezone,
                          home=settings.home_path, default_user=settings.users.default)
        check_stored_jobs(cron_store(self.rt.memory))

    def _preload(self) -> None:
        """Once Hermes is up (front-ends started, the socket listening): import litellm (~3 s
        of CPU) and load the embedding model, each in a thread of its own, so that the first
        reply does not pay for them and nothing waits for them to start. A model call that
        comes first waits for the import off the event loop (:meth:`LLM.ready`)."""
        from hermes.agent import llm

        settings = self.rt.settings
        if settings.model.name:
            llm.preload_litellm()
        if settings.sessions.embeddings:
            self.rt.memory.embedders.preload(settings.sessions.embedding_model)

    # ------------------------------------------------------------------ front-ends
    async def _start_frontends(self, agent: Agent) -> None:
        """Build every registered front-end (a configuration error stops Hermes), then start
        each in order; one that fails to start stays off, logged. The started ones take the
        cron deliveries for their prefix."""
        from hermes import plugins
        from hermes.assembly import cron_runner
        from hermes.frontends.base import Deliverer, FrontendContext, Placer

        deliverers: dict[str, Deliverer] = {}
        placers: dict[str, Placer] = {}
        ctx = FrontendContext(self.rt.memory, agent, worker=self.worker,
                              request_stop=self.request_stop,
                              fail=self._fail, interactive=self.interactive,
                              scheduler=self.scheduler, add_job=self._add_job,
                              deliverers=deliverers, placers=placers,
                              runner=cron_runner(self.rt.memory, agent, deliverers, placers),
                              turn_grace=self.turn_grace, sleep=self.sleep)
        self.ctx = ctx
        entries = plugins.loaded().frontends.entries
        for name, entry in entries.items():
            try:
                frontend = entry.factory(ctx)
            except HermesError:
                raise
            except Exception:
                log.exception("front-end %s: failed to start; it stays off", name)
                continue
            if frontend is None:
                log.info("front-end %s: off", name)
                continue
            self.built[name] = frontend
        for name, frontend in self.built.items():
            reports = getattr(frontend, "status", None) is not None
            try:
                started = await frontend.start()
            except Exception:
                log.exception("front-end %s: failed to start; it stays off", name)
                continue
            if not started:
                if not reports:
                    log.info("front-end %s: off", name)
                continue
            self.frontends[name] = frontend
            if entries[name].accepts is not None:
                ctx.deliverers[name] = frontend.deliver
                if getattr(frontend, "place_for", None) is not None:
                    ctx.placers[name] = frontend.place_for  # type: ignore[attr-defined]
            if not reports:
                log.info("front-end %s: started", name)

    async def _stop_frontends(self) -> None:
        async def stop(name: str, frontend: Frontend) -> None:
            try:
                await frontend.stop()
            except Exception:
                log.exception("front-end %s: failed to stop cleanly", name)

        await asyncio.gather(*(stop(n, f) for n, f in self.frontends.items()))

    async def _finish_frontends(self) -> None:
        """Background work the front-ends left after stopping (the terminal's summary)."""
        async def finish(name: str, frontend: Frontend) -> None:
            try:
                await frontend.finish(self.background_grace)  # type: ignore[attr-defined]
            except Exception:
                log.exception("front-end %s: failed to finish cleanly", name)

        await asyncio.gather(*(finish(n, f) for n, f in self.frontends.items()
                               if hasattr(f, "finish")))

    def _fail(self, message: str) -> None:
        log.error(message)
        self.failure = message
        self.request_stop("fatal error")

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

    def _add_job(self, name: str, work: Callable[[], Awaitable[object]], *, id: str,
                 trigger: str = "interval", **when: Any) -> None:
        """A scheduled job (the built-ins, a front-end's): at most one at a time, late runs
        folded into one, its failure logged."""
        assert self.scheduler is not None
        self.scheduler.add_job(self._job(name, work), trigger, id=id, coalesce=True,
                               max_instances=1, misfire_grace_time=None, replace_existing=True,
                               **when)

    def _add_builtin_jobs(self, agent: Agent) -> None:
        settings = self.rt.settings
        add = self._add_job
        add("WAL checkpoint", self.checkpoint_wal, seconds=CHECKPOINT_SECONDS,
            id="builtin:checkpoint")
        add("context refresh", lambda: self.refresh_contexts(agent),
            hours=settings.context.refresh_hours, id="builtin:context")
        add("idle sessions", lambda: self.close_idle(agent), minutes=IDLE_CHECK_MINUTES,
            id="builtin:idle")
        if self.worker is not None:
            add("extraction retry", self.worker.retry_failed, minutes=EXTRACTION_RETRY_MINUTES,
                id="builtin:extraction-retry")
        if settings.sessions.embeddings:
            add("message vectors", self.index_vectors, minutes=VECTOR_INDEX_MINUTES,
                id="builtin:vectors")

    async def checkpoint_wal(self) -> tuple[int, int]:
        """Copy the WAL into the database file on a worker thread (the loop's connection does
        not: hermes.store.db.checkpoint_elsewhere). (pages in the WAL, pages copied)"""
        return await asyncio.to_thread(checkpoint, self.rt.settings.db_path)

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
            db = connect(settings.db_path)
            try:
                # This thread's own connection, with the models the home's memory loaded (a
                # missing extra is this job's error: it exists only to embed).
                vectors, facts = memory.on(db).vectors_to_index()
                return sum(facts.index(user, stop=stopping) + vectors.index(user, stop=stopping)
                           for user in users)
            finally:
                db.conn.close()

        done = await asyncio.to_thread(work)
        if done:
            log.info("message vectors: %d message(s) embedded", done)
        return done

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
                await context.refresh(self.rt.memory, user, agent.background_llm)
                done.append(user)
            except Exception:
                log.exception("context refresh for %s failed; the old file stays", user)
        if done:
            log.info("context refreshed for %d user(s)", len(done))
        return done

    async def close_idle(self, agent: Agent) -> None:
        from hermes.agent import summarize

        outcomes = await summarize.close_idle(self.rt.memory, agent.background_llm)
        if outcomes:
            log.info("idle sessions: %d summarised", len(outcomes))

    async def _startup_work(self, agent: Agent) -> None:
        """Catch up what happened while Hermes was down (the front-ends' own catch-up first,
        such as cron's); each step skipped once stopping."""
        assert self.ctx is not None
        steps: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            *self.ctx.at_start,
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
        # The front-ends stop taking messages and their running turns (Discord, REPL, cron)
        # finish side by side with the built-in jobs; then the extraction they scheduled and
        # the front-ends' background work (the terminal session's summary). Worst case:
        # turn_grace + background_grace.
        await asyncio.gather(self._stop_frontends(), self._drain_jobs(), self._drain_socket())
        await asyncio.gather(self._drain_extraction(), self._finish_frontends())
        if self.scheduler is not None and self.scheduler.running:
            self.scheduler.shutdown(wait=False)
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

    async def _drain_extraction(self) -> None:
        if self.worker is not None:
            cancelled = await self.worker.drain(self.background_grace)
            if cancelled:
                log.warning("extraction: %d run(s) cut short; recorded for retry", cancelled)

    async def _drain_jobs(self) -> None:
        await finish_or_cancel(self._jobs, self.background_grace)


def run_daemon(rt: Runtime, *, interactive: bool) -> None:
    """Entry point for `hermes run`: logging and the loop (``interactive``: on a terminal,
    without --no-repl)."""
    daemon = Daemon(rt, interactive=interactive)
    if interactive:
        from prompt_toolkit.patch_stdout import patch_stdout

        with patch_stdout(raw=True):
            setup_logging(rt.settings, console=sys.stderr, repl=True)
            _run_logged(rt, daemon)
    else:
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
            log.error("hermes: stopped: %s", problem, extra={"file_only": True})
        else:
            log.exception("hermes: stopped by an unexpected error")
        raise
