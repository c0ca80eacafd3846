"""`hermes ask`: one question from the terminal, answered by streaming; and the line-by-line
chat that `hermes chat` uses when its input is a pipe (on a terminal it is the daemon's REPL).

Both build on the same turn engine as every other front-end. The model layer (litellm) is only
imported when the first model call is made, so `hermes --help` and memory commands stay fast.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import typer

from hermes.cli import JsonOption, UserOption, runtime
from hermes.cli.output import echo, emit_json
from hermes.config import terminal_identity
from hermes.memory.guard import printable
from hermes.runtime import Runtime

# The model layer, the agent and the extraction worker are imported only for a turn run
# in-process: with a daemon on the home, `hermes ask` needs none of them.


def require_model(rt: Runtime) -> None:
    from hermes.agent.llm import LLM, ModelNotConfigured

    llm = LLM.from_settings(rt.settings)
    if not llm.configured:
        raise ModelNotConfigured(llm.not_configured_message())


def preload_embeddings(rt: Runtime) -> None:
    """Load the embedding model in the background while the agent's modules import and the
    session is read: a turn needs it only when it searches (hermes.memory.embeddings)."""
    if rt.settings.sessions.embeddings:
        rt.memory.embedders.preload(rt.settings.sessions.embedding_model)


def agent_for(rt: Runtime) -> tuple[Any, Any]:
    """The daemon's agent over its socket when a daemon runs on this home (it has the model
    loaded and learns after we have gone: no worker here), else an in-process one."""
    from hermes.local_socket import RemoteAgent, daemon_running

    if daemon_running(rt.settings):
        return RemoteAgent(rt.settings), None
    preload_embeddings(rt)
    require_model(rt)
    from hermes.assembly import build_agent

    return build_agent(rt, exits_after=True)


async def _stream(turn, *, echo: bool) -> None:
    async for chunk in turn:
        if echo:
            sys.stdout.write(printable(chunk))  # a reply may quote memory: never obeyed
            sys.stdout.flush()


def ask(
    ctx: typer.Context,
    question: str = typer.Argument(..., help="What to ask."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Ask once and stream the answer (a one-turn terminal session, kept in the history)."""
    rt = runtime(ctx)
    who = rt.user(user)
    agent, worker = agent_for(rt)

    sessions = rt.memory.sessions
    session = sessions.create(who, "terminal", channel_key=f"{terminal_identity()}:ask")
    turn = agent.turn(who, session.id, question, speaker=rt.settings.display_name(who))

    async def answer_then_learn() -> None:
        await _stream(turn, echo=not as_json)
        if worker is not None:  # the answer is out; now learn from it before the process ends
            await worker.drain(LEARN_TIMEOUT_SECONDS)

    try:
        asyncio.run(answer_then_learn())
    finally:
        sessions.close(who, session.id)
    result = turn.result
    if as_json:
        emit_json(result)
    elif result is not None and result.text and not result.text.endswith("\n"):
        echo("")
    if turn.exception is not None:
        raise turn.exception


# How long `hermes ask` waits, after answering, for the facts of the turn to be learned.
LEARN_TIMEOUT_SECONDS = 60.0

CHAT_HELP = "Type a message. /new starts a new session, /exit (or Ctrl-D) quits."


def chat_lines(ctx: typer.Context, user: str | None) -> None:
    """Line-by-line chat for piped input (one session until /new or /exit)."""
    from hermes.agent.llm import ModelNotConfigured

    rt = runtime(ctx)
    who = rt.user(user)
    agent, worker = agent_for(rt)

    sessions = rt.memory.sessions
    channel = f"{terminal_identity()}:chat"
    session = sessions.open_for(who, "terminal", channel)
    echo(CHAT_HELP, err=True)
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:  # Latin-1 piped in: U+FFFD for the bad bytes, the rest kept
        reconfigure(errors="replace")
    with asyncio.Runner() as runner:
        while True:
            try:
                line = input("> " if sys.stdin.isatty() else "")
            except (EOFError, KeyboardInterrupt):
                break
            text = line.strip()
            if not text:
                continue
            if text in ("/exit", "/quit"):
                break
            if text == "/new":
                sessions.close(who, session.id)
                session = sessions.open_for(who, "terminal", channel)
                echo(f"(new session {session.id})", err=True)
                continue
            turn = agent.turn(who, session.id, text, speaker=rt.settings.display_name(who))
            try:
                runner.run(_stream(turn, echo=True))
            except KeyboardInterrupt:
                echo("\n(interrupted)", err=True)
                continue
            echo("")
            if turn.exception is not None and (
                    turn.exception.exit_code == ModelNotConfigured.exit_code):
                raise turn.exception  # a missing key: nothing later in the chat can work
            if turn.exception is not None:
                # The message is recorded; the provider may come back for the next one.
                echo(f"Error: {turn.exception}", err=True)
        # Leaving ends the session: learn from it and summarise it before the process ends
        # (a summary cut short is written at the next start).
        sessions.close(who, session.id)
        runner.run(_finish(rt, agent, worker, who))


async def _finish(rt: Runtime, agent, worker, user: str) -> None:
    from hermes.agent import summarize
    from hermes.aio import finish_or_cancel
    from hermes.local_socket import RemoteAgent

    if isinstance(agent, RemoteAgent):  # the daemon learns and summarises in its own time
        await agent.left(user)
        return
    summary = asyncio.ensure_future(
        summarize.summarize_pending(rt, agent.background_llm, user))
    await asyncio.gather(worker.drain(LEARN_TIMEOUT_SECONDS) if worker is not None
                         else asyncio.sleep(0),
                         finish_or_cancel([summary], LEARN_TIMEOUT_SECONDS))
