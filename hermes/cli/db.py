"""`hermes db` (the database file) and the top-level `hermes export` / `hermes import`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from hermes.cli import JsonOption, UserOption, given_user, runtime
from hermes.cli.output import console, echo, emit_json
from hermes.memory.sessions.transcripts import not_utf8_note, read_lines
from hermes.memory.transfer import export_pieces, import_user
from hermes.store.check import check_database
from hermes.store.files import atomic_text_file
from hermes.store.maintenance import backup as backup_db
from hermes.store.maintenance import table_stats

SHOWN_ERRORS = 10  # refused lines listed by `hermes import` (--json lists every one)

app = typer.Typer(no_args_is_help=True, help="The database file: where it is, what it holds, "
                  "a consistent backup.")


@app.command()
def path(ctx: typer.Context, as_json: bool = JsonOption) -> None:
    """Print the database file's path (one per home, shared by every user)."""
    db_path = runtime(ctx).settings.db_path
    if as_json:
        emit_json({"path": str(db_path)})
    else:
        echo(str(db_path))


@app.command()
def stats(ctx: typer.Context, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """Row counts of every table (and the user's share of it), and the file size."""
    rt = runtime(ctx)
    who = rt.user(user)
    rows = table_stats(rt.db, who)
    db_path = rt.settings.db_path
    wal = db_path.with_name(db_path.name + "-wal")
    size = db_path.stat().st_size
    wal_size = wal.stat().st_size if wal.exists() else 0
    if as_json:
        emit_json({
            "path": str(db_path), "bytes": size, "wal_bytes": wal_size, "user": who,
            "tables": [{"table": r.table, "rows": r.rows, "user_rows": r.user_rows}
                       for r in rows],
        })
        return
    table = Table(box=None, pad_edge=False, show_edge=False)
    table.add_column("TABLE")
    table.add_column("ROWS", justify="right")
    table.add_column(f"{who.upper()}'S", justify="right")
    for r in rows:
        table.add_row(r.table, f"{r.rows:,}", "" if r.user_rows is None else f"{r.user_rows:,}")
    console.print(table)
    echo(f"{db_path}: {size / 1e6:,.1f} MB (+ {wal_size / 1e6:,.1f} MB write-ahead log)")


@app.command()
def backup(
    ctx: typer.Context,
    target: Annotated[Path, typer.Argument(help="The new file to write (must not exist).")],
    as_json: bool = JsonOption,
) -> None:
    """Write a consistent copy of the whole database, every user's memory (safe while the
    daemon runs)."""
    size = backup_db(runtime(ctx).db, target)
    if as_json:
        emit_json({"path": str(target), "bytes": size})
    else:
        echo(f"Backed up to {target} ({size / 1e6:,.1f} MB).")


@app.command()
def check(
    ctx: typer.Context,
    repair: bool = typer.Option(False, "--repair", help="Rebuild damaged full-text indexes from "
                                "their tables and delete damaged vectors, which are embedded "
                                "again (nothing is lost)."),
    as_json: bool = JsonOption,
) -> None:
    """Check the database file: every page and index, each full-text index, the stored
    vectors' sizes, the migrations.

    Reads the file as it is (nothing is migrated or changed unless --repair). Exit code 2 when
    something is damaged."""
    db_path = runtime(ctx).settings.db_path
    findings = check_database(db_path, repair_fts=repair)
    ok = all(f.ok for f in findings)
    if as_json:
        emit_json({"path": str(db_path), "ok": ok, "checks": [
            {"name": f.name, "ok": f.ok, "detail": f.detail, "repaired": f.repaired}
            for f in findings]})
    else:
        typer.echo(str(db_path))
        for f in findings:
            typer.echo(f"  {'ok  ' if f.ok else 'FAIL'}  {f.name}: {f.detail}")
    if not ok:
        raise typer.Exit(2)


def export(
    ctx: typer.Context,
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Write here instead of stdout.", show_default=False)] = None,
    user: str = UserOption,
) -> None:
    """Export every tier of a user's memory as JSON Lines.

    Basic memory, entities, facts with their history, sessions with their messages; `hermes
    import` reads it back."""
    rt = runtime(ctx)
    who = rt.user(user)
    # Written as it is read (a session's messages one by one): memory stays bounded whatever
    # the size of the home.
    pieces = export_pieces(rt.db, who)
    count, last = 0, ""
    if output is None:
        for piece in pieces:
            sys.stdout.write(piece)
            count, last = count + piece.endswith("\n"), piece
        sys.stdout.flush()
    else:
        # Complete or absent: a full disk or a damaged row part-way leaves no partial export.
        with atomic_text_file(output) as handle:
            for piece in pieces:
                handle.write(piece)
                count, last = count + piece.endswith("\n"), piece
        # Said the way `hermes import` says what it restored: rows by table, from the end
        # record's counts (a session's line carries its messages, so lines are not rows).
        counts = json.loads(last).get("counts", {})
        said = ", ".join(f"{n:,} {kind}" for kind, n in sorted(counts.items())) or "nothing"
        echo(f"Exported for {who!r} to {output}: {said}.", err=True)
    if count <= 2:  # a misspelt --user would make a backup of nothing, and say it worked
        others = [u for u in rt.memory.sessions.users() if u != who]
        known = f" (users with memory here: {', '.join(others)})" if others else ""
        echo(f"Warning: {who!r} has no memory in this home{known}; the export holds no "
             "records.", err=True)


def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                         help="A file written by `hermes export`.")],
    user: str | None = typer.Option(None, "--user", "-u", help="Import as this user (default: "
                                    "the user in the file).", show_default=False,
                                    callback=given_user),
    allow_incomplete: bool = typer.Option(
        False, "--allow-incomplete", help="Import what can be read of a file whose end record "
        "is missing or does not match (cut short, changed, damaged) instead of refusing it."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Check every record and say what "
                                 "would be imported and refused; write nothing."),
    as_json: bool = JsonOption,
) -> None:
    """Restore a `hermes export` file into this home, for a user with no memory here yet.

    An import that stopped part-way (Ctrl-C, a crash) resumes when the same command is run
    again: what it committed is kept and the rest is added; once the file is in, running it
    again changes nothing.

    Every row is written for the importing user; ids are kept where they are free in this home
    and renumbered where not, references inside the file follow. A record that cannot be
    restored (damaged, refused like a normal write, pointing outside the file or at a refused
    record) is skipped and named by its line, the rest is imported, and the exit code is 1.
    Rows are committed in batches, so a large import never holds the database for long. A file
    that is cut short, changed or damaged (its end record is missing or does not match) is
    refused as a whole unless --allow-incomplete."""
    rt = runtime(ctx)
    not_utf8: dict[int, int] = {}  # (both passes read the same lines)
    try:
        report = import_user(rt.db, lambda: read_lines(file, not_utf8=not_utf8), user=user,
                             basic_char_limit=rt.settings.memory.basic_char_limit,
                             allow_unsealed=allow_incomplete,
                             redact_messages=rt.settings.sessions.redact_secrets,
                             dry_run=dry_run, clock=rt.clock)
    except KeyboardInterrupt:
        echo("\nInterrupted: what was imported before is kept; run the same command again to "
             "import the rest.", err=True)
        raise typer.Exit(130) from None
    for warning in report.warnings:
        echo(f"Warning: {warning}.", err=True)
    note = not_utf8_note(file.name, not_utf8)
    if note:
        echo(note, err=True)
    started = f"{report.started_at[:10]} {report.started_at[11:16]} UTC" \
        if report.started_at else ""
    if report.already_imported is not None:
        done = report.already_imported
        if as_json:
            emit_json({"user": report.user, "already_imported": done, "counts": {}})
        else:
            echo(f"Already imported: this file was restored for {report.user!r} on "
                 f"{done[:10]} {done[11:16]} UTC; nothing was changed.")
        return
    if as_json:
        emit_json({"user": report.user, "counts": report.counts, "dry_run": dry_run,
                   "renumbered": report.renumbered, "warnings": report.warnings,
                   "resumed_from_line": report.resumed_from,
                   "errors": [{"line": n, "error": why} for n, why in report.errors]})
    else:
        if report.resumed_from:
            echo(f"Resuming the import of this file for {report.user!r} begun {started}, which "
                 f"stopped after line {report.resumed_from:,}: that part is kept, the rest is "
                 "added.")
        counts = ", ".join(f"{n:,} {kind}" for kind, n in report.counts.items()) or "nothing"
        done = "Would import (--dry-run: nothing was written)" if dry_run else "Imported"
        echo(f"{done} for {report.user!r}: {counts}.")
        if report.renumbered:
            echo(f"{report.renumbered:,} row(s) got new ids: their ids were taken in this "
                 "home.")
        if report.errors:
            echo(f"Refused {len(report.errors):,} line(s):", err=True)
            for number, why in report.errors[:SHOWN_ERRORS]:
                echo(f"  line {number}: {why}", err=True)
            if len(report.errors) > SHOWN_ERRORS:
                echo(f"  ... and {len(report.errors) - SHOWN_ERRORS:,} more (--json lists "
                     "every one)", err=True)
    if report.errors:
        raise typer.Exit(1)
