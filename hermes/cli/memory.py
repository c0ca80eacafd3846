"""`hermes memory`: the basic-memory block (tier 1)."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from hermes.cli import JsonOption, UserOption, ask_daemon, runtime
from hermes.cli.output import echo, emit_json
from hermes.errors import HermesError
from hermes.memory.audience import mark_name, mark_value, who_sees
from hermes.memory.place import Scope

if TYPE_CHECKING:
    from hermes.memory.basic import WriteResult
    from hermes.memory.operations import MemoryOperations

# The memory package is imported when a command works in-process (`_ops`): `memory show`
# answered by the daemon needs none of it.

app = typer.Typer(no_args_is_help=True, help="The basic-memory block injected into every prompt.")


def _ops(ctx: typer.Context) -> MemoryOperations:
    from hermes.memory.operations import MemoryOperations

    return MemoryOperations(runtime(ctx).memory)


def _scope(ctx: typer.Context, user: str | None) -> Scope:
    return Scope(runtime(ctx).user(user))


def _report(result: WriteResult, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "status": result.status,
                "id": result.entry.id if result.entry else None,
                "chars": result.chars,
                "limit": result.limit,
                "message": result.message,
            }
        )
    else:
        echo(result.message)


@app.command()
def show(ctx: typer.Context, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """Show the block exactly as the model sees it, with usage against the cap.

    With a daemon running on the home (`hermes run`) the daemon answers."""
    from hermes.daemon_calls import memory_shown

    shown = ask_daemon(ctx, "memory.show", user)
    if shown is None:
        shown = memory_shown(_ops(ctx), _scope(ctx, user),
                             runtime(ctx).settings.privacy.shared_places)
    if as_json:
        emit_json({key: shown[key] for key in ("entries", "chars", "limit")})
        return
    echo(shown["rendered"])
    # where each entry may be shown, for those that are not simply private
    for entry_id, where in shown["shown_in"]:
        echo(f"  [{entry_id}] shown in {where}")


@app.command()
def add(
    ctx: typer.Context, text: str, user: str = UserOption, as_json: bool = JsonOption
) -> None:
    """Add an entry. Refused when over the cap, or when it looks like a secret or an injection."""
    _report(_ops(ctx).basic_add(_scope(ctx, user), text), as_json)


@app.command()
def replace(
    ctx: typer.Context,
    target: str = typer.Argument(..., help="An entry id, or a unique part of its text."),
    text: str = typer.Argument(..., help="The new text."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Replace an entry (by id or by a unique substring) with new text."""
    _report(_ops(ctx).basic_replace(_scope(ctx, user), target, text), as_json)


@app.command()
def remove(
    ctx: typer.Context,
    target: str = typer.Argument(..., help="An entry id, or a unique part of its text."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Remove an entry (by id or by a unique substring)."""
    _report(_ops(ctx).basic_remove(_scope(ctx, user), target), as_json)


@app.command()
def mark(
    ctx: typer.Context,
    target: str = typer.Argument(..., help="An entry id, or a unique part of its text."),
    to: str = typer.Argument(..., metavar="MARK", help="shareable, private or default."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Decide where an entry may be shown. shareable: in any Discord channel; private: only in
    private places (DMs, the terminal, the web panel, MCP); default: as privacy.shared_places
    says (place_only: private places and the channel it was written in)."""
    rt = runtime(ctx)
    entry = _ops(ctx).basic_mark(_scope(ctx, user), target, mark_value(to))
    if as_json:
        emit_json({"id": entry.id, "text": entry.text, "place": entry.place,
                   "shared": entry.mark})
        return
    echo(f"Entry [{entry.id}] is {mark_name(entry.shared)}: shown in "
         f"{who_sees(entry.place, entry.shared, rt.settings.privacy.shared_places)}.")


EDIT_HEADER = (
    "# One entry per line. These two header lines are ignored.\n"
    "# Save and quit to apply all changes at once; the cap is checked on the result.\n"
)
EDIT_HEADER_LINES = {line.strip() for line in EDIT_HEADER.splitlines()}


@app.command()
def edit(ctx: typer.Context, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """Open $EDITOR on the block and apply the result atomically (the cap is re-checked)."""
    ops, scope = _ops(ctx), _scope(ctx, user)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    before = ops.basic_entries(scope)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "basic-memory.txt"
        path.write_text(EDIT_HEADER + "".join(f"{e.text}\n" for e in before), encoding="utf-8")
        try:
            completed = subprocess.run([*shlex.split(editor), str(path)], check=False)
        except (OSError, ValueError) as exc:  # not found, not executable, unbalanced quotes
            reason = getattr(exc, "strerror", None) or exc
            raise HermesError(f"Cannot start the editor {editor!r} ({reason}); set $EDITOR "
                              "to an editor on your PATH. Nothing was changed.") from None
        if completed.returncode != 0:
            raise HermesError(f"The editor exited with status {completed.returncode}; "
                              "nothing was changed.")
        lines = [
            # An editor that saves Latin-1: U+FFFD for the bad bytes, the rest kept.
            line for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
            # Only our own header lines are comments: an entry may start with "#".
            if line.strip() and line.strip() not in EDIT_HEADER_LINES
        ]
    _report(ops.basic_edit(scope, before, lines), as_json)
