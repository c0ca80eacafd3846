"""Reading a `hermes export` file back: every row lands in the importing user's space.

A file is data, never authority. Every row is written for the importing user; every id in it is
only a name inside the file: a row keeps its id when that id is free in this home (so a restore
into an empty home gives back the same ids, and export -> import -> export is identical), and
gets a fresh one otherwise. Every reference (a message's session, a fact's entities, the facts
shown with a reply, an extraction run's messages, a rating's facts) is remapped to the row the
same file created; a reference to anything else (another user's session, an id the file never
defined) refuses the file. Every record is checked as a normal write would be, and the trailer
(counts and a checksum, written by :func:`hermes.memory.transfer.export_user`) must be there
and match, so a file cut short is refused. All or nothing: one transaction.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from typing import Any

import sqlite_utils

from hermes.errors import HermesError, RefusedWrite
from hermes.memory.basic import DEFAULT_LIMIT, Entry, usage_of
from hermes.memory.guard import find_problem, shown
from hermes.memory.secrets import redact_json, redact_text
from hermes.memory.transfer import (
    _USER_TABLES,
    EXPORT_END,
    EXPORT_FORMAT,
    EXPORT_VERSION,
    READABLE_VERSIONS,
    TABLES,
    ExportReport,
)
from hermes.safe_text import scrub_value
from hermes.store.db import write_transaction
from hermes.store.maintenance import table_columns

NOTHING = "Nothing was imported."


class _BadRecord(ValueError):
    """A record that is not what `hermes export` writes (the message says what is wrong)."""


class _RefusedRecord(ValueError):
    """A well-formed record that must not become memory (the message says why)."""


def import_user(
    db: sqlite_utils.Database, lines: Iterable[str], *, user: str | None = None,
    basic_char_limit: int = DEFAULT_LIMIT, allow_unsealed: bool = False,
    redact_messages: bool = True,
) -> ExportReport:
    """Read an export back for ``user`` (default: the user named in the file), all or nothing.

    The user must have no memory in this home yet. ``allow_unsealed`` imports a file whose end
    record is missing (cut short, or hand-made), with a warning, instead of refusing it.
    """
    iterator = iter(enumerate(lines, start=1))
    digest = hashlib.sha256()
    header: dict[str, Any] | None = None
    for number, line in iterator:
        if line.strip():
            header = _load(number, line)
            digest.update(_canonical(line))
            break
    if header is None or header.get("type") != EXPORT_FORMAT:
        raise HermesError("Not a Hermes export: the first line must be the hermes-export "
                          f"header (`hermes export` writes it). {NOTHING}")
    version = header.get("version")
    if version not in READABLE_VERSIONS:
        raise HermesError(f"Unsupported export version {version!r} "
                          f"(this Hermes reads versions {', '.join(map(str, READABLE_VERSIONS))}).")
    target = user or str(header.get("user"))
    restore = _Restore(db, target, redact_messages=redact_messages)
    trailer: dict[str, Any] | None = None
    read: dict[str, int] = {}
    number = 1
    with write_transaction(db):
        # Facts point at later facts (superseded_by): check references at commit instead.
        db.execute("PRAGMA defer_foreign_keys = ON")
        if _has_memory(db, target):
            raise RefusedWrite(f"Refused: user {target!r} already has memory in this home; "
                               f"`hermes import` restores into an empty one. {NOTHING}")
        for number, line in iterator:
            if not line.strip():
                continue
            if trailer is not None:
                raise HermesError(f"line {number}: a record after the end record. {NOTHING}")
            record = _load(number, line)
            kind = record.get("type")
            if kind == EXPORT_END:
                trailer = record
                continue
            digest.update(_canonical(line))
            if kind not in TABLES or kind == "messages":
                raise HermesError(f"line {number}: unknown record type {kind!r}. {NOTHING}")
            try:
                restore.record(kind, record)
            except _BadRecord as exc:
                raise HermesError(f"line {number}: {exc}. {NOTHING}") from None
            except _RefusedRecord as exc:
                raise RefusedWrite(f"Refused: line {number}: {exc}. {NOTHING}") from None
            _count(read, record)
        # A file cut short says so first: its dangling links are a symptom of that.
        warnings = _check_trailer(version, trailer, read, digest.hexdigest(), number,
                                  allow_unsealed)
        try:
            dropped = restore.finish(lenient=trailer is None and allow_unsealed)
        except _RefusedRecord as exc:
            raise RefusedWrite(f"Refused: {exc}. {NOTHING}") from None
        if dropped:
            warnings.append(f"{dropped} fact(s) pointed at a newer version the file does not "
                            "hold; they were imported without that link")
        used = usage_of(restore.basic)
        if used > basic_char_limit:
            raise RefusedWrite(f"Refused: basic memory would hold {used:,} characters, over its "
                               f"{basic_char_limit:,}-character cap. {NOTHING}")
    return ExportReport(target, restore.counts, warnings, restore.renumbered)


def _canonical(line: str) -> bytes:
    return line.rstrip("\r\n").encode("utf-8", "surrogatepass") + b"\n"


def _count(counts: dict[str, int], record: dict[str, Any]) -> None:
    kind = str(record.get("type"))
    counts[kind] = counts.get(kind, 0) + 1
    if kind == "sessions" and isinstance(record.get("messages"), list):
        counts["messages"] = counts.get("messages", 0) + len(record["messages"])


def _check_trailer(version: Any, trailer: dict[str, Any] | None, read: dict[str, int],
                   checksum: str, last_line: int, allow_unsealed: bool) -> list[str]:
    if version == 1:
        return ["this is a version 1 export, written before exports had an end record: "
                "whether it is complete cannot be checked"]
    if trailer is None:
        message = (f"the file ends at line {last_line} without its end record: it was cut short "
                   "(or is not what `hermes export` wrote)")
        if allow_unsealed:
            return [message + "; imported anyway (--allow-incomplete)"]
        raise HermesError(f"{message[0].upper()}{message[1:]}. {NOTHING} "
                          "(`hermes import --allow-incomplete` imports what is there.)")
    expected = trailer.get("counts")
    if expected != read:
        raise HermesError(f"The end record counts {expected!r}, but the file holds {read!r}: "
                          f"records are missing or were added. {NOTHING}")
    if trailer.get("sha256") != checksum:
        raise HermesError("The file's checksum does not match its end record: it was changed "
                          f"or damaged after it was exported. {NOTHING}")
    return []


class _Restore:
    """The rows of one file, written for one user, with the file's ids mapped to this home's."""

    def __init__(self, db: sqlite_utils.Database, user: str, *,
                 redact_messages: bool = True) -> None:
        # sessions.redact_secrets: messages lose their secrets as when they were recorded here
        self.redact_messages = redact_messages
        self.db = db
        self.user = user
        self.ids: dict[str, dict[int, int]] = {}  # table -> {id in the file: id here}
        self.columns: dict[str, set[str]] = {}
        self.counts: dict[str, int] = {}
        self.basic: list[Entry] = []
        self.renumbered = 0
        # Facts point forward (at later facts, at sessions and messages exported after them):
        # (id here, the file's superseded_by, source_session_id, source_message_ids).
        self.fact_links: list[tuple[int, Any, Any, Any]] = []
        self.session_messages: dict[int, list[tuple[int, int]]] = {}  # session here -> ids

    # -- one record ---------------------------------------------------------------------------

    def record(self, kind: str, record: dict[str, Any]) -> None:
        row = record.get("row")
        if not isinstance(row, dict):
            raise _BadRecord(f"a {kind} record without its row")
        row = scrub_value(row)
        _check_row(kind, row, self.basic)
        handler = getattr(self, f"_{kind}", None)
        if handler is not None:
            handler(row, record)
        else:
            self._insert(kind, self._remapped(kind, row))
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def _remapped(self, table: str, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with every reference column mapped to this file's rows (or refused)."""
        row = dict(row)
        for column, target in TABLES[table].refs.items():
            if column in row:
                row[column] = self._ref(table, column, row[column], target)
        return row

    def _ref(self, table: str, column: str, value: Any, target: str) -> int:
        mapped = None
        if isinstance(value, int) and not isinstance(value, bool):
            mapped = self.ids.get(target, {}).get(value)
        if mapped is None:
            raise _RefusedRecord(f"{table}.{column} {value!r} is not one of the {target} rows "
                                 "of this file (an import only links rows it brings)")
        return mapped

    def _facts(self, row: dict[str, Any], record: dict[str, Any]) -> None:
        links = (row.get("superseded_by"), row.get("source_session_id"),
                 row.get("source_message_ids"))
        new_id = self._insert("facts", {**row, "superseded_by": None, "source_session_id": None,
                                        "source_message_ids": None})
        self.fact_links.append((new_id, *links))

    def _sessions(self, row: dict[str, Any], record: dict[str, Any]) -> None:
        missing = [k for k in ("id", "message_count", "last_active_at") if k not in row]
        if missing:
            raise _BadRecord(f"the sessions row has no {missing[0]!r}")
        messages = record.get("messages") or []
        if not isinstance(messages, list):
            raise _BadRecord("'messages' must be a list")
        session_id = self._insert("sessions", {**row, "extracted_through": 0})
        pairs = self.session_messages.setdefault(session_id, [])
        for message in messages:
            if not isinstance(message, dict):
                raise _BadRecord("a messages record without its row")
            message = scrub_value(message)
            if self.redact_messages:
                message = _redacted_message(message)
            # A message belongs to the session it is written in, whatever id it names.
            old = message.get("id")
            new = self._insert("messages", {**message, "session_id": session_id})
            if isinstance(old, int):
                pairs.append((old, new))
        watermark = row.get("extracted_through") or 0
        # The message trigger counts and times the session: reset to the exported values.
        self.db.execute(
            "UPDATE sessions SET message_count = ?, last_active_at = ?, extracted_through = ? "
            "WHERE id = ?",
            [row["message_count"], row["last_active_at"],
             self._watermark(session_id, watermark, last=True) if watermark else 0, session_id])
        self.counts["messages"] = self.counts.get("messages", 0) + len(messages)

    def _watermark(self, session_id: int, value: Any, *, last: bool) -> int:
        """A message id that marks a place in a session (an extraction watermark, a run's first
        or last message), mapped: the same message, else the nearest one of the session."""
        if not isinstance(value, int) or isinstance(value, bool):
            raise _BadRecord(f"a message id must be an integer (got {value!r})")
        pairs = self.session_messages.get(session_id, [])
        exact = dict(pairs)
        if value in exact:
            return exact[value]
        if all(old == new for old, new in pairs):
            return value  # ids kept: the place stays where it was
        if last:
            return max((new for old, new in pairs if old <= value), default=0)
        return min((new for old, new in pairs if old >= value), default=0)

    def _extraction_runs(self, row: dict[str, Any], record: dict[str, Any]) -> None:
        session_id = self._ref("extraction_runs", "session_id", row.get("session_id"),
                               "sessions")
        self._insert("extraction_runs", {
            **row, "session_id": session_id,
            "first_message_id": self._watermark(session_id, row.get("first_message_id"),
                                                last=False),
            "last_message_id": self._watermark(session_id, row.get("last_message_id"),
                                               last=True)})

    def _reply_ratings(self, row: dict[str, Any], record: dict[str, Any]) -> None:
        message_id = self._ref("reply_ratings", "message_id", row.get("message_id"), "messages")
        applied = row.get("applied")
        try:
            deltas = json.loads(applied) if isinstance(applied, str) else None
        except (ValueError, RecursionError):
            deltas = None
        if not isinstance(deltas, dict):
            raise _BadRecord("reply_ratings.applied must be a JSON object of fact ids")
        mapped = {str(self._ref("reply_ratings", "applied", _int(k), "facts")): v
                  for k, v in deltas.items()}
        if list(mapped) != list(deltas):
            applied = json.dumps(mapped)
        self._insert("reply_ratings", {**row, "message_id": message_id, "applied": applied})

    # -- after the last record ----------------------------------------------------------------

    def finish(self, *, lenient: bool = False) -> int:
        """The forward links of facts, now that every row of the file is here. ``lenient``
        (a file imported without its end record) drops a link to a fact the file lacks instead
        of refusing; returns how many were dropped."""
        dropped = 0
        for fact_id, superseded_by, session_id, message_ids in self.fact_links:
            if superseded_by is not None:
                if lenient and (not isinstance(superseded_by, int)
                                or superseded_by not in self.ids.get("facts", {})):
                    superseded_by = None
                    dropped += 1
                else:
                    superseded_by = self._ref("facts", "superseded_by", superseded_by, "facts")
            if session_id is not None:  # provenance: a session the file does not hold is lost
                session_id = self.ids.get("sessions", {}).get(session_id) \
                    if isinstance(session_id, int) else None
            message_ids = self._message_list(message_ids)
            if (superseded_by, session_id, message_ids) != (None, None, None):
                self.db.execute(
                    "UPDATE facts SET superseded_by = ?, source_session_id = ?, "
                    "source_message_ids = ? WHERE id = ?",
                    [superseded_by, session_id, message_ids, fact_id])
        return dropped

    def _message_list(self, text: Any) -> str | None:
        if text is None:
            return None
        try:
            ids = json.loads(text) if isinstance(text, str) else None
        except (ValueError, RecursionError):
            ids = None
        if not isinstance(ids, list):
            raise _RefusedRecord(f"facts.source_message_ids {str(text)[:40]!r} is not a JSON "
                                 "list of message ids")
        known = self.ids.get("messages", {})
        mapped = [known[i] for i in ids if isinstance(i, int) and i in known]
        return text if mapped == ids else json.dumps(mapped)

    # -- writing ------------------------------------------------------------------------------

    def _insert(self, table: str, row: dict[str, Any]) -> int:
        columns = self.columns.get(table)
        if columns is None:
            columns = self.columns[table] = table_columns(self.db, table)
        unknown = set(row) - columns
        if unknown:
            raise _BadRecord(f"{table} has no column {sorted(unknown)[0]!r} "
                             "(an export from a newer Hermes?)")
        row = dict(row)
        if table in _USER_TABLES:
            row["user"] = self.user
        old = row.pop("id", None)
        if old is not None:
            if not isinstance(old, int) or isinstance(old, bool):
                raise _BadRecord(f"{table} id must be an integer (got {old!r})")
            seen = self.ids.setdefault(table, {})
            if old in seen:
                raise _BadRecord(f"{table} id {old} is used twice in this file")
            if self.db.execute(f"SELECT 1 FROM {table} WHERE id = ?", [old]).fetchone() is None:
                row["id"] = old  # free here: kept, so a restore gives back the same ids
            else:
                self.renumbered += 1  # taken (by another user's row): a fresh id instead
        names = list(row)
        try:
            cursor = self.db.execute(
                f"INSERT INTO {table} ({', '.join(names)}) "
                f"VALUES ({', '.join('?' for _ in names)})",
                [row[n] for n in names],
            )
        except sqlite3.IntegrityError as exc:
            if "NOT NULL" in str(exc):
                raise _BadRecord(f"{table} row is incomplete ({exc})") from None
            raise _RefusedRecord(f"{table} row cannot be restored here ({exc})") from None
        except sqlite3.Error as exc:  # a value of the wrong shape (a list, an object)
            raise _BadRecord(f"{table} row cannot be stored ({exc})") from None
        new = int(cursor.lastrowid or 0)
        if old is not None:
            self.ids[table][old] = new
        return new


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


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
        name = row.get(column)
        if isinstance(name, str) and (problem := find_problem(name)):
            raise _RefusedRecord(f"the {what} {shown(name)}: {problem}")
    elif kind == "sessions":
        # Hermes' own text: redacted like every stored summary
        for column in ("title", "summary"):
            if isinstance(row.get(column), str):
                row[column] = redact_text(row[column])


def _redacted_message(message: dict[str, Any]) -> dict[str, Any]:
    content, args = message.get("content"), message.get("tool_args")
    return {**message,
            **({"content": redact_text(content)} if isinstance(content, str) else {}),
            **({"tool_args": redact_json(args)} if isinstance(args, str) else {})}


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
        raise HermesError(f"line {number}: not valid JSON ({exc.msg}). {NOTHING}") from None
    except RecursionError:  # `[` x 50,000
        raise HermesError(f"line {number}: JSON nested too deeply to read. {NOTHING}") from None
    if not isinstance(value, dict):
        raise HermesError(f"line {number}: expected a JSON object. {NOTHING}")
    return value


def _has_memory(db: sqlite_utils.Database, user: str) -> bool:
    for table in ("basic_memory", "facts", "sessions"):
        if db.execute(f"SELECT 1 FROM {table} WHERE user = ? LIMIT 1", [user]).fetchone():
            return True
    return False


__all__ = ["EXPORT_VERSION", "import_user"]
