"""`hermes run` as a real process: a cron job answered, a clean SIGTERM, one daemon per home."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import pytest

from hermes.assembly import cron_store
from hermes.clock import FakeClock, SystemClock
from hermes.config import load_settings
from hermes.cron.store import CronStore
from hermes.daemon import HomeLock
from hermes.errors import HermesError
from hermes.frontends.discord_frontend import discord_token
from hermes.runtime import Runtime

REPO = Path(__file__).resolve().parent.parent
# Starting Python with litellm imported takes a while on a cold disk; nothing here sleeps.
START_TIMEOUT = 180


@pytest.fixture(autouse=True)
def no_web_panel(monkeypatch):
    """The daemons started in-process here leave the web panel out (test_web_chat serves it);
    the subprocess ones serve it on a free port (daemon_env)."""
    monkeypatch.setenv("HERMES_WEB__ENABLED", "false")


class Process:
    """A Hermes subprocess whose log lines (stderr) are read as they come."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *args], cwd=REPO, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, needle: str, timeout: float = START_TIMEOUT) -> str:
        while True:
            try:
                line = self._queue.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no {needle!r} in:\n" + "\n".join(self.lines)) from None
            if line is None:
                raise AssertionError(f"exited before {needle!r}:\n" + "\n".join(self.lines))
            self.lines.append(line)
            if needle in line:
                return line

    def finish(self, timeout: float = START_TIMEOUT) -> int:
        code = self.proc.wait(timeout=timeout)
        while (line := self._queue.get(timeout=timeout)) is not None:
            self.lines.append(line)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def daemon_env(hermes_home, tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HERMES_") and k != "DISCORD_TOKEN"}
    env.update(HERMES_HOME=str(hermes_home), HERMES_CONFIG=str(tmp_path / "config.yaml"),
               PYTHONPATH=str(REPO), HERMES_WEB__PORT="0")   # the web panel on a free port
    return env


def _job_due_at_start(home: Path) -> None:
    """A job created 35 minutes ago, every 30 minutes: it fired 5 minutes ago, inside the grace
    window, and fires next in 25 minutes (longer than any test run)."""
    settings = load_settings()
    rt = Runtime(settings, clock=FakeClock(SystemClock().now() - timedelta(minutes=35)))
    cron_store(rt.memory).add("digest", "owner", "every 30m", "Summarise my day",
                                   "file:digests/today.md")
    rt.close()


def test_daemon_answers_a_cron_job_and_stops_cleanly_on_sigterm(daemon_env, hermes_home, rt):
    _job_due_at_start(hermes_home)
    daemon_env["HERMES_TEST_REPLIES"] = json.dumps(["<<hold>>", "Digest: a quiet day."])
    first = Process(["-m", "tests.daemon_harness", "run", "--no-repl"], daemon_env)
    try:
        first.wait_for("hermes: running")
        first.wait_for("harness: model call held")       # the cron turn is in flight
        # A second daemon on the same home refuses to start, and changes nothing.
        second = Process(["-m", "hermes", "run", "--no-repl"], daemon_env)
        assert second.finish() == 1
        said = [line for line in second.lines if "already running" in line]  # one line
        assert len(said) == 1 and said[0].startswith("Error: Another Hermes daemon (pid ")
        log_file = (hermes_home / "hermes.log").read_text()
        assert "hermes: stopped: Another Hermes daemon" in log_file  # and in the log

        first.proc.send_signal(signal.SIGTERM)
        first.wait_for("no longer taking messages")
        first.proc.send_signal(signal.SIGUSR1)          # let the model answer now
        assert first.finish() == 0
    finally:
        first.kill()
    log = "\n".join(first.lines)
    assert "stopped cleanly" in log and "Traceback" not in log
    digest = hermes_home / "outbox" / "digests" / "today.md"
    assert digest.read_text().count("Digest: a quiet day.") == 1
    runs = rt.db.execute("SELECT status, output, session_id FROM cron_runs WHERE kind = "
                         "'schedule' ORDER BY scheduled_for").fetchall()
    assert [r[0] for r in runs] == ["ok"]
    session_id = runs[-1][2]
    messages = rt.db.execute("SELECT role, content FROM messages WHERE session_id = ? "
                             "ORDER BY id", (session_id,)).fetchall()
    assert [tuple(m) for m in messages] == [("user", "Summarise my day"),
                                            ("assistant", "Digest: a quiet day.")]
    source = rt.db.execute("SELECT source FROM sessions WHERE id = ?", (session_id,)).fetchone()
    assert source[0] == "cron"
    assert "hermes: stopped cleanly" in (hermes_home / "hermes.log").read_text()


def test_a_restart_does_not_run_the_same_fire_time_again(daemon_env, hermes_home, rt):
    _job_due_at_start(hermes_home)
    daemon_env["HERMES_TEST_REPLIES"] = json.dumps(["First digest."])
    for _ in range(2):
        proc = Process(["-m", "tests.daemon_harness", "run", "--no-repl"], daemon_env)
        try:
            proc.wait_for("cron catch-up done")
            proc.proc.send_signal(signal.SIGTERM)
            assert proc.finish() == 0
        finally:
            proc.kill()
    statuses = [r[0] for r in rt.db.execute("SELECT status FROM cron_runs").fetchall()]
    assert statuses.count("ok") == 1
    assert (hermes_home / "outbox" / "digests" / "today.md").read_text().count("First digest.") == 1


# --------------------------------------------------------------------------- in-process pieces
def test_the_home_lock_is_exclusive_and_released(hermes_home):
    first, second = HomeLock(hermes_home), HomeLock(hermes_home)
    first.acquire()
    with pytest.raises(HermesError, match=f"pid {os.getpid()}.*only one may run per home"):
        second.acquire()
    first.release()
    second.acquire()
    second.release()


def test_the_discord_token_comes_from_config_env_or_dotenv(hermes_home, config_file):
    settings = load_settings()
    assert discord_token(settings, environ={}) is None
    hermes_home.mkdir(parents=True, exist_ok=True)
    (hermes_home / ".env").write_text("# secrets\nexport DISCORD_TOKEN='from-dotenv'\n")
    assert discord_token(settings, environ={}) == "from-dotenv"
    assert discord_token(settings, environ={"DISCORD_TOKEN": "from-env"}) == "from-env"
    config_file.write_text("discord:\n  token: from-config\n")
    assert discord_token(load_settings(), environ={"DISCORD_TOKEN": "x"}) == "from-config"


async def until(condition, ticks: int = 20000) -> None:
    for _ in range(ticks):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


@pytest.fixture
def no_preload(monkeypatch):
    """The daemon's litellm preload is tested on its own; here it would only take seconds."""
    from hermes.agent import llm

    monkeypatch.setattr(llm, "load_litellm", lambda: None)


async def test_builtin_jobs_and_the_stale_context_refresh_at_start(rt, clock, hermes_home,
                                                                   no_preload, monkeypatch,
                                                                   caplog):
    import logging

    from hermes.daemon import Daemon
    from hermes.learn.worker import ExtractionWorker
    from hermes.memory import context
    from hermes.memory.basic import BasicMemory
    from hermes.memory.sessions.store import SessionStore

    basic = BasicMemory(rt.db, clock=clock)
    basic.add("alice", "Alice keeps bees")
    basic.add("bob", "Bob restores old radios")
    fresh, stale = context.path_for(rt, "alice"), context.path_for(rt, "bob")
    for path in (fresh, stale):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("an old note\n")
    seven_hours_ago = clock.now().timestamp() - 7 * 3600
    os.utime(stale, (seven_hours_ago, seven_hours_ago))
    os.utime(fresh, (clock.now().timestamp() - 3600,) * 2)
    # A conversation idle for three hours (sessions.idle_minutes is 120).
    earlier = SessionStore(rt.db, clock=FakeClock(clock.now() - timedelta(hours=3)))
    idle = earlier.create("alice", "terminal", channel_key="terminal:alice")
    earlier.append("alice", idle.id, "user", "I moved the hives to the orchard")
    # Extraction on (no model is needed: its work is recorded, not run).
    rt.settings.extraction.enabled = True
    retried, caught_up = [], []

    async def retry_failed(self, user=None):
        retried.append(user)
        return []

    monkeypatch.setattr(ExtractionWorker, "retry_failed", retry_failed)
    monkeypatch.setattr(ExtractionWorker, "catch_up",
                        lambda self, **kw: caught_up.append(True) or [])

    caplog.set_level(logging.INFO)
    daemon = Daemon(rt)
    running = asyncio.create_task(daemon.run())
    await until(lambda: stale.read_text().startswith("# Recent context") and caught_up)
    # The idle session was closed and summarised at start.
    closed = rt.memory.sessions.get("alice", idle.id)
    assert closed.ended_at is not None and closed.title
    jobs = {job.id: job for job in daemon.scheduler.get_jobs()}
    assert jobs["builtin:context"].trigger.interval == timedelta(hours=6)
    assert jobs["builtin:idle"].trigger.interval == timedelta(minutes=10)
    assert "builtin:cron-reload" in jobs
    # The loop's connection leaves the WAL to a job on a worker thread (issue 30).
    assert jobs["builtin:checkpoint"].trigger.interval == timedelta(seconds=30)
    assert rt.db.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert fresh.read_text() == "an old note\n"            # younger than 6 hours: left alone
    # The scheduled jobs are wired to real work: run them as the scheduler would.
    for key in ("builtin:extraction-retry", "builtin:idle", "builtin:context",
                "builtin:cron-reload", "builtin:checkpoint"):
        await jobs[key].func()
    assert retried == [None]
    assert fresh.read_text().startswith("# Recent context")  # the periodic refresh: everyone
    with pytest.raises(HermesError, match="already running"):
        HomeLock(hermes_home).acquire()
    daemon.request_stop("test")
    await asyncio.wait_for(running, 30)
    HomeLock(hermes_home).acquire()                          # released at the stop
    # The wrapper logs failures instead of raising: a broken wiring shows up only here.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_daemon_shutdown_ends_the_terminal_session_and_summarises_it(
        fake_model, rt):
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from hermes.daemon import Daemon

    store = rt.memory.sessions
    fake_model.reply("Hello from Hermes.")
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        daemon = Daemon(rt, interactive=True)
        running = asyncio.create_task(daemon.run())
        await until(lambda: "terminal" in daemon.frontends
                    and daemon.frontends["terminal"].repl.prompt.app.is_running)
        pipe.send_text("hi there\r")
        await until(lambda: [m for s in store.list_sessions("owner")
                             for m in store.messages("owner", s.id) if m.role == "assistant"])
        await daemon.frontends["terminal"].repl.wait_reply()
        daemon.request_stop("SIGTERM")
        await asyncio.wait_for(running, 30)
    rt2 = Runtime(load_settings())
    (session,) = rt2.memory.sessions.list_sessions("owner")
    rt2.close()
    assert session.ended_at is not None and session.title == "hi there"


async def test_litellm_is_imported_off_the_loop_once_hermes_is_up(rt, monkeypatch):
    """`hermes run` is ready (front-ends started, the schedule running) without waiting for
    litellm's import (~3 s of CPU): it runs in a worker thread once Hermes is up."""
    import threading

    from hermes.agent import llm
    from hermes.daemon import Daemon

    rt.settings.model.name = "fake/scripted"
    daemon = Daemon(rt)
    calls: list[tuple[bool, bool, bool]] = []
    imported = threading.Event()

    def fake_load():
        calls.append((threading.current_thread() is threading.main_thread(),
                      daemon.ctx is not None and "web" in daemon.built,
                      daemon.scheduler is not None and daemon.scheduler.running))
        imported.set()

    monkeypatch.setattr(llm, "_litellm", None)
    monkeypatch.setattr(llm, "_preload", None)
    monkeypatch.setattr(llm, "load_litellm", fake_load)
    running = asyncio.create_task(daemon.run())
    await until(lambda: daemon.scheduler is not None and daemon.scheduler.running)
    await asyncio.to_thread(imported.wait, 30)
    daemon.request_stop("test")
    await asyncio.wait_for(running, 30)
    # Once, in a worker thread (the import must not stall the loop), after the start.
    assert calls == [(False, True, True)]


def test_the_example_service_config_is_valid(monkeypatch, hermes_home):
    monkeypatch.setenv("HERMES_CONFIG", str(REPO / "scripts" / "config.example.yaml"))
    settings = load_settings()
    rt = Runtime(settings, clock=FakeClock())
    try:
        store = cron_store(rt.memory)
        store.sync_config(settings.cron.jobs)
        digest = store.get("daily-digest")
        assert digest.deliver.startswith("discord:") and "[SILENT]" in digest.prompt
        assert settings.discord.allowed_users and settings.model.name
    finally:
        rt.close()
    unit = (REPO / "scripts" / "hermes.service").read_text()
    assert "hermes run --no-repl" in unit and "KillSignal=SIGTERM" in unit


# --------------------------------------------------------------------------- Discord start-up
@pytest.fixture
def discord_starts(monkeypatch):
    """HermesBot.start scripted: each entry is an exception to raise, or None to stay up."""
    from hermes.frontends.discord_bot import HermesBot

    monkeypatch.setenv("DISCORD_TOKEN", "t")
    script: list[BaseException | None] = []
    bots: list[HermesBot] = []
    up = asyncio.Event()

    async def start(self, token: str) -> None:
        bots.append(self)
        outcome = script.pop(0)
        if outcome is not None:
            raise outcome
        up.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(HermesBot, "start", start)
    return script, bots, up


async def test_a_failed_discord_start_is_retried_with_backoff(rt, no_preload, discord_starts):
    from hermes.daemon import Daemon

    script, bots, up = discord_starts
    script += [OSError("network is down"), RuntimeError("gateway 502"), None]
    delays: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        delays.append(seconds)

    daemon = Daemon(rt, sleep=fake_sleep)
    running = asyncio.create_task(daemon.run())
    await asyncio.wait_for(up.wait(), 30)
    assert delays == [5.0, 10.0]
    assert len(bots) == 3 and len(set(map(id, bots))) == 3     # a fresh client each time
    assert daemon.frontends["discord"].bot is bots[-1]
    daemon.request_stop("test")
    await asyncio.wait_for(running, 30)
    assert daemon.failure is None


@pytest.mark.parametrize("error, words", [
    ("LoginFailure", "token was rejected"),
    ("PrivilegedIntentsRequired", "Message Content Intent"),
])
async def test_a_rejected_discord_login_stops_hermes_with_an_error(rt, no_preload, discord_starts,
                                                                   error, words):
    import discord

    from hermes.daemon import Daemon

    script, bots, _ = discord_starts
    exc = (discord.LoginFailure("bad token") if error == "LoginFailure"
           else discord.PrivilegedIntentsRequired(None))
    script.append(exc)

    async def no_sleep(seconds: float) -> None:
        raise AssertionError("a rejected login is not retried")

    daemon = Daemon(rt, sleep=no_sleep)
    await asyncio.wait_for(daemon.run(), 30)          # stops by itself
    assert len(bots) == 1 and words in (daemon.failure or "")


def test_hermes_run_exits_non_zero_when_discord_rejects_the_token(
        cli, monkeypatch, hermes_home, config_file, discord_starts):
    import discord

    from hermes.agent import llm

    monkeypatch.setattr(llm, "load_litellm", lambda: None)
    monkeypatch.setenv("DISCORD_TOKEN", "bad")
    discord_starts[0].append(discord.LoginFailure("bad token"))
    import logging

    try:
        result = cli("run", "--no-repl")
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "_hermes", False)]:
            root.removeHandler(handler)
            handler.close()
    assert result.exit_code == 1
    assert "token was rejected" in result.stderr


def test_the_log_file_rolls_over_and_keeps_a_bounded_number_of_backups(tmp_path, monkeypatch):
    import io
    import logging

    from hermes.daemon import setup_logging

    monkeypatch.setenv("HERMES_LOGGING__FILE_MAX_MB", "0.001")  # about 1 kB
    monkeypatch.setenv("HERMES_LOGGING__FILE_BACKUPS", "2")
    settings = load_settings()
    root = logging.getLogger()
    before = list(root.handlers), root.level
    try:
        setup_logging(settings, console=io.StringIO())
        log = logging.getLogger("hermes.test")
        for i in range(100):
            log.info("line %03d %s", i, "x" * 60)
    finally:
        for handler in list(root.handlers):
            if getattr(handler, "_hermes", False):
                root.removeHandler(handler)
                handler.close()
        root.handlers[:], root.level = before
    home = settings.home_path
    names = sorted(p.name for p in home.glob("hermes.log*"))
    assert names == ["hermes.log", "hermes.log.1", "hermes.log.2"]
    assert all(p.stat().st_size <= 1100 for p in home.glob("hermes.log*"))
    assert "line 099" in (home / "hermes.log").read_text()


async def test_message_vectors_are_indexed_in_the_background_and_stop_at_shutdown(
        rt, clock, monkeypatch):
    import numpy as np

    from hermes.daemon import Daemon
    from hermes.memory.embeddings import embedders as embeddings
    from hermes.memory.sessions.store import SessionStore

    class Toy:
        model_id = "toy-daemon"
        threads: set[str] = set()

        def embed(self, texts):
            Toy.threads.add(threading.current_thread().name)
            out = np.ones((len(texts), 4), dtype=np.float32)
            return out / np.linalg.norm(out, axis=1, keepdims=True)

        def embed_query(self, text):
            return self.embed([text])[0]

    monkeypatch.setitem(embeddings.MODELS, embeddings.DEFAULT_MODEL, Toy)
    rt.settings.sessions.embeddings = True
    store = SessionStore(rt.db, clock=clock)
    for user in ("alice", "bob"):
        session = store.create(user, "terminal")
        for i in range(40):  # more than one batch
            store.append(user, session.id, "user", f"{user} message {i}")
    daemon = Daemon(rt)
    assert await daemon.index_vectors() == 80
    assert threading.main_thread().name not in Toy.threads  # never on the event loop's thread
    count = "SELECT count(*) FROM message_vectors WHERE model = 'toy-daemon'"
    assert rt.db.execute(count).fetchone()[0] == 80
    assert await daemon.index_vectors() == 0                  # nothing new
    store.append("alice", session.id - 1, "user", "one more")
    daemon.request_stop("test")
    assert await daemon.index_vectors() == 0                  # stopping: left for next time
    rt.settings.sessions.embeddings = False
    assert await Daemon(rt).index_vectors() == 0  # hybrid off: nothing to do


@pytest.mark.parametrize("repl", [True, False])
def test_with_the_repl_info_lines_go_to_the_log_file_only(hermes_home, repl):
    import io
    import logging

    from hermes.daemon import setup_logging

    settings = load_settings()
    root = logging.getLogger()
    before = list(root.handlers), root.level
    console = io.StringIO()
    try:
        setup_logging(settings, console=console, repl=repl)
        logging.getLogger("hermes.learn.fastlane").info("fast lane: created fact 1")
        logging.getLogger("hermes.daemon").error("something broke")
    finally:
        for handler in list(root.handlers):
            if getattr(handler, "_hermes", False):
                root.removeHandler(handler)
                handler.close()
        root.handlers[:], root.level = before
    assert "fast lane: created fact 1" in (settings.home_path / "hermes.log").read_text()
    assert ("fast lane" in console.getvalue()) is not repl
    assert "something broke" in console.getvalue()


async def test_without_a_model_the_daemon_says_so_in_one_line_at_start(rt, no_preload, caplog):
    import logging

    from hermes.daemon import Daemon

    caplog.set_level(logging.INFO)
    daemon = Daemon(rt)
    running = asyncio.create_task(daemon.run())
    await until(lambda: any("chat and learning are off" in r.getMessage()
                            for r in caplog.records))
    daemon.request_stop("test")
    await asyncio.wait_for(running, 30)
    (notice,) = [r for r in caplog.records if "chat and learning" in r.getMessage()]
    assert notice.levelno == logging.WARNING and "\n" not in notice.getMessage()
    assert "HERMES_MODEL__NAME=" in notice.getMessage()


async def test_without_a_model_the_repl_shows_the_notice_once(rt, no_preload, monkeypatch):
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from hermes.daemon import Daemon
    from hermes.frontends import repl

    said: list[tuple[str, str]] = []
    # What the REPL prints, collected (the terminal sink is the REPL's only output).
    monkeypatch.setattr(repl, "TerminalSink", lambda: lambda kind, text: said.append((kind, text)))
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        daemon = Daemon(rt, interactive=True)
        running = asyncio.create_task(daemon.run())
        await until(lambda: any("chat and learning are off" in text for _, text in said))
        daemon.request_stop("test")
        await asyncio.wait_for(running, 30)
    notices = [text for _, text in said if "chat and learning are off" in text]
    assert len(notices) == 1 and "HERMES_MODEL__NAME=" in notices[0]


async def test_a_cron_job_for_the_terminal_is_shown_in_the_repl(fake_model, rt, clock,
                                                                monkeypatch):
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from hermes.daemon import Daemon
    from hermes.frontends import repl

    # Due 5 minutes ago (every 30 minutes since 35 minutes ago): run by the catch-up at start.
    CronStore(rt.db, home=rt.settings.home_path, clock=FakeClock(
        clock.now() - timedelta(minutes=35))).add("digest", "owner", "every 30m",
                                                  "Summarise my day", "terminal")
    fake_model.reply("Digest: a quiet day.")
    said: list[tuple[str, str]] = []
    delivered = asyncio.Event()

    def sink(kind: str, text: str) -> None:
        said.append((kind, text))
        if kind == "cron":
            delivered.set()

    monkeypatch.setattr(repl, "TerminalSink", lambda: sink)
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        daemon = Daemon(rt, interactive=True)
        running = asyncio.create_task(daemon.run())
        await asyncio.wait_for(delivered.wait(), 60)
        assert ("cron", "[cron digest]\nDigest: a quiet day.") in said
        daemon.request_stop("test")
        await asyncio.wait_for(running, 30)
    # Routed by its prefix to the REPL, the front-end registered as `terminal`; not printed.
    assert set(daemon.ctx.deliverers) == {"terminal"}


async def test_shutdown_waits_for_the_terminal_summary_within_the_background_grace(
        fake_model, rt, caplog):
    import logging

    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from hermes.daemon import Daemon

    rt.settings.extraction.enabled = False
    store = rt.memory.sessions
    fake_model.reply("Hello from Hermes.")
    fake_model.block()                 # the summary's model call waits, never released
    caplog.set_level(logging.WARNING)
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        # No grace for background work: the summary left in flight is cut at once (and
        # written at the next start), never waited for without bound nor left running.
        daemon = Daemon(rt, interactive=True, background_grace=0)
        running = asyncio.create_task(daemon.run())
        await until(lambda: "terminal" in daemon.frontends
                    and daemon.frontends["terminal"].repl.prompt.app.is_running)
        pipe.send_text("hi there\r")
        await until(lambda: [m for s in store.list_sessions("owner")
                             for m in store.messages("owner", s.id) if m.role == "assistant"])
        await daemon.frontends["terminal"].repl.wait_reply()
        daemon.request_stop("SIGTERM")
        await asyncio.wait_for(running, 30)
    repl = daemon.frontends["terminal"].repl
    assert "summary of the terminal session cut short" in caplog.text
    assert all(task.done() for task in repl.background)


def _run_refused_before_loading(cli, monkeypatch):
    """`hermes run --no-repl`, which must refuse before it loads the model or builds its
    agent: both raise here, so a run that goes on fails at once (never a daemon left running,
    never a hang)."""
    import logging

    from hermes.agent import llm

    def went_on(*args, **kwargs):
        raise AssertionError("hermes run went on past its checks")

    monkeypatch.setattr(llm, "load_litellm", went_on)
    monkeypatch.setattr("hermes.daemon.build_agent", went_on)
    try:
        result = cli("run", "--no-repl")
    finally:
        root = logging.getLogger()
        for handler in [h for h in root.handlers if getattr(h, "_hermes", False)]:
            root.removeHandler(handler)
            handler.close()
    assert not isinstance(result.exception, AssertionError), result.exception
    return result


def test_hermes_run_says_a_bad_cron_job_before_it_loads_anything(
        cli, monkeypatch, hermes_home, config_file):
    """Issue 30: the cron check ran after the model had loaded, so INFO lines came first."""
    config_file.write_text("cron:\n  jobs:\n"
                           "    - {name: digest, schedule: 'every blue moon', prompt: hi}\n")
    result = _run_refused_before_loading(cli, monkeypatch)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: ") and "cron.jobs.0.schedule" in result.stderr
    assert result.stderr.count("\n") == 1


def test_hermes_run_says_a_bad_stored_cron_job_in_one_line(cli, monkeypatch, rt):
    """A job of the database whose schedule cannot be used (an older Hermes, an edit by hand)
    logged a traceback and started with every cron job off (review rev4): one Error line that
    names the job and its fix, before anything loads, as for a bad job of cron.jobs."""
    from hermes.assembly import cron_store

    cron_store(rt.memory).add("digest", "owner", "0 8 * * *", "hi")
    rt.db.execute("UPDATE cron_jobs SET schedule = 'every fortnight' WHERE name = 'digest'")
    rt.db.conn.commit()
    result = _run_refused_before_loading(cli, monkeypatch)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: cron job 'digest' of owner: schedule 'every fortnight'")
    assert "hermes cron remove digest --user owner" in result.stderr
    assert result.stderr.count("\n") == 1
