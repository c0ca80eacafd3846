"""Fact vectors: each active fact embedded once, in the background, for recall by meaning.

"What car do I drive?" shares no word with "The user owns a Tesla Model 3": bm25 cannot find it,
a small embedding model can. Facts are few and short, so every one of a user's facts is compared
with the query (one matrix-vector product over a matrix held in memory per user), and the
cosines are fused with bm25 by :func:`fuse`.

Vectors are written off the reply path: by the extraction worker after it changes facts (its own
thread and connection), by the daemon's periodic vector job, and by ``hermes sessions index``.
Commands that write facts outside the daemon (``hermes facts add``/``update``, the MCP server's
facts_add/facts_update) embed them right after writing (:meth:`FactVectors.catch_up`). A search
never embeds a fact itself: a fact written a moment ago is found by its words until its vector
exists. Each row keeps the ``content_key`` it was computed from, so a fact whose text
changed (update, merge) is embedded again. Rows are scoped by user like every other read.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlite_utils

from hermes.memory.embeddings.embedders import Embedder, Embedders, meaning_floor, message_text
from hermes.memory.facts.query_ahead import QueryAhead
from hermes.memory.facts.records import ACTIVE
from hermes.memory.vectors import cells as vector_cells
from hermes.memory.vectors.matrix import (
    Int8Rows,
    changes_since,
    last_change,
    model_size,
)
from hermes.memory.vectors.store import VectorStore
from hermes.memory.words import trust as words_trust
from hermes.memory.words.dates import TimeSpan, time_spans
from hermes.store.fts import MatchPlan

if TYPE_CHECKING:
    from concurrent.futures import Future

log = logging.getLogger(__name__)

# How dense and bm25 scores are fused, chosen on LoCoMo's tuning half (scripts/bench_locomo.py
# --mode facts --embeddings e5 --fusion F --fusion-weight W): z-score fusion, the cosine's z
# weighted by DENSE_WEIGHT (turn R@5 0.584-0.587 for weights 1-3; score sum 0.562-0.586;
# reciprocal-rank fusion 0.555-0.563). Chosen again with the exchange column (m018/m019) for
# each model, tuning half turn R@5 at weights 1.0 / 1.25 / 1.5 / 1.75 / 2.0 / 2.5 / 3.0:
# MiniLM (the default) 0.639 / 0.643 / 0.643 / 0.641 / 0.636 / 0.638 / 0.634, e5 at 1.5 /
# 1.75 / 2.0: 0.645 / 0.644 / 0.644, so one weight serves both; held-out MiniLM 0.654 -> 0.658,
# e5 0.665 -> 0.666. Min-max score sum for MiniLM: 0.640 tuning but 0.633 held-out (0.5:
# 0.622 / 0.634): z-score kept.
FUSION = "zscore"
DENSE_WEIGHT = 1.5
# How far the words are trusted (hermes.memory.words.trust, as session search does): the
# best coverage x agreement among the best TRUST_POOL facts by words (the idf-weighted share of
# the query's content words a fact holds in any of its columns; its cosine as a share of the best
# candidate's) at or under TRUST_LOW leaves the fusion to meaning (bm25's z weighs nothing), at
# or over TRUST_HIGH it is whole. Under TRUST_MIN_FACTS facts, whole. Chosen on LoCoMo's tuning
# half and the recall probes' (docs/retrieval.md).
TRUST_LOW = 0.22
TRUST_HIGH = 0.28
TRUST_POOL = 10
# A query whose content words weigh together less than TRUST_MIN_WEIGHT words none of the facts
# holds ("What's keeping me up?": one word, in 1 fact of 7) is no stronger evidence for a fact
# that holds them all: its coverage counts as that share (weight / TRUST_MIN_WEIGHT unseen
# words). Not for a query that names a time: its date's words match too, and the date parts
# weigh them; nor per turn (word_trust). --mode facts --probes paraphrase --probe-facts 0.980 ->
# 0.990, LoCoMo unchanged (docs/retrieval.md).
TRUST_MIN_WEIGHT = 1.0
# Per turn the words searched are the message's selective ones (hermes.memory.facts.recall: the
# words no fact holds dropped). An implicit message shares a word or two with facts about
# something else ("the puppy trainer came by this morning before work": "morning", "work"), and
# its other words, in no fact, say so: the trust is this share judged with them counted (each
# as a word no fact holds weighs), the rest on the words searched alone.
MESSAGE_SHARE = 0.5
TRUST_MIN_FACTS = 100
# The nearest fact by meaning (at the model's floor) that is not among the word ranking's
# candidates is kept within the best KEEP_NEAREST (0: off), as session search keeps its
# wordless nearest
# (hermes.memory.sessions.semantic.SemanticParams.keep_nearest): no word vouches for it or
# against it, and the fusion keeps meaning alone's first (docs/retrieval.md).
KEEP_NEAREST = 5
# When the query's words are not trusted wholly (TRUST_HIGH), the nearest such fact among
# meaning's best KEEP_AMONG is kept so: the words that bury it are partly incidental ("He
# called me by my mother's name three times": meaning's 2nd, under six facts holding "name",
# "mother" or "times"). --mode facts --probes implicit --probe-facts 0.644 / 0.576 -> 0.656 /
# 0.576, paraphrases and LoCoMo unchanged. Meaning's 1st alone when they are trusted: keeping
# its 2nd there cost LoCoMo's held-out half 0.670 -> 0.667.
KEEP_AMONG = 2
# When the query's words are not trusted wholly (TRUST_HIGH), the facts from this share of the
# model's floor by meaning (MiniLM 0.1, as session search's nearest join) are candidates too:
# they take the places of word matches no nearer in meaning, never more places than the matches
# alone had, and are never shown per turn (Fact.fill_in). bench_locomo --mode facts --probes
# implicit --probe-facts: cues at cosine 0.17-0.2 that meaning alone ranks 1st-5th and the
# fusion left under incidental word matches (docs/retrieval.md).
FILL_IN_SHARE = 0.5
# Facts embedded at once. Small: the model serves one text at a time, and a reply's query
# embedding waits for the batch in progress (about 0.1 s for 8 facts with e5 on one core).
INDEX_BATCH = 8
# The nearest facts by meaning that join the bm25 matches as candidates.
DENSE_CANDIDATES = 50
# A clustered user's scan rounds the query to int8 to find candidates (7x faster than the float
# product, vector_cells.rounded_cosines; within ~0.001 of the exact cosine): the nearest k facts
# are the exact best of the rounded best 2k + this many (as session search does).
RESCORE_MARGIN = 16
# ... if their similarity reaches the model's floor (hermes.memory.embeddings.MEANING_FLOOR).
# Each fact has a second vector, of the exchange it was learned from (its source messages):
# the similarity to a query is (1 - CONTEXT_WEIGHT) x cos(fact) + CONTEXT_WEIGHT x
# cos(exchange), one precomputed matrix. A question is often worded like the conversation rather
# than like the fact distilled from it. Chosen on LoCoMo's tuning half (turn R@5 with the
# session share: 0.610 -> 0.618 at 0.4; 0.3: 0.614, 0.5: 0.618); held-out 0.613 -> 0.624.
CONTEXT_WEIGHT = 0.4
# The exchange is embedded from its first characters (a long paste is represented by its start).
CONTEXT_CHARS = 2000
# A fact learned in the same conversation as a strong match shares some of its relevance: the
# fused z of each candidate gains SESSION_WEIGHT x the best fused z among the candidates from
# its source session (facts of one conversation answer the same questions). Chosen on LoCoMo's
# tuning half (turn R@5 0.588 -> 0.610 at 0.5; 0.3: 0.601, 0.8: 0.602); held-out 0.607 -> 0.613.
SESSION_WEIGHT = 0.5
# A query that names a time ("in January 2024", "on 9 October, 2022", "last week": the spans
# session search reads too, hermes.memory.words.dates.time_spans) puts the facts learned
# then first: a fact's date is when it was said (valid_from: the extraction worker sets it to
# the last message of the exchange it learned from; else when it was written). The fused z of
# a fact dated inside a named span gains DATE_WEIGHT, within DATE_SLACK_DAYS after one half of
# it (what is told comes after the event; session search's slack). Chosen on LoCoMo's tuning
# half (turn R@5, MiniLM, 202 of 1,540 questions name a date): 0 / 1 / 2 / 3 / 4 / 6: 0.643 /
# 0.650 / 0.651 / 0.656 / 0.657 / 0.655; held-out 0.658 -> 0.668 at 3 (4: 0.667). 3, not 4: the
# same within one question, and a smaller step towards a date filter.
DATE_WEIGHT = 3.0
DATE_SLACK_DAYS = 30
# Once a user's facts are clustered (hermes.memory.vectors.cells: 32,768 facts or more), a query
# scans the fact vectors of the cells nearest it, about this many (at most the messages'
# SCAN_ROWS). The nearest facts found so are candidates only: every candidate's cosine is then
# read by id, exactly (Similarity.of). LoCoMo's 35,204 MiniLM vectors clustered as facts are
# (188 cells), 400 of its questions: the exact 50 nearest found 0.994 / 0.990 / 0.978 of the
# time scanning 16,384 / 8,192 / 4,096 rows (the true 10 nearest among those found: 0.999 /
# 0.995 / 0.984); at 90,000 facts 8,192 rows cost 1.3 ms of one core instead of 3.1 ms.
FACT_SCAN_ROWS = 8192


class FactVectors(VectorStore):
    """The fact vectors of one database for one model."""

    def __init__(self, db: sqlite_utils.Database, embedder: Embedder) -> None:
        super().__init__(db, embedder)
        self._cache: dict[str, _Matrix] = {}
        self._lock = threading.Lock()

    def index(self, user: str, *, stop: Callable[[], bool] | None = None,
              progress: Callable[[int, int], None] | None = None,
              only: Sequence[int] | None = None) -> int:
        """Embed ``user``'s active facts that have no vector for this model, or one computed
        from older text (of those, only the ids in ``only`` when given). Returns how many.
        ``stop`` is asked between batches; ``progress(done, total)`` is told after each."""
        among = ""
        if only is not None:
            among = f" AND f.id IN ({','.join(str(int(i)) for i in only) or 'NULL'})"
        damaged = sorted(self._damaged.get(user, ()))
        again = f" OR f.id IN ({','.join(str(i) for i in damaged)})" if damaged else ""
        rows = self.db.execute(
            "SELECT f.id, f.content, f.content_key, f.source_message_ids FROM facts f "
            "LEFT JOIN fact_vectors v ON v.fact_id = f.id AND v.model = ? "
            f"WHERE f.user = ? AND {ACTIVE} AND (v.fact_id IS NULL OR v.content_key != "
            f"f.content_key OR v.context_vector IS NULL{again}){among} ORDER BY f.id",
            [self.model_id, user],
        ).fetchall()

        def values_of(chunk: Sequence[Any]) -> list[tuple[Any, ...]]:
            contexts = self._contexts(user, [r[3] for r in chunk])
            # One call for the facts and their exchanges (facts of one exchange share it).
            unique = list(dict.fromkeys(c for c in contexts if c))
            vectors = self.embedder.embed([*(r[1] for r in chunk), *unique])
            of_context = {c: vectors[len(chunk) + i] for i, c in enumerate(unique)}
            half = self._np.float16
            return [(r[0], user, self.model_id, r[2], vectors[i].astype(half).tobytes(),
                     of_context[context].astype(half).tobytes() if context else b"")
                    for i, (r, context) in enumerate(zip(chunk, contexts, strict=True))]

        done = self._write_batches(
            user, rows, INDEX_BATCH, values_of,
            "INSERT OR REPLACE INTO fact_vectors (fact_id, user, model, content_key, vector, "
            "context_vector) VALUES (?, ?, ?, ?, ?, ?)", stop=stop, progress=progress)
        vector_cells.maybe_cluster(self.db, "fact", user, self.model_id,
                                   lambda rows: self._blended(self._sound(user, rows)),
                                   store_cells=False)
        return done

    def catch_up(self, user: str, fact_ids: Sequence[int]) -> int:
        """Embed the facts ``fact_ids`` of ``user`` just written by a command outside the daemon
        (``hermes facts add``, the MCP server's facts_add): no vector job runs there, so without
        this a fact added by hand would be found only by its words until the next ``hermes run``
        or ``hermes sessions index``. Only those facts: a backlog (an upgrade, an import, a new
        model: thousands of facts, minutes of CPU) is the vector job's and ``hermes sessions
        index``'s, with its progress bar, not a one-line command's. Never on the reply path. A
        failure is one log line: the fact is saved and found by its words meanwhile."""
        try:
            return self.index(user, only=fact_ids)
        except Exception as exc:  # noqa: BLE001 - logged; the fact itself is saved
            log.warning("fact vectors for %s: %s (embedded later by hermes run or "
                        "hermes sessions index)", user, exc)
            return 0

    def _contexts(self, user: str, sources: Sequence[str | None]) -> list[str | None]:
        """The text of each fact's source messages (the user's own, in order), or None."""
        wanted = [_message_ids(raw) for raw in sources]
        every = sorted({m for ids in wanted for m in ids})
        text: dict[int, str] = {}
        if every:
            marks = ",".join("?" * len(every))
            for mid, speaker, content in self.db.execute(
                    f"SELECT id, speaker, content FROM messages WHERE user = ? AND id IN ({marks})",
                    [user, *every]).fetchall():
                text[mid] = message_text(speaker, content or "")
        joined = ["\n".join(text[m] for m in sorted(ids) if m in text)[:CONTEXT_CHARS]
                  for ids in wanted]
        return [t or None for t in joined]

    def _matrix(self, user: str) -> _Matrix:
        """The user's vectors (the fact's blended with its exchange's), loaded once, then kept
        in step with every change logged since (hermes.memory.vectors.matrix): new and
        re-embedded facts, a context vector dropped because a source message was edited, a
        vector deleted with its fact, by this process or another."""
        np = self._np
        with self._lock:
            cached = self._cache.get(user)
            changes = (changes_since(self.db, "fact", user, self.model_id, cached.seq)
                       if cached is not None else None)
            version = vector_cells.version(self.db, "fact", user, self.model_id)
            held = cached.cells.centroids.version if cached and cached.cells else 0
            if (cached is not None and changes is not None and not changes.gap
                    and held == version):
                if not changes.ids:
                    cached.seq = changes.through  # seen: pruning past it is no gap
                    return cached
                fresh = self._rows(user, changes.ids,
                                   size=2 * cached.id_rows().codes.shape[1]
                                   if len(cached.ids) else None)
                keep = ~np.isin(cached.ids, np.array(changes.ids, dtype=np.int64))
                ids = np.concatenate([cached.ids[keep], fresh[0]])
                rows = Int8Rows.concatenated([cached.id_rows().take(keep), fresh[1]])
                seq = changes.through
                centroids = cached.cells.centroids if cached.cells is not None else None
                cell = (np.concatenate([cached.cells.cell[keep], _cells_of(fresh[1], centroids)])
                        if cached.cells is not None and centroids is not None else None)
            else:
                seq = last_change(self.db, "fact", user, self.model_id)
                centroids = vector_cells.load(self.db, "fact", user, self.model_id)
                ids, rows = self._rows(user, None)
                cell = _cells_of(rows, centroids) if centroids is not None else None
            position = {int(f): i for i, f in enumerate(ids.tolist())}
            if centroids is not None and cell is not None and len(ids):
                matrix = _Matrix(position, ids, None, seq,
                                 vector_cells.CellIndex(centroids, rows, cell))
            else:
                matrix = _Matrix(position, ids, rows, seq)
            self._cache[user] = matrix
            return matrix

    def _rows(self, user: str, fact_ids: list[int] | None, size: int | None = None
              ) -> tuple[Any, Int8Rows]:
        """(fact ids, their blended vectors as int8 rows): ``user``'s, all or these. ``size``:
        the vectors' byte size (else the size most of them have)."""
        np = self._np
        sql = ("SELECT fact_id, vector, context_vector FROM fact_vectors WHERE user = ? "
               "AND model = ?")
        if fact_ids is None:
            found = self.db.execute(sql, [user, self.model_id]).fetchall()
        else:
            found = []
            for start in range(0, len(fact_ids), 500):
                chunk = fact_ids[start : start + 500]
                found += self.db.execute(f"{sql} AND fact_id IN ({','.join('?' * len(chunk))})",
                                         [user, self.model_id, *chunk]).fetchall()
        found = self._sound(user, found, size)
        parts = [Int8Rows.quantized(self._blended(found[begin : begin + 8192]))
                 for begin in range(0, len(found), 8192)]  # no float32 copy of all at once
        return np.array([r[0] for r in found], dtype=np.int64), Int8Rows.concatenated(parts)

    def _sound(self, user: str, rows: list[Any], size: int | None = None) -> list[Any]:
        """``rows`` of (fact_id, vector, context_vector) without those whose vector is not of
        this model's size (a damaged or hand-edited row: the fact is found by its words only,
        and embedded again by the next index), a context vector of the wrong size read as
        none. Said once in the log."""
        size = size or model_size(self.embedder, [len(r[1]) for r in rows])
        if all(len(r[1]) == size and (not r[2] or len(r[2]) == size) for r in rows):
            return rows
        wrong = {int(r[0]) for r in rows if len(r[1]) != size}
        known = self._damaged.setdefault(user, set())
        if wrong - known:
            log.warning("%d stored fact vector(s) of %s have the wrong size (a damaged row): "
                        "found by their words only until embedded again (hermes sessions index "
                        "or hermes run)", len(wrong - known), user)
        known.update(wrong)
        return [(r[0], r[1], r[2] if r[2] and len(r[2]) == size else b"")
                for r in rows if int(r[0]) not in wrong]

    def _blended(self, rows: list[Any]) -> Any:
        """float32 vectors a search scores for (fact_id, vector, context_vector) rows: the
        fact's blended with its exchange's."""
        np = self._np
        vectors = np.stack([np.frombuffer(r[1], dtype=np.float16) for r in rows]
                           ).astype(np.float32)
        for i, r in enumerate(rows):
            if r[2]:
                vectors[i] = ((1 - CONTEXT_WEIGHT) * vectors[i] + CONTEXT_WEIGHT
                              * np.frombuffer(r[2], dtype=np.float16).astype(np.float32))
        return vectors

    @property
    def meaning_floor(self) -> float:
        """The similarity a fact sharing no word with the query needs to be a result."""
        return meaning_floor(self.model_id)

    def similarity(self, user: str, query: str, ahead: QueryAhead | None = None
                   ) -> Similarity | None:
        """The similarity of ``query`` to each of ``user``'s embedded facts (its cosine to the
        fact, blended with its cosine to the fact's exchange); None when the user has none
        (then the query is not embedded at all). With ``ahead`` (the query's embedding on the
        worker, hermes.memory.facts.query_ahead), the vector and the scan wait for the first
        use: the caller's SQL runs meanwhile. Its failure is then raised at that first use
        (QueryEmbeddingFailed)."""
        matrix = self._matrix(user)
        if not len(matrix.ids):
            return None
        if ahead is not None and ahead.text == query:
            return Similarity(self._np, matrix, ahead.vector, ahead=ahead)
        return Similarity(self._np, matrix, self.embedder.embed_query(query))

    def holds_any(self, user: str) -> bool:
        """Whether ``user`` has an embedded fact (a search would embed its query)."""
        return bool(len(self._matrix(user).ids))


def _cells_of(rows: Int8Rows, centroids: vector_cells.Centroids) -> Any:
    """Each fact's cell, from its blended vector as held: computed at load, not stored (facts
    are few: 100,000 facts x 316 cells is about 0.3 s of one core, once per process)."""
    import numpy as np

    return np.concatenate([np.zeros(0, np.int32), *(
        np.argmax(rows.dequantized(slice(b, b + 8192)) @ centroids.vectors.T, axis=1)
        .astype(np.int32) for b in range(0, len(rows), 8192))])


def _message_ids(raw: str | None) -> list[int]:
    """A fact's source_message_ids (a JSON list); anything else counts as none."""
    try:
        ids = json.loads(raw or "[]")
    except ValueError:
        return []
    return [int(m) for m in ids if isinstance(m, int)] if isinstance(ids, list) else []


@dataclass
class _Matrix:
    position: dict[int, int]  # fact id -> row
    ids: Any  # numpy int64 fact id of each row
    rows: Int8Rows | None  # the blended vectors (None: held by ``cells``, cell by cell)
    seq: int  # the newest vector_changes entry applied
    cells: vector_cells.CellIndex | None = None  # once the user's facts are clustered

    def id_rows(self) -> Int8Rows:
        if self.cells is not None:
            return self.cells.owner_rows()
        assert self.rows is not None
        return self.rows

    def cosines_at(self, query: Any, rows: Any) -> Any:
        if self.cells is not None:
            return self.cells.cosines(query, rows)
        assert self.rows is not None
        return self.rows.cosines(query, rows)


class Similarity:
    """One query's cosines to a user's facts: to every fact, or, once the user's facts are
    clustered (hermes.memory.vectors.cells), to those of the cells nearest the query; the
    cosines of facts asked for by id are exact either way."""

    def __init__(self, np: Any, matrix: _Matrix, query: Any,
                 ahead: QueryAhead | None = None) -> None:
        """``query``: its vector, or a function that returns it (called at the first use).
        ``ahead``: the query's embedding on the worker, which then scans too, right after it
        (the turn's SQL runs here meanwhile; the matrix is only read)."""
        self._np = np
        self._matrix = matrix
        self._query: Any = None
        self._rows: Any = None
        self._scanned: Future[tuple[Any, Any]] | None = None
        if callable(query):
            self._pending = query
            if ahead is not None:
                self._scanned = ahead.then(self._scan_of)
        else:
            self._pending = None
            self._query = query
            self._rows, self._scores = self._scan_of(query)

    def _ready(self) -> None:
        if self._pending is not None:
            # The vector first: a failed embedding is raised (and logged) as before.
            vector, self._pending = self._pending(), None
            self._query = vector
            scanned, self._scanned = self._scanned, None
            self._rows, self._scores = (scanned.result() if scanned is not None
                                        else self._scan_of(vector))

    def _scan_of(self, query: Any) -> tuple[Any, Any]:
        """(rows scanned or None for all, their cosines to ``query``)."""
        matrix = self._matrix
        if matrix.cells is not None:
            # The query rounded to int8 only finds candidates (one SIMD integer product per
            # cell, vector_cells.rounded_cosines); :meth:`nearest` keeps the exact best.
            return matrix.cells.scan(
                query, min(FACT_SCAN_ROWS, vector_cells.SCAN_ROWS), rounded=True)
        assert matrix.rows is not None
        return None, matrix.rows.cosines(query)

    def nearest(self, k: int) -> dict[int, float]:
        """The ``k`` most similar facts (among those scanned): fact id -> cosine."""
        self._ready()
        np = self._np
        scores = self._scores
        k = min(k, len(scores))
        if k <= 0:
            return {}
        ids = self._matrix.ids
        if self._rows is None:  # every fact's exact cosine
            top = np.argpartition(-scores, k - 1)[:k]
            return {int(ids[r]): float(scores[r]) for r in top}
        # The scanned cells' cosines are the rounded query's: the exact best k of their best
        # 2k + RESCORE_MARGIN (a near tie could swap), each with its exact cosine.
        pick = min(len(scores), 2 * k + RESCORE_MARGIN)
        rows = self._rows[np.argpartition(-scores, pick - 1)[:pick]]
        exact = self._matrix.cosines_at(self._query, rows)
        best = np.argpartition(-exact, k - 1)[:k]
        return {int(ids[rows[i]]): float(exact[i]) for i in best}

    def of(self, fact_ids: Sequence[int]) -> dict[int, float]:
        """The cosines of these facts (those without a vector are left out)."""
        self._ready()
        position = self._matrix.position
        known = [f for f in fact_ids if f in position]
        if not known:
            return {}
        rows = self._np.array([position[f] for f in known], dtype=self._np.int64)
        cosines = self._matrix.cosines_at(self._query, rows)
        return {f: float(c) for f, c in zip(known, cosines, strict=True)}


def query_spans(query: str, now: datetime) -> list[TimeSpan]:
    """The spans of time ``query`` names (none for most queries: then no fact's date counts)."""
    return time_spans(query, now) if DATE_WEIGHT else []


def date_parts(spans: Sequence[TimeSpan], dates: dict[int, str | None]) -> dict[int, float]:
    """1 for each fact (id -> its date, a stored timestamp) dated inside one of ``spans``, 0.5
    within DATE_SLACK_DAYS after one; facts dated elsewhere or undated are left out."""
    if not spans:
        return {}
    slack = timedelta(days=DATE_SLACK_DAYS)
    by_day: dict[str, float] = {}
    parts: dict[int, float] = {}
    for fact_id, stamp in dates.items():
        day = (stamp or "")[:10]
        if day not in by_day:
            try:
                when = datetime.fromisoformat(day).replace(tzinfo=UTC)
            except ValueError:
                by_day[day] = 0.0
                continue
            by_day[day] = (1.0 if any(s.start <= when < s.end for s in spans) else 0.5 if any(
                s.start <= when < s.end + slack for s in spans) else 0.0)
        if by_day[day]:
            parts[fact_id] = by_day[day]
    return parts


def fuse(bm25: dict[int, float], cosines: dict[int, float], candidates: Sequence[int], *,
         method: str | None = None, weight: float | None = None,
         sessions: dict[int, int | None] | None = None,
         dated: dict[int, float] | None = None, trust: float = 1.0) -> dict[int, float]:
    """One relevance in (0, 1] per candidate from its bm25 (0 when its words do not match) and
    its cosine (missing: no vector yet, counted as the lowest cosine among the candidates).

    * ``zscore``: trust * z(bm25) + weight * z(cosine), each over the candidates (``trust``:
      how far the query's words are trusted, :func:`word_trust`), plus DATE_WEIGHT x
      its part of a time the query names (``dated``: fact id -> 1 or 0.5, :func:`date_parts`),
      plus SESSION_WEIGHT x the best such sum among the candidates of its source session
      (``sessions``: fact id -> session id; a fact without one counts as its own session),
      squashed by a logistic so that trust can multiply it;
    * ``sum``: bm25 / best bm25 + weight * min-max(cosine);
    * ``rrf``: 1 / (60 + bm25 rank) + weight / (60 + cosine rank), reciprocal-rank fusion.
    """
    if not candidates:
        return {}
    method = method or FUSION  # read at call time: scripts/bench_locomo.py sweeps them
    weight = DENSE_WEIGHT if weight is None else weight
    low = min((cosines[c] for c in candidates if c in cosines), default=0.0)
    cos = {c: cosines.get(c, low) for c in candidates}
    words = {c: bm25.get(c, 0.0) for c in candidates}
    if method == "rrf":
        by_words = sorted(candidates, key=lambda c: -words[c])
        by_meaning = sorted(candidates, key=lambda c: -cos[c])
        rank_w = {c: i for i, c in enumerate(by_words)}
        rank_m = {c: i for i, c in enumerate(by_meaning)}
        return {c: (0.0 if not words[c] else 1 / (60 + rank_w[c])) + weight / (60 + rank_m[c])
                for c in candidates}
    if method == "sum":
        best = max(words.values()) or 1.0
        high = max(cos.values())
        span = (high - low) or 1.0
        return {c: (words[c] / best + weight * (cos[c] - low) / span) / (1 + weight) + 1e-6
                for c in candidates}
    if method != "zscore":
        raise ValueError(f"unknown fusion method {method!r}")
    zw, zc = _z(words), _z(cos)
    raw = {c: trust * zw[c] + weight * zc[c] for c in candidates}
    if dated:
        raw = {c: value + DATE_WEIGHT * dated.get(c, 0.0) for c, value in raw.items()}
    if sessions is not None and SESSION_WEIGHT:
        session_best: dict[object, float] = {}
        for c, value in raw.items():
            key = sessions.get(c) or ("fact", c)
            session_best[key] = max(session_best.get(key, value), value)
        raw = {c: value + SESSION_WEIGHT * session_best[sessions.get(c) or ("fact", c)]
               for c, value in raw.items()}
    return {c: 1 / (1 + math.exp(-raw[c])) for c in candidates}


def word_trust(db: sqlite_utils.Database, plan: MatchPlan, spans: Sequence[TimeSpan],
               by_words: Sequence[int], cosines: dict[int, float], *,
               weigh: bool = True, message: MatchPlan | None = None) -> float:
    """How far a fact search trusts its query's words (hermes.memory.words.trust): the
    best coverage x agreement among the best TRUST_POOL facts by words (``by_words``, best
    first), ramped between TRUST_LOW and TRUST_HIGH; 1 under TRUST_MIN_FACTS facts, for a query
    without content words, or without any cosine to compare (nothing says otherwise).
    ``weigh``: coverage counts only as far as the words weigh (TRUST_MIN_WEIGHT); not for a
    message cut to its selective words (per-turn recall, hermes.memory.facts.recall), which
    dropped the rarest, those no fact holds. ``message``: the text the words were chosen
    from; its words no fact holds then weigh against them, for half the trust
    (MESSAGE_SHARE)."""
    if TRUST_HIGH <= 0 or not by_words or not cosines:
        return 1.0
    closest = max(cosines.values())
    if closest <= 0:
        return 1.0
    words = words_trust.query_words(db, plan, spans, index="facts", least=TRUST_MIN_FACTS)
    if not words.terms:
        return 1.0
    top = list(by_words[:TRUST_POOL])
    cover = words_trust.indexed_coverage(db, words, "facts", top)
    if weigh and not spans and TRUST_MIN_WEIGHT > 0 and words.unseen > 0:
        weight = min(1.0, words.total / (TRUST_MIN_WEIGHT * words.unseen))
        cover = {i: c * weight for i, c in cover.items()}
    agreement = {i: min(1.0, max(0.0, cosines[i]) / closest) if i in cosines else 1.0
                 for i in top}
    trust = words_trust.trust(words_trust.evidence(cover, agreement), TRUST_LOW, TRUST_HIGH)
    unheld = _unheld(db, message, spans, words) if message is not None else 0
    if not unheld or MESSAGE_SHARE <= 0:
        return trust
    # Each word of the message no fact holds weighs as much as a word can (words.unseen);
    # the words it dropped as common weigh next to nothing and are not counted (a count of a
    # word in thousands of facts is what the selective words spare a turn).
    share = words.total / (words.total + unheld * words.unseen)
    judged = words_trust.trust(words_trust.evidence(
        {i: c * share for i, c in cover.items()}, agreement), TRUST_LOW, TRUST_HIGH)
    return (1 - MESSAGE_SHARE) * trust + MESSAGE_SHARE * judged


def _unheld(db: sqlite_utils.Database, message: MatchPlan, spans: Sequence[TimeSpan],
            searched: words_trust.QueryWords) -> int:
    """How many of ``message``'s content words (not among those ``searched``) no fact holds:
    one index probe a word."""
    known = {term.fts for term in searched.terms}
    return sum(1 for term in words_trust.content_terms(message, spans)
               if term.fts not in known and db.execute(
                   "SELECT 1 FROM facts_fts WHERE facts_fts MATCH ? LIMIT 1",
                   [term.fts]).fetchone() is None)


def _z(values: dict[int, float]) -> dict[int, float]:
    n = len(values)
    mean = sum(values.values()) / n
    spread = math.sqrt(sum((v - mean) ** 2 for v in values.values()) / n) or 1.0
    return {k: (v - mean) / spread for k, v in values.items()}


def fact_vectors_for(db: sqlite_utils.Database, embedders: Embedders,
                     model: str) -> FactVectors | None:
    """The FactVectors of a connection for the configured model, or None (bm25 only) when the
    model's extra is not installed: said once in the log (once per ``embedders``, the home's
    memory), never an error, since facts are always found by their words."""
    from hermes.errors import HermesError

    try:
        return FactVectors(db, embedders.get(model))
    except (HermesError, ImportError) as exc:
        if embedders.first_failure(model):
            log.warning("fact recall by meaning is off, bm25 only: %s", exc)
        return None
