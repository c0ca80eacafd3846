"""Near-duplicate detection and merging for ``FactStore.add`` (:class:`Duplicates`, built by the
store from the connection, the facts config and its entity store).

A new fact merges into an existing active fact of the same user when rapidfuzz's
``token_set_ratio`` reaches ``facts.merge_threshold`` and nothing says they differ in meaning:
other numbers, a negation on one side, a name on one side only (capitalised words are never
respellings: "Berlin" / "Bern"), or a word on each side that is not a respelling of the other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import sqlite_utils
from rapidfuzz import fuzz
from rapidfuzz.utils import default_process

from hermes.config import FactsConfig
from hermes.memory.facts.entities import EntityStore
from hermes.memory.facts.records import (
    ACTIVE,
    OWN_COLUMNS,
    Fact,
    clean_tags,
    content_key,
    get_fact,
    link_entities,
    linked_entity_ids,
    record_history,
    snapshot,
)
from hermes.store.fts import STOPWORDS, build_match

# Near-duplicate candidates compared with rapidfuzz per add, most recent first.
MERGE_CANDIDATES = 50
# An entity in more facts than this is a hub: candidates must also share words with the text.
HUB_FACTS = 50
_NEGATION = re.compile(r"\b(?:not|no|never|n't|cannot|nor|without)\b|n't\b", re.I)
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_WORD = re.compile(r"[^\W_]+")
# rapidfuzz ratio at or above which two differing (lowercase) words count as one word respelt
RESPELLING = 80


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in STOPWORDS}


def capitalised_words(text: str) -> set[str]:
    """Casefolded words written with a capital somewhere: names and proper nouns."""
    return {w.casefold() for w in _WORD.findall(text) if not w.islower() and not w.isdigit()}


def differs_in_meaning(a: str, b: str) -> bool:
    """Similar text that must still not merge: other numbers, a negation, a name on one side
    only ("Berlin" / "Bern", "Karen" / "Karin", "Vim" / "Vi": one letter makes another name),
    or a word on each side that is not a respelling of one on the other ("cat" / "dog")."""
    if _NUMBER.findall(a) != _NUMBER.findall(b):
        return True
    if bool(_NEGATION.search(a)) != bool(_NEGATION.search(b)):
        return True
    words_a, words_b = content_words(a), content_words(b)
    only_a, only_b = words_a - words_b, words_b - words_a
    if not only_a or not only_b:
        return False  # one says everything the other does
    names = capitalised_words(a) | capitalised_words(b)
    if (only_a | only_b) & names:
        return True  # a capitalised word is never a respelling of another word
    return any(max(fuzz.ratio(x, y) for y in only_b) < RESPELLING for x in only_a)


class Duplicates:
    """Finds the active fact a new statement duplicates, and folds the statement into it."""

    def __init__(self, db: sqlite_utils.Database, config: FactsConfig,
                 entities: EntityStore) -> None:
        self.db = db
        self.config = config
        self.entities = entities

    def near_duplicate(
        self, user: str, text: str, entity_ids: list[int],
        prefer: Callable[[str, int | None], bool] | None = None,
    ) -> tuple[Fact, float] | None:
        """The most similar active fact about one of the same entities, if similar enough
        (``prefer``: over the candidates' place and mark, those it holds true for first: the
        facts the place a statement was made in may see).

        Candidates come from the FTS index, never from a scan of the user's facts: the facts
        naming the new fact's most specific entity (the one in fewest facts) in their entity
        column. When even that entity is in many facts, or there is none, only facts sharing
        three of the text's four longest words qualify (a fact similar enough to merge shares
        them). No bm25 here: computing it needs every term's document count, which is what
        made this slow at 100k facts; rapidfuzz ranks the candidates instead.
        """
        plan = build_match(text)
        words = sorted((t for t in plan.terms if not t.is_stopword),
                       key=lambda t: -len(" ".join(t.tokens)))[:4]
        if len(words) >= 3:
            shared = " OR ".join(
                "(" + " AND ".join(w.fts for w in words if w is not skip) + ")" for skip in words
            ) if len(words) == 4 else " AND ".join(w.fts for w in words)
        else:
            shared = " AND ".join(w.fts for w in words) or plan.strict or ""
        if not shared:
            return None
        # Only the facts' own words: a fact whose exchange shares them is no duplicate.
        expression = f"{OWN_COLUMNS} : ({shared})"
        anchor: int | None = None
        if entity_ids:
            marks = ",".join("?" * len(entity_ids))
            row = self.db.execute(
                f"SELECT entity_id, count(*) AS n FROM fact_entities "
                f"WHERE entity_id IN ({marks}) GROUP BY entity_id ORDER BY n LIMIT 1",
                entity_ids,
            ).fetchone()
            if row is None:
                return None  # no fact is about any of these entities yet
            anchor = int(row[0])
            name = self.entities.names_of(user, [anchor])[anchor]
            phrase = build_match('"' + name.replace('"', " ") + '"').strict
            if phrase:
                column = f"entity_names : {phrase}"
                expression = column if row[1] <= HUB_FACTS else f"{column} AND {expression}"
        rows = self.db.execute(
            f"""
            SELECT f.id, f.content, f.place, f.shared FROM facts_fts
              CROSS JOIN facts f ON f.id = facts_fts.rowid
            WHERE facts_fts MATCH ? AND f.user = ? AND {ACTIVE}
            ORDER BY facts_fts.rowid DESC LIMIT {MERGE_CANDIDATES}
            """,
            [expression, user],
        ).fetchall()
        best: tuple[int, tuple[bool, float]] | None = None
        for fact_id, content, place, shared in rows:
            similarity = float(fuzz.token_set_ratio(text, content, processor=default_process))
            if similarity < self.config.merge_threshold or differs_in_meaning(text, content):
                continue
            if anchor is not None and anchor not in linked_entity_ids(self.db, fact_id):
                continue  # the name is in its text, but the fact is not linked to the entity
            rank = (prefer is None or prefer(place, shared), similarity)
            if best is None or rank > best[1]:
                best = (int(fact_id), rank)
        return None if best is None else (get_fact(self.db, user, best[0]), best[1][1])

    @staticmethod
    def merged_wording(existing: Fact, text: str) -> str:
        """The text a fact has after ``text`` merges into it (:meth:`merge`): the new wording
        when it says everything the old one did, and more; else the old."""
        content = existing.content
        covers = fuzz.token_set_ratio(text, content, processor=default_process) == 100
        if len(text) > len(content) and covers and content_key(text) != content_key(content):
            return text
        return content


    def merge(self, existing: Fact, text: str, linked: list[tuple[int, str]],
              tags: list[str], message_ids: list[int], now: str, note: str) -> Fact:
        """Fold a new statement into an existing fact: keep the more complete wording, union
        entities, tags and sources."""
        old = snapshot(existing)
        content = self.merged_wording(existing, text)
        entity_names = list(existing.entities)
        for _, name in linked:
            if name not in entity_names:
                entity_names.append(name)
        merged_tags = clean_tags([*existing.tags, *tags])
        sources = list(dict.fromkeys([*existing.source_message_ids, *message_ids]))
        changed = (content != existing.content or entity_names != existing.entities
                   or merged_tags != existing.tags or sources != existing.source_message_ids)
        if not changed:
            return existing
        self.db.execute(
            "UPDATE facts SET content = ?, content_key = ?, entity_names = ?, tags = ?, "
            "source_message_ids = ?, updated_at = ? WHERE id = ? AND user = ?",
            [content, content_key(content), "\n".join(entity_names),
             json.dumps(merged_tags, ensure_ascii=False), json.dumps(sources), now,
             existing.id, existing.user],
        )
        link_entities(self.db, existing.id, [i for i, _ in linked])
        fact = get_fact(self.db, existing.user, existing.id)
        record_history(self.db, fact, "merge", old, snapshot(fact), note=f"{note}: {text}", at=now)
        return fact
