"""The schema, as named, append-only migrations (sqlite-utils ``Migrations``).

Each migration runs in its own transaction together with the record that it ran. Never edit a
migration that has shipped: add a new one, at the end of the last module below. Every memory
table carries ``user`` so that every query can be scoped to the person the memory belongs to.
Timestamps are ISO 8601 UTC text (``hermes.clock.to_ts``), so text order is time order.

The history, in the order it runs (each module registers its migrations when imported):

* :mod:`.schema`: m001-m017, the three tiers' tables, cron, extraction, vectors, model calls;
* :mod:`.exchanges`: m018-m020, a fact found by the conversation it was learned from;
* :mod:`.bookkeeping`: m021-m032, this home's own state beside the memory (import resumes, the
  vector change log, vector cells);
* :mod:`.places`: m033-, where each memory was learned and where it came from (who may read it).
"""

from __future__ import annotations

import importlib
import sqlite3
from collections.abc import Iterator

import sqlite_utils
from sqlite_utils.migrations import Migrations

migrations = Migrations("hermes")

# One tokenizer for English-language recall: Porter stemming ("deploy" finds "deployed"),
# diacritics folded ("cafe" finds "café"). CJK has no word breaks for unicode61, so queries with
# CJK text fall back to LIKE (see hermes.store.fts).
TOKENIZE = "porter unicode61 remove_diacritics 2"


def run_script(db: sqlite_utils.Database, sql: str) -> None:
    """Run the statements of ``sql`` one by one, inside the migration's transaction.

    What ``db.executescript`` does inside a transaction, at a fraction of the cost: sqlite-utils
    finds each statement's end by joining and testing the text read so far after every
    character (quadratic: 0.5 s of a blank home's 0.6 s of migrations); a statement can only
    end at a semicolon, so only those are tested. (``sqlite3``'s own executescript would commit
    the migration's transaction first.)"""
    cursor = db.conn.cursor()
    for statement in script_statements(sql):
        cursor.execute(statement)


def script_statements(sql: str) -> Iterator[str]:
    """The complete statements of ``sql`` in order (a trigger's body stays whole), then any
    text after the last one."""
    start = 0
    end = sql.find(";")
    while end != -1:
        candidate = sql[start:end + 1]
        if sqlite3.complete_statement(candidate):
            yield candidate.strip()
            start = end + 1
        end = sql.find(";", end + 1)
    rest = sql[start:].strip()
    if rest:
        yield rest


# Imported for their registrations, in the history's order (once ``migrations`` exists): the
# order they register in is the order they run in.
for _module in ("schema", "exchanges", "bookkeeping", "places"):
    importlib.import_module(f"{__name__}.{_module}")
