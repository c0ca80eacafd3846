"""The ``hermes`` command line. Every command's docstring is its help text."""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
from pathlib import Path

import click
import typer
from typer.core import TyperGroup

from hermes.config import Settings, load_settings
from hermes.errors import ConfigError, HermesError
from hermes.runtime import Runtime
from hermes.safe_text import scrub_arg
from hermes.store.db import DatabaseBusy
from hermes.store.failures import storage_problem

log = logging.getLogger(__name__)


class HermesGroup(TyperGroup):
    """Turns a HermesError anywhere below into one line on stderr and its exit code.

    A damaged database, a full disk or an unwritable file (sqlite3 and OS errors that
    :func:`hermes.store.failures.storage_problem` recognises) become one too; any other
    exception is a bug and keeps its traceback.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Arguments that are not UTF-8 (a Latin-1 file name, `$'do\xffcker'`) arrive as lone
        # surrogates, which SQLite and the terminal refuse: U+FFFD instead, the rest kept.
        return super().parse_args(ctx, [scrub_arg(a) for a in args])

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except HermesError as exc:
            _fail(ctx, exc)
        except (sqlite3.DatabaseError, OSError) as exc:
            problem = storage_problem(exc, _db_path(ctx))
            if problem is None and isinstance(exc, sqlite3.OperationalError) \
                    and "locked" in str(exc):
                # A write outside write_transaction found the lock held past the timeout.
                problem = DatabaseBusy("The database is locked by another Hermes process; "
                                       "nothing was written. Try again in a moment.")
            if problem is None:
                raise
            log.debug("storage failure shown as one line", exc_info=exc)
            _fail(ctx, problem)
        except Exception as exc:
            # `hermes facts search -x`: text that starts with "-" reads as an option. (Typer
            # vendors its own click, so the class is matched by name.)
            name = getattr(exc, "option_name", None)
            if type(exc).__name__ == "NoSuchOption" and isinstance(name, str) \
                    and name.startswith("-") and not name.startswith("--"):
                where = getattr(getattr(exc, "ctx", None), "command_path", "hermes ...")
                exc.message += (f". To pass text that starts with '-', put -- before it: "
                                f"`{where} -- {name}`")
            raise


def _fail(ctx: click.Context, exc: HermesError) -> None:
    click.echo(f"Error: {exc}", err=True)
    ctx.exit(exc.exit_code)


def _db_path(ctx: click.Context) -> Path:
    obj = ctx.find_root().obj
    if isinstance(obj, Runtime):
        return obj.settings.db_path
    return Path("hermes.db")


app = typer.Typer(
    cls=HermesGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Hermes: a personal assistant that never starts a conversation with amnesia.",
)


@app.callback()
def root(
    ctx: typer.Context,
    home: Path | None = typer.Option(
        None, "--home", help="Directory for all state (database, context files, history). "
        "Overrides HERMES_HOME and the config's `home`.", show_default=False
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Config file (default: $HERMES_CONFIG, $HERMES_HOME/config.yaml, "
        "./config.yaml).", show_default=False
    ),
) -> None:
    try:
        settings = load_settings(config_path=config, home=home)
    except ConfigError as exc:
        if ctx.invoked_subcommand != "doctor":
            raise
        # The doctor reports a broken config and checks the rest with the defaults.
        ctx.meta["config_problem"] = exc
        settings = Settings(home=str(home) if home else os.environ.get("HERMES_HOME"))
    ctx.meta["config_path"] = config
    ctx.obj = Runtime(settings)
    ctx.call_on_close(ctx.obj.close)


def runtime(ctx: typer.Context) -> Runtime:
    obj = ctx.find_root().obj
    assert isinstance(obj, Runtime)
    return obj


UserOption = typer.Option(
    None, "--user", "-u", help="The Hermes user whose memory this acts on (default: owner).",
    show_default=False,
)
JsonOption = typer.Option(False, "--json", help="Print one JSON document on stdout.")


def command_of(argv: list[str]) -> str | None:
    """The command a ``hermes`` command line names (the global options and their values
    skipped)."""
    args = iter(argv)
    for arg in args:
        if arg in ("--home", "--config"):
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def _register_mcp_only() -> None:
    from hermes.cli import mcp

    app.command("mcp")(mcp.mcp)


def _register() -> None:
    from hermes.cli import (
        ask,
        context,
        cron,
        daemon,
        db,
        doctor,
        facts,
        learn,
        mcp,
        memory,
        sessions,
        stats,
        web,
    )

    app.add_typer(memory.app, name="memory")
    app.add_typer(facts.app, name="facts")
    app.add_typer(sessions.app, name="sessions")
    app.add_typer(context.app, name="context")
    app.add_typer(cron.app, name="cron")
    app.add_typer(db.app, name="db")
    app.add_typer(web.app, name="web")
    app.add_typer(learn.app, name="learn")
    app.command("export")(db.export)
    app.command("import")(db.import_)
    app.command("ask")(ask.ask)
    app.command("stats")(stats.stats)
    app.command("doctor")(doctor.doctor)
    # The daemon's `chat` is the full prompt-toolkit REPL; it replaces the minimal loop.
    app.command("run")(daemon.run)
    app.command("chat")(daemon.chat)
    app.command("mcp")(mcp.mcp)


# `hermes mcp` is started by an MCP client that waits for its `initialize` answer: launched as
# the `hermes` script for that command, only that command is registered, so the other commands'
# imports (every store, the secret detector) stay out of its start-up.
if Path(sys.argv[0]).name == "hermes" and command_of(sys.argv[1:]) == "mcp":
    _register_mcp_only()
else:
    _register()


def main() -> None:
    # Input that is not UTF-8 (Latin-1 piped into `hermes chat`) and output the terminal cannot
    # encode are replaced, never a UnicodeError that loses the rest.
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    app()
