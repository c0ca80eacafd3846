"""Full-text search over facts: FTS5 bm25 x trust, strict first, then any content word.

Ranking is FTS5's own ``bm25()`` (column weights content 1.0, tags 0.6, entities 0.8, and
1.0 for the exchange the fact was learned from, m018/m019: hermes.memory.facts.records.BM25) times
trust, over every match of the user's active facts: an old, trusted fact is never left out
because hundreds of newer ones also match. Each match costs one bm25 evaluation (microseconds);
a fact's row (whose it is, its state, its trust) is read only for the best matches, as long as
no match left could beat them (bounded by the user's highest trust: :func:`_best_matches`); on
equal scores, the more trusted fact first, then the newest (id). The winners' rows are read last.

The any-word fallback (a natural question whose words are not all in one fact) ORs every
content word. How common a word is only changes the ranking (bm25's idf), never which of the
user's facts are found: a word found in thousands of other users' facts hides nothing.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import sqlite_utils

from hermes.memory.audience import NO_CONDITION, and_condition
from hermes.memory.facts import vectors as fact_vectors
from hermes.memory.facts.query_ahead import QueryAhead, QueryEmbeddingFailed
from hermes.memory.facts.records import (
    ACTIVE,
    BM25,
    COLUMNS,
    Fact,
    own_words_first,
    own_words_only,
    row_to_fact,
)
from hermes.store.fts import MatchPlan, build_match, like_pattern, search_with_fallback

if TYPE_CHECKING:
    from hermes.memory.facts.vectors import FactVectors, Similarity
    from hermes.memory.words.dates import TimeSpan

# A word's matches are kept to the user's active, trusted facts through this narrow index
# (migration m024) rather than the wide table rows: ~0.35 instead of ~1.3 us a match. SQLite
# looks a rowid up in the table unless told.
SCOPE_INDEX = "INDEXED BY idx_facts_scope"
# The user's highest trust among their active facts, one index seek (migration m027).
TRUST_INDEX = "INDEXED BY idx_facts_active_trust"
# The best matches by bm25 x trust come from FTS5's bm25 order alone (facts_fts knows no
# users, states or trust): the rows of the best limit + BOUND_BATCH matches are read, then of
# twice as many, until no match left can beat the limit-th (its bm25 x the user's highest
# trust is no better). Reading every match's row cost ~1.5 us beside bm25's own ~1.5 us: a
# word in 600-1,900 facts cost 3-9 ms a turn at 100k facts (scripts/bench_turn.py). Exact:
# the order of ranking every match in one statement (two different bm25 values whose
# products with a trust round to one double aside: equals either way).
BOUND_BATCH = 16
# The filters of a search that only the narrow index answers: whose, active, trusted enough.
_SCOPED = f"f.user = ? AND {ACTIVE} AND f.trust >= ?"
MAX_BOUND_BATCH = 1024


class FactSearch:
    """Search over the facts in ``db``: bm25 x trust; with fact vectors (``vectors``, a
    :class:`~hermes.memory.facts.vectors.FactVectors` or None), bm25 fused with the cosine of
    the query (``meaning``, else ``query``) to every fact, x trust (hermes.memory.facts.vectors).
    Built by ``FactStore`` from the connection and the vectors it was given."""

    def __init__(self, db: sqlite_utils.Database, vectors: FactVectors | None = None) -> None:
        self.db = db
        self.vectors = vectors

    def search(self, user: str, query: str, *, limit: int, category: str | None,
               floor: float, explain: bool, any_word: bool = False,
               meaning: str | None = None, now: datetime | None = None,
               ahead: QueryAhead | None = None,
               visible: tuple[str, list[Any]] = NO_CONDITION) -> list[Fact]:
        """``ahead``: the query's embedding on the worker (hermes.memory.facts.query_ahead):
        bm25 runs while it computes; should it fail, the facts are ranked by their words.
        ``visible``: the audience's condition over ``f`` for the place the result is read in
        (hermes.memory.audience; none in a private place)."""
        plan = build_match(query)
        if visible[0]:  # a shared place: the facts' own words, never their exchange's
            plan = own_words_only(plan)
        filters = _SCOPED
        params: list[Any] = [user, floor]
        if category is not None:
            filters += " AND f.category = ?"
            params.append(category)
        if visible[0]:
            filters += " AND " + visible[0]
            params.extend(visible[1])
        if self.vectors is not None and not plan.cjk:
            similarity = self.vectors.similarity(user, meaning or query, ahead)
            if similarity is not None:
                spans = fact_vectors.query_spans(meaning or query, now) if now else []
                try:
                    # Per turn the words searched are the message's selective ones (those no
                    # fact holds dropped, hermes.memory.facts.recall): the message itself says
                    # too how far they can be trusted.
                    message = (build_match(meaning) if meaning and meaning != query
                               else None)
                    return _hybrid(self.db, plan, filters, params, similarity, limit, explain,
                                   self.vectors.meaning_floor, spans, per_turn=any_word,
                                   message=message)
                except QueryEmbeddingFailed:
                    pass  # said in the log: the words' ranking below
        if plan.empty:
            return []
        if plan.cjk:
            return _search_like(self.db, plan, filters, params, limit, explain)
        return [fact for fact, _ in _bm25(self.db, plan, filters, params, limit, explain,
                                          any_word)]

    def newest(self, user: str, query: str, *, limit: int, floor: float,
               visible: tuple[str, list[Any]] = NO_CONDITION) -> list[Fact]:
        """The newest ``limit`` of ``user``'s active facts at or above ``floor`` trust holding
        every word of ``query``, else any of them, most trusted first (score: trust). Costs
        what it returns, however many facts hold the words: FTS5 yields matches newest first
        without scoring them (per-turn recall of only common words: facts.recall)."""
        plan = build_match(query)
        if visible[0]:  # a shared place: the facts' own words, never their exchange's
            plan = own_words_only(plan)
        for expression in (plan.strict, plan.loose):
            if not expression:
                continue
            rows = self.db.execute(
                f"SELECT {COLUMNS} FROM facts_fts CROSS JOIN facts f {SCOPE_INDEX} "
                "ON f.id = facts_fts.rowid "
                f"WHERE facts_fts MATCH ? AND f.user = ? AND {ACTIVE} AND f.trust >= ?"
                f"{and_condition(visible[0])} ORDER BY facts_fts.rowid DESC LIMIT ?",
                [expression, user, floor, *visible[1], int(limit)]).fetchall()
            if rows:
                facts = [row_to_fact(row) for row in rows]
                for fact in facts:
                    fact.score = fact.trust
                return sorted(facts, key=lambda f: (f.trust, f.id), reverse=True)
        return []


def _bm25(db: sqlite_utils.Database, plan: MatchPlan, filters: str, params: list[Any], limit: int,
          explain: bool, any_word: bool) -> list[tuple[Fact, float]]:
    """(fact, bm25 relevance) of the best ``limit`` matches by bm25 x trust."""
    if plan.strict is None:
        return []
    user, floor = params[0], params[1]
    # A category or an audience's condition is in the row: one statement
    scoped = filters == _SCOPED

    def run(expression: str) -> list[tuple]:
        best = (_best_matches(db, expression, user, floor, limit) if scoped else None)
        if best is None:
            # Every match is ranked; only the ids and sort keys pass through the sorter.
            best = db.execute(
                f"SELECT f.id, {BM25} AS bm FROM facts_fts CROSS JOIN facts f "
                f"{SCOPE_INDEX if scoped else ''} ON f.id = facts_fts.rowid "
                f"WHERE facts_fts MATCH ? AND {filters} "
                "ORDER BY bm * f.trust, f.trust DESC, f.id DESC LIMIT ?",
                [expression, *params, int(limit)]).fetchall()
        if not best:
            return []
        marks = ",".join("?" * len(best))
        rows = {row[0]: row for row in db.execute(
            f"SELECT {COLUMNS} FROM facts f WHERE f.id IN ({marks})",
            [fact_id for fact_id, _ in best]).fetchall()}
        return [(*rows[fact_id], bm) for fact_id, bm in best]

    expression: str | None
    if any_word:
        # Per-turn recall: bm25 over any word, so the fact holding most of the (rarest) words
        # ranks first, and a partial match is found even when some fact holds them all.
        expression = plan.loose or plan.strict
        mode = "any"
        rows = run(expression) if expression else []
    else:
        # All words in the fact itself (not some only in its exchange: "all words" would then
        # find a fact holding none of them); else any word, the exchange's too.
        plan = own_words_first(plan)
        rows, mode = search_with_fallback(plan, run)
        expression = plan.strict if mode == "strict" else plan.loose
    found = []
    for row in rows:
        fact = row_to_fact(row)
        relevance = -float(row[-1])
        fact.score = relevance * fact.trust
        if explain:
            fact.explain = {"bm25": round(relevance, 6), "trust": fact.trust,
                            "score": round(fact.score, 6), "mode": mode, "match": expression,
                            "min_trust": params[1]}
        found.append((fact, relevance))
    return found


def _best_matches(db: sqlite_utils.Database, expression: str, user: str, floor: float,
                  limit: int) -> list[tuple[int, float]]:
    """(id, bm25) of the best ``limit`` matches of ``expression`` among ``user``'s active
    facts at or above ``floor`` trust, by bm25 x trust, then trust, then the newest (id): the
    matches in FTS5's bm25 order, a fact's row read (whose it is, its state and trust) only
    for the best of them (see BOUND_BATCH)."""
    top = db.execute(f"SELECT max(f.trust) FROM facts f {TRUST_INDEX} WHERE f.user = ? "
                     f"AND {ACTIVE}", [user]).fetchone()[0]
    if top is None or limit <= 0:
        return []
    matches = db.execute(f"SELECT rowid, {BM25} AS bm FROM facts_fts WHERE facts_fts MATCH ? "
                         "ORDER BY bm, rowid DESC", [expression])
    best: list[tuple[float, float, int, float]] = []  # (bm25 x trust, trust, id, bm25)
    batch = limit + BOUND_BATCH
    try:
        while rows := matches.fetchmany(batch):
            marks = ",".join("?" * len(rows))
            trust = dict(db.execute(
                f"SELECT f.id, f.trust FROM facts f {SCOPE_INDEX} WHERE f.id IN ({marks}) "
                f"AND f.user = ? AND {ACTIVE} AND f.trust >= ?",
                [*(fact_id for fact_id, _ in rows), user, floor]).fetchall())
            best.extend((-bm * trust[fact_id], trust[fact_id], fact_id, bm)
                        for fact_id, bm in rows if fact_id in trust)
            best.sort(reverse=True)
            del best[limit:]
            # Every match after these has a bm25 no better than the last one's (on a tie, a
            # smaller id): at most the last one's relevance x the user's highest trust.
            last_id, last_bm = rows[-1]
            if len(best) == limit and best[-1][:3] >= (-last_bm * top, top, last_id):
                break
            batch = min(batch * 2, MAX_BOUND_BATCH)
    finally:
        matches.close()
    return [(fact_id, bm) for _, _, fact_id, bm in best]


def _hybrid(db: sqlite_utils.Database, plan: MatchPlan, filters: str, params: list[Any],
            similarity: Similarity, limit: int, explain: bool,
            meaning_floor: float, spans: list[TimeSpan], *, per_turn: bool = False,
            message: MatchPlan | None = None) -> list[Fact]:
    """The bm25 matches (any word) and the nearest facts by meaning (those at the model's
    floor or above: hermes.memory.facts.vectors.MEANING_FLOOR), fused (with the date of each
    when the query names a time, ``spans``), x trust. ``message``: the whole text the query's
    words were chosen from, when they were (the words' trust is then judged half on it).
    ``per_turn``: for per-turn recall (hermes.memory.facts.recall), which shows no fill-in:
    none is returned, nor takes the place of a fact that would be shown."""
    pool = max(limit, fact_vectors.DENSE_CANDIDATES)
    by_words = _bm25(db, plan, filters, params, pool, False, True)
    facts = {fact.id: fact for fact, _ in by_words}
    bm25 = {fact.id: relevance for fact, relevance in by_words}
    nearest = similarity.nearest(fact_vectors.DENSE_CANDIDATES)
    near = {fact_id: cosine for fact_id, cosine in nearest.items() if cosine >= meaning_floor}
    _read_rows(db, facts, [i for i in near if i not in facts], filters, params)
    cosines = similarity.of(list(facts))
    trust = fact_vectors.word_trust(db, plan, spans, [f.id for f, _ in by_words], cosines,
                                    weigh=not per_turn, message=message)
    # What the words bring is worth no more than the near misses by meaning when the words are
    # not trusted wholly: a word match under the floor and a fact just under it by meaning are
    # ranked by the same fusion, and the list is never longer than the matches alone made it.
    # Per turn a near miss would never be shown: not read.
    places = len(facts)
    if trust < 1.0 and not per_turn:
        share = fact_vectors.FILL_IN_SHARE * meaning_floor
        fill = [i for i, cosine in nearest.items()
                if share <= cosine < meaning_floor and i not in facts]
        _read_rows(db, facts, fill, filters, params)
        cosines.update(similarity.of([i for i in fill if i in facts]))
    ids = list(facts)
    dated = fact_vectors.date_parts(spans, {f.id: f.valid_from or f.created_at
                                            for f in facts.values()})
    fused = fact_vectors.fuse(bm25, cosines, ids, dated=dated,
                              sessions={f.id: f.source_session_id for f in facts.values()},
                              trust=trust)
    for fact in facts.values():
        fact.score = fused[fact.id] * fact.trust
        fact.cosine = cosines.get(fact.id)
        # Neither near enough in meaning nor holding a word the query's words are trusted
        # wholly for: ranked, never shown to the model per turn (hermes.memory.facts.recall).
        # A word match under the floor is as weak as its words are incidental: with the words
        # half trusted ("us" in "just the four of us and a rotisserie chicken"), it is one.
        fact.fill_in = (fact.cosine is None or fact.cosine < meaning_floor) and (
            fact.id not in bm25 or trust < 1.0)
        if explain:
            fact.explain = {**(fact.explain or {}), "bm25": round(bm25.get(fact.id, 0.0), 6),
                            "cosine": round(cosines.get(fact.id, float("nan")), 4),
                            "fused": round(fused[fact.id], 6), "trust": fact.trust,
                            "word_trust": round(trust, 3), "fill_in": fact.fill_in,
                            "date": dated.get(fact.id, 0.0),
                            "score": round(fact.score, 6), "mode": "hybrid",
                            "fusion": fact_vectors.FUSION, "min_trust": params[1]}
    ranked = sorted(facts.values(), key=lambda f: (f.score or 0.0, f.trust, f.updated_at, f.id),
                    reverse=True)
    _keep_nearest(ranked, near, bm25, fact_vectors.KEEP_NEAREST, explain,
                  among=1 if trust >= 1.0 else fact_vectors.KEEP_AMONG)
    if per_turn:
        ranked = [fact for fact in ranked if not fact.fill_in]
    return ranked[:min(limit, places)]


def _read_rows(db: sqlite_utils.Database, facts: dict[int, Fact], ids: list[int], filters: str,
               params: list[Any]) -> None:
    """Add the facts ``ids`` to ``facts`` (id -> Fact), those that pass the same filters as
    the matches (the user's, active, trusted enough, visible) only."""
    if not ids:
        return
    marks = ",".join("?" * len(ids))
    for row in db.execute(f"SELECT {COLUMNS} FROM facts f WHERE {filters} AND f.id IN ({marks})",
                          [*params, *ids]).fetchall():
        fact = row_to_fact(row)
        facts[fact.id] = fact


def _keep_nearest(ranked: list[Fact], near: dict[int, float], worded: dict[int, float], k: int,
                  explain: bool, among: int = 1) -> None:
    """The fact nearest in meaning (``near``: those at the model's floor) that is not among
    the word ranking's candidates (``worded``: it holds no word of the query, or too weakly to
    be among them), when it is among the ``among`` nearest and ranked below the best ``k``,
    moved to the k-th place in ``ranked``, its score between the (k-1)-th's and the k-th's."""
    if k <= 0 or len(ranked) <= k or not near:
        return
    nearest = next((i for i in sorted(near, key=lambda i: (near[i], i), reverse=True)[:among]
                    if i not in worded), None)
    if nearest is None:
        return
    at = next((i for i, fact in enumerate(ranked) if fact.id == nearest), None)
    if at is None or at < k:
        return
    fact = ranked.pop(at)
    below = ranked[k - 1].score or 0.0
    above = (ranked[k - 2].score or 0.0) if k >= 2 else below + 1.0
    fact.score = (above + below) / 2
    if explain:
        fact.explain = {**(fact.explain or {}), "nearest_kept": True,
                        "score": round(fact.score, 6)}
    ranked.insert(k - 1, fact)


def _search_like(db: sqlite_utils.Database, plan: MatchPlan, filters: str, params: list[Any],
                 limit: int, explain: bool) -> list[Fact]:
    """CJK text has no word breaks for unicode61: match its runs with LIKE. Every run (and
    every other word) first, then every run, then any run or word (as session search does),
    ranked by how many runs match, then trust."""
    haystack = "(f.content || ' ' || f.entity_names || ' ' || f.tags)"
    like = f"{haystack} LIKE ? ESCAPE '\\'"
    like_params = [like_pattern(run) for run in plan.cjk]
    hits = " + ".join(f"({like})" for _ in plan.cjk)
    every = " AND ".join(like for _ in plan.cjk)
    in_fts = "f.id IN (SELECT rowid FROM facts_fts WHERE facts_fts MATCH ?)"
    tail = "ORDER BY hits DESC, f.trust DESC, f.updated_at DESC, f.id DESC LIMIT ?"
    words = plan.loose or plan.strict
    tries: list[tuple[str, str, list[Any]]] = []
    if plan.strict:
        tries.append(("like", f"{every} AND {in_fts}", [*like_params, plan.strict]))
    tries.append(("like", every, like_params))
    anything = " OR ".join([*(f"({like})" for _ in plan.cjk), *([in_fts] if words else [])])
    tries.append(("loose", f"({anything})", [*like_params, *([words] if words else [])]))
    rows: list[tuple] = []
    mode = "none"
    for tried, where, where_params in tries:
        rows = db.execute(
            f"SELECT {COLUMNS}, {hits} AS hits FROM facts f WHERE {filters} AND {where} {tail}",
            [*like_params, *params, *where_params, int(limit)],
        ).fetchall()
        if rows:
            mode = tried
            break
    facts = []
    for row in rows:
        fact = row_to_fact(row)
        fact.score = fact.trust
        if explain:
            fact.explain = {"like": list(plan.cjk), "trust": fact.trust, "score": fact.trust,
                            "mode": mode, "match": plan.strict if mode == "like" else words,
                            "runs_matched": int(row[-1])}
        facts.append(fact)
    return facts
