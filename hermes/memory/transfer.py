"""Moving memory in and out: transcript import (JSON Lines), full export and import of one user's
memory, and consistent backups.

* :func:`import_sessions`: one session per line, ``{"source", "title"?, "started_at",
  "external_id"?, "summary"?, "messages": [{"role", "speaker"?, "content", "created_at",
  "external_id"?}]}``. Re-importing the same file adds nothing; a malformed line is reported with
  its number and skipped, the rest is imported.
* :func:`export_user` / :func:`import_user`: every tier of a user (basic memory, entities, facts
  with their links and history, sessions with messages, and the tables that hang off them) as
  JSON Lines, read straight from the tables, ids kept, so that export -> import into an empty
  home -> export is identical.
* :func:`backup`: ``VACUUM INTO``, a consistent snapshot even while another process writes.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlite_utils

from hermes.clock import parse_ts, to_ts
from hermes.errors import HermesError, RefusedWrite
from hermes.memory.basic import DEFAULT_LIMIT, Entry, usage_of
from hermes.memory.guard import find_problem
from hermes.memory.sessions import ROLES, SOURCES, SessionStore
from hermes.store.db import write_transaction

# Lines written per transaction during a transcript import: big enough that the commit cost
# disappears, small enough that another process waiting for the write lock is not starved.
IMPORT_BATCH = 200
EXPORT_FORMAT = "hermes-export"
EXPORT_VERSION = 1
# The external id given to an imported session that has none: its line's content hash.
HASH_PREFIX = "sha256:"


class ImportLineError(ValueError):
    """One line of an import file that cannot be used (the message says why)."""


@dataclass
class ImportReport:
    lines: int = 0
    sessions_created: int = 0
    sessions_existing: int = 0  # already imported: only missing messages were added
    messages_added: int = 0
    messages_existing: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line number, reason)

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
            "skipped": self.skipped,
            "errors": [{"line": n, "error": e} for n, e in self.errors],
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


def parse_session_line(line: str) -> _ParsedSession:
    """Validate one import line completely before anything is written."""
    try:
        data = json.loads(line.lstrip("\ufeff"))
    except json.JSONDecodeError as exc:
        raise ImportLineError(f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict):
        raise ImportLineError("expected a JSON object with source, started_at and messages")
    source = (_text(data.get("source"), "source", required=True) or "").strip().lower()
    if source not in SOURCES:
        raise ImportLineError(f"'source' must be one of {', '.join(SOURCES)} "
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
    lines: Iterable[str],
    *,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import transcripts (one JSON session per line) for ``user``. Idempotent.

    A session is the same session when its ``external_id`` matches (per source). A line without
    one gets the hash of its content as external id: the same line again is the same session,
    two different lines are never merged. Within a known session a message is new when its
    ``external_id`` is new, or, without one, when no message has its role, time and content.
    ``progress`` is called with the number of lines done after each batch.
    """
    db = store.db
    report = ImportReport()
    batch: list[tuple[int, str]] = []

    def flush() -> None:
        with write_transaction(db):
            for number, text in batch:
                _import_line(db, user, number, text, report)
        batch.clear()
        if progress is not None:
            progress(report.lines)

    for number, line in enumerate(lines, start=1):
        report.lines = number
        if not line.strip():
            continue
        batch.append((number, line))
        if len(batch) >= IMPORT_BATCH:
            flush()
    if batch:
        flush()
    elif progress is not None:
        progress(report.lines)
    return report


def _import_line(
    db: sqlite_utils.Database, user: str, number: int, line: str, report: ImportReport
) -> None:
    try:
        parsed = parse_session_line(line)
    except ImportLineError as exc:
        report.errors.append((number, str(exc)))
        return
    conn = db.conn
    conn.execute("SAVEPOINT import_line")
    try:
        session_id = _find_session(db, user, parsed)
        if session_id is None:
            cursor = conn.execute(
                "INSERT INTO sessions (user, source, channel_key, title, summary, summary_status, "
                "started_at, last_active_at, external_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [user, parsed.source, parsed.channel_key, parsed.title, parsed.summary,
                 "done" if parsed.summary else None, parsed.started_at, parsed.started_at,
                 parsed.external_id],
            )
            session_id = int(cursor.lastrowid or 0)
            fresh = parsed.messages
            report.sessions_created += 1
        else:
            fresh = _new_messages(db, session_id, parsed.messages)
            report.sessions_existing += 1
            report.messages_existing += len(parsed.messages) - len(fresh)
        # A plain INSERT: a message the checks above let through but the table refuses is an
        # error for the whole line, never a silent skip that is still counted.
        cursor = conn.executemany(
            "INSERT INTO messages (session_id, user, role, speaker, content, "
            "created_at, tool_name, tool_args, tool_call_id, external_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(session_id, user, m.role, m.speaker, m.content, m.created_at, m.tool_name,
              m.tool_args, m.tool_call_id, m.external_id) for m in fresh],
        )
        report.messages_added += max(cursor.rowcount, 0)
    except Exception as exc:
        conn.execute("ROLLBACK TO import_line")
        conn.execute("RELEASE import_line")
        if isinstance(exc, HermesError | ValueError | sqlite3.Error):
            report.errors.append((number, f"could not be stored: {exc}"))
            return
        raise
    conn.execute("RELEASE import_line")


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


def read_lines(path: Path, *, on_bytes: Callable[[int], None] | None = None) -> Iterator[str]:
    """The lines of a UTF-8 file (a leading byte order mark dropped), reporting bytes read (for
    a progress bar)."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle):
            if on_bytes is not None:
                on_bytes(len(raw))
            yield raw.decode("utf-8-sig" if number == 0 else "utf-8", errors="replace")


# -- full export / import ---------------------------------------------------------------------

# (record type, SQL selecting the user's rows). Read straight from the tables so that every
# column travels, including ones added by later migrations.
_EXPORT_QUERIES: list[tuple[str, str]] = [
    ("basic_memory", "SELECT * FROM basic_memory WHERE user = ? ORDER BY id"),
    ("entities", "SELECT * FROM entities WHERE user = ? ORDER BY id"),
    ("entity_aliases", "SELECT * FROM entity_aliases WHERE user = ? ORDER BY alias_key"),
    ("facts", "SELECT * FROM facts WHERE user = ? ORDER BY id"),
    ("fact_entities",
     "SELECT fe.* FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id WHERE f.user = ? "
     "ORDER BY fe.fact_id, fe.entity_id"),
    ("fact_history", "SELECT * FROM fact_history WHERE user = ? ORDER BY id"),
]
# Exported after the sessions, which they point into.
_EXPORT_AFTER_SESSIONS: list[tuple[str, str]] = [
    ("shown_facts",
     "SELECT sf.* FROM shown_facts sf JOIN messages m ON m.id = sf.message_id WHERE m.user = ? "
     "ORDER BY sf.message_id, sf.fact_id"),
    ("message_refs", "SELECT * FROM message_refs WHERE user = ? ORDER BY ref"),
    ("extraction_runs", "SELECT * FROM extraction_runs WHERE user = ? ORDER BY id"),
]
# Tables whose rows carry the user (rewritten when importing under another name).
_USER_TABLES = {"basic_memory", "entities", "entity_aliases", "facts", "fact_history",
                "sessions", "messages", "message_refs", "extraction_runs"}


@dataclass
class ExportReport:
    user: str
    counts: dict[str, int]


def _rows(db: sqlite_utils.Database, sql: str, params: list[Any]) -> Iterator[dict[str, Any]]:
    cursor = db.execute(sql, params)
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield dict(zip(names, row, strict=True))


def export_user(db: sqlite_utils.Database, user: str) -> Iterator[str]:
    """Every tier of ``user`` as JSON Lines (a header line, then one record per line)."""
    yield _dump({"type": EXPORT_FORMAT, "version": EXPORT_VERSION, "user": user})
    for kind, sql in _EXPORT_QUERIES:
        for row in _rows(db, sql, [user]):
            yield _dump({"type": kind, "row": row})
    for session in _rows(db, "SELECT * FROM sessions WHERE user = ? ORDER BY id", [user]):
        messages = list(_rows(
            db, "SELECT * FROM messages WHERE session_id = ? AND user = ? ORDER BY id",
            [session["id"], user],
        ))
        yield _dump({"type": "sessions", "row": session, "messages": messages})
    for kind, sql in _EXPORT_AFTER_SESSIONS:
        for row in _rows(db, sql, [user]):
            yield _dump({"type": kind, "row": row})


def _dump(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _columns(db: sqlite_utils.Database, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def import_user(
    db: sqlite_utils.Database, lines: Iterable[str], *, user: str | None = None,
    basic_char_limit: int = DEFAULT_LIMIT,
) -> ExportReport:
    """Read an export back, ids kept, all or nothing. ``user`` renames the owner.

    Meant for an empty home (a restore, a move to another machine): an id already taken, or a
    user who already has memory here, stops the import before anything is kept. Every record
    is checked as a normal write would be (the memory guard on basic-memory entries and fact
    contents, trust in [0, 1], the basic-memory cap): one refused record refuses the file.
    """
    counts: dict[str, int] = {}
    iterator = iter(enumerate(lines, start=1))
    header: dict[str, Any] | None = None
    for number, line in iterator:
        if line.strip():
            header = _load(number, line)
            break
    if header is None or header.get("type") != EXPORT_FORMAT:
        raise HermesError("Not a Hermes export: the first line must be the hermes-export "
                          "header (`hermes export` writes it). Nothing was imported.")
    if header.get("version") != EXPORT_VERSION:
        raise HermesError(f"Unsupported export version {header.get('version')!r} "
                          f"(this Hermes reads version {EXPORT_VERSION}).")
    target = user or str(header.get("user"))
    known_columns: dict[str, set[str]] = {}
    basic: list[Entry] = []
    with write_transaction(db):
        # Facts point at later facts (superseded_by): check references at commit instead.
        db.execute("PRAGMA defer_foreign_keys = ON")
        if _has_memory(db, target):
            raise RefusedWrite(f"Refused: user {target!r} already has memory in this home; "
                               "`hermes import` restores into an empty one. Nothing was imported.")
        for number, line in iterator:
            if not line.strip():
                continue
            record = _load(number, line)
            kind = record.get("type")
            if kind not in known_columns:
                if kind not in {k for k, _ in _EXPORT_QUERIES + _EXPORT_AFTER_SESSIONS} | {
                        "sessions"}:
                    raise HermesError(f"line {number}: unknown record type {kind!r}. "
                                      "Nothing was imported.")
                known_columns[kind] = _columns(db, kind)
            try:
                _import_record(db, record, kind, known_columns, target, counts, basic)
            except _BadRecord as exc:
                raise HermesError(f"line {number}: {exc}. Nothing was imported.") from None
            except _RefusedRecord as exc:
                raise RefusedWrite(f"Refused: line {number}: {exc}. Nothing was imported.")\
                    from None
        used = usage_of(basic)
        if used > basic_char_limit:
            raise RefusedWrite(f"Refused: basic memory would hold {used:,} characters, over its "
                               f"{basic_char_limit:,}-character cap. Nothing was imported.")
    return ExportReport(target, counts)


class _BadRecord(ValueError):
    """A record that is not what `hermes export` writes (the message says what is wrong)."""


class _RefusedRecord(ValueError):
    """A well-formed record that must not become memory (the message says why)."""


def _import_record(
    db: sqlite_utils.Database, record: dict[str, Any], kind: str,
    known_columns: dict[str, set[str]], target: str, counts: dict[str, int], basic: list[Entry],
) -> None:
    row = record.get("row")
    if not isinstance(row, dict):
        raise _BadRecord(f"a {kind} record without its row")
    _check_row(kind, row, basic)
    _insert(db, kind, [row], known_columns[kind], target)
    counts[kind] = counts.get(kind, 0) + 1
    if kind != "sessions":
        return
    missing = [k for k in ("id", "message_count", "last_active_at") if k not in row]
    if missing:
        raise _BadRecord(f"the sessions row has no {missing[0]!r}")
    known_columns.setdefault("messages", _columns(db, "messages"))
    messages = record.get("messages") or []
    if not isinstance(messages, list):
        raise _BadRecord("'messages' must be a list")
    # The message trigger counts and times the session: reset to the exported values.
    _insert(db, "messages", messages, known_columns["messages"], target)
    db.execute("UPDATE sessions SET message_count = ?, last_active_at = ? WHERE id = ?",
               [row["message_count"], row["last_active_at"], row["id"]])
    counts["messages"] = counts.get("messages", 0) + len(messages)


def _check_row(kind: str, row: dict[str, Any], basic: list[Entry]) -> None:
    """What a normal write would refuse: the memory guard, trust out of range."""
    if kind == "basic_memory":
        text = row.get("text")
        if not isinstance(text, str):
            raise _BadRecord("a basic_memory row needs its 'text'")
        problem = find_problem(text)
        if problem:
            raise _RefusedRecord(f"basic memory entry {text[:60]!r}: {problem}")
        basic.append(Entry(row.get("id") or 0, text, "", ""))
    elif kind == "facts":
        content, trust = row.get("content"), row.get("trust", 0.5)
        if not isinstance(content, str):
            raise _BadRecord("a facts row needs its 'content'")
        problem = find_problem(content)
        if problem:
            raise _RefusedRecord(f"fact {row.get('id')!r}: {problem}")
        if isinstance(trust, bool) or not isinstance(trust, int | float) \
                or not 0.0 <= trust <= 1.0:
            raise _RefusedRecord(f"fact {row.get('id')!r}: trust must be in [0, 1] "
                                 f"(got {trust!r})")


def _load(number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise HermesError(f"line {number}: not valid JSON ({exc.msg}). Nothing was imported.")\
            from None
    if not isinstance(value, dict):
        raise HermesError(f"line {number}: expected a JSON object. Nothing was imported.")
    return value


def _has_memory(db: sqlite_utils.Database, user: str) -> bool:
    for table in ("basic_memory", "facts", "sessions"):
        if db.execute(f"SELECT 1 FROM {table} WHERE user = ? LIMIT 1", [user]).fetchone():
            return True
    return False


def _insert(
    db: sqlite_utils.Database, table: str, rows: list[Any], columns: set[str], user: str,
) -> None:
    for row in rows:
        if not isinstance(row, dict):
            raise _BadRecord(f"a {table} record without its row")
        unknown = set(row) - columns
        if unknown:
            raise _BadRecord(f"{table} has no column {sorted(unknown)[0]!r} "
                             "(an export from a newer Hermes?)")
        if table in _USER_TABLES:
            row = {**row, "user": user}
        names = list(row)
        try:
            db.execute(
                f"INSERT INTO {table} ({', '.join(names)}) "
                f"VALUES ({', '.join('?' for _ in names)})",
                [row[n] for n in names],
            )
        except sqlite3.IntegrityError as exc:
            if "NOT NULL" in str(exc):
                raise _BadRecord(f"{table} row is incomplete ({exc})") from None
            raise _RefusedRecord(f"{table} row cannot be restored here ({exc}); import into "
                                 "an empty home") from None
        except sqlite3.Error as exc:  # a value of the wrong shape (a list, an object)
            raise _BadRecord(f"{table} row cannot be stored ({exc})") from None


# -- backup and stats -------------------------------------------------------------------------


def backup(db: sqlite_utils.Database, target: Path) -> int:
    """A consistent copy of the whole database at ``target`` (VACUUM INTO). Returns its size."""
    target = target.expanduser()
    if target.exists():
        raise RefusedWrite(f"Refused: {target} already exists; choose a new file name.")
    if not target.parent.exists():
        raise HermesError(f"No such directory: {target.parent}")
    db.execute("VACUUM INTO ?", [str(target)])
    return target.stat().st_size


@dataclass
class TableStats:
    table: str
    rows: int
    user_rows: int | None  # rows of the given user, when the table has a user column


def table_stats(db: sqlite_utils.Database, user: str | None = None) -> list[TableStats]:
    """Row counts of the real tables (not FTS shadow tables or migrations bookkeeping)."""
    stats = []
    for row in db.execute("PRAGMA table_list").fetchall():
        schema, name, kind = row[0], row[1], row[2]
        if schema != "main" or kind != "table" or name.startswith("sqlite_"):
            continue
        rows = db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
        user_rows = None
        if user is not None and "user" in _columns(db, name):
            user_rows = db.execute(
                f'SELECT count(*) FROM "{name}" WHERE user = ?', [user]
            ).fetchone()[0]
        stats.append(TableStats(name, rows, user_rows))
    return sorted(stats, key=lambda s: s.table)
