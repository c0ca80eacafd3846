"""Re-ranking of matched messages: what turns bm25 matches into recall.

Session search (``SessionStore.search``, behind the ``session_search`` tool, the CLI and the
context file, and ``SessionStore.search_messages``) finds the messages that match a query and
scores them by BM25 (``hermes.memory.sessions.bm25``); :func:`rerank` then reads each match in its
conversation. Zero model calls, two small SQLite queries. Each signal is general, none fitted
to any one benchmark question:

1. **Neighbours**: a question passes part of its score to the turn after it (same session),
   its answer ("Lisbon! The tiles were beautiful"), and every message passes part of its score
   to the turn before it, the question it may answer. Asking is not telling: a message that ends
   in a question mark keeps only part of its own score. A statement passes nothing forward: the
   turn after it is no more likely to hold the answer (measured: no gain on LoCoMo, a loss on
   every reshaped variant of it, see ``scripts/locomo_perturb.py``).
2. **Speakers**: a query that names someone ("what does Ana like?") prefers what Ana said, as
   a tie-breaker among matches of about the same strength (the question may be about what Ana
   was told).
3. **Session**: conversations are about something. A message in a session where many turns
   match gets a share of the session's score (the sum of its best turns' scores, plus any hit on
   the session's title or summary).
4. **Time**: a date in the query ("in May 2023", "on 13 October", "last month" relative to now)
   boosts messages written then, and half as much in the weeks after (people tell later what
   they did).
5. **Embeddings** (optional, ``hermes[embeddings]``): the nearest messages by a small local
   embedding model join the candidates; hermes.memory.sessions.semantic then re-scores the
   ranking by meaning.

Scores are normalised by the query's best BM25 score, so the weights do not depend on the size
of the history. They were chosen on the first half of a public benchmark and checked on the
other half (``scripts/bench_locomo.py``).
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import sqlite_utils

from hermes.memory.words.dates import time_spans
from hermes.store.fts import MatchPlan


@dataclass(frozen=True)
class RecallParams:
    """The ranking's knobs. Defaults chosen on the tuning half of LoCoMo (see module doc)."""

    # Share of the previous turn's score a message receives when that turn is not a question
    # (a question's next turn receives ``answer``). 0.3 measured -0.002 / +0.002 turn R@5 on
    # LoCoMo's halves against 0, and 0 was better on both halves under all eight perturbed
    # variants (bench_locomo --perturb; README, "Generalisation"): off.
    neighbour: float = 0.0
    neighbour_back: float = 0.3  # share of the next turn's score a message receives
    # Added to messages spoken by someone the query names: a hint, not a trump. LoCoMo's
    # questions name the person who said the answer (96 % of the evidence turns of a question
    # naming one speaker); there 0.5 measured best (+0.044 turn R@5), but with the names pointing
    # at the other speaker it cost 0.215 (0.2: 0.107 less), so 0.5 pays only where more than
    # ~78 % of answers are the named person's own words. 0.2 had the least regret on the tuning
    # half for any such share from 60 % to 90 % (README, "Generalisation").
    speaker_boost: float = 0.2
    session: float = 0.5  # weight of the (normalised) session score
    candidates: int = 100  # best BM25 matches read in their conversation
    match_floor: float = 0.2  # least score of a matching message, relative to the best
    session_top: int = 3  # a session's score: the sum of its best this-many turns
    meta_weight: float = 1.0  # title/summary hits, relative to message hits
    date_boost: float = 0.5  # added (normalised) to messages inside a date the query names
    date_slack_days: int = 30  # a date also covers this long afterwards
    # Hybrid (hermes[embeddings]): the nearest messages by embedding join the candidates and
    # are placed here like the others (neighbours, session, date, speaker); their meaning is
    # scored afterwards, with every candidate's, by hermes.memory.sessions.semantic. A
    # dense_weight above 0 also adds each one's cosine, rescaled over the list, here: measured
    # worse on LoCoMo than the re-scoring alone (0.704 vs 0.715 turn R@5), so 0.
    dense_candidates: int = 100
    dense_weight: float = 0.0
    # A message that ends in a question ("what's your best camping memory?") holds the query's
    # words but rarely the answer: its own bm25 part is multiplied by this. Its neighbours (the
    # answer) and its session still receive their full share.
    question: float = 0.5
    answer: float = 0.6  # share of a question's score its next turn (the answer) receives


DEFAULT_PARAMS = RecallParams()


@dataclass
class RankedMessage:
    message_id: int
    session_id: int
    score: float
    parts: dict[str, float] = field(default_factory=dict)  # what the score is made of
    session_matched: bool = False  # the session's title or summary matched the query
    # What it matched: "words" (its own words, its title or summary, or the turn it answers),
    # "meaning" (close in meaning: hermes.memory.sessions.semantic), "both", or "" (a fill-in
    # of neither: a candidate by meaning under the floor of what is shown). See :func:`shown`.
    matched: str = "words"


def shown(r: RankedMessage) -> bool:
    """Whether a ranked message may be shown to a person or the model: it matched words or
    meaning, or a fact learned from it lifted it (hermes.memory.sessions.fact_evidence)."""
    return bool(r.matched) or bool(r.parts.get("facts"))


# -- ranking ----------------------------------------------------------------------------------


def other_names(db: sqlite_utils.Database, user: str, plan: MatchPlan) -> list[str]:
    """Other names, from the fact store's entities, of what the query names: "postgres" ->
    "PostgreSQL" when one is an alias of the other (``hermes facts`` aliases, config aliases)."""
    tokens = [t.casefold() for term in plan.terms for t in term.tokens]
    keys = {" ".join(tokens[i : i + n]) for n in (1, 2, 3) for i in range(len(tokens) - n + 1)}
    if not keys:
        return []
    marks = ",".join("?" * len(keys))
    rows = db.execute(
        "WITH hit(id) AS ("
        f"  SELECT entity_id FROM entity_aliases WHERE user = ? AND alias_key IN ({marks}) "
        f"  UNION SELECT id FROM entities WHERE user = ? AND name_key IN ({marks})) "
        "SELECT e.name, e.name_key FROM entities e JOIN hit ON hit.id = e.id "
        "UNION SELECT a.alias, a.alias_key FROM entity_aliases a JOIN hit ON hit.id = a.entity_id "
        "WHERE a.user = ?",
        [user, *keys, user, *keys, user],
    ).fetchall()
    return sorted({name for name, key in rows if key not in keys})


def plan_text(plan: MatchPlan) -> str:
    """The query's words, as plain text (for date spans and embeddings)."""
    return " ".join([" ".join(t.tokens) for t in plan.terms] + list(plan.cjk))


TITLE_ONLY_SESSIONS = 50


def rerank(
    db: sqlite_utils.Database,
    user: str,
    plan: MatchPlan,
    candidates: Sequence[tuple[int, float]],
    meta: dict[int, float],
    *,
    limit: int = 10,
    source: str | None = None,
    now: datetime | None = None,
    params: RecallParams = DEFAULT_PARAMS,
    dense: Sequence[tuple[int, float]] | None = None,
    exclude_session: int | None = None,
    detail: bool = True,
) -> list[RankedMessage]:
    """The ``limit`` messages of ``user`` that best answer the query, best first (none from
    ``exclude_session``, the conversation in progress, when given).

    ``candidates``: (message id, bm25 score) of the messages that match the query (higher is
    better); ``meta``: session id -> bm25 score of its title and summary; ``dense``: the nearest
    messages by embedding (message id, cosine), best first, when hybrid recall is on;
    ``detail``: False for a caller that never shows the parts (the grouping by session): each
    message's parts are then only those the stages after read (:func:`_read_parts`).
    """
    if not candidates and not meta and not dense:
        return []
    # The best ``candidates`` matches are read in context; the rest would rank below anyway.
    scores = dict(sorted(candidates, key=lambda c: -c[1])[: params.candidates])
    top = max(scores.values(), default=0.0) or max(meta.values(), default=0.0) or 1.0
    # The index says every candidate matches, even when counting its words found none (an
    # irregular stem): it is worth at least a small part of the best match.
    scores = {mid: max(score, params.match_floor * top) for mid, score in scores.items()}
    closeness = _closeness(list(dense or [])[: params.dense_candidates])
    found = _placed(db, user, list(scores.keys() | closeness.keys()), source)
    if exclude_session is not None:
        found = [c for c in found if c.session_id != exclude_session]
        meta = {sid: v for sid, v in meta.items() if sid != exclude_session}

    # Own score, and a share of it for the turn before and the turn after (same session).
    own: dict[int, float] = {}
    asks: set[int] = set()
    near: dict[int, float] = defaultdict(float)
    where: dict[int, tuple[int, str]] = {}  # message -> (session, created_at)
    for c in found:
        value = scores.get(c.message_id, 0.0) / top \
            + params.dense_weight * closeness.get(c.message_id, 0.0)
        own[c.message_id] = value
        if c.asks:
            asks.add(c.message_id)
        where[c.message_id] = (c.session_id, c.created_at)
        forward = params.answer if c.asks else params.neighbour
        for other, share in ((c.next_id, forward), (c.prev_id, params.neighbour_back)):
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
    spans = time_spans(plan_text(plan), now) if params.date_boost else []
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

    named: set[int] = set()
    words = {t.tokens[0].casefold() for t in plan.terms if len(t.tokens) == 1}
    if params.speaker_boost and words:
        speakers = {c.speaker for c in found}
        naming = {sp for sp in speakers if _names(words, sp)}  # a few distinct speakers
        named = {c.message_id for c in found if c.speaker in naming}
        if named:  # someone the query names spoke here: their neighbouring turns count too
            named |= _speakers_named(db, words, [m for m in where if m not in own])

    # Totals first; the parts (for --explain) only for the messages returned.
    entries: list[tuple[float, int, int, tuple[float, ...]]] = []
    for mid, (sid, created) in where.items():
        values = (scores.get(mid, 0.0) / top * (params.question if mid in asks else 1.0),
                  params.dense_weight * closeness.get(mid, 0.0) if closeness else 0.0,
                  near.get(mid, 0.0),
                  params.session * session_score.get(sid, 0.0) / best_session,
                  date_part(created) if spans else 0.0,
                  params.speaker_boost if mid in named else 0.0)
        entries.append((sum(v for v in values if v), mid, sid, values))
    # Sessions that matched only on title/summary: their first turn stands for them.
    # Each stands for its session with one message; callers show at most a few dozen
    # sessions, so only the best TITLE_ONLY_SESSIONS of them can reach a result.
    title_only = sorted(meta.keys() - per_session.keys(), key=lambda sid: (-meta[sid], -sid))
    for sid in title_only[: min(limit, TITLE_ONLY_SESSIONS)]:
        first = _first_message(db, user, sid)
        if first is not None and first not in where:
            value = params.meta_weight * meta[sid] / top
            entries.append((value, first, sid, (value,)))
    entries.sort(key=lambda e: (-e[0], -e[1]))
    # A message placed here only because it is near in meaning (no word, no neighbour's, no
    # title's) has matched nothing yet: the re-scoring by meaning says whether it does.
    parts = _parts if detail else _read_parts
    return [RankedMessage(mid, sid, total, parts(values), sid in meta,
                          "words" if len(values) == 1 or values[0] or values[2] else "")
            for total, mid, sid, values in entries[:limit]]


_PART_NAMES = ("bm25", "dense", "neighbours", "session", "date", "speaker")


def _parts(values: tuple[float, ...]) -> dict[str, float]:
    names = ("title/summary",) if len(values) == 1 else _PART_NAMES
    return {name: v for name, v in zip(names, values, strict=True) if v}


def _read_parts(values: tuple[float, ...]) -> dict[str, float]:
    """The parts of :func:`_parts` that the stages after the ranking read, with the same
    values: "title/summary" (the grouping by session; the re-scoring by meaning), "bm25" and
    "date" (hermes.memory.sessions.semantic)."""
    if len(values) == 1:
        return {"title/summary": values[0]} if values[0] else {}
    words, date = values[0], values[4]
    if words:
        return {"bm25": words, "date": date} if date else {"bm25": words}
    return {"date": date} if date else {}


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


def _names(words: set[str], speaker: str | None) -> bool:
    return bool(speaker) and bool(words & _name_words(speaker or ""))


@functools.lru_cache(maxsize=1024)
def _name_words(speaker: str) -> frozenset[str]:
    return frozenset(p.casefold() for p in _WORD.findall(speaker))


def _speakers_named(db: sqlite_utils.Database, words: set[str], ids: list[int]) -> set[int]:
    """Of ``ids``, the messages whose speaker the query names ("what does Ana like?")."""
    if not ids:
        return set()
    marks = ",".join("?" * len(ids))
    rows = db.execute(f"SELECT id, speaker FROM messages WHERE id IN ({marks}) "
                      "AND speaker IS NOT NULL", ids).fetchall()
    return {mid for mid, speaker in rows if _names(words, speaker)}


_WORD = re.compile(r"[^\W_]+")


@dataclass
class _Found:
    message_id: int
    session_id: int
    created_at: str
    prev_id: int | None
    next_id: int | None
    speaker: str | None
    asks: int  # the message ends in a question mark
    score: float  # higher is better


# Each candidate with its session, time and neighbours in one pass (idx_messages_session).
_FOUND_COLUMNS = (
    "m.id, m.session_id, m.created_at, "
    "(SELECT max(p.id) FROM messages p WHERE p.session_id = m.session_id AND p.id < m.id), "
    "(SELECT min(n.id) FROM messages n WHERE n.session_id = m.session_id AND n.id > m.id), "
    "m.speaker, rtrim(m.content) LIKE '%?'"
)
_SOURCE_FILTER = (
    "(? IS NULL OR m.session_id IN (SELECT id FROM sessions WHERE user = ? AND source = ?))"
)


def _first_message(db: sqlite_utils.Database, user: str, session_id: int) -> int | None:
    # The session's first user turn (walking the (session_id, id) index, not sorting the
    # whole session), else its first message of any role.
    for role_filter in ("AND role = 'user'", ""):
        row = db.execute(
            f"SELECT id FROM messages WHERE session_id = ? AND user = ? {role_filter} "
            "ORDER BY id LIMIT 1", [session_id, user]).fetchone()
        if row is not None:
            return int(row[0])
    return None
