"""Reading a `hermes export` file back: every row lands in the importing user's space.

A file is data, never authority. Every row is written for the importing user; every id in it is
only a name inside the file: a row keeps its id when that id is free in this home (so a restore
into an empty home gives back the same ids, and export -> import -> export is identical), and
gets a fresh one otherwise. Every reference (a message's session, a fact's entities, the facts
shown with a reply, an extraction run's messages, a rating's facts) is remapped to the row the
same file created; a reference to anything else (another user's session, an id the file never
defined) refuses that record. Every record is checked as a normal write would be.

Two passes. The first (:mod:`.file`) reads the whole file and writes
nothing: the header, and the trailer (counts and a checksum), which must be there and match,
so a file cut short, changed or damaged is refused as a whole unless asked (``allow_unsealed``).
The second writes, record by record: a record that cannot be restored
(not JSON, refused by the guard, pointing outside the file or at a refused record) is skipped
and reported by its line, and the rest is kept; rows are committed in batches of about
:data:`BATCH_ROWS`, so a large import holds the write lock for a moment at a time, never for
minutes. ``dry_run`` does all of it in one transaction and rolls it back.

Resuming: each batch commits with a note of the last line it holds and of the id each row of
the file got (:mod:`.ledger`). The same file for the same user again, after
an import that stopped part-way, replays the committed lines without writing them (so every
reference, count and check is as in one run) and writes the rest; once finished, the same file
again is "already imported" and changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable
from typing import Any

import sqlite_utils

from hermes.clock import Clock, SystemClock
from hermes.errors import HermesError
from hermes.memory.basic import DEFAULT_LIMIT, Entry, usage_of
from hermes.memory.sessions.transcripts import MAX_IMPORT_MESSAGE_CHARS
from hermes.memory.transfer.export import (
    EXPORT_END,
    EXPORT_VERSION,
    TABLES,
    USER_TABLES,
    ExportReport,
)
from hermes.memory.transfer.file import NOTHING, check_file, load_record
from hermes.memory.transfer.ledger import RestoreLedger, TakenOver
from hermes.safe_text import scrub_value
from hermes.safety.guard import find_problem, shown
from hermes.safety.secrets import redact_json, redact_text
from hermes.store.db import begin_immediate
from hermes.store.maintenance import table_columns

# Rows written per transaction (a session counts its messages): big enough that commits cost
# nothing, small enough that another writer waits milliseconds, not minutes.
BATCH_ROWS = 1000
def _within_message_limit(messages: list[Any]) -> None:
    """Refuse a session one of whose messages is over the import limit a message (as `hermes
    sessions import` does): its secret screen alone would take many times its size in memory."""
    for index, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            continue    # refused as it is written
        size = max((len(v) for v in (message.get("content"), message.get("tool_args"))
                    if isinstance(v, str)), default=0)
        if size > MAX_IMPORT_MESSAGE_CHARS:
            raise _RefusedRecord(
                f"message {index:,} of {len(messages):,} is {size:,} characters, over the "
                f"import limit of {MAX_IMPORT_MESSAGE_CHARS:,} a message; none of this "
                "session was imported")


class _BadRecord(ValueError):
    """A record that is not what `hermes export` writes (the message says what is wrong)."""


class _RefusedRecord(ValueError):
    """A well-formed record that must not become memory (the message says why)."""


class _NotImportedThen(Exception):
    """Resuming: the run this one resumes did not write this record's row (it was refused as
    it was written)."""


def import_user(
    db: sqlite_utils.Database, lines: Iterable[str] | Callable[[], Iterable[str]], *,
    user: str | None = None, basic_char_limit: int = DEFAULT_LIMIT,
    allow_unsealed: bool = False, redact_messages: bool = True, dry_run: bool = False,
    clock: Clock | None = None,
) -> ExportReport:
    """Read an export back for ``user`` (default: the user named in the file).

    ``lines``: the file's lines, or a function that reads them again (the file is read twice:
    checked, then written). The user must have no memory in this home yet, unless this file's
    import for them stopped part-way: then it resumes after the last committed line (when it
    finished, nothing is written and the report's ``already_imported`` says when).
    ``allow_unsealed`` imports what can be read of a file whose end record is missing or does
    not match (cut short, changed, damaged), with a warning, instead of refusing it. Records
    that cannot be restored are in the report's ``errors`` (line number, reason); the rest is
    imported.
    """
    read = lines if callable(lines) else _replayable(lines)
    digest = hashlib.sha256()
    header, warnings = check_file(_hashed(read(), digest), allow_unsealed)
    target = user or str(header.get("user"))
    clock = clock or SystemClock()
    restore = _Restore(db, target, redact_messages=redact_messages,
                       basic_char_limit=basic_char_limit)
    errors: list[tuple[int, str]] = []
    batch = _Batches(db, dry_run)
    number = 0
    try:
        batch.begin()
        ledger = RestoreLedger.open(db, target, digest.hexdigest(), clock)
        if ledger.finished_at is not None:
            batch.end()
            return ExportReport(target, {}, warnings, already_imported=ledger.finished_at)
        restore.resume(ledger)
        batch.ledger = ledger
        resumed_from = ledger.through_line if ledger.resumed else 0
        seen_header = False
        for number, line in enumerate(read(), start=1):
            if not line.strip():
                continue
            if not seen_header:  # checked by check_file
                seen_header = True
                continue
            restore.replaying = number <= resumed_from
            if not restore.replaying:
                batch.ensure()
            written = _restore_line(restore, number, line, errors)
            if written is None:
                break  # the end record
            if not restore.replaying:
                batch.wrote(written, number)
        restore.replaying = False
        batch.ensure()
        dropped, missing = restore.finish(lenient=allow_unsealed)
        errors += dropped
        warnings += [f"line {n}: {why}" for n, why in missing]
        ledger.finish(number, clock)
        batch.end()
    except TakenOver:
        batch.abort()
        raise HermesError(f"Stopped at line {number:,}: another `hermes import` of this file "
                          f"for {target!r} committed in the meantime and goes on from there; "
                          "what was imported is kept.") from None
    except BaseException:
        batch.abort()
        raise
    return ExportReport(target, restore.counts, warnings, restore.renumbered, errors,
                        resumed_from=resumed_from,
                        started_at=ledger.started_at)


def _hashed(lines: Iterable[str], digest: Any) -> Iterable[str]:
    """``lines``, each added to ``digest`` as it goes by: the file's identity for resuming."""
    for line in lines:
        digest.update(line.rstrip("\r\n").encode("utf-8", "surrogatepass") + b"\n")
        yield line


def _replayable(lines: Iterable[str]) -> Callable[[], Iterable[str]]:
    kept = lines if isinstance(lines, list | tuple) else list(lines)
    return lambda: kept


def _restore_line(restore: _Restore, number: int, line: str,
                  errors: list[tuple[int, str]]) -> int | None:
    """One record: the rows it wrote (0 when it was refused, and why is in ``errors``), or
    None for the end record."""
    try:
        record = load_record(number, line)
    except HermesError as exc:
        errors.append((number, str(exc).removeprefix(f"line {number}: ")
                       .removesuffix(f". {NOTHING}")))
        restore.unreadable = True
        return 0
    kind = record.get("type")
    if kind == EXPORT_END:
        return None
    if kind not in TABLES or kind == "messages":
        errors.append((number, f"unknown record type {kind!r}"))
        return 0
    try:
        return restore.record(number, kind, record)
    except (_BadRecord, _RefusedRecord) as exc:
        errors.append((number, str(exc)))
        return 0


class _Batches:
    """Write transactions of about BATCH_ROWS rows each; a dry run is one, rolled back. Each
    commit notes its last line in the ledger; the next batch begins only when there is more
    to write (no lock is held while the file is read), and first checks that no other import
    of the file committed in between."""

    def __init__(self, db: sqlite_utils.Database, dry_run: bool) -> None:
        self.conn = db.conn
        self.dry_run = dry_run
        self.rows = 0
        self.ledger: RestoreLedger | None = None

    def begin(self) -> None:
        begin_immediate(self.conn)

    def ensure(self) -> None:
        if not self.conn.in_transaction:
            self.begin()
            if self.ledger is not None:
                self.ledger.check_still_mine()

    def wrote(self, rows: int, line: int) -> None:
        self.rows += rows
        if self.rows >= BATCH_ROWS and not self.dry_run:
            if self.ledger is not None:
                self.ledger.reached(line)
            self.conn.execute("COMMIT")
            self.rows = 0

    def end(self) -> None:
        self.conn.execute("ROLLBACK" if self.dry_run else "COMMIT")

    def abort(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")


class _Restore:
    """The rows of one file, written for one user, with the file's ids mapped to this home's."""

    def __init__(self, db: sqlite_utils.Database, user: str, *,
                 redact_messages: bool = True, basic_char_limit: int = DEFAULT_LIMIT) -> None:
        # sessions.redact_secrets: messages lose their secrets as when they were recorded here
        self.redact_messages = redact_messages
        self.basic_char_limit = basic_char_limit
        self.db = db
        self.user = user
        self.ids: dict[str, dict[int, int]] = {}  # table -> {id in the file: id here}
        self.refused: dict[str, dict[int, int]] = {}  # table -> {id in the file: its line}
        self.columns: dict[str, set[str]] = {}
        self.counts: dict[str, int] = {}
        self.basic: list[Entry] = []
        self.renumbered = 0
        # Facts point forward (at later facts, at sessions and messages exported after them):
        # (line, id here, the file's superseded_by, source_session_id, source_message_ids).
        self.fact_links: list[tuple[int, int, Any, Any, Any]] = []
        self.session_messages: dict[int, list[tuple[int, int]]] = {}  # session here -> ids
        self.line = 0
        self.unreadable = False  # a line that was not a record at all came before
        self._added: list[tuple[str, int]] = []  # this record's (table, id in the file)
        self.ledger: RestoreLedger | None = None
        # Resuming: the lines an earlier run committed are read again, not written; each id
        # they name is the row it became then.
        self.replaying = False
        self.resumed: dict[str, dict[int, int]] = {}

    def resume(self, ledger: RestoreLedger) -> None:
        self.ledger = ledger
        self.resumed = ledger.ids() if ledger.through_line else {}

    # -- one record ---------------------------------------------------------------------------

    def record(self, line: int, kind: str, record: dict[str, Any]) -> int:
        """Restore one record, all of it or none of it (a savepoint); returns the rows
        written. A refused record leaves nothing behind, and its ids are remembered so that
        what points at them is refused by name."""
        self.line, self._added = line, []
        counts, basic, links, renumbered = dict(self.counts), len(self.basic), \
            len(self.fact_links), self.renumbered
        mapped = len(self.ledger.pending) if self.ledger is not None else 0
        self.db.execute("SAVEPOINT restore_record")
        try:
            rows = self._record(kind, record)
        except (_BadRecord, _RefusedRecord, _NotImportedThen) as exc:
            self.db.execute("ROLLBACK TO restore_record")
            self.db.execute("RELEASE restore_record")
            for table, old in self._added:
                self.ids.get(table, {}).pop(old, None)
            for session_id in [new for table, new in self._added if table == "sessions*"]:
                self.session_messages.pop(session_id, None)
            self.counts, self.renumbered = counts, renumbered
            if self.ledger is not None:
                self.ledger.forget_since(mapped)
            del self.basic[basic:], self.fact_links[links:]
            if isinstance(exc, _NotImportedThen):
                # Refused by the run this one resumes, as it wrote it: try it as that run did,
                # so it is refused again for the same reason (or, if it fits now, written).
                self.replaying = False
                try:
                    return self.record(line, kind, record)
                finally:
                    self.replaying = True
            self._remember_refused(kind, record)
            raise
        self.db.execute("RELEASE restore_record")
        return rows

    def _record(self, kind: str, record: dict[str, Any]) -> int:
        row = record.get("row")
        if not isinstance(row, dict):
            raise _BadRecord(f"a {kind} record without its row")
        row = scrub_value(row)
        _check_row(kind, row, self.basic)
        if kind == "basic_memory":
            used = usage_of(self.basic)
            if used > self.basic_char_limit:
                raise _RefusedRecord(f"basic memory would hold {used:,} characters, over its "
                                     f"{self.basic_char_limit:,}-character cap")
        before = self.counts.get("messages", 0)
        handler = getattr(self, f"_{kind}", None)
        if handler is not None:
            handler(row, record)
        else:
            self._insert(kind, self._remapped(kind, row))
        self.counts[kind] = self.counts.get(kind, 0) + 1
        return 1 + self.counts.get("messages", 0) - before

    def _remember_refused(self, kind: str, record: dict[str, Any]) -> None:
        row = record.get("row")
        old = row.get("id") if isinstance(row, dict) else None
        if isinstance(old, int) and not isinstance(old, bool):
            self.refused.setdefault(kind, {}).setdefault(old, self.line)
        messages = record.get("messages") if kind == "sessions" else None
        for message in messages if isinstance(messages, list) else []:
            old = message.get("id") if isinstance(message, dict) else None
            if isinstance(old, int) and not isinstance(old, bool):
                self.refused.setdefault("messages", {}).setdefault(old, self.line)

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
            line = self.refused.get(target, {}).get(value) if isinstance(value, int) else None
            if line is not None:
                raise _RefusedRecord(f"{table}.{column} {value!r} is the {target} row of line "
                                     f"{line}, which was refused")
            maybe = "; a line that could not be read may have held it" if self.unreadable \
                else ""
            raise _RefusedRecord(f"{table}.{column} {value!r} is not one of the {target} rows "
                                 f"of this file (an import only links rows it brings{maybe})")
        return mapped

    def _facts(self, row: dict[str, Any], record: dict[str, Any]) -> None:
        links = (row.get("superseded_by"), row.get("source_session_id"),
                 row.get("source_message_ids"))
        new_id = self._insert("facts", {**row, "superseded_by": None, "source_session_id": None,
                                        "source_message_ids": None})
        self.fact_links.append((self.line, new_id, *links))

    def _sessions(self, row: dict[str, Any], record: dict[str, Any]) -> None:
        missing = [k for k in ("id", "message_count", "last_active_at") if k not in row]
        if missing:
            raise _BadRecord(f"the sessions row has no {missing[0]!r}")
        messages = record.get("messages") or []
        if not isinstance(messages, list):
            raise _BadRecord("'messages' must be a list")
        _within_message_limit(messages)
        session_id = self._insert("sessions", {**row, "extracted_through": 0})
        self._added.append(("sessions*", session_id))  # its messages' pairs, if refused
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
        self.counts["messages"] = self.counts.get("messages", 0) + len(messages)
        if self.replaying:
            return
        # The message trigger counts and times the session: reset to the exported values.
        self.db.execute(
            "UPDATE sessions SET message_count = ?, last_active_at = ?, extracted_through = ? "
            "WHERE id = ?",
            [row["message_count"], row["last_active_at"],
             self._watermark(session_id, watermark, last=True) if watermark else 0, session_id])

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

    def finish(self, *, lenient: bool = False
               ) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
        """The forward links of facts, now that every row of the file is here. The facts are
        imported already, so a link that cannot be made is dropped and said: as an error (a
        link to a refused fact, or to anything outside the file), or as a warning (a fact
        missing from a file imported without its end record, ``lenient``). Returns (errors,
        warnings), each (line, what was dropped)."""
        dropped: list[tuple[int, str]] = []
        warnings: list[tuple[int, str]] = []
        for line, fact_id, superseded_by, session_id, message_ids in self.fact_links:
            if superseded_by is not None:
                try:
                    superseded_by = self._ref("facts", "superseded_by", superseded_by, "facts")
                except _RefusedRecord as exc:
                    superseded_by = None
                    missing = lenient and "not one of" in str(exc)  # the file was cut short
                    (warnings if missing else dropped).append(
                        (line, "the fact points at a newer version that was not imported; it "
                         "was imported without that link" + ("" if missing else f" ({exc})")))
            if session_id is not None:  # provenance: a session the file does not hold is lost
                session_id = self.ids.get("sessions", {}).get(session_id) \
                    if isinstance(session_id, int) else None
            try:
                message_ids = self._message_list(message_ids)
            except _RefusedRecord as exc:
                message_ids = None
                dropped.append((line, f"its source messages were dropped ({exc})"))
            if (superseded_by, session_id, message_ids) != (None, None, None):
                self.db.execute(
                    "UPDATE facts SET superseded_by = ?, source_session_id = ?, "
                    "source_message_ids = ? WHERE id = ?",
                    [superseded_by, session_id, message_ids, fact_id])
        return dropped, warnings

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
        if table in USER_TABLES:
            row["user"] = self.user
        old = row.pop("id", None)
        if old is not None:
            if not isinstance(old, int) or isinstance(old, bool):
                raise _BadRecord(f"{table} id must be an integer (got {old!r})")
            seen = self.ids.setdefault(table, {})
            if old in seen:
                raise _BadRecord(f"{table} id {old} is used twice in this file")
            if self.replaying:
                return self._replayed(table, old)
            if self.db.execute(f"SELECT 1 FROM {table} WHERE id = ?", [old]).fetchone() is None:
                row["id"] = old  # free here: kept, so a restore gives back the same ids
            else:
                self.renumbered += 1  # taken (by another user's row): a fresh id instead
        elif self.replaying:
            return 0  # a row without an id of its own (a link, an alias): nothing to map
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
            self._added.append((table, old))
            if self.ledger is not None:
                self.ledger.wrote(table, old, new)
        return new

    def _replayed(self, table: str, old: int) -> int:
        """The row that id ``old`` of the file became in the run this one resumes."""
        new = self.resumed.get(table, {}).get(old)
        if new is None:
            raise _NotImportedThen
        if new != old:
            self.renumbered += 1
        self.ids[table][old] = new
        self._added.append((table, old))
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


__all__ = ["EXPORT_VERSION", "import_user"]
