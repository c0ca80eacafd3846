"""What a fact is on disk and in memory: the row <-> ``Fact`` mapping, the SQL every fact query
shares (the *active* condition, the selected columns, the bm25 weights) and the small writes
used by the store, its search and its duplicate detection (insert, link, history).

Imported by the store, search, dedup, graph and entities; imports none of them.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hermes.errors import NotFound
from hermes.safety.guard import check_field
from hermes.store.fts import MatchPlan

if TYPE_CHECKING:  # the records are read without the store (a daemon's answer)
    import sqlite_utils

# A fact is active while it is neither forgotten nor superseded (``f`` is the facts alias).
ACTIVE = "f.forgotten_at IS NULL AND f.superseded_by IS NULL"
# bm25 column weights: content, tags, entity_names, exchange (the text of the fact's source
# messages and the end of the message they answered, m018/m019: a question is often worded like
# the conversation the fact was learned from). Chosen on LoCoMo's tuning half (scripts/
# bench_locomo.py --mode facts --exchange-weight W), turn R@5 bm25 / hybrid e5 at 0.5, 0.7, 1.0,
# 1.5, 2.0: 0.594 / 0.639, 0.596 / 0.642, 0.602 / 0.644, 0.602 / 0.647, 0.599 / 0.645. 1.0, the
# fact's own weight: bm25's best, and within two questions of e5's best (1.5), with less trust in
# words of a long reply, which LoCoMo's one-turn exchanges do not have.
EXCHANGE_WEIGHT = 1.0
BM25 = f"bm25(facts_fts, 1.0, 0.6, 0.8, {EXCHANGE_WEIGHT})"
# The fact's own columns, for a match that must not be decided by its exchange (duplicates).
OWN_COLUMNS = "{content tags entity_names}"


def own_words_first(plan: MatchPlan) -> MatchPlan:
    """``plan`` for an all-words search: its strict round over the fact's own columns only (a
    fact must hold every word itself), its fallback any word over every column, the exchange's
    too (a one-word query's fallback is that word)."""
    if plan.strict is None:
        return plan
    return dataclasses.replace(plan, strict=f"{OWN_COLUMNS} : ({plan.strict})",
                               loose=plan.loose or plan.strict)


def own_words_only(plan: MatchPlan) -> MatchPlan:
    """``plan`` over the fact's own columns only, its exchange never read: a search in a shared
    place, where a fact marked shareable is repeated but the conversation it was learned from
    (a DM) may not be searched or quoted (docs/discord.md). Review rev6: "divorce" found "The
    user lives in Lisbon", shareable, by the DM it was learned in, and said so."""
    return dataclasses.replace(
        plan, strict=None if plan.strict is None else f"{OWN_COLUMNS} : ({plan.strict})",
        loose=None if plan.loose is None else f"{OWN_COLUMNS} : ({plan.loose})")


COLUMNS = (
    "f.id, f.user, f.content, f.category, f.kind, f.tags, f.entity_names, f.trust, f.importance,"
    " f.created_at, f.updated_at, f.valid_from, f.valid_to, f.superseded_by, f.forgotten_at,"
    " f.forgotten_reason, f.source_session_id, f.source_message_ids, f.retrieved_count,"
    " f.helpful_count, f.unhelpful_count, f.place, f.shared, f.source, f.confirmed_at"
)
# Where a fact came from (facts.source, m033): what the user said or typed, and what came from
# elsewhere (the model's own inference, an import, a tool's output or an MCP client, a
# document). A fact from elsewhere starts with less trust and ranks below the user's own until
# confirmed (hermes.memory.facts.provenance).
SOURCES = ("said", "inferred", "import", "tool", "document")


@dataclass
class Fact:
    id: int
    user: str
    content: str
    category: str
    kind: str
    tags: list[str]
    entities: list[str]
    trust: float
    importance: float | None
    created_at: str
    updated_at: str
    valid_from: str | None
    valid_to: str | None
    superseded_by: int | None
    forgotten_at: str | None
    forgotten_reason: str | None
    source_session_id: int | None
    source_message_ids: list[int]
    retrieved_count: int
    helpful_count: int
    unhelpful_count: int
    # where it was learned (hermes.memory.place: "private" or a shared place's key), the
    # user's mark (None: the home's default, 1 shareable, 0 private), where it came from
    # (SOURCES) and when the user confirmed it (a fact from elsewhere than the user)
    place: str = "private"
    shared: int | None = None
    source: str = "said"
    confirmed_at: str | None = None
    score: float | None = None
    explain: dict | None = None
    # the query's cosine to this fact when a hybrid search ranked it (None: by words only, or
    # no vector yet): session search's fact evidence (hermes.memory.sessions.fact_evidence)
    cosine: float | None = None
    # a hybrid search's candidate under the model's floor by meaning that holds no word the
    # query's words are trusted wholly for (hermes.memory.facts.search): ranked, never shown
    # per turn (a per-turn search returns none)
    fill_in: bool = False

    @property
    def status(self) -> Literal["active", "superseded", "forgotten"]:
        if self.forgotten_at:
            return "forgotten"
        return "superseded" if self.superseded_by is not None else "active"

    @property
    def active(self) -> bool:
        return self.status == "active"

    def to_json(self) -> dict:
        data: dict[str, Any] = {
            "id": self.id, "content": self.content, "entities": self.entities,
            "category": self.category, "trust": self.trust, "tags": self.tags,
            "score": None if self.score is None else round(self.score, 6),
            "kind": self.kind, "status": self.status, "importance": self.importance,
            "created_at": self.created_at, "updated_at": self.updated_at,
            "valid_from": self.valid_from, "valid_to": self.valid_to,
            "superseded_by": self.superseded_by, "forgotten_at": self.forgotten_at,
            "forgotten_reason": self.forgotten_reason,
            "source_session_id": self.source_session_id,
            "source_message_ids": self.source_message_ids,
            "retrieved_count": self.retrieved_count, "helpful_count": self.helpful_count,
            "unhelpful_count": self.unhelpful_count,
            "place": self.place, "shared": _mark(self.shared), "source": self.source,
            "confirmed_at": self.confirmed_at,
        }
        if self.explain is not None:
            data["explain"] = self.explain
        return data


def _mark(shared: int | None) -> str:
    """The user's mark as JSON says it: default (follows privacy.shared_places), shareable,
    private."""
    return "default" if shared is None else "shareable" if shared else "private"


def in_sqlite_range(number: int) -> bool:
    """Whether an integer fits SQLite's INTEGER (int64); larger ids name no row."""
    return -(2**63) <= number < 2**63


def normalise(content: str) -> str:
    return re.sub(r"\s+", " ", content).strip()


def content_key(content: str) -> str:
    """What makes two facts exact duplicates: case, spacing and end punctuation do not count."""
    return re.sub(r"[\s.!;,]+$", "", normalise(content).casefold())


def row_to_fact(row: Sequence[Any]) -> Fact:
    return Fact(
        id=int(row[0]), user=row[1], content=row[2], category=row[3], kind=row[4],
        tags=json.loads(row[5] or "[]"),
        entities=[n for n in (row[6] or "").split("\n") if n],
        trust=float(row[7]), importance=row[8], created_at=row[9], updated_at=row[10],
        valid_from=row[11], valid_to=row[12], superseded_by=row[13], forgotten_at=row[14],
        forgotten_reason=row[15], source_session_id=row[16],
        source_message_ids=json.loads(row[17] or "[]"), retrieved_count=int(row[18]),
        helpful_count=int(row[19]), unhelpful_count=int(row[20]), place=row[21],
        shared=row[22], source=row[23], confirmed_at=row[24],
    )


def fetch_facts(db: sqlite_utils.Database, user: str, where: str, params: Sequence[Any],
                tail: str = "") -> list[Fact]:
    """The user's facts matching ``where`` (over the ``f`` alias), in any state."""
    rows = db.execute(
        f"SELECT {COLUMNS} FROM facts f WHERE f.user = ? AND ({where}) {tail}",
        [user, *params],
    ).fetchall()
    return [row_to_fact(r) for r in rows]


def get_fact(db: sqlite_utils.Database, user: str, fact_id: int) -> Fact:
    """One fact of this user, in any state. NotFound for unknown ids and other users' ids."""
    fact_id = int(fact_id)
    # An id beyond SQLite's int64 would raise OverflowError in the driver: no such fact.
    found = fetch_facts(db, user, "f.id = ?", [fact_id]) if in_sqlite_range(fact_id) else []
    if not found:
        raise NotFound(f"No fact with id {fact_id} for user {user!r}.")
    return found[0]


def snapshot(fact: Fact) -> dict:
    data = fact.to_json()
    for key in ("score", "explain", "retrieved_count"):
        data.pop(key, None)
    return data


def clean_tags(tags: Iterable[str]) -> list[str]:
    seen: dict[str, str] = {}
    for tag in tags:
        tag = normalise(str(tag)).lstrip("#")
        if tag:
            check_field("tag", tag)  # a tag is memory too: no key, no hidden text
        if tag and tag.casefold() not in seen:
            seen[tag.casefold()] = tag
    return list(seen.values())


# Where the writes of the current call come from, when not from Hermes itself (for example
# ``mcp:claude-desktop``): set around a write with :func:`writes_from`, stored on every history
# row that write makes (an add, a merge, a supersede and its update alike).
_ORIGIN: ContextVar[str | None] = ContextVar("hermes_fact_origin", default=None)


@contextmanager
def writes_from(origin: str | None) -> Iterator[None]:
    """Record ``origin`` on the fact history written inside the block."""
    token = _ORIGIN.set(origin)
    try:
        yield
    finally:
        _ORIGIN.reset(token)


def record_history(db: sqlite_utils.Database, fact: Fact, action: str, old: Any, new: Any, *,
                   note: str | None, at: str) -> None:
    """One ``fact_history`` row: a change of a fact with its old and new values (JSON)."""
    db.execute(
        "INSERT INTO fact_history (fact_id, user, action, old, new, note, at, origin) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [fact.id, fact.user, action,
         None if old is None else json.dumps(old, ensure_ascii=False),
         None if new is None else json.dumps(new, ensure_ascii=False),
         note, at, _ORIGIN.get()],
    )


def insert_fact(db: sqlite_utils.Database, *, user: str, content: str, category: str, kind: str,
                tags: Sequence[str], entity_names: Sequence[str], trust: float,
                importance: float | None, now: str, valid_from: str,
                source_session_id: int | None, source_message_ids: Sequence[int],
                place: str = "private", shared: int | None = None, source: str = "said",
                confirmed_at: str | None = None) -> int:
    """Insert a new fact row (the FTS triggers index it) and return its id."""
    cursor = db.execute(
        """
        INSERT INTO facts (user, content, content_key, category, kind, tags, entity_names,
          trust, importance, created_at, updated_at, valid_from, source_session_id,
          source_message_ids, place, shared, source, confirmed_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """,
        [user, content, content_key(content), category, kind,
         json.dumps(list(tags), ensure_ascii=False), "\n".join(entity_names), trust,
         importance, now, now, valid_from, source_session_id,
         json.dumps(list(source_message_ids)), place, shared, source, confirmed_at],
    )
    return int(cursor.lastrowid or 0)


def link_entities(db: sqlite_utils.Database, fact_id: int, entity_ids: Iterable[int]) -> None:
    db.conn.executemany(
        "INSERT OR IGNORE INTO fact_entities (fact_id, entity_id) VALUES (?, ?)",
        [(fact_id, e) for e in entity_ids],
    )


def linked_entity_ids(db: sqlite_utils.Database, fact_id: int) -> list[int]:
    return [int(r[0]) for r in db.execute(
        "SELECT entity_id FROM fact_entities WHERE fact_id = ?", [fact_id]).fetchall()]
