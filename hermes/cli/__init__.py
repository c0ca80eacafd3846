"""The ``hermes`` command line. Every command's docstring is its help text."""

from __future__ import annotations

import logging
import os
import shlex
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
import typer.main
from typer.core import TyperGroup

from hermes.errors import ConfigError, HermesError, StorageError
from hermes.home import PRIVATE_UMASK
from hermes.safe_text import scrub_arg
from hermes.safety.guard import printable

if TYPE_CHECKING:
    # typer runs on the click it vendors (typer._click), not on the click package
    from typer import _click as click
    from typer._click.exceptions import NoSuchOption

    from hermes.runtime import Runtime

# The settings (pydantic), the Runtime and the store (sqlite-utils) are imported when a command
# first needs them (:func:`runtime`): a search the daemon answers never does.

log = logging.getLogger(__name__)


class HermesGroup(TyperGroup):
    """Turns a HermesError anywhere below into one line on stderr and its exit code.

    A damaged database, a full disk or an unwritable file (sqlite3 and OS errors that
    :func:`hermes.store.failures.storage_problem` recognises) become one too; any other
    exception is a bug and keeps its traceback.
    """

    # Plugins' commands (the register_commands hook) are loaded only for a name that is no
    # built-in command, or for the command list: `hermes memory show` loads no plugin.
    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands()
        return [*super().list_commands(ctx), *(n for n in COMMANDS if n not in self.commands)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in COMMANDS:
            command = load_command(cmd_name)
            self.add_command(command, cmd_name)
        if command is None and self._load_plugin_commands():
            command = super().get_command(ctx, cmd_name)
        return command

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        # Arguments that are not UTF-8 (a Latin-1 file name, `$'do\xffcker'`) arrive as lone
        # surrogates, which SQLite and the terminal refuse: U+FFFD instead, the rest kept.
        return super().parse_args(ctx, [scrub_arg(a) for a in args])

    def _load_plugin_commands(self) -> bool:
        if getattr(self, "_plugin_commands", False):
            return False
        self._plugin_commands = True
        from hermes import plugins

        loaded = plugins.loaded()

        # Each plugin gets a Typer app, the way Hermes's own commands are written
        # (@cli.command(), cli.add_typer); what it adds joins this group. A plugin whose hook
        # raises adds nothing and is named once on stderr; the other commands stay.
        for plugin, register_commands in loaded.hook_impls("register_commands"):
            with loaded.guarded(plugin, "register_commands"):
                extra = typer.Typer()
                register_commands(cli=extra)
                if extra.registered_commands or extra.registered_groups:
                    for name, command in typer.main.get_group(extra).commands.items():
                        if name not in self.commands and name not in COMMANDS:
                            self.add_command(command, name)  # the built-ins keep theirs
        return True

    def invoke(self, ctx: click.Context) -> Any:
        # The words as typed, before the sub-command consumes them (for the '-' hint below).
        typed = [*getattr(ctx, "_protected_args", getattr(ctx, "protected_args", [])), *ctx.args]
        try:
            return super().invoke(ctx)
        except HermesError as exc:
            _fail(ctx, exc)
        except (sqlite3.DatabaseError, OSError) as exc:
            from hermes.store.db import DatabaseBusy
            from hermes.store.failures import storage_problem

            problem: HermesError | None = storage_problem(exc, _db_path(ctx))
            if problem is None and isinstance(exc, sqlite3.OperationalError) \
                    and "locked" in str(exc):
                # A write outside write_transaction found the lock held past the timeout.
                problem = DatabaseBusy("The database is locked by another Hermes process; "
                                       "nothing was written. Try again in a moment.")
            if problem is None:
                raise
            log.debug("storage failure shown as one line", exc_info=exc)
            _fail(ctx, problem)
        except MemoryError as exc:
            # SQLite reports a garbled length in a damaged index as out of memory (SQLITE_NOMEM).
            log.debug("out of memory shown as one line", exc_info=exc)
            _fail(ctx, StorageError(
                f"Ran out of memory reading {_db_path(ctx)}; a damaged full-text index does this: "
                "`hermes db check --repair` rebuilds it (keep a copy first: `hermes db backup`)."))
        except Exception as exc:
            # `hermes facts search -x`: text that starts with "-" reads as an option. (Typer
            # vendors its own click, so the class is matched by name.)
            name = getattr(exc, "option_name", None)
            if type(exc).__name__ == "NoSuchOption" and isinstance(name, str) \
                    and name.startswith("-") and not name.startswith("--"):
                where = getattr(getattr(exc, "ctx", None), "command_path", "hermes ...")
                # Click names only the first short option of '-Vaultwarden*' ('-V'): quote
                # the whole word as it was typed.
                word = next((w for w in typed if w.startswith(name) and w != "--"), name)
                shown = shlex.quote(word)
                cast("NoSuchOption", exc).message += (
                    f". To pass text that starts with '-', put -- before it: `{where} -- {shown}`")
            raise


def _fail(ctx: click.Context, exc: HermesError) -> None:
    typer.echo(printable(f"Error: {exc}"), err=True)  # an error may quote memory
    ctx.exit(exc.exit_code)


def _db_path(ctx: click.Context) -> Path:
    obj = ctx.find_root().obj
    if obj is not None:
        return cast("Runtime", obj).settings.db_path
    return Path("hermes.db")


app = typer.Typer(
    cls=HermesGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Hermes: a personal assistant that never starts a conversation with amnesia.",
)


def show_version(value: bool) -> None:
    if value:
        from hermes import __version__

        typer.echo(f"hermes {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", help="Print Hermes's version and exit.",
                                 callback=show_version, is_eager=True),
    home: Path | None = typer.Option(
        None, "--home", help="Directory for all state (database, context files, history). "
        "Overrides HERMES_HOME and the config's `home`.", show_default=False
    ),
    config: Path | None = typer.Option(
        None, "--config", help="Config file (default: $HERMES_CONFIG, the home's config.yaml, "
        "the clone's config.yaml when run from a clone; never the current folder's).",
        show_default=False
    ),
) -> None:
    ctx.meta["config_path"] = config
    ctx.meta["home"] = home
    # Everything Hermes writes (the database and its -wal/-shm, logs, history, outbox files,
    # backups, caches) is its owner's alone, whatever the umask it was started with.
    umask = os.umask(PRIVATE_UMASK)
    ctx.call_on_close(lambda: os.umask(umask))
    if ctx.invoked_subcommand not in SETTINGS_WHEN_NEEDED:
        _open(ctx)


# Commands whose settings are loaded when the command first needs them (`runtime(ctx)`), not
# before it runs: those the daemon may answer, which then need only its socket
# (:func:`ask_daemon`). Their other commands call runtime(ctx) first, so a broken config
# still stops them with its one line.
SETTINGS_WHEN_NEEDED = frozenset({"facts", "sessions", "memory"})


def _open(ctx: click.Context) -> Runtime:
    """Load the settings and make the command's Runtime, closed with the command."""
    from hermes.config import Settings, load_settings
    from hermes.logs import log_to_file

    config, home = ctx.meta["config_path"], ctx.meta["home"]
    try:
        settings = load_settings(config_path=config, home=home)
    except ConfigError as exc:
        if ctx.invoked_subcommand != "doctor":
            raise
        # The doctor reports a broken config and checks the rest with the defaults.
        ctx.meta["config_problem"] = exc
        settings = Settings(home=str(home) if home else os.environ.get("HERMES_HOME"))
    if not ctx.meta.get("home_said"):
        _say_about_the_home(ctx, settings.notes, settings.home_named_now, settings.home_path)
    rt = cast("Runtime", sys.modules[__name__].Runtime(settings))  # see __getattr__
    ctx.obj = rt
    ctx.call_on_close(rt.close)
    # Log lines (retries, background failures) go to <home>/hermes.log, not around the output.
    ctx.call_on_close(log_to_file(rt.settings))
    return rt


def __getattr__(name: str) -> Any:
    # hermes.cli.Runtime is the class the commands' Runtime is made of (the tests' `cli` fixture
    # puts its clock in it), imported only when a command needs one.
    if name == "Runtime":
        from hermes.runtime import Runtime

        return Runtime
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _say_about_the_home(ctx: click.Context, notes: list[str], named_now: bool,
                        home: Path) -> None:
    """What loading the settings found to say (on stderr), once per command."""
    ctx.meta["home_said"] = True
    for note in notes:
        typer.echo(note, err=True)
    if not named_now and ctx.invoked_subcommand != "doctor":
        _say_where_the_home_is(home)


def _say_where_the_home_is(home: Path) -> None:
    """On first use of a home nobody named for this command (the default, or a config file's
    ``home``), where it is (it is created by the first command that writes); and, while Hermes
    memory sits in ./data of the current folder (where Hermes kept it before it had one home),
    how to keep it. Both on stderr. (`hermes doctor` says both.)"""
    from hermes.home import old_home_note

    try:
        note = old_home_note(home, Path.cwd())
    except OSError:  # the current folder was removed under us
        note = None
    if note:
        typer.echo(note, err=True)
    elif not home.exists():
        typer.echo(f"Hermes keeps its memory in {home} (HERMES_HOME or --home to put it "
                   "elsewhere; `hermes doctor` shows it).", err=True)


def runtime(ctx: typer.Context) -> Runtime:
    root = ctx.find_root()
    if root.obj is None:
        return _open(root)
    return cast("Runtime", root.obj)


def ask_daemon(ctx: typer.Context, what: str, user: str | None, **args: Any) -> Any | None:
    """The answer of the daemon running on the home to the call ``what`` (hermes/daemon_calls.py)
    for ``user`` (--user, else the configured default); None when none runs: the command then
    does the work itself."""
    from hermes.daemon_calls import call
    from hermes.local_socket import SOCKET_NAME, socket_path

    root = ctx.find_root()
    if root.obj is None:
        # The config as written names the home and the default user: enough to reach the
        # daemon without validating the settings (pydantic: ~0.3 s of CPU). No daemon there:
        # the command loads them below, as it always did.
        from hermes.config_file import home_and_user, read_config

        raw = read_config(root.meta["config_path"], root.meta["home"])
        found = home_and_user(raw)
        if found is not None:
            home, default_user = found
            _say_about_the_home(root, raw.notes, raw.home_named_now, home)
            return call(home / SOCKET_NAME, what, user or default_user, **args)
    rt = runtime(ctx)
    return call(socket_path(rt.settings), what, rt.user(user), **args)


def given_user(value: str | None) -> str | None:
    """``--user ""`` is a mistake (an unset shell variable), never "the default user"."""
    if value is not None and not value.strip():
        raise HermesError(f"--user {value!r}: a user name cannot be empty; leave --user out to "
                          "act for the default user (users.default).")
    return value


UserOption = typer.Option(
    None, "--user", "-u", help="The Hermes user whose memory this acts on (default: owner).",
    show_default=False, callback=given_user,
)
JsonOption = typer.Option(False, "--json", help="Print one JSON document on stdout.")


# Every sub-command, imported only when it runs (or for --help): `hermes memory show` must not
# pay for the model layer, the scheduler or the web panel. name -> (module, attribute): a Typer
# sub-app, or a function that is one command.
COMMANDS: dict[str, tuple[str, str]] = {
    "memory": ("hermes.cli.memory", "app"),
    "facts": ("hermes.cli.facts", "app"),
    "sessions": ("hermes.cli.sessions", "app"),
    "context": ("hermes.cli.context", "app"),
    "cron": ("hermes.cli.cron", "app"),
    "db": ("hermes.cli.db", "app"),
    "web": ("hermes.cli.web", "app"),
    "learn": ("hermes.cli.learn", "app"),
    "export": ("hermes.cli.db", "export"),
    "import": ("hermes.cli.db", "import_"),
    "ask": ("hermes.cli.ask", "ask"),
    "stats": ("hermes.cli.stats", "stats"),
    "doctor": ("hermes.cli.doctor", "doctor"),
    # The daemon's `chat` is the full prompt-toolkit REPL; piped input gets the minimal loop.
    "run": ("hermes.cli.daemon", "run"),
    "chat": ("hermes.cli.daemon", "chat"),
    "mcp": ("hermes.cli.mcp", "mcp"),
    "plugins": ("hermes.cli.plugins", "plugins"),
    "tools": ("hermes.cli.tools", "app"),
}


def load_command(name: str) -> click.Command:
    """The click command for ``name``, importing its module now."""
    import importlib

    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer(add_completion=False)
    if isinstance(target, typer.Typer):
        holder.add_typer(target, name=name)
        command = typer.main.get_command(holder).commands[name]  # type: ignore[attr-defined]
    else:
        holder.command(name)(target)
        command = typer.main.get_command(holder)
    return one_line_summaries(command)


def one_line_summaries(command: click.Command) -> click.Command:
    """Each command's summary in a command list is its help's first paragraph on one line:
    typer keeps the docstring's line breaks there, so a wrapped sentence broke mid-line."""
    if command.short_help is None and command.help:
        command.short_help = " ".join(command.help.split("\n\n")[0].split())
    for sub in getattr(command, "commands", {}).values():
        one_line_summaries(sub)
    return command


def main() -> None:
    # Input that is not UTF-8 (Latin-1 piped into `hermes chat`) and output the terminal cannot
    # encode are replaced, never a UnicodeError that loses the rest.
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="replace")
    app()
