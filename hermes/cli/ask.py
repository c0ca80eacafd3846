"""`hermes ask`: one question from the terminal, answered by streaming.

It builds on the same turn engine as every other front-end (`hermes chat` is the daemon's
REPL). The model layer (litellm) is only imported when the first model call is made, so
`hermes --help` and the memory commands stay fast.
"""

from __future__ import annotations

import asyncio
import sys

import typer

from hermes.agent.llm import LLM, ModelNotConfigured
from hermes.cli import JsonOption, UserOption, runtime
from hermes.cli.output import emit_json
from hermes.config import terminal_identity
from hermes.runtime import Runtime


def make_agent(rt: Runtime):  # -> hermes.agent.turn.Agent
    """The Agent the terminal commands use (the place to attach hooks for the terminal).

    The fast lane stores an explicit "remember that ..." before the reply. Extraction after the
    reply is left to the daemon: a one-shot process would exit before it finished.
    """
    from hermes.agent.turn import Agent
    from hermes.learn.fastlane import FastLane

    agent = Agent(rt)
    agent.before_reply.append(FastLane(rt, agent.facts))
    return agent


def _require_model(rt: Runtime) -> None:
    llm = LLM.from_settings(rt.settings)
    if not llm.configured:
        raise ModelNotConfigured(llm.not_configured_message())


async def _stream(turn, *, echo: bool) -> None:
    async for chunk in turn:
        if echo:
            sys.stdout.write(chunk)
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
    _require_model(rt)
    from hermes.memory.sessions import SessionStore

    sessions = SessionStore.from_runtime(rt)
    session = sessions.create(who, "terminal", channel_key=f"{terminal_identity()}:ask")
    agent = make_agent(rt)
    turn = agent.turn(who, session.id, question)
    try:
        asyncio.run(_stream(turn, echo=not as_json))
    finally:
        sessions.close(who, session.id)
    result = turn.result
    if as_json:
        emit_json(result)
    elif result is not None and result.text and not result.text.endswith("\n"):
        typer.echo("")
    if turn.exception is not None:
        raise turn.exception
