"""`hermes sessions`: browse, search, read and import past conversations (tier 3)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from hermes.cli import JsonOption, UserOption, ask_daemon, runtime
from hermes.cli.options import (
    BudgetOption,
    DryRunOption,
    RateOption,
    SinceOption,
    SourceOption,
    YesOption,
    estimate_lines,
    known_source,
    parse_since,
    session_sources,
)
from hermes.cli.output import console, echo, emit_json, err_console, literal
from hermes.errors import HermesError
from hermes.memory.place import Scope
from hermes.store.fts import brief, build_match

if TYPE_CHECKING:
    from hermes.memory.operations import MemoryOperations
    from hermes.memory.sessions.records import Message, SearchHit
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.transcripts import ImportReport
    from hermes.runtime import Runtime

# The memory package and rich's progress bars are imported where a command uses them, not
# with this module: a search the daemon answers needs neither.

app = typer.Typer(no_args_is_help=True, help="Past conversations: browse, search, read, import.")

# Files above this size get a progress bar on stderr while they import.
PROGRESS_BYTES = 1_000_000
# Exports with at least this many conversations get one too.
PROGRESS_CONVERSATIONS = 50


def _store(ctx: typer.Context) -> SessionStore:
    return runtime(ctx).memory.sessions


def _ops(ctx: typer.Context) -> MemoryOperations:
    from hermes.memory.operations import MemoryOperations

    return MemoryOperations(runtime(ctx).memory)


def short_time(ts: str | None) -> str:
    return "" if not ts else ts[:16].replace("T", " ")


def _highlight(snippet: str) -> str:
    """The snippet's ** markers as bold, everything else literal (the line's own asterisks
    as written: escaped in the snippet, hermes.memory.sessions.bm25.HIGHLIGHT)."""
    from hermes.memory.sessions.bm25 import snippet_parts

    return "".join(f"[bold]{literal(text)}[/bold]" if marked else literal(text)
                   for text, marked in snippet_parts(snippet))


def _message_line(message: Message, *, mark: bool = False) -> str:
    who = message.role + (f" ({message.speaker})" if message.speaker else "")
    text = " ".join(message.content.split())
    prefix = "[bold]>[/bold]" if mark else " "
    when = short_time(message.created_at)
    return f"{prefix} [dim]\\[{message.id}] {when}[/dim] {literal(who)}: {literal(text)}"


@app.command("list")
def list_(
    ctx: typer.Context,
    source: str | None = typer.Option(None, "--source", help="Only this source: discord, "
                                      "terminal, cron, import, web.", show_default=False),
    since: str | None = typer.Option(None, "--since", help="Only sessions active since: 7d, "
                                     "12h, 30m, 2w or a date.", show_default=False),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="How many sessions."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Recent sessions, newest activity first (no model call)."""
    rt = runtime(ctx)
    since_ts = parse_since(since, rt.clock)
    sessions = _ops(ctx).sessions_list(Scope(rt.user(user)), source=known_source(source),
                                       since=since_ts, limit=limit)
    if as_json:
        emit_json([s.to_json() for s in sessions])
        return
    if not sessions:
        echo("No sessions.")
        return
    header = ("ID", "SOURCE", "STARTED", "LAST ACTIVE", "MSGS")
    echo("{:>5}  {:<8}  {:<16}  {:<16}  {:>5}  TITLE".format(*header))
    for s in sessions:
        echo(f"{s.id:>5}  {s.source:<8}  {short_time(s.started_at):<16}  "
                   f"{short_time(s.last_active_at):<16}  {s.message_count:>5}  {s.display_title}")


@app.command()
def search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="Words, \"a phrase\", an email, a path, a version..."),
    limit: int = typer.Option(5, "--limit", "-n", min=1, help="How many sessions."),
    context: int = typer.Option(2, "--context", "-C", min=0,
                                help="Messages shown either side of the match."),
    source: str | None = typer.Option(None, "--source", help="Only this source.",
                                      show_default=False),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Search every past conversation (no model call).

    Best session first, with its summary and the matching message in context. All words
    first; when that finds fewer than --limit, any-word matches fill the rest below them; cron
    sessions rank below conversations. With a daemon running on the home (`hermes run`) the
    daemon answers: it has the embedding model loaded."""
    from hermes.daemon_calls import hits_from

    wanted = known_source(source)
    remote = ask_daemon(ctx, "sessions.search", user, query=query, limit=limit,
                        context=context, source=wanted)
    hits = hits_from(remote) if remote is not None else _ops(ctx).sessions_search(
        Scope(runtime(ctx).user(user)), query, limit=limit, context=context, source=wanted)
    for note in build_match(query).notes:  # a query cut to its bounds says so
        echo(f"Note: {note}.", err=True)
    if as_json:
        emit_json([h.to_json() for h in hits])
        return
    if not hits:
        echo(f"No session mentions {brief(query)!r}.")
        return
    for number, hit in enumerate(hits):
        s = hit.session
        if number:
            console.print()
        console.print(
            f"[bold]#{s.id}[/bold] {s.source} · {short_time(s.started_at)} · "
            f"{literal(s.display_title)}  [dim](score {hit.score:.2f}{_how(hit)})[/dim]"
        )
        for fact_id, text in hit.learned:  # why it was found: what Hermes learned there
            text = brief(" ".join(text.split()), 160)
            console.print(f"  Learned here: fact #{fact_id} {literal(text)}")
        if s.summary:
            console.print(f"  Summary: {literal(' '.join(s.summary.split()))}")
        console.print(f"  Match: {_highlight(hit.snippet)}")
        for message in hit.context:
            mark = hit.match is not None and message.id == hit.match.id
            console.print("  " + _message_line(message, mark=mark))


def _how(hit: SearchHit) -> str:
    """What the hit matched, after its score (``SearchHit.found_by``): ", words" (all of them),
    ", any word", ", by meaning" (no word of the query, close in meaning), ", words, by
    meaning" / ", any word, by meaning", ", through a fact" (lifted by a fact learned there)."""
    return ", " + hit.found_by


@app.command()
def show(
    ctx: typer.Context,
    session_id: int = typer.Argument(..., help="The session id (from list or search)."),
    around: int | None = typer.Option(None, "--around", help="Only a window around this "
                                      "message id.", show_default=False),
    context: int = typer.Option(5, "--context", "-C", min=0,
                                help="With --around: messages either side."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Read a whole session, or a window of it."""
    ops, scope = _ops(ctx), Scope(runtime(ctx).user(user))
    session = ops.session(scope, session_id)
    messages = ops.session_messages(scope, session_id, around=around, context=context)
    if as_json:
        emit_json({**session.to_json(), "messages": [m.to_json() for m in messages]})
        return
    ended = f", ended {short_time(session.ended_at)}" if session.ended_at else ", open"
    console.print(f"[bold]#{session.id}[/bold] {session.source} · {literal(session.display_title)}"
                  f"  [dim]({session.message_count} messages, started "
                  f"{short_time(session.started_at)}{ended})[/dim]")
    if session.summary:
        console.print(f"Summary: {literal(session.summary)}")
    for message in messages:
        console.print(_message_line(message, mark=message.id == around))


@app.command()
def index(
    ctx: typer.Context,
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Embed every message and fact that has no vector yet (hybrid recall,
    sessions.embeddings).

    `hermes run` does this in the background (and extraction embeds the facts it writes); a
    search embeds only the newest few messages itself, and never a fact."""
    rt = runtime(ctx)
    if not rt.settings.sessions.embeddings:
        raise HermesError("Hybrid recall is off (sessions.embeddings: false): there is nothing "
                          "to index. Turn it on in config.yaml first.")
    # The model itself, not the search's words-only fallback: a missing extra is an error here.
    vectors, fact_vectors = rt.memory.vectors_to_index()  # a long history: its file too
    who = rt.user(user)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    # A bar on stderr for a backlog; none for --json or when stderr is not a terminal.
    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), console=err_console, transient=True,
        disable=as_json or not err_console.is_terminal,
    ) as progress:
        def bar(description: str) -> Callable[[int, int], None]:
            task = progress.add_task(description, total=None)
            return lambda done, total: progress.update(task, completed=done, total=total)

        facts = fact_vectors.index(who, progress=bar("embedding facts"))
        done = vectors.index(who, progress=bar("embedding messages"))
    if as_json:
        emit_json({"user": who, "model": vectors.embedder.model_id, "embedded": done,
                   "facts_embedded": facts})
        return
    echo(f"Embedded {done} message(s) and {facts} fact(s) of {who} with "
         f"{vectors.embedder.model_id}.")


@app.command("import")
def import_(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True,
                                         help="JSON Lines (one session per line), or a ChatGPT "
                                         "or Claude export: conversations.json or its zip.")],
    fmt: Annotated[str, typer.Option("--format", "-f", help="jsonl, chatgpt or claude.")
                   ] = "jsonl",
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Import past conversations: transcripts (JSON Lines) or a ChatGPT or Claude export.

    JSON Lines, one session per line: {"source", "title"?, "started_at", "external_id"?,
    "messages": [{"role", "speaker"?, "content", "created_at", "external_id"?}]}.
    --format chatgpt|claude reads the data export those services send (conversations.json, or
    the zip as downloaded): each conversation becomes a session with source import, its title,
    times and messages (ChatGPT: the branch you last saw). Re-importing adds nothing. A malformed
    line or conversation is reported by its position and skipped, the rest is imported, and
    the exit code is 1. An interrupted import keeps what it committed (batches of whole
    sessions); the same command again imports the rest, skipping what is there."""
    try:
        _import(ctx, file, fmt, user, as_json)
    except KeyboardInterrupt:
        echo("\nInterrupted: what was imported before is kept; run the same command again to "
             "import the rest (what is there is skipped).", err=True)
        raise typer.Exit(130) from None


def _import(ctx: typer.Context, file: Path, fmt: str, user: str, as_json: bool) -> None:
    rt = runtime(ctx)
    store = _store(ctx)
    fmt = fmt.strip().lower()
    if fmt != "jsonl":
        _import_export(rt, store, file, fmt, rt.user(user), as_json)
        return
    if _looks_like_export(file):
        which = _export_named_in(file)
        raise HermesError(f"{file.name} looks like a {which or 'ChatGPT or Claude'} export, not "
                          "JSON Lines: add " + (f"--format {which.lower()}." if which else
                                                "--format chatgpt or --format claude."))
    if _is_hermes_export(file):
        raise _an_export_file(file, "transcripts")
    from hermes.memory.sessions.transcripts import import_sessions, not_utf8_note, read_lines

    not_utf8: dict[int, int] = {}
    size = file.stat().st_size
    if size >= PROGRESS_BYTES:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

        with Progress(
            "[progress.description]{task.description}", BarColumn(), DownloadColumn(),
            TimeRemainingColumn(), console=err_console, transient=True,
        ) as progress:
            task = progress.add_task(f"importing {file.name}", total=size)
            lines = read_lines(file, on_bytes=lambda n: progress.advance(task, n),
                               not_utf8=not_utf8)
            report = import_sessions(store, rt.user(user), lines, sources=session_sources())
    else:
        report = import_sessions(store, rt.user(user), read_lines(file, not_utf8=not_utf8),
                                 sources=session_sources())
    _finish_import(report, as_json, not_utf8_note(file.name, not_utf8))


def _looks_like_export(file: Path) -> bool:
    """A zip (whole or cut short), or a file whose JSON starts with a list (JSON Lines holds one
    object a line)."""
    import zipfile

    from hermes.memory.sessions.chat_exports import zip_start

    if zipfile.is_zipfile(file) or zip_start(file):
        return True
    with file.open("rb") as handle:
        head = handle.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def _export_named_in(file: Path) -> str | None:
    """ChatGPT or Claude, when the start of a (not zipped) export names only that one's key."""
    import zipfile

    if zipfile.is_zipfile(file):
        return None
    with file.open("rb") as handle:
        head = handle.read(65536)
    found = [name for name, key in (("ChatGPT", b'"mapping"'), ("Claude", b'"chat_messages"'))
             if key in head]
    return found[0] if len(found) == 1 else None


def _an_export_file(file: Path, expected: str) -> HermesError:
    return HermesError(f"{file.name} is a `hermes export` file (a user's whole memory), not "
                       f"{expected}: `hermes import {file}` restores it. Nothing was imported.")


def _is_hermes_export(file: Path) -> bool:
    """Whether the file's first line is the header `hermes export` writes."""
    import json

    from hermes.memory.transfer import EXPORT_FORMAT

    try:
        with file.open("rb") as handle:
            record = json.loads(handle.readline(4096).decode("utf-8-sig", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(record, dict) and record.get("type") == EXPORT_FORMAT


def _import_export(rt: Runtime, store: SessionStore, file: Path, fmt: str, who: str,
                   as_json: bool) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from hermes.memory.sessions.chat_exports import (
        FORMATS,
        NAMES,
        ExportError,
        detect_format,
        import_export,
        read_export,
        scan_export,
    )

    if fmt not in FORMATS:
        raise HermesError(f"--format: expected jsonl, {', '.join(FORMATS)} (got {fmt!r}).")
    try:
        # The whole file is checked (and counted) before its first conversation is imported;
        # then it is read again, a conversation at a time.
        scan = scan_export(file)
    except ExportError as exc:
        if _looks_like_export(file):
            raise
        # One JSON object a line: transcripts (or a `hermes export`), not a data export.
        if _is_hermes_export(file):
            raise _an_export_file(file, f"a {NAMES[fmt]} export") from None
        raise HermesError(f"{str(exc).rstrip('.')}; it looks like JSON Lines (transcripts), "
                          f"not a {NAMES[fmt]} export: leave out --format (jsonl is the "
                          "default).") from None
    detected = detect_format(scan.sample)
    if detected is not None and detected != fmt:
        raise HermesError(f"{file.name} looks like a {NAMES[detected]} export, not a "
                          f"{NAMES[fmt]} one: use --format {detected}. Nothing was imported.")
    with Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), console=err_console, transient=True,
        disable=scan.conversations < PROGRESS_CONVERSATIONS,
    ) as progress:
        task = progress.add_task(f"importing {file.name}", total=scan.conversations)
        report = import_export(store, who, read_export(file), fmt,
                               progress=lambda done: progress.update(task, completed=done))
    note = (f"Note: {file.name} held {scan.not_utf8:,} byte sequence(s) that are not UTF-8: "
            "each was read as U+FFFD (\ufffd) and imported with the rest."
            if scan.not_utf8 else None)
    _finish_import(report, as_json, note)


def _finish_import(report: ImportReport, as_json: bool, note: str | None = None) -> None:
    """The report (``--json``: as JSON), and ``note`` (what was altered in reading the file:
    one line, on stderr, whatever the mode)."""
    if note:
        echo(note, err=True)
    if as_json:
        emit_json(report.to_json())
    else:
        _print_report(report)
    if report.errors:
        raise typer.Exit(1)


def _print_report(report: ImportReport) -> None:
    echo(
        f"Imported {report.sessions_created:,} new session(s) and {report.messages_added:,} "
        f"message(s); {report.sessions_existing:,} session(s) were already there "
        f"({report.messages_existing:,} message(s) already present)."
    )
    if report.empty:
        echo(f"{report.empty:,} empty {report.unit}(s) (nothing said) left out.")
    if report.errors:
        echo(f"Skipped {report.skipped} {report.unit}(s):", err=True)
        for number, reason in report.errors[:20]:
            echo(f"  {report.unit} {number}: {reason}", err=True)
        if report.skipped > 20:
            echo(f"  ... and {report.skipped - 20} more", err=True)


@app.command()
def summarize(
    ctx: typer.Context,
    since: str | None = SinceOption,
    source: str | None = SourceOption,
    dry_run: bool = DryRunOption,
    budget: str | None = BudgetOption,
    rate: float = RateOption,
    yes: bool = YesOption,
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Title and summarise finished or imported sessions that have no summary yet, oldest first.

    The daemon summarises the sessions it closes but never imported ones unasked: this is how
    an import gets its summaries. First it prints how many sessions and model calls it would
    take (small talk and empty sessions take none) and the estimated cost, and asks.
    ``--dry-run`` needs no model: without one it counts and leaves the cost unknown."""
    import asyncio

    from hermes.agent import summary_backlog as sb
    from hermes.agent.llm import LLM, ModelNotConfigured
    from hermes.budget import Budget, Pacer

    rt = runtime(ctx)
    who = rt.user(user)
    limit = Budget.parse(budget)
    since_ts = parse_since(since, rt.clock)
    llm = LLM.from_settings(rt.settings, background=True)
    if not llm.configured and not dry_run:
        raise ModelNotConfigured(llm.not_configured_message())
    llm.record_usage(rt.db, rt.clock)
    plan = sb.plan(rt.memory, who, llm if llm.configured else None, since=since_ts,
                   source=known_source(source))
    if as_json and dry_run:
        emit_json(plan.to_json())
        return
    if not plan.session_ids:
        echo(f"No session of {who} is waiting for a summary.")
        return
    if dry_run or not yes:
        echo(f"Summaries for {who}: {len(plan.session_ids):,} session(s), "
                   f"{plan.model_calls:,} model call(s) ({plan.without_call:,} titled "
                   "without one).")
        for line in estimate_lines(plan, plan.model):
            echo(line)
    if dry_run:
        return
    if not yes and not typer.confirm("Go ahead?", err=True):
        raise typer.Exit(1)
    try:
        report = asyncio.run(sb.run(rt.memory, llm, plan, budget=limit,
                                    pacer=Pacer(rate or None, rt.clock.now)))
    except KeyboardInterrupt:
        echo("\nInterrupted. The summaries written are kept; run it again to continue.",
                   err=True)
        raise typer.Exit(130) from None
    if as_json:
        emit_json({"plan": plan.to_json(), "report": report.to_json()})
        return
    failed = f"; {report.failed} failed (tried again next time)" if report.failed else ""
    echo(f"Summarised {report.done} session(s) with {report.model_calls} model "
               f"call(s){failed}.")
    if report.stopped:
        echo(f"Stopped: {report.stopped}. Run it again to continue.")


@app.command()
def redact(
    ctx: typer.Context,
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Redact secrets stored before redaction was on (or with sessions.redact_secrets off).

    Messages and their search index, session titles and summaries and the context file are
    rewritten in place, once; facts and basic-memory entries that hold a secret are listed, to
    forget or edit. Other users' rows are not touched."""
    from hermes.memory.transfer.redact_stored import redact_stored

    rt = runtime(ctx)
    report = redact_stored(rt.memory, rt.user(user))
    if as_json:
        emit_json(report.to_json())
        return
    context = ", and the context file" if report.context_file else ""
    echo(f"Redacted {report.secrets} secret(s) in {report.messages} message(s) of "
         f"{report.user}, {report.sessions} session title(s) or summary(ies){context}.")
    if report.facts:
        echo(f"Facts holding a secret: {', '.join(map(str, report.facts))} "
             "(`hermes facts forget ID`).")
    if report.basic_memory:
        echo(f"Basic-memory entries holding a secret: "
             f"{', '.join(map(str, report.basic_memory))} (`hermes memory remove ID`).")
