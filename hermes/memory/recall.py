"""Ranked recall of past messages: the retrieval under session search.

``SessionStore.search_messages`` (and through it the ``session_search`` tool, the CLI and the
context file) asks :func:`rank_messages` for the messages that best answer a free-text query.
Zero model calls; a few SQLite queries. The ranking, each part general rather than fitted to any
one benchmark question:

1. **Terms**: the query's words through the safe builder (``hermes.store.fts``), question and
   filler words dropped (:data:`QUERY_STOPWORDS`), the rest OR-joined; Porter stemming is the
   index's tokenizer. bm25 with column weights: what was said counts fully, who said it a little.
2. **Neighbours**: a message is read in its conversation. Part of a neighbour's score (the turn
   before and the turn after, same session) is added to each message, so an answer ("yes, last
   Tuesday") is found through the question it answers (a reply takes more from the turn it
   answers than from the turn after it), and vice versa.
   **Speakers**: a query that names someone ("what does Ana like?") prefers what Ana said.
3. **Session**: conversations are about something. A message in a session where many turns
   match gets a share of the session's score (the sum of its best turns' scores, plus any hit on
   the session's title or summary).
4. **Time**: a date in the query ("in May 2023", "on 13 October", "last year" relative to now)
   boosts messages written then, or in the weeks after (people report what they did later).

Scores are normalised by the best bm25 score of the query, so the weights below do not depend on
the size of the corpus. Parameters were chosen on half of a public benchmark and checked on the
other half (``scripts/bench_locomo.py``).
"""

from __future__ import annotations

import calendar
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import sqlite_utils

from hermes.errors import QueryError
from hermes.store.fts import STOPWORDS, MatchPlan, Term, build_match, like_pattern

# Words that say what kind of answer is wanted, not what it is about. Dropped from the ranked
# query (never from a quoted phrase), on top of the ordinary stopwords.
_QUESTION_WORDS = """
    anything something everything whatever whenever wherever however thing things stuff
    kind kinds type types sort sorts specific particular exactly ever still really else
    like likely might maybe perhaps probably would could should must
    many much often usually
    say said says mention mentioned mentions talk talked talking tell told
    recall remember remind reminded describe described
"""
QUERY_STOPWORDS = STOPWORDS | frozenset(_QUESTION_WORDS.split())


@dataclass(frozen=True)
class RecallParams:
    """The ranking's knobs. Defaults chosen on the tuning half of LoCoMo (see module doc)."""

    content_weight: float = 1.0
    speaker_weight: float = 0.3
    candidates: int = 100  # best bm25 matches considered before re-ranking
    neighbour: float = 0.5  # share of the previous turn's score a message receives
    neighbour_back: float = 0.3  # share of the next turn's score a message receives
    speaker_boost: float = 0.5  # added to messages spoken by someone the query names
    session: float = 0.5  # weight of the (normalised) session score
    session_top: int = 3  # a session's score: the sum of its best this-many turns
    meta_weight: float = 1.0  # title/summary hits, relative to message hits
    date_boost: float = 0.5  # added (normalised) to messages inside a date the query names
    date_slack_days: int = 30  # a date also covers this long afterwards
    # Hybrid (hermes[embeddings]): the nearest messages by embedding, fused with the ranking.
    dense_candidates: int = 100
    # "score": the cosine (rescaled over the nearest list) joins bm25 as part of each message's
    # own score, so neighbours and sessions profit from it too; "rrf": reciprocal rank fusion.
    fusion: str = "score"
    dense_weight: float = 1.0
    rrf_k: int = 60
    # Added to messages holding every word of the query (stopwords included): an exact match of
    # a short query ("docker network") outranks messages with only some of its words.
    strict_bonus: float = 1.0


DEFAULT_PARAMS = RecallParams()


@dataclass
class RankedMessage:
    message_id: int
    session_id: int
    score: float
    parts: dict[str, float] = field(default_factory=dict)  # what the score is made of
    session_matched: bool = False  # the session's title or summary matched the query


@dataclass(frozen=True)
class TimeSpan:
    start: datetime
    end: datetime  # exclusive
    text: str  # the words of the query it came from


# -- query analysis -------------------------------------------------------------------------


def query_terms(plan: MatchPlan) -> list[Term]:
    """The terms that carry meaning: quoted phrases and non-stopwords (all, if none is left)."""
    kept = [t for t in plan.terms
            if t.quoted or len(t.tokens) > 1 or t.tokens[0].lower() not in QUERY_STOPWORDS]
    return kept or list(plan.terms)


def ranked_expression(plan: MatchPlan) -> str | None:
    terms = query_terms(plan)
    return " OR ".join(t.fts for t in terms) if terms else None


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS.pop("may", None)  # re-added below with a guard: "may" is usually a verb
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True)) + "|may"
_DAY_MONTH_YEAR = re.compile(
    rf"\b(?:(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?|({_MONTH_RE})\.?\s+"
    rf"(\d{{1,2}})(?:st|nd|rd|th)?\b)(?:,?\s+(\d{{4}}))?", re.I)
_MONTH_YEAR = re.compile(rf"\b(?:in|during|of|since|by|around|early|late|mid)?\s*"
                         rf"({_MONTH_RE})\.?(?:,?\s+(\d{{4}}))?\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since|around)\s+((?:19|20)\d{2})\b", re.I)
_RELATIVE = re.compile(r"\b(last|this|past)\s+(year|month|week)\b|\byesterday\b|\btoday\b", re.I)


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def time_spans(query: str, now: datetime | None = None) -> list[TimeSpan]:
    """The dates a query names, as spans of time. A month without a year means that month in
    any year (returned for every year from 1990 to now, cheap to test); "may" counts as the
    month only next to a day or a year, or after "in"."""
    spans: list[TimeSpan] = []
    taken: list[tuple[int, int]] = []
    now = now or datetime.now(UTC)
    years = range(1990, now.year + 2)

    def month_no(word: str) -> int:
        return _MONTHS.get(word.lower().rstrip("."), 5 if word.lower() == "may" else 0)

    for m in _DAY_MONTH_YEAR.finditer(query):
        day = int(m.group(1) or m.group(4))
        month = month_no(m.group(2) or m.group(3))
        if not month or not 1 <= day <= 31:
            continue
        for year in [int(m.group(5))] if m.group(5) else years:
            try:
                start = datetime(year, month, day, tzinfo=UTC)
            except ValueError:
                continue
            spans.append(TimeSpan(start, start + timedelta(days=1), m.group(0)))
        taken.append(m.span())
    for m in _MONTH_YEAR.finditer(query):
        if any(a <= m.start(1) < b for a, b in taken):
            continue
        word = m.group(1)
        if word.lower() == "may" and not (m.group(2) or m.group(0).lower().strip().startswith(
                ("in", "during", "of", "since", "by", "around", "early", "late", "mid"))):
            continue
        month = month_no(word)
        for year in [int(m.group(2))] if m.group(2) else years:
            start, end = _month_span(year, month)
            spans.append(TimeSpan(start, end, m.group(0).strip()))
        taken.append(m.span())
    for m in _YEAR.finditer(query):
        if any(a <= m.start(1) < b for a, b in taken):
            continue
        year = int(m.group(1))
        spans.append(TimeSpan(datetime(year, 1, 1, tzinfo=UTC),
                              datetime(year + 1, 1, 1, tzinfo=UTC), m.group(0)))
    for m in _RELATIVE.finditer(query):
        word = m.group(0).lower()
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        if word == "yesterday":
            spans.append(TimeSpan(today - timedelta(days=1), today, word))
        elif word == "today":
            spans.append(TimeSpan(today, today + timedelta(days=1), word))
        else:
            unit = m.group(2).lower()
            which = m.group(1).lower()
            if unit == "year":
                year = now.year - (which == "last")
                start, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
                if which == "past":
                    start, end = now - timedelta(days=365), now
            elif unit == "month":
                first = today.replace(day=1)
                if which == "last":
                    start = (first - timedelta(days=1)).replace(day=1)
                    end = first
                elif which == "this":
                    start, end = _month_span(now.year, now.month)
                else:
                    start, end = now - timedelta(days=31), now
            else:
                monday = today - timedelta(days=today.weekday())
                start, end = {"last": (monday - timedelta(days=7), monday),
                              "this": (monday, monday + timedelta(days=7)),
                              "past": (now - timedelta(days=7), now)}[which]
            spans.append(TimeSpan(start, end, word))
    return spans


# -- ranking ----------------------------------------------------------------------------------


def rank_messages(
    db: sqlite_utils.Database,
    user: str,
    query: str,
    *,
    limit: int = 10,
    source: str | None = None,
    now: datetime | None = None,
    params: RecallParams = DEFAULT_PARAMS,
    dense: Sequence[tuple[int, float]] | None = None,
    plan: MatchPlan | None = None,
) -> list[RankedMessage]:
    """The ``limit`` messages of ``user`` that best answer ``query``, best first.

    ``dense``: the nearest messages by embedding (message id, cosine), best first, when hybrid
    recall is on; fused with this ranking by reciprocal rank fusion.
    Raises QueryError when the query has no words; a MATCH error propagates (it is a bug).
    """
    plan = plan or build_match(query)
    if plan.empty:
        raise QueryError(f"Nothing to search for in {query!r}: it has no words.")
    limit = max(1, limit)
    wanted = max(params.candidates, limit)
    if plan.cjk:
        found = _like_candidates(db, user, plan, source, wanted)
        meta: dict[int, float] = {}
    else:
        expr = ranked_expression(plan)
        assert expr is not None
        found = _fts_candidates(db, user, expr, source, wanted, params)
        meta = _session_meta(db, user, expr, source)
    if not found and not meta:
        return []
    top = max((c.score for c in found), default=0.0) or max(meta.values(), default=1.0)
    strict = _strict_matches(db, plan, found) if params.strict_bonus else set()
    closeness: dict[int, float] = {}
    if dense and params.fusion == "score":
        closeness = _closeness(dense[: params.dense_candidates])
        known = {c.message_id for c in found}
        found = found + _placed(db, user, [m for m in closeness if m not in known], source)

    # Own score, and a share of it for the turn before and the turn after (same session).
    own: dict[int, float] = {}
    near: dict[int, float] = defaultdict(float)
    where: dict[int, tuple[int, str]] = {}  # message -> (session, created_at)
    for c in found:
        value = c.score / top + params.dense_weight * closeness.get(c.message_id, 0.0)
        own[c.message_id] = value
        where[c.message_id] = (c.session_id, c.created_at)
        for other, share in ((c.next_id, params.neighbour), (c.prev_id, params.neighbour_back)):
            if other is not None and share:
                near[other] += share * value
                # A neighbour shares its session, and its time to within minutes.
                where.setdefault(other, (c.session_id, c.created_at))

    # Session: the sum of its best turns, and title/summary hits.
    per_session: dict[int, list[float]] = defaultdict(list)
    for mid, value in own.items():
        per_session[where[mid][0]].append(value)
    session_score = {sid: sum(sorted(vals, reverse=True)[: params.session_top])
                     for sid, vals in per_session.items()}
    for sid, value in meta.items():
        session_score[sid] = session_score.get(sid, 0.0) + params.meta_weight * value / top
    best_session = max(session_score.values(), default=0.0) or 1.0

    # Time: the dates the query names; messages written then (or soon after) come first.
    spans = time_spans(query, now) if params.date_boost else []
    slack = timedelta(days=params.date_slack_days)
    date_cache: dict[str, float] = {}

    def date_part(created: str) -> float:
        day = created[:10]
        if day not in date_cache:
            when = datetime.fromisoformat(day).replace(tzinfo=UTC)
            if any(s.start <= when < s.end for s in spans):
                date_cache[day] = params.date_boost
            elif any(s.start <= when < s.end + slack for s in spans):
                date_cache[day] = params.date_boost / 2
            else:
                date_cache[day] = 0.0
        return date_cache[day]

    named = _speakers_named(db, plan, list(where)) if params.speaker_boost else set()

    ranked = []
    for mid, (sid, created) in where.items():
        parts = {"bm25": own.get(mid, 0.0), "neighbours": near.get(mid, 0.0),
                 "session": params.session * session_score.get(sid, 0.0) / best_session,
                 "date": date_part(created) if spans else 0.0,
                 "all terms": params.strict_bonus if mid in strict else 0.0,
                 "speaker": params.speaker_boost if mid in named else 0.0}
        parts = {k: v for k, v in parts.items() if v}
        ranked.append(RankedMessage(mid, sid, sum(parts.values()), parts, sid in meta))
    # Sessions that matched only on title/summary: their first turn stands for them.
    for sid in meta.keys() - per_session.keys():
        first = _first_message(db, user, sid)
        if first is not None and first not in where:
            value = params.meta_weight * meta[sid] / top
            ranked.append(RankedMessage(first, sid, value, {"title/summary": value}, True))
    ranked.sort(key=lambda r: (-r.score, -r.message_id))
    if dense and params.fusion == "rrf":
        ranked = _fuse(db, user, ranked, dense, source, params)
    return ranked[:limit]


def _closeness(dense: Sequence[tuple[int, float]]) -> dict[int, float]:
    """Cosines rescaled to 0..1 over the nearest list: the last one 0, the nearest 1."""
    if not dense:
        return {}
    high, low = dense[0][1], dense[-1][1]
    span = (high - low) or 1.0
    return {mid: (cosine - low) / span for mid, cosine in dense}


def _placed(
    db: sqlite_utils.Database, user: str, ids: list[int], source: str | None
) -> list[_Found]:
    """Messages found by embedding only, placed like bm25 candidates (with no bm25 score)."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = db.execute(
        f"SELECT {_FOUND_COLUMNS}, 0.0 FROM messages m WHERE m.user = ? AND m.id IN ({marks}) "
        f"AND {_SOURCE_FILTER}", [user, *ids, source, user, source]).fetchall()
    return [_Found(*row) for row in rows]


def _speakers_named(db: sqlite_utils.Database, plan: MatchPlan, ids: list[int]) -> set[int]:
    """The messages whose speaker the query names ("what does Ana like?" -> Ana's turns)."""
    words = {t.tokens[0].casefold() for t in plan.terms if len(t.tokens) == 1}
    if not words or not ids:
        return set()
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"SELECT id, speaker FROM messages WHERE id IN ({marks}) "
                      "AND speaker IS NOT NULL", ids).fetchall()
    return {mid for mid, speaker in rows
            if words & {part.casefold() for part in _WORD.findall(speaker)}}


_WORD = re.compile(r"[^\W_]+")


def _strict_matches(db: sqlite_utils.Database, plan: MatchPlan, found: list[_Found]) -> set[int]:
    """The candidates that hold every term of the query (none when that is a single term)."""
    if plan.cjk or not plan.strict or len(plan.terms) < 2 or not found:
        return set()
    ids = [c.message_id for c in found]
    marks = ",".join("?" * len(ids))
    rows = db.execute(
        f"SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? AND rowid IN ({marks})",
        [plan.strict, *ids]).fetchall()
    return {r[0] for r in rows}


def _fuse(
    db: sqlite_utils.Database, user: str, ranked: list[RankedMessage],
    dense: Sequence[tuple[int, float]], source: str | None, params: RecallParams,
) -> list[RankedMessage]:
    """Reciprocal rank fusion of the lexical ranking and the dense one."""
    k = params.rrf_k
    by_id = {r.message_id: r for r in ranked}
    fused: dict[int, float] = {}
    for position, r in enumerate(ranked, start=1):
        fused[r.message_id] = 1.0 / (k + position)
    dense = list(dense)[: params.dense_candidates]
    unknown = [mid for mid, _ in dense if mid not in by_id]
    placed: dict[int, int] = {}
    if unknown:
        marks = ",".join("?" * len(unknown))
        placed = dict(db.execute(
            f"SELECT m.id, m.session_id FROM messages m WHERE m.user = ? AND m.id IN ({marks}) "
            f"AND {_SOURCE_FILTER}", [user, *unknown, source, user, source]).fetchall())
    for position, (mid, cosine) in enumerate(dense, start=1):
        if mid not in by_id:
            if mid not in placed:
                continue  # another user's, another source's, or deleted
            by_id[mid] = RankedMessage(mid, placed[mid], 0.0, {})
        share = params.dense_weight / (k + position)
        fused[mid] = fused.get(mid, 0.0) + share
        by_id[mid].parts["dense"] = round(cosine, 4)
    result = []
    for mid, value in fused.items():
        r = by_id[mid]
        r.parts["lexical"] = r.score
        r.score = value
        result.append(r)
    result.sort(key=lambda r: (-r.score, -r.message_id))
    return result


@dataclass
class _Found:
    message_id: int
    session_id: int
    created_at: str
    prev_id: int | None
    next_id: int | None
    score: float  # higher is better


# Each candidate with its session, time and neighbours in one pass (idx_messages_session).
_FOUND_COLUMNS = (
    "m.id, m.session_id, m.created_at, "
    "(SELECT max(p.id) FROM messages p WHERE p.session_id = m.session_id AND p.id < m.id), "
    "(SELECT min(n.id) FROM messages n WHERE n.session_id = m.session_id AND n.id > m.id)"
)
_SOURCE_FILTER = (
    "(? IS NULL OR m.session_id IN (SELECT id FROM sessions WHERE user = ? AND source = ?))"
)


def _fts_candidates(
    db: sqlite_utils.Database, user: str, expr: str, source: str | None, wanted: int,
    params: RecallParams,
) -> list[_Found]:
    weights = f"{params.content_weight}, {params.speaker_weight}"
    rows = db.execute(
        f"SELECT {_FOUND_COLUMNS}, -hits.rank FROM "
        f"(SELECT rowid AS id, bm25(messages_fts, {weights}) AS rank FROM messages_fts "
        "  WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?) AS hits "
        f"JOIN messages m ON m.id = hits.id WHERE m.user = ? AND {_SOURCE_FILTER} "
        "ORDER BY hits.rank",
        [expr, wanted, user, source, user, source],
    ).fetchall()
    if len(rows) < wanted and db.execute(
        "SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? LIMIT ?)",
        [expr, wanted],
    ).fetchone()[0] == wanted:
        # Other users' (or other sources') messages took some of the places: rank in scope.
        rows = db.execute(
            f"SELECT {_FOUND_COLUMNS}, -bm25(messages_fts, {weights}) FROM messages_fts "
            "CROSS JOIN messages m ON m.id = messages_fts.rowid "
            f"WHERE messages_fts MATCH ? AND m.user = ? AND {_SOURCE_FILTER} "
            f"ORDER BY bm25(messages_fts, {weights}) LIMIT ?",
            [expr, user, source, user, source, wanted],
        ).fetchall()
    return [_Found(*row) for row in rows]


def _like_candidates(
    db: sqlite_utils.Database, user: str, plan: MatchPlan, source: str | None, wanted: int
) -> list[_Found]:
    """CJK text has no word breaks for FTS5: LIKE on each run, scored by occurrences."""
    clause = " OR ".join("m.content LIKE ? ESCAPE '\\'" for _ in plan.cjk)
    rows = db.execute(
        f"SELECT {_FOUND_COLUMNS}, m.content FROM messages m WHERE m.user = ? AND ({clause}) "
        f"AND {_SOURCE_FILTER} ORDER BY m.id DESC LIMIT ?",
        [user, *(like_pattern(run) for run in plan.cjk), source, user, source, wanted],
    ).fetchall()
    return [_Found(*row[:5], float(sum(row[5].count(run) for run in plan.cjk)))
            for row in rows]


def _session_meta(
    db: sqlite_utils.Database, user: str, expr: str, source: str | None
) -> dict[int, float]:
    """bm25 of session titles and summaries (a title hit worth twice a summary hit)."""
    rows = db.execute(
        "SELECT s.id, -bm25(sessions_fts, 2.0, 1.0) FROM sessions_fts "
        "CROSS JOIN sessions s ON s.id = sessions_fts.rowid "
        "WHERE sessions_fts MATCH ? AND s.user = ? AND (? IS NULL OR s.source = ?)",
        [expr, user, source, source],
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def _first_message(db: sqlite_utils.Database, user: str, session_id: int) -> int | None:
    row = db.execute(
        "SELECT id FROM messages WHERE session_id = ? AND user = ? "
        "ORDER BY role != 'user', id LIMIT 1", [session_id, user]).fetchone()
    return None if row is None else int(row[0])
