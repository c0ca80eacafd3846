"""Session search's session-level stage: the ranked messages re-read by their conversation.

Runs after the message score (hermes.memory.sessions.rerank by words, then
hermes.memory.sessions.semantic by meaning when the model is on), on its best ``POOL`` messages.
Today one signal: **the conversation's date against the time the question names** ("what did
Dave do in the first weekend of October 2023?": ``words.dates.time_spans``). A session that started
inside a named span lifts each of its messages by ``DATE_IN`` x the spread of the sessions'
scores, one that started within ``SLACK_DAYS`` after it by ``DATE_AFTER`` x that spread:

    spread = standard deviation, over the sessions in the pool, of each session's best score

so the lift is on the scale of how far apart the conversations are, whichever score came before
(words only, or words and meaning); conversations that tie are told apart by their date alone.
The message ranking has a date part of its own (rerank's, from each message's time, on the word
candidates only, then diluted by the meaning part); this one is the session's, for every message
of the pool, the ones found by meaning included. A start time that cannot be read is no date; a
home of one conversation is left as it was.

Chosen on LoCoMo's tuning half only (``DATE_IN``/``DATE_AFTER`` among 0.25-1.0 each; offline on
the ranked pools of all 1,536 questions, checked in ``bench_locomo.py``): see the README,
"Session-level stage". Measured and not kept (no gain on either half, or a loss): the session
taken as one document for bm25, its best / mean-of-top-3 / mean cosine, how many candidates it
holds, z-score fusion of bm25 with the best cosine, a session-level MMR on the best messages'
vectors. A question that names no time is left as it was.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hermes.memory.sessions.rerank import RankedMessage
from hermes.memory.words.dates import TimeSpan

POOL = 200  # the best this-many messages are re-read (their sessions are the candidates)
DATE_IN = 1.0  # the session started inside a span the question names (x the spread)
DATE_AFTER = 0.5  # ... or within SLACK_DAYS after its end
SLACK_DAYS = 30


def pstdev(values: Iterable[float]) -> float:
    """The population standard deviation of ``values`` (0 for fewer than two), in floats:
    statistics.pstdev's exact arithmetic costs ~0.1-0.4 ms a call on a pool of 200 scores,
    for a spread that only scales a lift (the two agree to ~1e-15). Ties are exactly 0, as
    there (the callers then fall back to another spread)."""
    held = list(values)
    if len(held) < 2 or min(held) == max(held):
        return 0.0
    mean = math.fsum(held) / len(held)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in held) / len(held))


def session_starts(db: Any, user: str, session_ids: Sequence[int]) -> dict[int, datetime]:
    """When each of ``user``'s sessions among ``session_ids`` started (another user's: none)."""
    ids = list(dict.fromkeys(session_ids))
    starts: dict[int, datetime] = {}
    for begin in range(0, len(ids), 500):
        chunk = ids[begin : begin + 500]
        for sid, started in db.execute(
            f"SELECT id, started_at FROM sessions WHERE user = ? AND id IN "
            f"({','.join('?' * len(chunk))})", [user, *chunk]).fetchall():
            when = _parsed(started)
            if when is not None:
                starts[sid] = when
    return starts


def _parsed(text: str | None) -> datetime | None:
    """A stored timestamp as an aware datetime (naive ones are UTC); None when unreadable."""
    try:
        when = datetime.fromisoformat(text or "")
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def by_session_date(
    db: Any, user: str, ranked: Sequence[RankedMessage], spans: Sequence[TimeSpan],
) -> list[RankedMessage]:
    """``ranked`` (best first) with the messages of sessions that started in (or just after)
    one of ``spans`` lifted, re-sorted; unchanged without spans. Reads ``user``'s sessions
    only."""
    pool = list(ranked[:POOL])
    if not spans or len(pool) < 2:
        return list(ranked)
    best: dict[int, float] = {}
    for r in pool:
        best[r.session_id] = max(best.get(r.session_id, r.score), r.score)
    if len(best) < 2:
        return list(ranked)
    # Conversations that tie (the same words, said alike) have no spread: any lift only breaks
    # the tie, on the scale of the messages' scores (or 1 when they all tie too).
    spread = pstdev(best.values()) or pstdev(r.score for r in pool) or 1.0
    slack = timedelta(days=SLACK_DAYS)
    lift: dict[int, float] = {}
    for sid, started in session_starts(db, user, list(best)).items():
        if any(s.start <= started < s.end for s in spans):
            lift[sid] = DATE_IN * spread
        elif any(s.start <= started < s.end + slack for s in spans):
            lift[sid] = DATE_AFTER * spread
    if not lift:
        return list(ranked)
    lifted = [replace(r, score=r.score + lift[r.session_id],
                      parts={**r.parts, "session date": lift[r.session_id]})
              if r.session_id in lift else r for r in pool]
    lifted.sort(key=lambda r: (-r.score, -r.message_id))
    return lifted + list(ranked[POOL:])
