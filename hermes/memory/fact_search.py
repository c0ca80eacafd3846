"""Full-text search over facts: FTS5 bm25 x trust, strict first, then any content word.

Ranking is FTS5's own ``bm25()`` (column weights content 1.0, tags 0.6, entities 0.8) times
trust. Each match costs a bm25 evaluation (microseconds), so a query whose words are in
thousands of facts would take milliseconds: the newest ``facts.search_window`` matches (default
300) are ranked, which is every match of a specific query; 0 ranks all matches.

In the any-word fallback (a natural question whose words are not all in one fact), words found
in more than ``COMMON_SHARE`` of all facts are left out while rarer ones remain: like stopwords,
they would match a large part of the store and say little. The strict query keeps every word.
Document frequencies come from the index's own vocabulary table (``facts_vocab``, fts5vocab), a
lookup per word. Below ``EXACT_BELOW`` facts every word counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hermes.store.fts import Term, build_match, like_pattern, search_with_fallback

if TYPE_CHECKING:
    from hermes.memory.facts import Fact, FactStore

COMMON_SHARE = 0.05
EXACT_BELOW = 5000


def _prefixes(token: str) -> list[str]:
    """Candidates for the Porter stem of a token: the stem is nearly always a prefix of the
    lowercased word ("alerts" -> "alert", "service" -> "servic"), at most four letters shorter."""
    word = token.casefold()
    return [word[:n] for n in range(max(1, len(word) - 4), len(word) + 1)]


def doc_freq(store: FactStore, term: Term) -> int:
    """How many facts contain the term, from the index's vocabulary (no scan). For a phrase,
    its rarest word. An unknown stem counts as rare, so the term keeps ranking."""
    counts = []
    for token in term.tokens:
        prefixes = _prefixes(token)
        marks = ",".join("?" * len(prefixes))
        row = store.db.execute(
            f"SELECT max(doc) FROM facts_vocab WHERE term IN ({marks})", prefixes
        ).fetchone()
        counts.append(int(row[0] or 0))
    return min(counts) if counts else 0


def informative(store: FactStore, terms: Sequence[Term]) -> list[Term]:
    """The terms worth ranking by: all of them on a small store, else those in at most
    COMMON_SHARE of the facts (or the rarest one, when every term is common)."""
    if len(terms) < 2:
        return list(terms)
    total = int(store.db.execute("SELECT coalesce(max(id), 0) FROM facts").fetchone()[0])
    if total < EXACT_BELOW:
        return list(terms)
    counted = [(doc_freq(store, t), t) for t in terms]
    kept = [t for count, t in counted if count <= total * COMMON_SHARE]
    return kept or [min(counted, key=lambda pair: pair[0])[1]]


def search_facts(store: FactStore, user: str, query: str, *, limit: int, category: str | None,
                 floor: float, explain: bool) -> list[Fact]:
    from hermes.memory.facts import ACTIVE, BM25, COLUMNS, _row_to_fact

    plan = build_match(query)
    if plan.empty:
        return []
    filters = f"f.user = ? AND {ACTIVE} AND f.trust >= ?"
    params: list[Any] = [user, floor]
    if category is not None:
        filters += " AND f.category = ?"
        params.append(category)
    if plan.cjk:
        return _search_like(store, plan.cjk, plan.strict, filters, params, limit, explain)
    used: dict[str, str] = {}

    def run(expression: str) -> list[tuple]:
        match = expression
        if expression != plan.strict:
            # any-word fallback: words found in a large share of all facts are left out
            terms = [t for t in plan.terms if not t.is_stopword]
            match = " OR ".join(t.fts for t in informative(store, terms))
        used[expression] = match
        # bm25 costs microseconds per match, so a word in thousands of facts would cost
        # milliseconds: only the newest `window` matches are ranked (0: all of them). The
        # match runs in rowid order, so LIMIT stops it early; then the winners' rows are read.
        window = store.config.search_window
        inner_order = "facts_fts.rowid DESC" if window else "bm * f.trust"
        inner_limit = window if window else int(limit)
        return store.db.execute(
            f"""
            SELECT {COLUMNS}, r.bm FROM (
              SELECT f.id AS id, {BM25} AS bm, f.trust AS trust, f.updated_at AS updated
              FROM facts_fts CROSS JOIN facts f ON f.id = facts_fts.rowid
              WHERE facts_fts MATCH ? AND {filters}
              ORDER BY {inner_order} LIMIT ?
            ) r CROSS JOIN facts f ON f.id = r.id
            ORDER BY r.bm * r.trust, r.trust DESC, r.updated DESC, r.id DESC LIMIT ?
            """,
            [match, *params, inner_limit, int(limit)],
        ).fetchall()

    rows, mode = search_with_fallback(plan, run)
    expression = plan.strict if mode == "strict" else plan.loose
    facts = []
    for row in rows:
        fact = _row_to_fact(row)
        relevance = -float(row[-1])
        fact.score = relevance * fact.trust
        if explain:
            fact.explain = {"bm25": round(relevance, 6), "trust": fact.trust,
                            "score": round(fact.score, 6), "mode": mode, "match": expression,
                            "sent": used.get(expression or ""), "min_trust": floor}
        facts.append(fact)
    return facts


def _search_like(store: FactStore, cjk: Sequence[str], strict: str | None, filters: str,
                 params: list[Any], limit: int, explain: bool) -> list[Fact]:
    """CJK text has no word breaks for unicode61: match it with LIKE, rank by trust."""
    from hermes.memory.facts import COLUMNS, _row_to_fact

    haystack = "(f.content || ' ' || f.entity_names || ' ' || f.tags)"
    likes = " AND ".join(f"{haystack} LIKE ? ESCAPE '\\'" for _ in cjk)
    like_params = [like_pattern(run) for run in cjk]
    order = "ORDER BY f.trust DESC, f.updated_at DESC, f.id DESC LIMIT ?"
    rows: list[tuple] = []
    if strict:
        rows = store.db.execute(
            f"SELECT {COLUMNS} FROM facts f WHERE {filters} AND {likes} AND f.id IN "
            f"(SELECT rowid FROM facts_fts WHERE facts_fts MATCH ?) {order}",
            [*params, *like_params, strict, int(limit)],
        ).fetchall()
    if not rows:
        rows = store.db.execute(
            f"SELECT {COLUMNS} FROM facts f WHERE {filters} AND {likes} {order}",
            [*params, *like_params, int(limit)],
        ).fetchall()
    facts = []
    for row in rows:
        fact = _row_to_fact(row)
        fact.score = fact.trust
        if explain:
            fact.explain = {"like": list(cjk), "trust": fact.trust, "score": fact.trust,
                            "mode": "like", "match": strict}
        facts.append(fact)
    return facts
