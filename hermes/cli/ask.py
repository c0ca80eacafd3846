"""`hermes ask`: one question from the terminal, answered by streaming; and the line-by-line
chat that `hermes chat` uses when its input is a pipe (on a terminal it is the daemon's REPL).

Both build on the same turn engine as every other front-end. The model layer (litellm) is only
imported when the first model call is made, so `hermes --help` and memory commands stay fast.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sys
from typing import Any

import typer

from hermes.cli import JsonOption, UserOption, runtime
from hermes.cli.output import echo, emit_json
from hermes.config import terminal_identity
from hermes.memory import Memory
from hermes.runtime import Runtime
from hermes.safety.guard import printable

log = logging.getLogger(__name__)

# The model layer, the agent and the extraction worker are imported only for a turn run
# in-process: with a daemon on the home, `hermes ask` needs none of them.


def require_model(rt: Runtime) -> None:
    from hermes.agent.llm import LLM, ModelNotConfigured

    llm = LLM.from_settings(rt.settings)
    if not llm.configured:
        raise ModelNotConfigured(llm.not_configured_message())


def plan_embeddings(rt: Runtime, user: str | None) -> bool:
    """Before the turns of this process: when ``user`` has vectors, start loading the embedding
    model in the background (the agent's modules import and the session is read meanwhile; the
    turn waits only when it embeds). When nothing of theirs was ever embedded (a new user, or a
    history never indexed), the turns search by words only and the newest messages are embedded
    after the reply (:func:`embed_after_reply`): the reply does not wait for the model (~0.25 s
    of CPU, ~85 MB) for the few vectors a search would have made itself, and the next turn has
    them. Returns whether embedding waits until after the reply. ``user`` None (the REPL, a
    session of many turns, maybe several users): the model loads in the background."""
    settings = rt.settings
    if not settings.sessions.embeddings:
        return False
    from hermes.memory.embeddings.embedders import has_vectors

    if user is None or has_vectors(rt.db, user):
        rt.memory.embedders.preload(settings.sessions.embedding_model)
        return False
    rt.settings = settings.model_copy(update={
        "sessions": settings.sessions.model_copy(update={"embeddings": False})})
    built = rt.__dict__.pop("memory", None)
    if built is not None:  # rebuilt with words only, on the same connection
        rt.__dict__["memory"] = Memory(rt.settings, rt.clock, db=built.db)
    return True


def embed_after_reply(rt: Runtime, user: str, model: str) -> None:
    """Embed the user's newest messages (as a search would have) and the facts learned, once
    the reply is out (see :func:`plan_embeddings`). A model that cannot load is one log line,
    as in a search: the reply and the history are kept either way."""
    from hermes.errors import HermesError
    from hermes.memory.sessions.vectors import INLINE_INDEX

    try:
        messages, facts = rt.memory.vectors_to_index(model, keep_file=False)
        messages.index(user, limit=INLINE_INDEX)
        facts.index(user)
    except HermesError as exc:
        log.warning("session search by meaning is off, words only: %s", exc)


def agent_for(rt: Runtime, user: str | None = None) -> tuple[Any, Any, bool]:
    """The daemon's agent over its socket when a daemon runs on this home (it has the model
    loaded and learns after we have gone: no worker here), else an in-process one; and whether
    to call :func:`embed_after_reply` (see :func:`plan_embeddings`)."""
    from hermes.local_socket import RemoteAgent, daemon_running

    if daemon_running(rt.settings):
        return RemoteAgent(rt.settings), None, False
    require_model(rt)  # first: without a model, nothing is loaded only to stop
    later = plan_embeddings(rt, user)
    from hermes.assembly import build_agent

    agent, worker = build_agent(rt, exits_after=True)
    return agent, worker, later


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
    model = rt.settings.sessions.embedding_model
    agent, worker, embed_later = agent_for(rt, who)

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
    if embed_later:
        embed_after_reply(rt, who, model)
    result = turn.result
    if as_json:
        emit_json(result)
    elif result is not None and result.text and not result.text.endswith("\n"):
        echo("")
    if turn.exception is not None:
        raise turn.exception


# How long `hermes ask` waits, after answering, for the facts of the turn to be learned.
LEARN_TIMEOUT_SECONDS = 60.0

CHAT_HELP = ("Type a message. /new starts a new session, /exit (or Ctrl-D) quits; "
             "/help lists the other commands.")

# A line that is a command: "/forget 3", "/help" (not "/usr/bin is full", which is a message).
_COMMAND_LINE = re.compile(r"/[A-Za-z]+(?:\s|$)")


def chat_lines(ctx: typer.Context, user: str | None) -> None:
    """Line-by-line chat for piped input (one session until /new or /exit)."""
    from hermes.agent.llm import ModelNotConfigured

    rt = runtime(ctx)
    who = rt.user(user)
    agent, worker, _ = agent_for(rt)  # many turns: the model loads in the background

    sessions = rt.memory.sessions
    channel = f"{terminal_identity()}:chat"
    session = sessions.open_for(who, "terminal", channel)
    echo(CHAT_HELP, err=True)
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:  # Latin-1 piped in: U+FFFD for the bad bytes, the rest kept
        reconfigure(errors="replace")
    shell = None
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
            if _COMMAND_LINE.match(text):
                # The REPL's own commands, piped: run, never sent to the model as a message.
                if shell is None:
                    shell = _piped_shell(rt.memory, agent, who)
                runner.run(shell.command(text))
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


def _piped_shell(memory: Memory, agent: Any, user: str) -> Any:
    """The REPL's slash commands for piped input: what they say goes to stdout, an error to
    stderr (one line), exactly as the interactive REPL words it."""
    from prompt_toolkit.history import InMemoryHistory

    from hermes.frontends.repl import Repl

    def said(kind: str, text: str) -> None:
        echo(printable(text), err=kind == "error")

    return Repl(memory, agent, user=user, emit=said, history=InMemoryHistory())


async def _finish(rt: Runtime, agent, worker, user: str) -> None:
    from hermes.agent import summarize
    from hermes.aio import finish_or_cancel
    from hermes.local_socket import RemoteAgent

    if isinstance(agent, RemoteAgent):  # the daemon learns and summarises in its own time
        await agent.left(user)
        return
    summary = asyncio.ensure_future(
        summarize.summarize_pending(rt.memory, agent.background_llm, user))
    await asyncio.gather(worker.drain(LEARN_TIMEOUT_SECONDS) if worker is not None
                         else asyncio.sleep(0),
                         finish_or_cancel([summary], LEARN_TIMEOUT_SECONDS))
