"""Moving a user's memory out: every tier as JSON Lines, and the one list of what travels.

:func:`export_user`: every tier of a user (basic memory, entities, facts with their links and
history, sessions with messages, and the tables that hang off them) as JSON Lines, read straight
from the tables (every column, ids included), ended by a trailer with counts and a checksum.
:data:`EXPORTED_TABLES` is the one list of the tables that travel and of the ids they point at;
:mod:`.restore` reads a file back, remapping every id into the importing user's rows.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlite_utils

EXPORT_FORMAT = "hermes-export"
EXPORT_END = "hermes-export-end"
# 2: ends with a trailer record (counts and a checksum), so a file cut short is refused.
EXPORT_VERSION = 2
READABLE_VERSIONS = (1, 2)


@dataclass(frozen=True)
class ExportedTable:
    """One table of a user's memory as it travels in an export.

    ``select`` reads the user's rows in export order. ``refs`` names each column that holds
    the id of a row of another exported table: on import those ids are remapped to the rows
    the same file created, never trusted as they are.
    """

    name: str
    select: str
    refs: dict[str, str] = field(default_factory=dict)


# Every table of a user's memory, in the order an export writes them (sessions carry their
# messages). The one list: export, import and the test that every user table travels read it.
EXPORTED_TABLES: tuple[ExportedTable, ...] = (
    ExportedTable("basic_memory", "SELECT * FROM basic_memory WHERE user = ? ORDER BY id"),
    ExportedTable("entities", "SELECT * FROM entities WHERE user = ? ORDER BY id"),
    ExportedTable("entity_aliases",
                  "SELECT * FROM entity_aliases WHERE user = ? ORDER BY alias_key",
                  {"entity_id": "entities"}),
    ExportedTable("facts", "SELECT * FROM facts WHERE user = ? ORDER BY id",
                  {"superseded_by": "facts", "source_session_id": "sessions",
                   "source_message_ids": "messages"}),
    ExportedTable("fact_entities",
                  "SELECT fe.* FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
                  "WHERE f.user = ? ORDER BY fe.fact_id, fe.entity_id",
                  {"fact_id": "facts", "entity_id": "entities"}),
    ExportedTable("fact_history", "SELECT * FROM fact_history WHERE user = ? ORDER BY id",
                  {"fact_id": "facts"}),
    ExportedTable("fact_tombstones",
                  "SELECT * FROM fact_tombstones WHERE user = ? ORDER BY id",
                  {"fact_id": "facts"}),
    ExportedTable("sessions", "SELECT * FROM sessions WHERE user = ? ORDER BY id",
                  {"extracted_through": "messages"}),
    ExportedTable("messages",
                  "SELECT * FROM messages WHERE session_id = ? AND user = ? ORDER BY id",
                  {"session_id": "sessions"}),
    ExportedTable("shown_facts",
                  "SELECT sf.* FROM shown_facts sf JOIN messages m ON m.id = sf.message_id "
                  "WHERE m.user = ? ORDER BY sf.message_id, sf.fact_id",
                  {"message_id": "messages", "fact_id": "facts"}),
    ExportedTable("message_refs", "SELECT * FROM message_refs WHERE user = ? ORDER BY ref",
                  {"message_id": "messages"}),
    ExportedTable("extraction_runs", "SELECT * FROM extraction_runs WHERE user = ? ORDER BY id",
                  {"session_id": "sessions", "first_message_id": "messages",
                   "last_message_id": "messages"}),
    ExportedTable("reply_ratings",
                  "SELECT * FROM reply_ratings WHERE user = ? ORDER BY message_id, rater",
                  {"message_id": "messages", "applied": "facts"}),
)
TABLES = {t.name: t for t in EXPORTED_TABLES}
# Tables that hold a user's rows but deliberately do not travel, and why. A new user table must
# be added to one list or the other (tests/test_transfer_scope.py fails until it is).
NOT_EXPORTED = {
    "message_vectors": "derived from the messages; `hermes sessions index` rebuilds it",
    "fact_vectors": "derived from the facts; the daemon embeds facts without one again",
    "vector_changes": "this home's log of vector writes, read by its running processes (m022)",
    "vector_cells": "derived from the vectors (m023); the next vector pass clusters them again",
    "fact_sources": "derived from facts.source_message_ids by triggers (m018), rebuilt on import",
    "fact_exchanges": "derived from each fact's source messages by triggers (m018), rebuilt on "
                      "import",
    "fact_questions": "inferences waiting for the user's word in this home's replies (issue 31); "
                      "the facts they are about travel, the questions are asked again if "
                      "learned again",
    "cron_jobs": "configuration of this home (config.yaml, `hermes cron add`), not memory",
    "cron_runs": "the schedule's bookkeeping in this home; follows cron_jobs",
    "model_calls": "what this home's model calls cost (`hermes stats`), not memory",
    "restores": "this home's record of `hermes import` runs (what the same command resumes), "
                "not memory",
    "restore_ids": "follows restores: the ids an unfinished import gave the file's rows",
}
# Tables whose rows carry the user (rewritten to the importing user).
USER_TABLES = {"basic_memory", "entities", "entity_aliases", "facts", "fact_history",
                "fact_tombstones",
                "sessions", "messages", "message_refs", "extraction_runs", "reply_ratings"}


@dataclass
class ExportReport:
    user: str
    counts: dict[str, int]
    warnings: list[str] = field(default_factory=list)
    renumbered: int = 0  # rows whose id was taken in this home and that got a new one
    errors: list[tuple[int, str]] = field(default_factory=list)  # (line, why it was refused)
    # Resuming an import of the same file that stopped part-way: the lines it had committed
    resumed_from: int = 0
    started_at: str | None = None  # when this file's import began (by this run or that one)
    already_imported: str | None = None  # the same file, finished then: nothing was written


def _rows(db: sqlite_utils.Database, sql: str, params: list[Any]) -> Iterator[dict[str, Any]]:
    cursor = db.execute(sql, params)
    names = [d[0] for d in cursor.description]
    for row in cursor:
        yield dict(zip(names, row, strict=True))


def export_user(db: sqlite_utils.Database, user: str) -> Iterator[str]:
    """Every tier of ``user`` as JSON Lines: a header line, one record per line, and a trailer
    with the count of each kind and the sha256 of every line before it."""
    line: list[str] = []
    for piece in export_pieces(db, user):
        if piece.endswith("\n"):
            line.append(piece[:-1])
            yield "".join(line)
            line = []
        else:
            line.append(piece)


def export_pieces(db: sqlite_utils.Database, user: str) -> Iterator[str]:
    """:func:`export_user`'s text as it is read, in pieces (a line's end is the "\\n" that
    ends a piece): a session's line, which holds every message of the session, comes one
    message a piece, so that `hermes export` writes a session of any length without holding
    it (a chat of 100,000 messages was one record of ~200 MB of Python objects before it was
    a line). The same text as :func:`sealed_lines` of the records, byte for byte."""
    digest = hashlib.sha256()
    counts: dict[str, int] = {}

    def sealed(piece: str) -> str:
        digest.update(piece.encode("utf-8", "surrogatepass"))
        return piece

    yield sealed(_dump({"type": EXPORT_FORMAT, "version": EXPORT_VERSION, "user": user}) + "\n")
    for table in EXPORTED_TABLES:
        if table.name == "messages":
            continue
        for row in _rows(db, table.select, [user]):
            counts[table.name] = counts.get(table.name, 0) + 1
            if table.name != "sessions":
                yield sealed(_dump({"type": table.name, "row": row}) + "\n")
                continue
            # _dump({"type": "sessions", "row": row, "messages": [...]}), written as read
            counts["messages"] = counts.get("messages", 0)
            yield sealed('{"type":"sessions","row":' + _dump(row) + ',"messages":[')
            comma = ""
            for message in _rows(db, TABLES["messages"].select, [row["id"], user]):
                yield sealed(comma + _dump(message))
                comma = ","
                counts["messages"] += 1
            yield sealed("]}\n")
    yield _dump({"type": EXPORT_END, "counts": counts, "sha256": digest.hexdigest()}) + "\n"


def sealed_lines(records: Iterable[dict[str, Any]]) -> Iterator[str]:
    """``records`` (the header first) as export lines, followed by their end record."""
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    for record in records:
        line = _dump(record)
        digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
        kind = record["type"]
        if kind != EXPORT_FORMAT:
            counts[kind] = counts.get(kind, 0) + 1
            if kind == "sessions":
                counts["messages"] = counts.get("messages", 0) + len(record["messages"])
        yield line
    yield _dump({"type": EXPORT_END, "counts": counts, "sha256": digest.hexdigest()})


def _dump(record: dict[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))
