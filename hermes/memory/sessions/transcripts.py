"""Transcript import: JSON Lines, one session per line, into a user's session store.

:func:`import_sessions`: one session per line, ``{"source", "title"?, "started_at",
"external_id"?, "summary"?, "messages": [{"role", "speaker"?, "content", "created_at",
"external_id"?}]}``. Re-importing the same file adds nothing; a malformed line is reported with
its number and skipped, the rest is imported.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from hermes.clock import parse_ts, to_ts
from hermes.errors import HermesError
from hermes.memory.sessions.store import ROLES, SOURCES, SessionStore
from hermes.safe_text import one_line, scrub_value
from hermes.safety.secrets import redact_json, redact_text
from hermes.store.db import write_transaction
from hermes.store.failures import is_environmental

# Lines written per transaction during a transcript import: big enough that the commit cost
# disappears, small enough that another process waiting for the write lock is not starved.
IMPORT_BATCH = 200
# ... or fewer, when their messages hold this many characters (a batch waits in memory).
IMPORT_BATCH_CHARS = 16 * 1024 * 1024
# The longest message an import takes (its text, or a tool call's arguments), in characters.
# An attachment's extracted text is part of its message (a 2 MB Claude attachment imports);
# the secret screen needs several times a text in memory, so one message of 50 MB would cost
# GBs: its session is refused as a whole, by one line naming it, and the others are imported.
MAX_IMPORT_MESSAGE_CHARS = 4 * 1024 * 1024
# The external id given to an imported session that has none: its line's content hash.
HASH_PREFIX = "sha256:"


class ImportLineError(ValueError):
    """One line of an import file that cannot be used (the message says why)."""


@dataclass
class ImportReport:
    lines: int = 0
    sessions_created: int = 0
    empty: int = 0  # items with nothing to import (a conversation without messages)
    sessions_existing: int = 0  # already imported: only missing messages were added
    messages_added: int = 0
    messages_existing: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)
    unit: str = "line"  # what a number in errors counts: a line, or a conversation of an export

    @property
    def skipped(self) -> int:
        return len(self.errors)

    @property
    def ok(self) -> bool:
        return not self.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "lines": self.lines,
            "sessions_created": self.sessions_created,
            "sessions_existing": self.sessions_existing,
            "messages_added": self.messages_added,
            "messages_existing": self.messages_existing,
            "empty": self.empty,
            "skipped": self.skipped,
            "errors": [{self.unit: n, "error": e} for n, e in self.errors],
        }


@dataclass
class _ParsedMessage:
    role: str
    speaker: str | None
    content: str
    created_at: str
    external_id: str | None
    tool_name: str | None
    tool_args: str | None
    tool_call_id: str | None


@dataclass
class _ParsedSession:
    source: str
    title: str | None
    summary: str | None
    started_at: str
    external_id: str | None
    channel_key: str | None
    messages: list[_ParsedMessage]
    ended_at: str | None = None  # a finished conversation (an export) is stored ended
    # Set when the line has no external_id: the line's content hash, stored as its external id
    # so that re-importing the same line finds it again (and two different lines never merge).
    content_hash: str | None = None


def _text(value: Any, name: str, *, required: bool = False) -> str | None:
    if value is None:
        if required:
            raise ImportLineError(f"missing {name!r}")
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and name.endswith("id"):
        return str(value)
    if not isinstance(value, str):
        raise ImportLineError(f"{name!r} must be a string (got {type(value).__name__})")
    return value


# A UTC time already in (or next to) the stored form: rewritten without parsing, which is most
# of the cost of validating a large import.
_UTC_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?(?:Z|\+00:00)$")


def _timestamp(value: Any, name: str) -> str:
    text = _text(value, name, required=True)
    assert text is not None
    fast = _UTC_TS.match(text)
    # Days past the 28th take the slow path, which knows the length of each month.
    if fast and "01" <= text[5:7] <= "12" and "01" <= text[8:10] <= "28" and text[11:13] < "24" \
            and text[14:16] < "60" and text[17:19] < "60":
        return f"{fast.group(1)}.{(fast.group(2) or '').ljust(6, '0')}Z"
    try:
        return to_ts(parse_ts(text))
    except ValueError:
        raise ImportLineError(f"{name!r} is not an ISO 8601 time: {text!r}") from None


def parse_session_line(line: str, *, sources: Collection[str] = SOURCES) -> _ParsedSession:
    """Validate one import line completely before anything is written. ``sources``: the
    session sources known here (the built-in ones and the registered front-ends')."""
    try:
        data = json.loads(line.lstrip("\ufeff"))
    except json.JSONDecodeError as exc:
        raise ImportLineError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:  # `[` x 50,000: this line is refused, the others are imported
        raise ImportLineError("JSON nested too deeply to read") from None
    # "\ud83e" escapes decode to lone surrogates, which no row can store: U+FFFD instead.
    data = scrub_value(data)
    if not isinstance(data, dict):
        raise ImportLineError("expected a JSON object with source, started_at and messages")
    source = (_text(data.get("source"), "source", required=True) or "").strip().lower()
    if source not in sources:
        raise ImportLineError(f"'source' must be one of {', '.join(sources)} "
                              f"(got {data.get('source')!r})")
    started_at = _timestamp(data.get("started_at"), "started_at")
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list):
        raise ImportLineError("'messages' must be a list")
    messages = []
    seen_ids: set[str] = set()
    for index, raw in enumerate(raw_messages):
        where = f"messages[{index}]"
        if not isinstance(raw, dict):
            raise ImportLineError(f"{where} must be an object")
        role = raw.get("role")
        if role not in ROLES:
            raise ImportLineError(f"{where}.role must be one of {', '.join(ROLES)} (got {role!r})")
        content = _text(raw.get("content"), f"{where}.content", required=True)
        message_id = _text(raw.get("external_id"), f"{where}.external_id")
        if message_id is not None:
            if message_id in seen_ids:
                raise ImportLineError(f"{where}.external_id {message_id!r} is used twice in "
                                      "this session")
            seen_ids.add(message_id)
        tool_args = raw.get("tool_args")
        if tool_args is not None and not isinstance(tool_args, str):
            tool_args = json.dumps(tool_args, ensure_ascii=False)
        messages.append(
            _ParsedMessage(
                role=role,
                speaker=_text(raw.get("speaker"), f"{where}.speaker"),
                content=content or "",
                created_at=_timestamp(raw.get("created_at", started_at), f"{where}.created_at"),
                external_id=message_id,
                tool_name=_text(raw.get("tool_name"), f"{where}.tool_name"),
                tool_args=tool_args,
                tool_call_id=_text(raw.get("tool_call_id"), f"{where}.tool_call_id"),
            )
        )
    external_id = _text(data.get("external_id"), "external_id")
    content_hash = None
    if external_id is None:
        canonical = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        content_hash = HASH_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:32]
    return _ParsedSession(
        source=source,
        title=_text(data.get("title"), "title"),
        summary=_text(data.get("summary"), "summary"),
        started_at=started_at,
        external_id=external_id or content_hash,
        channel_key=_text(data.get("channel_key"), "channel_key"),
        messages=messages,
        content_hash=content_hash,
    )


def import_sessions(
    store: SessionStore,
    user: str,
    lines: Iterable[Any],
    *,
    progress: Callable[[int], None] | None = None,
    parse: Callable[[Any], _ParsedSession | None] | None = None,
    unit: str = "line",
    sources: Collection[str] = SOURCES,
) -> ImportReport:
    """Import transcripts (one JSON session per line) for ``user``. Idempotent.

    ``parse`` turns one item into a session (raising ImportLineError, or returning None when
    the item holds nothing to import); other importers (``chat_exports``) pass their own and
    share everything else: validation before writing, batches, idempotence, the report.

    A session is the same session when its ``external_id`` matches (per source). A line without
    one gets the hash of its content as external id: the same line again is the same session,
    two different lines are never merged. Within a known session a message is new when its
    ``external_id`` is new, or, without one, when no message has its role, time and content.
    ``progress`` is called with the number of lines done after each batch.
    """
    if parse is None:
        parse = functools.partial(parse_session_line, sources=sources)
    db = store.db
    report = ImportReport(unit=unit)
    # Parsed and redacted as each item arrives, before the write lock is taken (redaction is
    # linear in the text, but a batch of long messages is still work no other writer should
    # wait for), and only the parsed sessions are kept until their batch is written: a batch
    # ends at IMPORT_BATCH of them or IMPORT_BATCH_CHARS of text, so a file of large
    # conversations is never in memory whole.
    ready: list[tuple[int, _ParsedSession]] = []
    chars = 0

    def flush() -> None:
        nonlocal chars
        with write_transaction(db):
            for number, parsed in ready:
                _import_line(db, user, number, parsed, report)
        ready.clear()
        chars = 0
        if progress is not None:
            progress(report.lines)

    for number, line in enumerate(lines, start=1):
        report.lines = number
        if isinstance(line, str) and not line.strip():
            continue
        parsed = _prepare_line(number, line, report, parse, redact=store.redact_secrets)
        del line  # (the parsed session is what is kept)
        if parsed is not None:
            ready.append((number, parsed))
            chars += sum(len(m.content) for m in parsed.messages)
        if len(ready) >= IMPORT_BATCH or chars >= IMPORT_BATCH_CHARS:
            flush()
    if ready:
        flush()
    elif progress is not None:
        progress(report.lines)
    return report


def _prepare_line(
    number: int, item: Any, report: ImportReport,
    parse: Callable[[Any], _ParsedSession | None], *, redact: bool = True,
) -> _ParsedSession | None:
    """One line parsed and redacted (None: an error or an empty line, counted in ``report``)."""
    try:
        parsed = parse(item)
    except ImportLineError as exc:
        report.errors.append((number, str(exc)))
        return None
    if parsed is None:
        report.empty += 1
        return None
    for index, message in enumerate(parsed.messages, start=1):
        size = max(len(message.content), len(message.tool_args or ""))
        if size > MAX_IMPORT_MESSAGE_CHARS:
            named = f"{one_line(redact_text(parsed.title), 60)!r}: " if parsed.title else ""
            report.errors.append((number, (
                f"{named}message {index:,} of {len(parsed.messages):,} is {size:,} characters, "
                f"over the import limit of {MAX_IMPORT_MESSAGE_CHARS:,} a message; none of "
                "this session was imported.")))
            return None
    _redact_session(parsed, messages=redact)
    return parsed


def _import_line(
    db: sqlite_utils.Database, user: str, number: int, parsed: _ParsedSession,
    report: ImportReport,
) -> None:
    conn = db.conn
    conn.execute("SAVEPOINT import_line")
    # Counted only once the whole line is stored: a line refused at its messages adds nothing.
    counts = ImportReport()
    try:
        session_id = _find_session(db, user, parsed)
        if session_id is None:
            cursor = conn.execute(
                "INSERT INTO sessions (user, source, channel_key, title, summary, summary_status, "
                "started_at, last_active_at, ended_at, external_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [user, parsed.source, parsed.channel_key, parsed.title, parsed.summary,
                 "done" if parsed.summary else None, parsed.started_at, parsed.started_at,
                 parsed.ended_at, parsed.external_id],
            )
            session_id = int(cursor.lastrowid or 0)
            fresh = parsed.messages
            counts.sessions_created += 1
        else:
            fresh = _new_messages(db, session_id, parsed.messages)
            counts.sessions_existing += 1
            counts.messages_existing += len(parsed.messages) - len(fresh)
        # A plain INSERT: a message the checks above let through but the table refuses is an
        # error for the whole line, never a silent skip that is still counted.
        cursor = conn.executemany(
            "INSERT INTO messages (session_id, user, role, speaker, content, "
            "created_at, tool_name, tool_args, tool_call_id, external_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(session_id, user, m.role, m.speaker, m.content, m.created_at, m.tool_name,
              m.tool_args, m.tool_call_id, m.external_id) for m in fresh],
        )
        counts.messages_added += max(cursor.rowcount, 0)
    except Exception as exc:
        if not conn.in_transaction:
            # SQLite rolled the whole transaction back itself (a full disk can): no savepoint
            # is left to return to, and the batch is gone; say why, not "no such savepoint".
            raise
        conn.execute("ROLLBACK TO import_line")
        conn.execute("RELEASE import_line")
        # A full disk or a damaged file is not this line's fault: stop the import (what was
        # committed stays; running it again skips it) instead of failing every later line.
        if isinstance(exc, HermesError | ValueError | sqlite3.Error) and not is_environmental(exc):
            report.errors.append((number, f"could not be stored: {exc}"))
            return
        raise
    conn.execute("RELEASE import_line")
    report.sessions_created += counts.sessions_created
    report.sessions_existing += counts.sessions_existing
    report.messages_added += counts.messages_added
    report.messages_existing += counts.messages_existing


def _redact_session(parsed: _ParsedSession, *, messages: bool) -> None:
    """Secrets out of an imported session, as when it was recorded here (before the duplicate
    check, so the same file imported twice still matches). Title and summary always."""
    parsed.title = None if parsed.title is None else redact_text(parsed.title)
    parsed.summary = None if parsed.summary is None else redact_text(parsed.summary)
    if messages:
        for message in parsed.messages:
            message.content = redact_text(message.content)
            if message.tool_args is not None:
                message.tool_args = redact_json(message.tool_args)


def _find_session(db: sqlite_utils.Database, user: str, parsed: _ParsedSession) -> int | None:
    row = db.execute(
        "SELECT id FROM sessions WHERE user = ? AND source = ? AND external_id = ?",
        [user, parsed.source, parsed.external_id],
    ).fetchone()
    return None if row is None else int(row[0])


def _new_messages(
    db: sqlite_utils.Database, session_id: int, messages: list[_ParsedMessage]
) -> list[_ParsedMessage]:
    rows = db.execute(
        "SELECT external_id, role, created_at, content FROM messages WHERE session_id = ?",
        [session_id],
    ).fetchall()
    known_ids = {r[0] for r in rows if r[0] is not None}
    known = {(r[1], r[2], r[3]) for r in rows}
    fresh = []
    for m in messages:
        key = (m.role, m.created_at, m.content)
        if (m.external_id in known_ids) if m.external_id is not None else key in known:
            continue
        fresh.append(m)
        known.add(key)
        if m.external_id is not None:
            known_ids.add(m.external_id)
    return fresh


# The longest line read from an import file (`hermes sessions import`, `hermes import`): a
# session with all its messages fits many times over; a file of one endless line (not an export)
# is refused at it instead of read whole into memory.
MAX_LINE_BYTES = 256 * 1024 * 1024


def read_lines(path: Path, *, on_bytes: Callable[[int], None] | None = None,
               not_utf8: dict[int, int] | None = None) -> Iterator[str]:
    """The lines of a UTF-8 file (a leading byte order mark dropped), reporting bytes read (for
    a progress bar). A line over MAX_LINE_BYTES is a HermesError (what came before it was
    imported). Bytes that are not UTF-8 are read as U+FFFD, and ``not_utf8`` is told where:
    line number (from 1) -> how many such sequences (the command says so: see
    :func:`not_utf8_note`)."""
    with path.open("rb") as handle:
        number = 0
        while raw := handle.readline(MAX_LINE_BYTES + 1):
            if len(raw) > MAX_LINE_BYTES:
                raise HermesError(
                    f"{path.name}: line {number + 1:,} is over the import limit of "
                    f"{MAX_LINE_BYTES // 1024 // 1024} MiB a line (is it a file Hermes wrote?); "
                    "it and the lines after it were not imported.")
            if on_bytes is not None:
                on_bytes(len(raw))
            codec = "utf-8-sig" if number == 0 else "utf-8"
            number += 1
            try:
                text = raw.decode(codec)
            except UnicodeDecodeError:
                text = raw.decode(codec, errors="replace")
                if not_utf8 is not None:
                    not_utf8[number] = replaced_count(raw, text)
            del raw  # (the text is what is read from here: the bytes need not stay)
            yield text


def replaced_count(raw: bytes, text: str) -> int:
    """How many byte sequences of ``raw`` that are not UTF-8 ``text`` (``raw`` decoded with
    errors="replace") holds as U+FFFD: its U+FFFD less those ``raw`` spelt in UTF-8 itself
    (a valid sequence is never part of an invalid one)."""
    return text.count("\ufffd") - raw.count("\ufffd".encode())


def not_utf8_note(name: str, lines: dict[int, int]) -> str | None:
    """The one line an import says when lines of its file held bytes that are not UTF-8."""
    if not lines:
        return None
    numbers = sorted(lines)
    shown = ", ".join(f"{n:,}" for n in numbers[:10]) + (", ..." if len(numbers) > 10 else "")
    return (f"Note: {len(numbers):,} line(s) of {name} held bytes that are not UTF-8 (line "
            f"{shown}): each such sequence ({sum(lines.values()):,} in all) was read as "
            "U+FFFD (\ufffd) and imported with the rest of its line.")
