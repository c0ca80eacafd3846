"""Tier 2: the fact store. Atomic statements with entities, trust, tags and a full history.

A fact is *active* while it is neither forgotten nor superseded; only active facts are found by
``search``, ``probe``, ``reason``, ``related`` and ``recent``. Every change of a fact (add, merge,
update, supersede, rate, forget, restore) writes a ``fact_history`` row with old and new values.

Writes that read first (dedup, merge, rating) run inside BEGIN IMMEDIATE transactions, so two
processes adding at once never lose a fact or merge into a row the other just changed.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

import sqlite_utils

from hermes.clock import Clock, SystemClock, to_ts
from hermes.config import FactsConfig
from hermes.errors import NotFound, RefusedWrite
from hermes.memory.audience import KEEP_PRIVATE, Audience, and_condition
from hermes.memory.facts import provenance
from hermes.memory.facts.contradiction import lookup_words, replaced
from hermes.memory.facts.dedup import Duplicates
from hermes.memory.facts.entities import Entity, EntityStore, check_name
from hermes.memory.facts.graph import connect_entities
from hermes.memory.facts.matched import annotate
from hermes.memory.facts.questions import FactQuestions, Question
from hermes.memory.facts.records import (
    ACTIVE,
    BM25,
    COLUMNS,
    Fact,
    clean_tags,
    content_key,
    fetch_facts,
    get_fact,
    in_sqlite_range,
    insert_fact,
    link_entities,
    linked_entity_ids,
    normalise,
    record_history,
    row_to_fact,
    snapshot,
    writes_from,
)
from hermes.memory.facts.search import FactSearch
from hermes.memory.facts.statement import VERBATIM_TAG, is_verbatim
from hermes.memory.facts.tombstones import Tombstones
from hermes.memory.place import PRIVATE, Place
from hermes.safe_text import scrub
from hermes.safety.guard import check_text
from hermes.store.db import write_transaction
from hermes.store.fts import any_terms

if TYPE_CHECKING:
    from hermes.memory.facts.query_ahead import QueryAhead
    from hermes.memory.facts.recall import FactRecall
    from hermes.memory.facts.vectors import FactVectors

# Fact and content_key live in fact_records; they are part of this module's public API.
__all__ = ["AddResult", "Fact", "FactStore", "RateResult", "ReasonResult", "content_key",
           "normalise"]

log = logging.getLogger(__name__)

KINDS = ("semantic", "episodic", "procedural")
# Trust learned from use (learn_trust): a small rise, capped, and a larger fall.
IMPLICIT_RISE = 0.02
IMPLICIT_FALL = 0.05
IMPLICIT_MAX = 0.9
IMPLICIT_RELIED = "implicit: a reply relied on it"
IMPLICIT_CONTRADICTED = "implicit: the user contradicted it"
IMPLICIT_ORIGIN = "learned from use"
# Reciprocal-rank fusion's constant for related(): small, since each list is short (<= limit).
RELATED_RRF_K = 10
# The start of the text that related() embeds (MiniLM reads 256 tokens at most).
RELATED_MEANING_CHARS = 1000
# A long text's vector mostly means its bulk: a change said in passing ("... and Mark and I
# split up in the spring ...") falls far down, often under the meaning floor. related()
# compares each sentence of a text this long instead (at most RELATED_SENTENCES; a fact counts
# its best cosine): scripts/bench_related.py's diluted pass 0.624 -> 0.832, as said 0.906 ->
# 0.913, for about one more embedding of the text when the turn had embedded it whole.
RELATED_SENTENCES_FROM = 120
RELATED_SENTENCES = 8
# A sentence shorter than this is read with the next ("Dr." is no sentence of its own).
_SHORT_SENTENCE = 25
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\s*\n+\s*")
_TITLE_END = re.compile(r"(?:^|\s)(?:Dr|Mr|Mrs|Ms|Mx|Prof|St|Sr|Jr|Mt|Rev|[A-Z])\.$")
# Related facts read for the ones a statement of the user's contradicts.
RELATED_CONTRADICTED = 10
MAX_CONTENT_CHARS = 2000


def sentences(text: str) -> list[str]:
    """The sentences of a text long enough to dilute them (RELATED_SENTENCES_FROM), at most
    RELATED_SENTENCES; none for a shorter text or a single sentence (the whole says it)."""
    if len(text) < RELATED_SENTENCES_FROM:
        return []
    found: list[str] = []
    pending, start = "", 0
    for end in [*_SENTENCE_END.finditer(text), None]:
        piece = text[start:end.start() if end else len(text)].strip()
        if end is not None and _TITLE_END.search(piece):
            continue        # "Dr. Silva": the title's period ends no sentence
        start = end.end() if end else len(text)
        pending = f"{pending} {piece}".strip()
        if len(pending) >= _SHORT_SENTENCE:
            found.append(pending)
            pending = ""
    if pending:
        if found:
            found[-1] = f"{found[-1]} {pending}"
        else:
            found.append(pending)
    return found[:RELATED_SENTENCES] if len(found) > 1 else []


@dataclass
class AddResult:
    id: int
    status: Literal["created", "merged"]
    fact: Fact
    # For "merged": "exact" (normalised duplicate) or "near" (rapidfuzz), and the similarity.
    match: Literal["exact", "near"] | None = None
    similarity: float | None = None
    # For "created" with ``supersede``: the facts it contradicted, now superseded by it.
    superseded: list[int] = field(default_factory=list)


@dataclass
class RateResult:
    id: int
    old_trust: float
    new_trust: float


@dataclass
class ReasonResult:
    facts: list[Fact]
    path: list[str] = field(default_factory=list)  # entity chain when no fact links them directly
    unknown: list[str] = field(default_factory=list)  # names that resolve to no entity


class FactStore:
    def __init__(
        self, db: sqlite_utils.Database, config: FactsConfig, clock: Clock | None = None,
        vectors: FactVectors | None = None, audience: Audience | None = None,
    ) -> None:
        self.db = db
        self.config = config
        self.clock = clock or SystemClock()
        # who may read what (privacy.shared_places): every read for a reply takes its place
        self.audience = audience or Audience()
        self.entity_store = EntityStore(db, config, self.clock)
        # hermes.memory.facts.vectors.FactVectors when recall by meaning is on
        self.vectors = vectors
        self.duplicates = Duplicates(db, config, self.entity_store)
        self.searcher = FactSearch(db, vectors)
        self.tombstones = Tombstones(db, config.merge_threshold)
        self.questions = FactQuestions(db)

    @cached_property
    def recall(self) -> FactRecall:
        """What a turn recalls from these facts (its word counts cached across turns)."""
        from hermes.memory.facts.recall import FactRecall

        return FactRecall(self, self.clock)

    # -- reading one ------------------------------------------------------------------------

    def _now(self) -> str:
        return to_ts(self.clock.now())

    def _fetch(self, user: str, where: str, params: Sequence[Any], tail: str = "") -> list[Fact]:
        return fetch_facts(self.db, user, where, params, tail)

    def get(self, user: str, fact_id: int, *, place: Place = PRIVATE) -> Fact:
        """One fact of this user, in any state. NotFound for unknown ids, other users' ids and
        (``place`` shared) facts a reply read there may not hold."""
        fact = get_fact(self.db, user, fact_id)
        if place.shared and not self.audience.sees_item(place, fact.place, fact.shared):
            raise NotFound(f"No fact with id {fact.id} for user {user!r}.")
        return fact

    def _visible(self, place: Place) -> tuple[str, list[Any]]:
        """The audience's condition over ``f`` for a read in ``place`` (none when private)."""
        return self.audience.items(place, "f")

    def _learned_in(self, user: str, session_id: int | None, place: Place | None,
                    source: str | None) -> tuple[Place, str]:
        """Where a new fact was learned and where it came from: as given, else its source
        session's (a fact learned in a Discord channel is placed there; one from an imported
        transcript came from an import, one from a cron run is the model's own), else private
        and said."""
        if (place is None or source is None) and session_id is not None \
                and in_sqlite_range(int(session_id)):
            row = self.db.execute("SELECT place, source FROM sessions WHERE id = ? AND user = ?",
                                  [int(session_id), user]).fetchone()
            if row is not None:
                place = Place(row[0]) if place is None else place
                if source is None:
                    source = {"import": "import", "cron": "inferred"}.get(row[1], "said")
        return place or PRIVATE, provenance.check_source(source or provenance.SAID)

    def session_place(self, user: str, session_id: int | None) -> Place:
        """Where ``user``'s session is held (private for none, or another user's id)."""
        return self._learned_in(user, session_id, None, None)[0]

    def _history(self, fact: Fact, action: str, old: Any, new: Any, note: str | None = None,
                 at: str | None = None) -> None:
        record_history(self.db, fact, action, old, new, note=note, at=at or self._now())

    # -- adding -----------------------------------------------------------------------------

    def _validate(self, content: str, category: str, kind: str) -> str:
        text = normalise(content or "")
        if not text:
            raise RefusedWrite("Refused: a fact needs non-empty text.")
        limit = getattr(self.config, "max_content_chars", MAX_CONTENT_CHARS)
        if len(text) > limit:
            raise RefusedWrite(
                f"Refused: a fact is one statement of at most {limit:,} characters "
                f"(got {len(text):,}). Split it into several facts."
            )
        if category not in self.config.categories:
            raise RefusedWrite(
                f"Refused: unknown category {category!r}; use one of "
                f"{', '.join(self.config.categories)} (or add it to facts.categories)."
            )
        if kind not in KINDS:
            raise RefusedWrite(f"Refused: kind must be one of {', '.join(KINDS)}.")
        check_text(text)
        return text

    def _check_bounds(self, values: Sequence[str], what: str, key: str) -> None:
        """A fact links at most ``facts.<key>`` of ``what``: 10,000 entities on one fact held
        the write lock for 46 s and made every probe of them slow."""
        cap = getattr(self.config, key)
        if len(values) > cap:
            raise RefusedWrite(f"Refused: a fact has at most {cap} {what} (got {len(values):,}; "
                               f"facts.{key} in the config). Nothing was changed.")

    def add(
        self,
        user: str,
        content: str,
        *,
        entities: list[str] | None = None,
        category: str = "general",
        tags: Iterable[str] = (),
        kind: str = "semantic",
        importance: float | None = None,
        source_session_id: int | None = None,
        source_message_ids: Iterable[int] = (),
        valid_from: str | None = None,
        place: Place | None = None,
        source: str | None = None,
        shared: int | None = None,
        said_at: str | None = None,
        supersede: bool = False,
    ) -> AddResult:
        """Add a fact, or merge it into an existing duplicate or near duplicate.

        ``place``: where it was learned; ``source``: where it came from (provenance.SOURCES);
        both default to its source session's (else private, said). A fact from elsewhere
        than the user starts with less trust, and one that reads like an instruction is stored
        but not shown (hermes.memory.facts.provenance). The user saying a fact from elsewhere
        again confirms it. ``shared``: the user's mark (None: the home's default).
        ``said_at``: when what it was learned from was said (extraction: its newest message).
        A statement forgotten or corrected since is refused (:class:`Forgotten`); None (a
        person's own write, now) never is. ``supersede``: what the user states outright (the
        fast lane, /remember, facts add) replaces an active fact it contradicts (another value
        of a single-valued relation: :mod:`hermes.memory.facts.contradiction`), which stays
        in the history, superseded by it, instead of both staying active."""
        text = self._validate(content, category, kind)
        # Read before the write lock (related facts may embed the text).
        contradicted = self._replaced_by(user, text) if supersede else []
        self._check_bounds(entities or (), "entities", "max_entities_per_fact")
        for name in entities or ():
            check_name(name)
        tag_list = clean_tags(tags)
        self._check_bounds(tag_list, "tags", "max_tags_per_fact")
        message_ids = [int(m) for m in source_message_ids]
        if importance is not None and not 0 <= importance <= 1:
            raise RefusedWrite("Refused: importance must be between 0 and 1.")
        key = content_key(text)
        if shared not in (None, 0, 1):
            raise RefusedWrite("Refused: shared is 1 (shareable), 0 (private) or None.")
        with write_transaction(self.db):
            where_learned, source = self._learned_in(user, source_session_id, place, source)
            now = self._now()
            self.tombstones.check(user, text, said_at)
            def seen_here(place_key: str, mark: int | None) -> bool:
                return self.audience.sees_item(where_learned, place_key, mark)

            # (the fact the place it was said in sees first: a shared place may have its own)
            exact = sorted(self._fetch(user, f"f.content_key = ? AND {ACTIVE}", [key],
                                       "ORDER BY f.id"),
                           key=lambda f: not seen_here(f.place, f.shared))[:1]
            if exact and not entities:
                # The same statement again: its entities were found the first time.
                fact = self._fold(exact[0], text, [], tag_list, message_ids, now,
                                  "exact duplicate", where_learned, source)
                if fact is not None:
                    return AddResult(fact.id, "merged", fact, "exact", 100.0)
            # Names found in the text are a guess: the first ones, up to the bound.
            names = entities if entities else self.entity_store.candidates(user, text)[
                : self.config.max_entities_per_fact]
            linked = self.entity_store.ensure_all(user, names)
            if exact:
                fact = self._fold(exact[0], text, linked, tag_list, message_ids, now,
                                  "exact duplicate", where_learned, source)
                if fact is not None:
                    return AddResult(fact.id, "merged", fact, "exact", 100.0)
            near = self.duplicates.near_duplicate(user, text, [i for i, _ in linked],
                                                  prefer=seen_here)
            if near is not None:
                existing, similarity = near
                fact = self._fold(existing, text, linked, tag_list, message_ids, now,
                                  f"near duplicate ({similarity:.0f})", where_learned, source)
                if fact is not None:
                    return AddResult(fact.id, "merged", fact, "near", similarity)
            fact_id = insert_fact(
                self.db, user=user, content=text, category=category, kind=kind, tags=tag_list,
                entity_names=[n for _, n in linked],
                trust=provenance.start_trust(self.config, source),
                importance=importance, now=now, valid_from=valid_from or now,
                source_session_id=source_session_id, source_message_ids=message_ids,
                place=where_learned.key, shared=shared, source=source)
            link_entities(self.db, fact_id, [i for i, _ in linked])
            fact = self.get(user, fact_id)
            self._history(fact, "add", None, snapshot(fact), at=now)
            reason = provenance.withheld(source, text)
            if reason is not None:
                # Stored, not shown: a forgotten fact whose reason says why (the user may
                # restore it, which confirms it).
                self.db.execute(
                    "UPDATE facts SET forgotten_at = ?, forgotten_reason = ? "
                    "WHERE id = ? AND user = ?", [now, reason, fact_id, user])
                self._history(fact, "forget", {"forgotten_at": None},
                              {"forgotten_at": now, "forgotten_reason": reason}, note=reason,
                              at=now)
                fact = self.get(user, fact_id)
                contradicted = []   # a fact withheld replaces nothing
            superseded = []
            for old_id in contradicted:
                old = self.get(user, old_id)
                # Only what the place it was said in may see: a channel's "my new therapist
                # is ..." never retires (nor names, in the reply's note) a private fact.
                if old.active and seen_here(old.place, old.shared):
                    self._supersede(old, fact_id, "contradicted by what the user said", now)
                    superseded.append(old.id)
        return AddResult(fact_id, "created", fact, superseded=superseded)

    def _replaced_by(self, user: str, text: str) -> list[int]:
        """The active facts of ``user`` that ``text``, said outright, replaces
        (:func:`hermes.memory.facts.contradiction.replaced`), among its related facts and the
        user's facts of the relations it speaks of: "I'm now at Globex" shares no word with
        "The user works at Acme", which its relation's words ("works", "job" ...) find."""
        words = lookup_words(text)
        if not words:
            return []
        found = {f.id: f for f in self.related(user, text, limit=RELATED_CONTRADICTED)}
        terms = any_terms(" ".join(words), drop_stopwords=False)
        if terms:
            rows = self.db.execute(
                f"SELECT {COLUMNS} FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid "
                f"WHERE facts_fts MATCH ? AND f.user = ? AND {ACTIVE} "
                f"ORDER BY {BM25} * f.trust, f.id DESC LIMIT ?",
                [f"content : ({terms})", user, 3 * RELATED_CONTRADICTED]).fetchall()
            for row in rows:
                found.setdefault(row[0], row_to_fact(row))
        olds = list(found.values())
        return [olds[i].id for i in replaced(text, [f.content for f in olds])]

    def _supersede(self, old: Fact, new_id: int, note: str | None, now: str) -> None:
        """``old`` replaced by fact ``new_id``: kept with ``valid_to`` and the link, a history
        row, and a tombstone (what was said before is not learned again)."""
        self.tombstones.record(old.user, old.id, old.content, "correct", note, now)
        self.db.execute(
            "UPDATE facts SET valid_to = ?, superseded_by = ?, updated_at = ? "
            "WHERE id = ? AND user = ?", [now, new_id, now, old.id, old.user],
        )
        self._history(self.get(old.user, old.id), "supersede",
                      {"valid_to": None, "superseded_by": None},
                      {"valid_to": now, "superseded_by": new_id}, note=note, at=now)

    def _fold(self, existing: Fact, text: str, linked: list[tuple[int, str]], tags: list[str],
              message_ids: list[int], now: str, note: str, where: Place,
              source: str) -> Fact | None:
        """Merge a statement made in ``where`` into the fact it duplicates, unless that would
        let a place's readers learn more than was said to them (hermes.memory.audience); None:
        store it as a fact of its own (inside the caller's transaction).

        * Everyone who may see the fact would see the statement too: it merges (said in a
          channel into what the user marked private: the mark stands, the channel sees none).
        * Said in a channel, known until now only in private places: when the merged fact says
          no more than the channel heard, it merges and is the channel's from now on (private
          places still see it); when it says more, the channel gets a fact of its own.
        * Said where fewer may see it (a DM about a channel's fact): the same statement
          confirms the fact and changes nothing else; other words are a fact of their own,
          never written into what the channel reads."""
        audience = self.audience
        seen_here = audience.sees_item(where, existing.place, existing.shared)
        if audience.covers(existing.place, existing.shared, where):
            if seen_here or existing.shared == KEEP_PRIVATE:
                fact = self.duplicates.merge(existing, text, linked, tags, message_ids, now,
                                             note)
            elif content_key(self.duplicates.merged_wording(existing, text)) == \
                    content_key(text):
                fact = self.duplicates.merge(existing, text, linked, tags, message_ids, now,
                                             note)
                self.db.execute("UPDATE facts SET place = ? WHERE id = ? AND user = ?",
                                [where.key, fact.id, fact.user])
                self._history(fact, "place", {"place": fact.place}, {"place": where.key},
                              note=f"said in {where.describe()}", at=now)
                fact = self.get(fact.user, fact.id)
            else:
                return None
        elif seen_here and content_key(existing.content) == content_key(text):
            fact = existing
        else:
            return None
        return self._confirm_if_said(fact, source, now)

    def _confirm_if_said(self, fact: Fact, source: str, now: str) -> Fact:
        """The user saying a fact from elsewhere again confirms it (inside the caller's
        transaction): it ranks with their own from then on, at the default trust or above."""
        if provenance.outside(source) or not provenance.unconfirmed(fact):
            return fact
        return self._confirm(fact, now, note="confirmed: the user said it")

    def _confirm(self, fact: Fact, now: str, *, note: str) -> Fact:
        trust = max(fact.trust, self.config.default_trust)
        self.db.execute("UPDATE facts SET confirmed_at = ?, trust = ? WHERE id = ? AND user = ?",
                        [now, trust, fact.id, fact.user])
        self._history(fact, "confirm", {"confirmed_at": None, "trust": fact.trust},
                      {"confirmed_at": now, "trust": trust}, note=note, at=now)
        return self.get(fact.user, fact.id)

    # -- searching --------------------------------------------------------------------------

    def search(
        self,
        user: str,
        query: str,
        *,
        limit: int = 10,
        category: str | None = None,
        min_trust: float | None = None,
        explain: bool = False,
        any_word: bool = False,
        meaning: str | None = None,
        ahead: QueryAhead | None = None,
        place: Place = PRIVATE,
    ) -> list[Fact]:
        """Active facts matching ``query``, ranked by bm25 x trust; low-trust facts hidden;
        ``place``: where the result will be read (a shared place: only what its readers may
        see, hermes.memory.audience); unconfirmed facts from elsewhere than the user after
        the user's own (hermes.memory.facts.provenance).

        All terms must match first; when that finds nothing, any non-stopword term may
        (``any_word``: any term at once, ranked by bm25, as per-turn recall does). CJK text (no
        word breaks for FTS5) is matched with LIKE. With fact vectors, bm25 over any word is
        fused with the cosine of ``meaning`` (default: ``query``) to each fact, and with the
        facts' dates when it names a time (by this store's clock), then x trust. ``ahead``:
        ``meaning``'s embedding, already computing on the worker (the turn's prompt).
        See hermes.memory.facts.search.
        """
        floor = self.config.search_min_trust if min_trust is None else min_trust
        query, meaning = scrub(query), None if meaning is None else scrub(meaning)
        found = self.searcher.search(user, query, limit=limit, category=category, floor=floor,
                                     explain=explain, any_word=any_word, meaning=meaning,
                                     now=self.clock.now(), ahead=ahead,
                                     visible=self._visible(place))
        found = provenance.own_first(found)
        if explain:  # which words matched where: for a person reading, never per turn
            annotate(self.db, user, query, found, exchange=not place.shared)
        return found

    def withheld_copy(self, user: str, text: str) -> Fact | None:
        """The user's withheld fact that says ``text`` already (the same words), or None: a
        poisoned page the model reads at every turn is withheld once, not once a turn."""
        found = self._fetch(user, "f.content_key = ? AND f.forgotten_reason LIKE ?",
                            [content_key(normalise(text)), provenance.WITHHELD_PREFIX + "%"],
                            "ORDER BY f.id LIMIT 1")
        return found[0] if found else None

    def probe(self, user: str, entity: str, *, limit: int | None = None,
              place: Place = PRIVATE) -> list[Fact]:
        """Every active fact linked to the entity (or one of its aliases), by trust then
        recency (the user's own before unconfirmed facts from elsewhere). Exact: only linked
        facts, and all of them unless ``limit`` says otherwise; in a shared ``place``, those
        its readers may see."""
        entity_id = self.entity_store.resolve_id(user, scrub(entity))
        if entity_id is None:
            return []
        tail = "ORDER BY f.trust DESC, f.updated_at DESC, f.id DESC"
        params: list[Any] = [entity_id]
        if limit is not None:
            tail += " LIMIT ?"
            params.append(int(limit))
        visible, visible_params = self._visible(place)
        # Driven from the link index (CROSS JOIN fixes the join order): cost follows the
        # entity's facts, not the user's.
        rows = self.db.execute(
            f"SELECT {COLUMNS} FROM fact_entities fe CROSS JOIN facts f ON f.id = fe.fact_id "
            f"WHERE fe.entity_id = ? AND f.user = ? AND {ACTIVE}{and_condition(visible)} "
            f"{tail}",
            [entity_id, user, *visible_params, *params[1:]],
        ).fetchall()
        facts = [row_to_fact(r) for r in rows]
        for fact in facts:
            fact.score = fact.trust
        return provenance.own_first(facts)

    def reason(self, user: str, entities: list[str], *, limit: int = 20,
               place: Place = PRIVATE) -> ReasonResult:
        """Facts connecting the entities: linked to all first, then to several, by how many
        they link and by trust. With no direct link, the shortest chain through shared
        entities."""
        resolved: dict[int, str] = {}
        unknown: list[str] = []
        for name in map(scrub, entities):
            entity_id = self.entity_store.resolve_id(user, name)
            if entity_id is None:
                unknown.append(name)
            else:
                resolved.setdefault(entity_id, name)
        if not resolved or (len(entities) > 1 and len(resolved) < 2):
            return ReasonResult([], [], unknown)  # nothing to connect
        ids = list(resolved)
        marks = ",".join("?" * len(ids))
        need = 2 if len(ids) > 1 else 1
        scan = ids
        if len(ids) > 1:
            # A fact linked to two or more of them is linked to one that is not the most
            # linked entity, so that hub's (possibly thousands of) links need not be read.
            counts = dict(self.db.execute(
                f"SELECT entity_id, count(*) FROM fact_entities WHERE entity_id IN ({marks}) "
                f"GROUP BY entity_id", ids).fetchall())
            hub = max(ids, key=lambda i: counts.get(i, 0))
            scan = [i for i in ids if i != hub]
        scan_marks = ",".join("?" * len(scan))
        visible, visible_params = self._visible(place)
        rows = self.db.execute(
            f"""
            SELECT {COLUMNS}, (SELECT count(*) FROM fact_entities x
                               WHERE x.fact_id = f.id AND x.entity_id IN ({marks})) AS links
            FROM (SELECT DISTINCT fact_id FROM fact_entities WHERE entity_id IN ({scan_marks})) c
              CROSS JOIN facts f ON f.id = c.fact_id
            WHERE f.user = ? AND {ACTIVE}{and_condition(visible)} AND links >= ?
            ORDER BY links DESC, f.trust DESC, f.updated_at DESC, f.id DESC LIMIT ?
            """,
            [*ids, *scan, user, *visible_params, need, int(limit)],
        ).fetchall()
        facts = []
        for row in rows:
            fact = row_to_fact(row)
            fact.score = float(row[-1]) + fact.trust
            fact.explain = {"links": int(row[-1]), "of": len(ids), "trust": fact.trust}
            facts.append(fact)
        if facts or len(ids) < 2:
            return ReasonResult(provenance.own_first(facts), [], unknown)
        path_ids, fact_ids = connect_entities(self.db, user, ids)
        if not path_ids:
            return ReasonResult([], [], unknown)
        chain = [self.get(user, i) for i in fact_ids][:limit]
        if place.shared and not all(self.audience.sees_item(place, f.place, f.shared)
                                    for f in chain):
            # A chain through a fact its readers may not see would say what it says.
            return ReasonResult([], [], unknown)
        names = self.entity_store.names_of(user, path_ids)
        for position, fact in enumerate(chain):
            fact.score = fact.trust
            fact.explain = {"path_step": position + 1}
        return ReasonResult(chain, [names[i] for i in path_ids], unknown)

    def related(self, user: str, text: str, *, limit: int = 10,
                by_meaning: bool = True, place: Place = PRIVATE) -> list[Fact]:
        """Active facts that may bear on ``text``, the ones learning may update, merge or
        contradict: those about entities it names, FTS matches on any of its terms, and (with
        fact vectors, ``by_meaning``) the nearest by meaning, so that a paraphrase ("Our dog
        passed away") finds the fact it changes ("The user has a beagle named Biscuit"). Each
        side reads at most ``limit`` rows (meaning: the nearest ``2 x limit``, at the model's
        floor or above; for a long text, those of each of its sentences, :func:`sentences`);
        the three ranked lists are fused by reciprocal rank. Used by
        extraction (the facts its model is shown) and consolidation (merge, contradiction).
        ``place``: learning from a conversation held in a shared place is shown only the facts
        its readers may see (what it writes is placed there: it must not copy what they may
        not)."""
        ranked: list[list[Fact]] = []
        visible, visible_params = self._visible(place)
        seen = and_condition(visible)
        entity_ids = [i for i, _ in self.entity_store.known_in(user, text)]
        if entity_ids:
            marks = ",".join("?" * len(entity_ids))
            rows = self.db.execute(
                f"SELECT DISTINCT {COLUMNS} FROM fact_entities fe CROSS JOIN facts f "
                f"ON f.id = fe.fact_id WHERE fe.entity_id IN ({marks}) AND f.user = ? "
                f"AND {ACTIVE}{seen} ORDER BY f.trust DESC, f.updated_at DESC, f.id DESC "
                "LIMIT ?",
                [*entity_ids, user, *visible_params, int(limit)],
            ).fetchall()
            ranked.append([row_to_fact(row) for row in rows])
        terms = any_terms(text)
        if terms:
            rows = self.db.execute(
                f"""
                SELECT {COLUMNS} FROM facts_fts JOIN facts f ON f.id = facts_fts.rowid
                WHERE facts_fts MATCH ? AND f.user = ? AND {ACTIVE}{seen}
                ORDER BY {BM25} * f.trust LIMIT ?
                """,
                [terms, user, *visible_params, int(limit)],
            ).fetchall()
            ranked.append([row_to_fact(row) for row in rows])
        if by_meaning and self.vectors is not None:
            ranked.append(self._related_by_meaning(user, text, limit, place))
        return fuse_ranked(ranked, limit)

    def _related_by_meaning(self, user: str, text: str, limit: int,
                            place: Place = PRIVATE) -> list[Fact]:
        """The user's active facts nearest ``text`` by meaning, nearest first. A failure to
        embed is logged and leaves the words' side alone (never a failed extraction)."""
        assert self.vectors is not None
        try:
            query = scrub(text)[:RELATED_MEANING_CHARS]
            floor = self.vectors.meaning_floor
            near: dict[int, float] = {}
            for part in (sentences(query) or [query]):
                similarity = self.vectors.similarity(user, part)
                if similarity is None:
                    return []
                for fact_id, cosine in similarity.nearest(2 * limit).items():
                    if cosine >= floor and cosine > near.get(fact_id, -1.0):
                        near[fact_id] = cosine
        except Exception as exc:  # noqa: BLE001 - logged; the words still find related facts
            log.warning("related facts by meaning for %s: %s", user, exc)
            return []
        if not near:
            return []
        marks = ",".join("?" * len(near))
        visible, visible_params = self._visible(place)
        rows = self.db.execute(
            f"SELECT {COLUMNS} FROM facts f WHERE f.user = ? AND {ACTIVE}"
            f"{and_condition(visible)} AND f.id IN ({marks})",
            [user, *visible_params, *near]).fetchall()
        ordered = sorted(rows, key=lambda r: (near[r[0]], r[0]), reverse=True)[:limit]
        return [row_to_fact(row) for row in ordered]

    def recent(self, user: str, since: str, *, limit: int = 20,
               place: Place = PRIVATE) -> list[Fact]:
        """Active facts added or changed at or after ``since`` (a stored timestamp), newest
        first (in a shared ``place``, those its readers may see)."""
        visible, visible_params = self._visible(place)
        return self._fetch(user, f"f.updated_at >= ? AND {ACTIVE}{and_condition(visible)}",
                           [since, *visible_params, int(limit)],
                           "ORDER BY f.updated_at DESC, f.id DESC LIMIT ?")

    def history_mark(self) -> int:
        """A watermark for :meth:`changed_since`: the newest fact-history row id (any user's:
        it is a position, not a row, and reading it is one rowid lookup)."""
        return int(self.db.execute("SELECT coalesce(max(id), 0) FROM fact_history")
                   .fetchone()[0])

    def changed_since(self, user: str, mark: int, *, limit: int = 20,
                      place: Place = PRIVATE) -> list[Fact]:
        """This user's facts added, merged, updated, superseded, forgotten or restored after the
        watermark ``mark``, in any state, oldest change first. Ratings do not count. In a shared
        ``place``, only those its readers may see."""
        rows = self.db.execute(
            "SELECT fact_id, max(id) AS last FROM fact_history WHERE id > ? AND user = ? "
            "AND action != 'rate' GROUP BY fact_id ORDER BY last LIMIT ?",
            [int(mark), user, int(limit)]).fetchall()
        if not rows:
            return []
        order = {fact_id: i for i, (fact_id, _) in enumerate(rows)}
        marks = ",".join("?" * len(order))
        visible, visible_params = self._visible(place)
        found = self._fetch(user, f"f.id IN ({marks}){and_condition(visible)}",
                            [*order, *visible_params])
        return sorted(found, key=lambda f: order[f.id])

    def list_facts(self, user: str, *, category: str | None = None, include_inactive: bool = False,
                   limit: int = 50, place: Place = PRIVATE) -> list[Fact]:
        condition = "1" if include_inactive else ACTIVE
        params: list[Any] = []
        if category is not None:
            condition += " AND f.category = ?"
            params.append(category)
        visible, visible_params = self._visible(place)
        condition += and_condition(visible)
        return self._fetch(user, condition, [*params, *visible_params, int(limit)],
                           "ORDER BY f.updated_at DESC, f.id DESC LIMIT ?")

    def count_active(self, user: str) -> int:
        """How many of the user's facts are active."""
        return int(self.db.execute(f"SELECT count(*) FROM facts f WHERE f.user = ? AND {ACTIVE}",
                                   [user]).fetchone()[0])

    def count_tagged(self, user: str, tag: str) -> int:
        """How many of the user's facts carry ``tag``, in any state."""
        return int(self.db.execute(
            "SELECT count(*) FROM facts WHERE user = ? AND EXISTS "
            "(SELECT 1 FROM json_each(facts.tags) WHERE value = ?)", [user, tag]).fetchone()[0])

    def entities(self, user: str) -> list[Entity]:
        return self.entity_store.list_entities(user)

    def history(self, user: str, fact_id: int) -> list[dict]:
        self.get(user, fact_id)
        rows = self.db.execute(
            "SELECT id, fact_id, action, old, new, note, at, origin FROM fact_history "
            "WHERE fact_id = ? AND user = ? ORDER BY id",
            [int(fact_id), user],
        ).fetchall()
        return [
            {"id": r[0], "fact_id": r[1], "action": r[2],
             "old": json.loads(r[3]) if r[3] else None,
             "new": json.loads(r[4]) if r[4] else None, "note": r[5], "at": r[6],
             "origin": r[7]}
            for r in rows
        ]

    # -- changing ---------------------------------------------------------------------------

    def mark_retrieved(self, user: str, fact_ids: Iterable[int]) -> None:
        """Count that these facts were shown (recall, search results given to the model)."""
        ids = [int(i) for i in fact_ids if in_sqlite_range(int(i))]
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with write_transaction(self.db):
            self.db.execute(
                f"UPDATE facts SET retrieved_count = retrieved_count + 1 "
                f"WHERE user = ? AND id IN ({marks})", [user, *ids],
            )

    def add_sources(self, user: str, fact_id: int, message_ids: Iterable[int]) -> None:
        """Cite more of the user's messages as the fact's sources (the fast lane: the reply
        to the message that said it). Ids of another user's messages are ignored; the fact's
        exchange is indexed again by the facts trigger."""
        ids = [int(i) for i in message_ids if in_sqlite_range(int(i))]
        if not ids:
            return
        with write_transaction(self.db):
            fact = self.get(user, fact_id)
            marks = ",".join("?" * len(ids))
            mine = [int(r[0]) for r in self.db.execute(
                f"SELECT id FROM messages WHERE user = ? AND id IN ({marks}) ORDER BY id",
                [user, *ids]).fetchall()]
            sources = list(dict.fromkeys([*fact.source_message_ids, *mine]))
            if sources != fact.source_message_ids:
                self.db.execute("UPDATE facts SET source_message_ids = ? WHERE id = ? AND user = ?",
                                [json.dumps(sources), fact.id, user])

    def rate(self, user: str, fact_id: int, helpful: bool, *,
             confirms: bool = False) -> RateResult:
        """Helpful: trust + helpful_delta; unhelpful: trust - unhelpful_delta; clamped.

        ``confirms``: the person rated this one fact themselves (``hermes facts rate``,
        ``/rate``, the web panel), so a helpful rating confirms a fact from elsewhere
        (hermes.memory.facts.provenance). A model's rating (the fact_feedback tool, an MCP
        client) or a 👍 on a whole reply never does: a source could vouch for itself."""
        delta = self.config.helpful_delta if helpful else -self.config.unhelpful_delta
        result = self._move_trust(user, fact_id, helpful, delta, +1,
                                  note="helpful" if helpful else "unhelpful")
        if helpful and confirms:
            with write_transaction(self.db):
                fact = self.get(user, fact_id)
                if provenance.unconfirmed(fact):
                    fact = self._confirm(fact, self._now(), note="confirmed: rated helpful")
                    result = RateResult(result.id, result.old_trust, fact.trust)
        return result

    def withdraw_rating(self, user: str, fact_id: int, helpful: bool,
                        applied: float) -> RateResult | None:
        """Undo one earlier ``rate``: take back the trust change it ``applied`` (the exact
        change, which clamping may have made smaller than the delta) and its count. None when
        the fact is gone (purged since)."""
        try:
            return self._move_trust(user, fact_id, helpful, -applied, -1,
                                    note="rating withdrawn")
        except NotFound:
            return None

    def learn_trust(self, user: str, fact_id: int, relied: bool, *,
                    reply_ids: Iterable[int] = ()) -> RateResult | None:
        """Trust learned from use, without a button: a reply relied on the fact and the user
        did not contradict it (+IMPLICIT_RISE, once per fact a day, never above IMPLICIT_MAX),
        or the user contradicted it (-IMPLICIT_FALL). Recorded in its history as implicit
        (origin ``learned from use``); the helpful/unhelpful counts are the buttons' alone.
        None when nothing changed (the day's rise was had, or at the cap)."""
        note = IMPLICIT_RELIED if relied else IMPLICIT_CONTRADICTED
        with write_transaction(self.db):
            fact = self.get(user, fact_id)
            now = self._now()
            if relied:
                since = to_ts(self.clock.now() - timedelta(days=1))
                if fact.trust >= IMPLICIT_MAX or self.db.execute(
                        "SELECT 1 FROM fact_history WHERE fact_id = ? AND user = ? AND "
                        "action = 'rate' AND note = ? AND at > ? LIMIT 1",
                        [fact.id, user, note, since]).fetchone():
                    return None
                new_trust = round(min(IMPLICIT_MAX, fact.trust + IMPLICIT_RISE), 6)
            else:
                new_trust = round(max(0.0, fact.trust - IMPLICIT_FALL), 6)
            if new_trust == fact.trust:
                return None
            self.db.execute("UPDATE facts SET trust = ? WHERE id = ? AND user = ?",
                            [new_trust, fact.id, user])
            replies = [int(i) for i in reply_ids]
            with writes_from(IMPLICIT_ORIGIN):
                self._history(fact, "rate", {"trust": fact.trust},
                              {"trust": new_trust, "replies": replies}, note=note, at=now)
        return RateResult(fact.id, fact.trust, new_trust)

    def trust_changes(self, user: str) -> dict[str, int]:
        """How many trust changes of each kind (the history note: helpful, unhelpful, rating
        withdrawn, or learned from use) the user's facts had (``hermes stats``)."""
        rows = self.db.execute("SELECT note, count(*) FROM fact_history WHERE user = ? AND "
                               "action = 'rate' GROUP BY note", [user]).fetchall()
        return {str(note): int(count) for note, count in rows}

    def shown_with(self, user: str, message_ids: Iterable[int], *, limit: int = 10
                   ) -> list[Fact]:
        """The user's active facts shown to the model for these replies (recorded by the turn),
        at most ``limit``: what extraction asks about (relied on, contradicted)."""
        ids = [int(i) for i in message_ids if in_sqlite_range(int(i))]
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return self._fetch(
            user, f"{ACTIVE} AND f.id IN (SELECT s.fact_id FROM shown_facts s JOIN messages m "
            f"ON m.id = s.message_id WHERE m.user = ? AND s.message_id IN ({marks}))",
            [user, *ids, int(limit)], "ORDER BY f.id LIMIT ?")

    def mark_relied(self, user: str, message_ids: Iterable[int], fact_ids: Iterable[int]) -> None:
        """The replies among ``message_ids`` relied on these of the facts shown for them (a 👎
        then lowers only those). The user's own messages and facts only."""
        messages = [int(i) for i in message_ids]
        facts = [int(i) for i in fact_ids]
        if not messages or not facts:
            return
        m_marks, f_marks = ",".join("?" * len(messages)), ",".join("?" * len(facts))
        with write_transaction(self.db):
            self.db.execute(
                f"UPDATE shown_facts SET relied = 1 WHERE message_id IN ({m_marks}) "
                f"AND fact_id IN ({f_marks}) AND message_id IN (SELECT id FROM messages "
                f"WHERE user = ?) AND fact_id IN (SELECT id FROM facts WHERE user = ?)",
                [*messages, *facts, user, user])

    def _move_trust(self, user: str, fact_id: int, helpful: bool, delta: float, count: int,
                    *, note: str) -> RateResult:
        """Trust + ``delta`` (clamped to 0..1, rounded) and the helpful or unhelpful count +
        ``count`` (never below 0), with its history row: rating and withdrawing alike."""
        with write_transaction(self.db):
            fact = self.get(user, fact_id)
            # Rounded so that 0.5 - 0.1 - 0.1 is exactly 0.3, not 0.30000000000000004.
            new_trust = round(min(1.0, max(0.0, fact.trust + delta)), 6)
            counter = "helpful_count" if helpful else "unhelpful_count"
            old_count = getattr(fact, counter)
            new_count = max(0, old_count + count)
            self.db.execute(
                f"UPDATE facts SET trust = ?, {counter} = ? WHERE id = ? AND user = ?",
                [new_trust, new_count, fact.id, user],
            )
            self._history(fact, "rate", {"trust": fact.trust, counter: old_count},
                          {"trust": new_trust, counter: new_count}, note=note)
        return RateResult(fact.id, fact.trust, new_trust)

    def update(self, user: str, fact_id: int, content: str, *, note: str | None = None,
               entities: list[str] | None = None,
               source_session_id: int | None = None,
               source_message_ids: Iterable[int] = (), said_at: str | None = None,
               tags: Iterable[str] | None = None) -> Fact:
        """Replace a fact with a new version. The old one stays, superseded (valid_to set),
        and leaves a tombstone (what was said before is not learned again); ``said_at`` as in
        :meth:`add` (a new text forgotten since is refused).

        The new version is linked to the entities its text names (found as ``add`` finds them:
        known names, capitalised names, quoted terms), to ``entities`` when given, and to the
        old version's entities. When the new text names an entity the old did not (a
        substitution: "The user lives in Lisbon" -> "in Porto"), the old names it no longer
        mentions are dropped (Lisbon), so probing them does not return the new version; a
        rewording that names nothing new keeps every link. ``tags``: the new version's tags
        (default: the old version's, less ``verbatim`` once the text is no longer as said)."""
        message_ids = [int(m) for m in source_message_ids]
        self._check_bounds(entities or (), "entities", "max_entities_per_fact")
        for name in entities or ():
            check_name(name)
        with write_transaction(self.db):
            old = self.get(user, fact_id)
            if not old.active:
                newer = f" by fact {old.superseded_by}" if old.superseded_by else ""
                raise RefusedWrite(
                    f"Refused: fact {old.id} is {old.status}{newer}; only an active fact can be "
                    "updated. Nothing was changed."
                )
            text = self._validate(content, old.category, old.kind)
            if content_key(text) == content_key(old.content):
                raise RefusedWrite(f"Refused: the new text of fact {old.id} is the same as the "
                                   "old. Nothing was changed.")
            self.tombstones.check(user, text, said_at)
            now = self._now()
            named_before = {i for i, _ in self.entity_store.known_in(user, old.content)}
            linked = self.entity_store.ensure_all(
                user, [*self.entity_store.candidates(user, text), *(entities or ())])
            named_now = {i for i, _ in linked}
            # A substitution (the new text names an entity the old did not) retires the old
            # names it dropped; a rewording that names nothing new keeps every link.
            replaced = bool(named_now - named_before)
            entity_ids = [i for i in linked_entity_ids(self.db, old.id)
                          if not replaced or i in named_now or i not in named_before]
            for entity_id, _ in linked:
                if entity_id not in entity_ids:
                    entity_ids.append(entity_id)
            display = self.entity_store.names_of(user, entity_ids)
            names = [display[i] for i in entity_ids]
            new_id = insert_fact(
                self.db, user=user, content=text, category=old.category, kind=old.kind,
                tags=_tags_for(text, old.tags if tags is None else clean_tags(tags)),
                entity_names=names, trust=old.trust,
                importance=old.importance,
                now=now, valid_from=now,
                source_session_id=(source_session_id if source_session_id is not None
                                   else old.source_session_id),
                source_message_ids=message_ids or old.source_message_ids,
                # the new version is the same fact, said anew: where and whence it came stay
                place=old.place, shared=old.shared, source=old.source,
                confirmed_at=old.confirmed_at)
            link_entities(self.db, new_id, entity_ids)
            self._supersede(old, new_id, note, now)
            new = self.get(user, new_id)
            self._history(new, "update", {"id": old.id, "content": old.content},
                          snapshot(new), note=note, at=now)
        return new

    def forget(self, user: str, fact_id: int, reason: str | None = None) -> Fact:
        """Soft delete: hidden everywhere, kept, restorable. Forgetting twice changes nothing."""
        with write_transaction(self.db):
            fact = self.get(user, fact_id)
            if fact.forgotten_at:
                return fact
            now = self._now()
            self.db.execute(
                "UPDATE facts SET forgotten_at = ?, forgotten_reason = ?, updated_at = ? "
                "WHERE id = ? AND user = ?", [now, reason, now, fact.id, user],
            )
            self.tombstones.record(user, fact.id, fact.content, "forget", reason, now)
            self._history(fact, "forget", {"forgotten_at": None},
                          {"forgotten_at": now, "forgotten_reason": reason}, note=reason, at=now)
            return self.get(user, fact.id)

    def restore(self, user: str, fact_id: int) -> Fact:
        """Undo ``forget``."""
        with write_transaction(self.db):
            fact = self.get(user, fact_id)
            if not fact.forgotten_at:
                raise RefusedWrite(f"Refused: fact {fact.id} is not forgotten; nothing to restore.")
            now = self._now()
            self.db.execute(
                "UPDATE facts SET forgotten_at = NULL, forgotten_reason = NULL, updated_at = ? "
                "WHERE id = ? AND user = ?", [now, fact.id, user],
            )
            self.tombstones.restored(user, fact.id)
            self._history(fact, "restore",
                          {"forgotten_at": fact.forgotten_at,
                           "forgotten_reason": fact.forgotten_reason},
                          {"forgotten_at": None}, at=now)
            restored = self.get(user, fact.id)
            if provenance.is_withheld(fact) and provenance.unconfirmed(restored):
                # Withheld for reading like an instruction: restoring it is the user's word.
                restored = self._confirm(restored, now, note="confirmed: restored by the user")
            return restored

    def mark(self, user: str, fact_id: int, shared: int | None) -> Fact:
        """The user's mark on a fact: shareable (1: any shared place may show it), private (0:
        no shared place may, not even the one it was learned in) or None (the home's default,
        privacy.shared_places). Who may see it changes, nothing else; recorded in its history.
        """
        if shared not in (None, 0, 1):
            raise RefusedWrite("Refused: a fact is marked shareable, private or default.")
        with write_transaction(self.db):
            fact = self.get(user, fact_id)
            if fact.shared == shared:
                return fact
            self.db.execute("UPDATE facts SET shared = ? WHERE id = ? AND user = ?",
                            [shared, fact.id, user])
            self._history(fact, "mark", {"shared": fact.shared}, {"shared": shared})
            return self.get(user, fact.id)

    # -- asking before an inference overrides what the user said ------------------------------

    def ask_before_overriding(self, user: str, fact_id: int, content: str, *,
                              session_id: int | None = None,
                              message_ids: Iterable[int] = ()) -> Question:
        """Keep ``content``, inferred, as a question about fact ``fact_id`` instead of
        superseding it (hermes.memory.facts.questions)."""
        with write_transaction(self.db):
            fact = self.get(user, fact_id)
            text = self._validate(content, fact.category, fact.kind)
            return self.questions.ask(user, fact.id, text, session_id=session_id,
                                      message_ids=[int(m) for m in message_ids], now=self._now())

    def _questions_audience(self, place: Place) -> tuple[tuple[str, list[Any]],
                                                         tuple[str, list[Any]]]:
        """The audience's conditions over a question's fact and its session (none: private)."""
        return self._visible(place), self.audience.sessions(place, "s")

    def pending_questions(self, user: str, *, place: Place = PRIVATE) -> list[Question]:
        """Open questions (in a shared ``place``: about what its readers may see, inferred
        from a conversation they may read)."""
        with write_transaction(self.db):
            return self.questions.pending(user, audience=self._questions_audience(place))

    def questions_to_ask(self, user: str, *,
                         place: Place = PRIVATE) -> list[tuple[Question, Fact]]:
        """The open question(s) for the next reply to ask, with their facts; marked asked.
        Every turn asks: without an open question that is one index read, no write. A reply
        read in a shared ``place`` asks only about what its readers may see."""
        if not self.questions.any_unasked(user):
            return []
        with write_transaction(self.db):
            found = self.questions.to_ask(user, self._now(),
                                          audience=self._questions_audience(place))
            return [(q, self.get(user, q.fact_id, place=place)) for q in found]

    def settle_question(self, user: str, question_id: int, accept: bool, *,
                        place: Place = PRIVATE) -> Fact:
        """The user's decision: accept (the inferred statement supersedes the fact, as a
        correction) or reject (the fact stays). Returns the fact as it now is. In a shared
        ``place``, only a question it may hold (NotFound otherwise)."""
        with write_transaction(self.db):
            question = self.questions.get(user, question_id,
                                          audience=self._questions_audience(place))
            self.questions.resolve(user, question.id, "accepted" if accept else "rejected",
                                   self._now())
            if not accept:
                return self.get(user, question.fact_id)
            return self.update(user, question.fact_id, question.content,
                               note="confirmed by the user (pending question)",
                               source_session_id=question.session_id,
                               source_message_ids=question.message_ids or ())

    def purge(self, user: str, fact_id: int) -> None:
        """Delete a fact for good, with its history and every older version it superseded."""
        with write_transaction(self.db):
            fact = self.get(user, fact_id)
            doomed = [fact.id]
            frontier = [fact.id]
            while frontier:
                marks = ",".join("?" * len(frontier))
                frontier = [int(r[0]) for r in self.db.execute(
                    f"SELECT id FROM facts WHERE user = ? AND superseded_by IN ({marks})",
                    [user, *frontier]).fetchall()]
                doomed.extend(frontier)
            # Newest first, so no row is deleted while an older one still points at it.
            for doomed_id in doomed:
                self.db.execute("UPDATE facts SET superseded_by = NULL WHERE superseded_by = ? "
                                "AND user = ?", [doomed_id, user])
            marks = ",".join("?" * len(doomed))
            # Gone, but not to be learned again from what was said before: the tombstones of
            # its versions stay (``hermes facts tombstones --remove`` takes one away).
            if not self.tombstones.of_fact(user, fact.id):
                self.tombstones.record(user, fact.id, fact.content, "purge", None, self._now())
            self.tombstones.purged(user, doomed)
            self.db.execute(f"DELETE FROM facts WHERE user = ? AND id IN ({marks})",
                            [user, *doomed])



def _tags_for(content: str, tags: list[str]) -> list[str]:
    """A new version's tags: the old ones, less ``verbatim`` once it is no longer the user's
    words kept as said (extraction wrote the clean statement)."""
    return tags if is_verbatim(content) else [t for t in tags if t != VERBATIM_TAG]


def fuse_ranked(ranked: Sequence[Sequence[Fact]], limit: int) -> list[Fact]:
    """Reciprocal-rank fusion of ranked lists of facts: a fact high in several lists first;
    a tie keeps the order of the lists (entities, words, meaning) and of each list."""
    scores: dict[int, float] = {}
    facts: dict[int, Fact] = {}
    for found in ranked:
        for rank, fact in enumerate(found, start=1):
            facts.setdefault(fact.id, fact)
            scores[fact.id] = scores.get(fact.id, 0.0) + 1.0 / (RELATED_RRF_K + rank)
    order = {fact_id: position for position, fact_id in enumerate(facts)}
    best = sorted(facts, key=lambda i: (-scores[i], order[i]))[:limit]
    return [facts[i] for i in best]
