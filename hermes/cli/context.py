"""`hermes context`: the cross-thread context file read at the start of every new session."""

from __future__ import annotations

import asyncio

import typer

from hermes.cli import JsonOption, UserOption, runtime
from hermes.cli.output import echo, emit_json
from hermes.errors import NotFound
from hermes.memory.operations import MemoryOperations, Scope

app = typer.Typer(no_args_is_help=True,
                  help="The cross-thread context file: recent activity across every channel.")


@app.command()
def refresh(ctx: typer.Context, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """Rewrite the context file from recent sessions, open items and new facts.

    Uses the background model when one is configured; otherwise (or if it fails) a plain
    version built from stored titles, summaries and facts.
    """
    from hermes.agent.llm import LLM
    from hermes.memory import context

    rt = runtime(ctx)
    who = rt.user(user)
    llm = LLM.from_settings(rt.settings, background=True)
    llm.record_usage(rt.db, rt.clock)
    text = asyncio.run(context.refresh(rt.memory, who, llm if llm.configured else None))
    path = context.path_for(rt, who)
    if as_json:
        emit_json({"user": who, "path": str(path), "chars": len(text), "text": text})
        return
    echo(f"Wrote {path} ({len(text):,}/{rt.settings.context.max_chars:,} chars).")


@app.command()
def show(ctx: typer.Context, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """Print the context file as the model sees it on a new session's first turn."""
    from hermes.memory import context

    rt = runtime(ctx)
    who = rt.user(user)
    text = MemoryOperations(rt.memory).context(Scope(who))
    if text is None:
        raise NotFound(f"No context file for {who!r} yet; run `hermes context refresh`.")
    if as_json:
        emit_json({"user": who, "path": str(context.path_for(rt, who)), "chars": len(text),
                   "text": text})
        return
    echo(text.rstrip("\n"))
