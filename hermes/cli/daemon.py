"""`hermes run` (the daemon) and `hermes chat` (the REPL alone)."""

from __future__ import annotations

import asyncio
import sys

import typer

from hermes.cli import UserOption, runtime


def run(
    ctx: typer.Context,
    no_repl: bool = typer.Option(False, "--no-repl",
                                 help="No terminal REPL (for a service); Discord and cron only."),
) -> None:
    """Start Hermes: Discord (when a token is set), the REPL (on a terminal) and cron jobs.

    One process per home. Stops cleanly on Ctrl-D in the REPL, SIGINT or SIGTERM.
    """
    from hermes.daemon import run_daemon

    rt = runtime(ctx)
    repl = not no_repl and sys.stdin.isatty() and sys.stdout.isatty()
    run_daemon(rt, interactive=repl)


def chat(ctx: typer.Context, user: str = UserOption) -> None:
    """Talk to Hermes in the terminal: the REPL alone (no Discord, no cron).

    With input from a pipe instead of a terminal, it reads one message per line.
    """
    from hermes.cli.ask import agent_for, chat_lines

    rt = runtime(ctx)
    if not sys.stdin.isatty():
        chat_lines(ctx, user)
        return
    from hermes.frontends.repl import Repl

    async def main() -> None:
        from prompt_toolkit.patch_stdout import patch_stdout

        from hermes.aio import finish_or_cancel

        agent, worker, _ = agent_for(rt)  # the daemon's, over its socket, when one runs
        repl = Repl(rt.memory, agent, user=rt.user(user) if user else None)
        repl.learn_from(worker)
        # A session left by an earlier chat that exited before its summary was written.
        repl.summarize_in_background()
        with patch_stdout(raw=True):
            await repl.run()
        # Leaving ended the session: learn from it and summarise it before the process ends.
        await asyncio.gather(worker.drain(30) if worker is not None else asyncio.sleep(0),
                             finish_or_cancel(repl.background, 30))

    asyncio.run(main())
