"""`hermes ask` and `hermes chat` run their turns in a running daemon, over <home>/hermes.sock."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat

import pytest


async def until(condition, ticks: int = 20000) -> None:
    for _ in range(ticks):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


@pytest.fixture
async def daemon(fake_model, rt, monkeypatch):
    from hermes.daemon import Daemon

    rt.settings.web.enabled = False
    running = Daemon(rt)
    task = asyncio.create_task(running.run())
    await until(lambda: running.socket is not None or task.done())
    # The daemon has its model; a command run in-process now would not (exit 2): whatever
    # answers below was answered by the daemon.
    monkeypatch.delenv("HERMES_MODEL__NAME")
    yield running
    running.request_stop("test")
    await asyncio.wait_for(task, 30)


async def test_ask_runs_its_turn_in_the_running_daemon(daemon, cli, fake_model, hermes_home):
    path = hermes_home / "hermes.sock"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    fake_model.reply("Paris is the capital.")
    result = await asyncio.to_thread(cli, "ask", "capital of France?")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Paris is the capital.\n"
    # The daemon's agent answered: its model was called, and the turn is a closed terminal
    # session of the user the CLI acts for.
    assert fake_model.requests[0].messages[-1]["content"].endswith("capital of France?")
    (session,) = daemon.rt.memory.sessions.list_sessions("owner")
    assert session.source == "terminal" and session.ended_at is not None
    fake_model.reply("Still Paris.")
    as_json = await asyncio.to_thread(cli, "ask", "again?", "--json")
    assert as_json.exit_code == 0 and as_json.json()["text"] == "Still Paris."
    failed = await asyncio.to_thread(cli, "ask", "and now?")   # nothing scripted: refused
    assert failed.exit_code == 1 and failed.stderr.startswith("Error: The model fake/scripted")


async def test_piped_chat_talks_to_the_daemon_and_leaving_ends_the_session(daemon, cli,
                                                                         fake_model):
    fake_model.reply("one").reply("two")
    result = await asyncio.to_thread(cli, "chat", input="first\nsecond\n/exit\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["one", "two"]
    (session,) = daemon.rt.memory.sessions.list_sessions("owner")
    assert session.ended_at is not None and session.message_count == 4
    await until(lambda: daemon.rt.memory.sessions.get("owner", session.id).title)


def _request(path, request: dict) -> list[dict]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(os.fspath(path))
        sock.sendall(json.dumps(request).encode() + b"\n")
        return [json.loads(line) for line in sock.makefile("r") if line.strip()]


async def test_a_socket_client_cannot_reach_another_users_session(daemon, fake_model,
                                                                  hermes_home):
    store = daemon.rt.memory.sessions
    alices = store.create("alice", "terminal", channel_key="terminal:alice:ask")
    answer = await asyncio.to_thread(
        _request, hermes_home / "hermes.sock",
        {"op": "turn", "user": "bob", "session_id": alices.id, "text": "read alice's memory"})
    assert answer == [{"error": f"No session {alices.id} for user 'bob'.", "exit_code": 1}]
    assert store.messages("alice", alices.id) == [] and fake_model.requests == []
    for bad in ({"op": "purge", "user": "bob"}, {"op": "turn"}):
        (refused,) = await asyncio.to_thread(_request, hermes_home / "hermes.sock", bad)
        assert refused["error"].startswith("Refused")


def test_without_a_daemon_ask_and_search_run_in_process_even_with_a_dead_daemons_socket(
        cli, fake_model, hermes_home):
    hermes_home.mkdir(parents=True, exist_ok=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(os.fspath(hermes_home / "hermes.sock"))
    dead.close()                                  # the file stays; nothing listens
    fake_model.reply("Answered here.")
    result = cli("ask", "anyone?")
    assert result.exit_code == 0 and result.stdout == "Answered here.\n"
    assert cli("facts", "add", "The user's NAS is in the attic").exit_code == 0
    found = cli("facts", "search", "NAS")         # a daemon call first, then in-process
    assert found.exit_code == 0 and "attic" in found.stdout, found.stderr


async def test_the_repl_talks_to_the_daemon_and_leaving_asks_it_to_summarise(
        daemon, fake_model, tmp_path):
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.history import FileHistory
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from hermes.frontends.repl import Repl
    from hermes.local_socket import RemoteAgent

    events: list[tuple[str, str]] = []
    fake_model.reply("Hello from the daemon.")
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        repl = Repl(daemon.rt.memory, RemoteAgent(daemon.rt.settings),
                    emit=lambda kind, text: events.append((kind, text)),
                    history=FileHistory(str(tmp_path / "history")))
        running = asyncio.create_task(repl.run())
        await until(lambda: repl.prompt.app.is_running)
        pipe.send_text("hi there\r")
        await until(lambda: repl._reply is not None)
        await repl.wait_reply()
        pipe.send_text("\x04")
        await asyncio.wait_for(running, 10)
        await asyncio.gather(*repl.background)
    assert "".join(text for kind, text in events if kind == "chunk") == "Hello from the daemon."
    (session,) = daemon.rt.memory.sessions.list_sessions("owner")
    assert session.ended_at is not None
    await until(lambda: daemon.rt.memory.sessions.get("owner", session.id).title)


async def test_the_clients_probe_is_not_logged_as_a_client_that_went_away(daemon, caplog):
    """`hermes ask` first checks that a daemon answers (connect, then close, nothing sent):
    that is no request and no failure, so it leaves no line in hermes.log."""
    import logging

    from hermes.local_socket import daemon_running

    caplog.set_level(logging.INFO, logger="hermes.local_socket")
    for _ in range(3):
        assert await asyncio.to_thread(daemon_running, daemon.rt.settings)
    await until(lambda: not daemon.socket.turns)        # each probe's handler has finished
    assert [r.getMessage() for r in caplog.records if r.name == "hermes.local_socket"
            and "went away" in r.getMessage()] == []


async def test_long_questions_and_long_replies_cross_the_socket_within_the_limits(
        daemon, cli, fake_model, hermes_home, monkeypatch):
    """Issue 30: over 64 KiB a question failed only with a daemon, and a reply was a
    traceback. Now a reply of 1 MiB arrives whole; a message over the turn's limit is the
    same one line with or without a daemon; a raw line over the socket's limit is refused."""
    from hermes.agent import turn as turn_module
    from hermes.local_socket import REQUEST_LIMIT

    long_reply = "word " * (1024 * 1024 // 5)     # 1 MiB, in 4 chunks
    fake_model.reply(long_reply, chunk_size=len(long_reply) // 4 + 1)
    question = "é" * 12_000                       # 72 KB of JSON escapes
    result = await asyncio.to_thread(cli, "ask", question)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == long_reply + "\n"
    sent = fake_model.requests[-1].messages[-1]["content"]
    assert sent.endswith(question)

    too_long = "x" * (turn_module.MAX_MESSAGE_CHARS + 1)
    refused = await asyncio.to_thread(cli, "ask", too_long)
    line = (f"Error: Refused: the message is {len(too_long):,} characters, over the limit "
            f"of {turn_module.MAX_MESSAGE_CHARS:,}; nothing was recorded. Send a shorter "
            "message.\n")
    assert (refused.exit_code, refused.stderr) == (1, line)
    # the daemon refuses it too, for a client that does not check
    (answer,) = await asyncio.to_thread(
        _request, hermes_home / "hermes.sock",
        {"op": "turn", "user": "owner", "session_id":
         daemon.rt.memory.sessions.create("owner", "terminal").id, "text": too_long})
    assert answer["exit_code"] == 1 and answer["result"]["error"] == line[len("Error: "):-1]
    (over,) = await asyncio.to_thread(
        _request, hermes_home / "hermes.sock",
        {"op": "turn", "user": "owner", "session_id": 1, "text": "y" * REQUEST_LIMIT})
    assert over == {"error": "Refused: a request over 1 MiB on the local socket.",
                    "exit_code": 1}


async def test_searches_and_cron_run_are_answered_by_the_running_daemon(daemon, cli, fake_model,
                                                                        monkeypatch):
    """`hermes facts search`, `sessions search`, `memory show`, `cron run` and `learn backfill
    --dry-run` with a daemon running: it does the work (its models are loaded), the command
    prints what it would have printed itself."""
    import hermes.daemon_calls as calls
    from hermes.assembly import cron_store

    rt = daemon.rt
    rt.memory.facts.add("owner", "The NAS runs Debian 13 and Redis", entities=["NAS"])
    rt.memory.facts.add("alice", "Alice's NAS runs Redis too", entities=["NAS"])
    sid = rt.memory.sessions.create("owner", "discord", title="NAS upgrade").id
    rt.memory.sessions.append("owner", sid, "user", "Upgrading Redis on the NAS tonight")
    rt.memory.basic.add("owner", "Prefers short answers")
    rt.memory.basic.add("alice", "Alice keeps bees")
    answered: list[tuple[str, str]] = []
    commands = [("facts", "search", "redis nas"), ("facts", "search", "redis", "--json"),
                ("sessions", "search", "redis"), ("sessions", "search", "redis", "--json"),
                ("memory", "show"), ("memory", "show", "--json"),
                ("memory", "show", "--user", "alice")]
    with pytest.MonkeyPatch.context() as patch:
        for name, work in list(calls.CALLS.items()):
            async def spy(services, user, args, name=name, work=work):
                answered.append((name, user))
                return await work(services, user, args)
            patch.setitem(calls.CALLS, name, spy)
        through_daemon = [await asyncio.to_thread(cli, *c) for c in commands]
        plan = await asyncio.to_thread(cli, "learn", "backfill", "--dry-run", "--json")
        patch.setattr(calls, "call", lambda *a, **k: None)   # no daemon: in-process
        in_process = [await asyncio.to_thread(cli, *c) for c in commands]
    assert [n for n, _ in answered] == ["facts.search"] * 2 + ["sessions.search"] * 2 + [
        "memory.show"] * 3 + ["learn.backfill_plan"]
    # The daemon's plan is priced with its model (this process has none: the cost is unknown)
    assert plan.exit_code == 0, plan.stderr
    assert plan.json()["sessions"] == 1 and plan.json()["model"] == "fake/scripted"
    assert [u for _, u in answered] == ["owner"] * 6 + ["alice", "owner"]
    for remote, local in zip(through_daemon, in_process, strict=True):
        assert remote.exit_code == local.exit_code == 0, remote.stderr
        assert remote.stdout == local.stdout
    assert "Debian 13" in through_daemon[0].stdout and "Alice" not in through_daemon[0].stdout
    assert "NAS upgrade" in through_daemon[2].stdout
    assert "Prefers short answers" in through_daemon[4].stdout and "bees" not in (
        through_daemon[4].stdout + through_daemon[5].stdout)
    assert "Alice keeps bees" in through_daemon[6].stdout
    assert "short answers" not in through_daemon[6].stdout

    cron_store(rt.memory).add("digest", "owner", "every 1d", "Summarise the NAS", "file:digest.md")
    fake_model.reply("Digest: the NAS is fine.")
    ran = await asyncio.to_thread(cli, "cron", "run", "digest")       # no model here: the daemon
    assert ran.exit_code == 0, ran.stderr
    assert "ok" in ran.stdout and "Digest: the NAS is fine." in ran.stdout
    (run,) = cron_store(rt.memory).runs(name="digest")
    assert run.kind == "manual" and run.status == "ok"
    refused = await asyncio.to_thread(cli, "cron", "run", "digest", "--user", "alice")
    assert refused.exit_code != 0


# What a command the daemon answers must not import: the settings' validation, the store, the
# memory package's stores and operations, the model layer. (Whole-process CPU: bench_cli.py.)
DAEMON_PATH_HEAVY = ("pydantic", "sqlite_utils", "litellm", "numpy", "rich.progress",
                     "hermes.config", "hermes.runtime", "hermes.store.db",
                     "hermes.store.migrations", "hermes.memory.operations",
                     "hermes.memory.facts.store", "hermes.memory.sessions.store",
                     "hermes.memory.basic", "hermes.safety.secrets")

DAEMON_PATH_PROBE = """
import json, sys
from hermes.cli import main
sys.argv = ["hermes", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(m for m in sys.modules if m in HEAVY or m.startswith(tuple(h + "." for h in HEAVY)))
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [("facts", "search", "redis"), ("sessions", "search", "redis"),
                                  ("memory", "show"), ("memory", "show", "--json")])
async def test_a_command_the_daemon_answers_imports_only_its_client(daemon, args):
    """Issue 33: `facts search`, `sessions search` and `memory show` answered by a running
    daemon took 0.55-0.6 s of CPU, most of it imports they did not need there."""
    import sys

    rt = daemon.rt
    rt.memory.facts.add("owner", "The NAS runs Redis", entities=["NAS"])
    rt.memory.sessions.append("owner", rt.memory.sessions.create("owner", "discord").id, "user",
                              "Redis on the NAS")
    rt.memory.basic.add("owner", "Prefers short answers")
    probe = DAEMON_PATH_PROBE.replace("HEAVY", repr(DAEMON_PATH_HEAVY))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", probe, *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    report = json.loads(err.decode().strip().splitlines()[-1])
    assert report == {"code": 0, "heavy": []}, err.decode()
    # ... and it printed the daemon's answer
    assert ("Redis" if args[0] != "memory" else "Prefers short answers") in out.decode()


async def test_a_client_writing_far_past_the_limit_still_reads_the_refusal(daemon, hermes_home):
    """A line of 4 MiB (a client that does not check): the daemon answered at 1 MiB and
    closed, the client's write failed (ECONNRESET) and it never read why (review rev4). The
    rest is read and dropped, so the one line arrives. A line nested 100,000 deep was a
    RecursionError traceback in hermes.log and no answer; now it is refused in one line."""
    def send(raw: bytes) -> list[dict]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(os.fspath(hermes_home / "hermes.sock"))
            sock.sendall(raw)
            return [json.loads(line) for line in sock.makefile("r") if line.strip()]

    huge = b'{"op": "turn", "user": "owner", "session_id": 1, "text": "' + b"y" * (4 << 20)
    assert await asyncio.to_thread(send, huge + b'"}\n') == [
        {"error": "Refused: a request over 1 MiB on the local socket.", "exit_code": 1}]
    deep = b'{"op": "turn", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n"
    assert await asyncio.to_thread(send, deep) == [{"error": "Refused: not a Hermes request."}]
    for given, shown in (("x", "'x'"), (None, "None"), ([1], "[1]")):
        request = {"op": "turn", "user": "owner", "session_id": given, "text": "hi"}
        assert await asyncio.to_thread(send, json.dumps(request).encode() + b"\n") == [
            {"error": f"Refused: session_id must be a session's number (got {shown}).",
             "exit_code": 1}]
