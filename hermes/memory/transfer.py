"""Moving a user's memory in and out: every tier as JSON Lines.

:func:`export_user` / :func:`import_user`: every tier of a user (basic memory, entities, facts
with their links and history, sessions with messages, and the tables that hang off them) as JSON
Lines, read straight from the tables, ids kept, so that export -> import into an empty home ->
export is identical. The import checks every record as a normal write would.

Transcript import lives in :mod:`hermes.memory.transcripts`, backups and table counts in
:mod:`hermes.store.maintenance`; their names are re-exported here for older callers.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from hermes.errors import HermesError, RefusedWrite
from hermes.memory.basic import DEFAULT_LIMIT, Entry, usage_of
from hermes.memory.guard import find_problem, shown
from hermes.memory.secrets import redact_text
from hermes.memory.transcripts import (
    IMPORT_BATCH,
    ImportLineError,
    ImportReport,
    import_sessions,
    parse_session_line,
    read_lines,
)
from hermes.store.db import write_transaction
from hermes.store.maintenance import TableStats, backup, table_columns, table_stats

__all__ = [
    "EXPORT_FORMAT", "EXPORT_VERSION", "IMPORT_BATCH", "ExportReport", "ImportLineError",
    "ImportReport", "TableStats", "backup", "export_user", "import_sessions", "import_user",
    "parse_session_line", "read_lines", "table_stats",
]

EXPORT_FORMAT = "hermes-export"
EXPORT_VERSION = 1


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
                known_columns[kind] = table_columns(db, kind)
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
    known_columns.setdefault("messages", table_columns(db, "messages"))
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
            raise _RefusedRecord(f"basic memory entry {shown(text)}: {problem}")
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
        for what, column in (("tag", "tags"), ("entity name", "entity_names")):
            for value in _strings(row.get(column)):
                problem = find_problem(value)
                if problem:
                    raise _RefusedRecord(f"fact {row.get('id')!r}: the {what} {shown(value)}: "
                                         f"{problem}")
    elif kind in ("entities", "entity_aliases"):
        what, column = ("entity name", "name") if kind == "entities" else ("alias", "alias")
        value = row.get(column)
        problem = find_problem(value) if isinstance(value, str) else None
        if problem:
            raise _RefusedRecord(f"the {what} {shown(value)}: {problem}")
    elif kind == "sessions":
        # Hermes' own text: redacted like every stored summary
        for column in ("title", "summary"):
            if isinstance(row.get(column), str):
                row[column] = redact_text(row[column])


def _strings(value: Any) -> list[str]:
    """The strings of a JSON-list column (tags, entity names) as exported."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _load(number: int, line: str) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise HermesError(f"line {number}: not valid JSON ({exc.msg}). Nothing was imported.")\
            from None
    except RecursionError:  # `[` x 50,000
        raise HermesError(f"line {number}: JSON nested too deeply to read. Nothing was "
                          "imported.") from None
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
