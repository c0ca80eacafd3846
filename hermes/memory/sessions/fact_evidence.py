"""Session search's fact evidence: the facts the home learned, pointing at where they were said.

Every fact the background extractor writes carries the session and the messages it was learned
from (``source_session_id``, ``source_message_ids``; hermes.learn.consolidate). The facts that
best answer a question (the fact store's own search: bm25 and meaning fused, x trust, the trust
threshold and forgotten or superseded facts hiding, exactly as per-turn recall sees them) are
then evidence for those conversations and those turns, even when the turn shares no word with
the question ("when did I talk about my car?" finds the conversation where "owns a Tesla Model
3" was learned). No model call: the facts already exist.

This module does not search facts (sessions/ does not import facts/): the caller passes the
hits, anything with ``score``, ``trust``, ``cosine``, ``source_session_id`` and
``source_message_ids`` (hermes.memory.facts.records.Fact). Only ``user``'s own sessions and
messages count: a fact whose ids point at another user's rows, or at deleted ones, contributes
nothing.

The evidence lifts the ranked messages after the message score and the session date
(hermes.memory.sessions.search): each message of a source session by ``SESSION_WEIGHT`` x the
fact's strength x the spread of the sessions' best scores (as session_rank's date lift), each
source message by ``MESSAGE_WEIGHT`` x strength x spread on top; a source message outside the
pool joins it from the pool's lowest score. A fact's strength (:func:`strength`) is its cosine to
the question on the model's ramp (words only: its score over the best hit's), x its trust, for
the best ``TOP_FACTS`` hits. Chosen on tuning halves (README, "Session search: the facts learned
from a conversation").
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from hermes.config import FactsConfig
from hermes.memory.embeddings import MINILM, MINILM_INT8
from hermes.memory.sessions.rerank import RankedMessage

# Chosen on the tuning halves of LoCoMo and of two homes with fewer facts (half the observations
# dropped; each session's first only), offline on every question's pool and fact hits (i12's
# screens, notes/i12-i13.md): no set's tuning turn R@5 down more than 0.003, then the largest
# gain. A session weight helps dense facts and hurts sparse ones (few facts: -0.009 turn R@5 at
# 0.25); the first landing's 1.0, with the score ratio as strength, lost 0.046 there.
TOP_FACTS = 20  # the best this-many fact hits are evidence
SESSION_WEIGHT = 0.0  # each message of a source session (x strength x spread)
MESSAGE_WEIGHT = 1.0  # each source message, on top (x strength x spread)
# A hit's strength by its cosine to the question, as the model measures it: nothing at RAMP[0]
# or below, all at RAMP[1] or above, a straight line between. The absolute cosine says how
# likely a hit is right whatever the home holds (MiniLM: a hit at 0.7 or above cites an evidence
# turn ~41 % of the time with every observation as a fact, with half, with one a session); its
# rank or its score against the best hit's does not (a home with few facts still has a best).
RAMPS = {MINILM: (0.4, 0.8), MINILM_INT8: (0.4, 0.8)}
# Trust multiplies: a fact at the default trust or above counts fully, one rated down less.
FULL_TRUST = FactsConfig.model_fields["default_trust"].default
POOL = 200  # the best this-many ranked messages are lifted (as session_rank.POOL)


class FactHit(Protocol):
    """What a fact hit must say (hermes.memory.facts.records.Fact does)."""

    @property
    def score(self) -> float | None: ...

    @property
    def source_session_id(self) -> int | None: ...

    @property
    def source_message_ids(self) -> list[int]: ...

    @property
    def trust(self) -> float: ...

    @property
    def cosine(self) -> float | None: ...


# The home's fact search as session search calls it: (user, query, meaning) -> hits, best first
# (hermes.memory.Memory passes its FactStore.search with TOP_FACTS); ``meaning``: the text whose
# embedding the fact store compares to the facts, None for the query itself.
FactSearch = Callable[[str, str, "str | None"], Sequence[FactHit]]
# True: the fact store is given the text session search embedded (the speakers' names as "you":
# one query embedding, ~3 ms CPU less a search); False: the question as asked (a second
# embedding). LoCoMo MiniLM --with-facts, turn / session R@5 all (transcripts 0.753 / 0.891):
# one embedding 0.760 / 0.892, p50 15.6 ms CPU; two 0.762 / 0.901, p50 18.5 ms (load ~4.5).
# One, so that the query CPU goal holds (lead's decision, notes/i12-i13.md 05:18).
ONE_EMBEDDING = True


@dataclass(frozen=True)
class Evidence:
    """What the facts say, for one user's question: session id -> strength, and message id ->
    (its session id, strength); strengths in (0, 1] (:func:`strength`)."""

    sessions: dict[int, float] = field(default_factory=dict)
    messages: dict[int, tuple[int, float]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.sessions)


NO_EVIDENCE = Evidence()


class Pending:
    """One search's fact evidence, gathered once, when the round that uses it (the last one,
    after the meaning score) asks: from the hits given, or from the fact search called then
    (a search answered by its all-words round searches no fact)."""

    def __init__(self, db: Any, user: str, query: str,
                 facts: Sequence[FactHit] | FactSearch | None, *, source: str | None = None,
                 exclude_session: int | None = None, model: str | None = None) -> None:
        self.db, self.user, self.query, self.facts = db, user, query, facts
        self.source, self.exclude_session, self.model = source, exclude_session, model
        self._evidence: Evidence | None = None

    def evidence(self, meaning: str | None = None) -> Evidence:
        """``meaning``: the text session search embedded for the query (None: words only)."""
        if self._evidence is None:
            facts = self.facts
            hits = facts(self.user, self.query, meaning if ONE_EMBEDDING else None) \
                if callable(facts) else facts
            self._evidence = gather(self.db, self.user, hits, source=self.source,
                                    exclude_session=self.exclude_session, model=self.model)
        return self._evidence


def strength(hit: FactHit, best: float, model: str | None) -> float:
    """How much ``hit`` says, in [0, 1]: by its cosine on ``model``'s ramp (RAMPS) when both
    are known, else (words only, or a model without a measured ramp) its score over the best
    hit's ``best``; x its trust over FULL_TRUST, at most 1."""
    trusted = min(1.0, max(0.0, float(hit.trust)) / FULL_TRUST)
    ramp = RAMPS.get(model or "")
    cosine = getattr(hit, "cosine", None)
    if ramp is not None and cosine is not None:
        low, high = ramp
        return trusted * min(1.0, max(0.0, (float(cosine) - low) / (high - low)))
    return trusted * float(hit.score or 0.0) / best


def gather(db: Any, user: str, hits: Sequence[FactHit] | None, *, source: str | None = None,
           exclude_session: int | None = None, top: int | None = None,
           model: str | None = None) -> Evidence:
    """The evidence of the best ``top`` (default TOP_FACTS) of ``hits`` (best first) in
    ``user``'s own sessions and messages (of ``source`` only, none of ``exclude_session``:
    the search's own filters), each by its :func:`strength` (``model``: the embedding model
    the hits' cosines come from); hits without a positive score or strength give nothing."""
    found = [h for h in (hits or [])[: top or TOP_FACTS] if h.score is not None and h.score > 0]
    if not found:
        return NO_EVIDENCE
    best = max(float(h.score or 0.0) for h in found)
    scored = [(h, s) for h in found if (s := strength(h, best, model)) > 0]
    if not scored:
        return NO_EVIDENCE
    wanted_messages = {int(m) for h, _ in scored for m in (h.source_message_ids or [])}
    wanted_sessions = {int(h.source_session_id) for h, _ in scored
                       if h.source_session_id is not None}
    owner = _own_messages(db, user, wanted_messages)
    own_sessions = _own_sessions(db, user, wanted_sessions | set(owner.values()), source,
                                 exclude_session)
    owner = {m: s for m, s in owner.items() if s in own_sessions}
    sessions: dict[int, float] = {}
    messages: dict[int, tuple[int, float]] = {}
    for hit, value in scored:
        found_in = {owner[m] for m in (hit.source_message_ids or []) if m in owner}
        if hit.source_session_id in own_sessions:
            found_in.add(int(hit.source_session_id))
        for sid in found_in:
            sessions[sid] = max(sessions.get(sid, 0.0), value)
        for m in hit.source_message_ids or []:
            if m in owner and value > messages.get(m, (0, 0.0))[1]:
                messages[m] = (owner[m], value)
    return Evidence(sessions, messages)


def _own_messages(db: Any, user: str, ids: set[int]) -> dict[int, int]:
    """message id -> session id, for those of ``ids`` that are ``user``'s and still stored."""
    found: dict[int, int] = {}
    ordered = sorted(ids)
    for begin in range(0, len(ordered), 500):
        chunk = ordered[begin : begin + 500]
        found.update(db.execute(
            f"SELECT id, session_id FROM messages WHERE user = ? AND id IN "
            f"({','.join('?' * len(chunk))})", [user, *chunk]).fetchall())
    return found


def _own_sessions(db: Any, user: str, ids: set[int], source: str | None,
                  exclude_session: int | None) -> set[int]:
    """Those of ``ids`` that are ``user``'s sessions, of ``source`` if given, but not
    ``exclude_session``."""
    if not ids:
        return set()
    ordered = sorted(ids)
    return {row[0] for row in db.execute(
        f"SELECT id FROM sessions WHERE user = ? AND id IN ({','.join('?' * len(ordered))}) "
        "AND (? IS NULL OR source = ?)", [user, *ordered, source, source]).fetchall()
        if row[0] != exclude_session}


def lift(ranked: Sequence[RankedMessage], evidence: Evidence, *, join: bool = True,
         session_weight: float | None = None,
         message_weight: float | None = None) -> list[RankedMessage]:
    """``ranked`` (best first) with the evidence's sessions and messages lifted and (``join``)
    its source messages missing from it added, re-sorted; unchanged without evidence."""
    if not evidence:
        return list(ranked)
    w_session = SESSION_WEIGHT if session_weight is None else session_weight
    w_message = MESSAGE_WEIGHT if message_weight is None else message_weight
    pool = list(ranked[:POOL])
    best: dict[int, float] = {}
    for r in pool:
        best[r.session_id] = max(best.get(r.session_id, r.score), r.score)
    # The lift is on the scale of how far apart the conversations are (session_rank's spread);
    # a pool of one conversation, or of ties, falls back to the messages' spread, then 1.
    spread = (statistics.pstdev(best.values()) if len(best) > 1 else 0.0) or (
        statistics.pstdev(r.score for r in pool) if len(pool) > 1 else 0.0) or 1.0
    floor = min((r.score for r in pool), default=0.0)

    def gain(message_id: int, session_id: int) -> float:
        held = evidence.messages.get(message_id)
        return spread * (w_session * evidence.sessions.get(session_id, 0.0)
                         + w_message * (held[1] if held else 0.0))

    lifted = []
    for r in pool:
        extra = gain(r.message_id, r.session_id)
        lifted.append(RankedMessage(r.message_id, r.session_id, r.score + extra,
                                    {**r.parts, "facts": extra}, r.session_matched)
                      if extra else r)
    present = {r.message_id for r in ranked}
    for mid, (sid, _) in evidence.messages.items() if join else ():
        if mid not in present:
            extra = gain(mid, sid)
            lifted.append(RankedMessage(mid, sid, floor + extra, {"facts": extra}))
    lifted.sort(key=lambda r: (-r.score, -r.message_id))
    return lifted + list(ranked[POOL:])
