"""Why a fact was found, in words a person can check: which of the query's words the fact holds
in its own text, which only in the exchange it was learned from (m018/m019: bm25 also reads
the conversation, so "car" can find "The user owns a Tesla Model 3" when the user said "my
new car"), and how close it is in meaning.

The fused score that orders the results is relative to the other candidates (a z-score squashed
to (0, 1), then x trust): 0.25 for the only fact, 6.6e-07 for a bm25 match over a handful of
facts. It ranks well and reads as nothing, so ``hermes facts search`` shows these reasons
instead and keeps the parts of the score for ``--explain``. Only for a search a person reads:
per-turn recall never pays for it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hermes.memory.facts.records import OWN_COLUMNS, Fact
from hermes.store.fts import build_match

if TYPE_CHECKING:  # why_found reads a fact alone (a daemon's answer): no store
    import sqlite_utils

# The fact's exchange column in facts_fts (hermes.store.migrations m018).
EXCHANGE_COLUMN = "{exchange}"


@dataclass
class Matched:
    """The query's words a fact holds: in its own text (content, tags, entities), and only in
    its exchange."""

    words: list[str] = field(default_factory=list)
    exchange_words: list[str] = field(default_factory=list)


def matched_words(db: sqlite_utils.Database, user: str, query: str,
                  facts: Sequence[Fact]) -> dict[int, Matched]:
    """For each of ``user``'s ``facts``, the query's words (stopwords left out, each as the
    user wrote it) it holds itself and those found only in its exchange, matched as the search
    matches them (FTS5, Porter stems). Another user's fact ids find nothing: every lookup is
    joined to the user's own rows."""
    found = {f.id: Matched() for f in facts}
    plan = build_match(query)
    terms = [t for t in plan.terms if not t.is_stopword] or list(plan.terms)
    if not found or not terms or plan.cjk:
        return {}  # CJK runs are matched with LIKE over the fact's own text
    # The results' indexed text (the user's own rows only) in a small in-memory FTS5 table with
    # the same tokenizer: each word is then matched against these few rows, not looked up in
    # the whole index (a word in every one of 100k facts cost 55 ms CPU that way).
    rows = db.execute(  # what the facts_fts_source view gives the index, each fact by rowid
        "SELECT f.id, f.content, f.tags, f.entity_names, coalesce(x.text, '') "
        "FROM json_each(?) j CROSS JOIN facts f ON f.id = j.value "
        "LEFT JOIN fact_exchanges x ON x.fact_id = f.id WHERE f.user = ?",
        [json.dumps(list(found)), user]).fetchall()
    from hermes.store.migrations import TOKENIZE

    scratch = sqlite3.connect(":memory:")
    try:
        scratch.execute("CREATE VIRTUAL TABLE t USING fts5(content, tags, entity_names, exchange, "
                        f"tokenize='{TOKENIZE}')")
        scratch.executemany("INSERT INTO t (rowid, content, tags, entity_names, exchange) "
                            "VALUES (?, ?, ?, ?, ?)", rows)

        def holding(expression: str) -> set[int]:
            return {int(r[0]) for r in scratch.execute(
                "SELECT rowid FROM t WHERE t MATCH ?", [expression]).fetchall()}

        for term in terms:
            word = " ".join(term.tokens)
            own = holding(f"{OWN_COLUMNS} : {term.fts}")
            for fact_id in own:
                found[fact_id].words.append(word)
            for fact_id in holding(f"{EXCHANGE_COLUMN} : {term.fts}") - own:
                found[fact_id].exchange_words.append(word)
    finally:
        scratch.close()
    return found


def annotate(db: sqlite_utils.Database, user: str, query: str, facts: Sequence[Fact], *,
             exchange: bool = True) -> None:
    """Add the matched words to each fact's ``explain`` (``words``, ``exchange_words``;
    ``exchange=False``, a search read in a shared place: none of its exchange's, which was not
    searched and may be a private conversation)."""
    matched = matched_words(db, user, query, facts)
    for fact in facts:
        if fact.id not in matched:
            continue
        fact.explain = {**(fact.explain or {}), "words": matched[fact.id].words,
                        "exchange_words": matched[fact.id].exchange_words if exchange else []}


def why_found(fact: Fact) -> str | None:
    """One short phrase of why ``fact`` was found, from its ``explain`` (None without one):
    ``words tesla; from its conversation: car; meaning 0.61``."""
    explain = fact.explain
    if not explain or "words" not in explain:
        return None
    parts = []
    if explain["words"]:
        parts.append("words " + ", ".join(explain["words"]))
    if explain.get("exchange_words"):
        parts.append("from its conversation: " + ", ".join(explain["exchange_words"]))
    cosine = explain.get("cosine")
    if isinstance(cosine, float) and cosine == cosine:  # NaN: no vector yet
        parts.append(f"meaning {cosine:.2f}")
    if explain.get("date"):  # said in (1.0) or soon after (0.5) a time the query names
        day = (fact.valid_from or fact.created_at)[:10]
        parts.append(f"said {day}, " + ("the time asked" if explain["date"] == 1.0
                                        else "soon after the time asked"))
    return "; ".join(parts) or "no word in common"
