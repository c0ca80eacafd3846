"""Session search's fact evidence: the facts the home learned, pointing at where they were said.

Every fact the background extractor writes carries the session and the messages it was learned
from (``source_session_id``, ``source_message_ids``; hermes.learn.consolidate). The facts that
best answer a question (the fact store's own search: bm25 and meaning fused, x trust, the trust
threshold and forgotten or superseded facts hiding, exactly as per-turn recall sees them) are
then evidence for those conversations and those turns, even when the turn shares no word with
the question ("when did I talk about my car?" finds the conversation where "owns a Tesla Model
3" was learned). No model call: the facts already exist.

This module does not search facts (sessions/ does not import facts/): the caller passes the
hits, anything with ``score``, ``source_session_id`` and ``source_message_ids``
(hermes.memory.facts.records.Fact). Only ``user``'s own sessions and messages count: a fact
whose ids point at another user's rows, or at deleted ones, contributes nothing.

The evidence lifts the ranked messages after the message score and the session date
(hermes.memory.sessions.search): each message of a source session by ``SESSION_WEIGHT`` x the
fact's strength x the spread of the sessions' best scores (as session_rank's date lift), each
source message by ``MESSAGE_WEIGHT`` x strength x spread on top; a source message outside the
pool joins it from the pool's lowest score. A fact's strength is, when the fact search ranked
by meaning (its hits carry their cosine to the question) with a model whose cosines are
calibrated here (RAMPS), how close the fact is to the question (MEANING_* weights: its source
messages only); otherwise its score over the best hit's score, for the best ``TOP_FACTS`` hits.
Weights chosen on LoCoMo's tuning half (README, "Session search: the facts learned from a
conversation"; the meaning strength also on the tuning halves of sparser fact sets, README
"Session search: when the home has few facts").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from hermes.config import FactsConfig
from hermes.memory.embeddings.embedders import MINILM, MINILM_INT8
from hermes.memory.sessions.rerank import RankedMessage
from hermes.memory.sessions.session_rank import pstdev

# Chosen on LoCoMo's tuning half (offline on the pools and fact hits of all 1,536 questions:
# TOP_FACTS 3/5/10/20/30, strength score ratio or 0.8/0.6 per rank, each weight 0-2).
TOP_FACTS = 5  # the best this-many fact hits are evidence
SESSION_WEIGHT = 1.0  # each message of a source session (x strength x spread)
MESSAGE_WEIGHT = 0.25  # each source message, on top (x strength x spread)

# With the facts' cosines to the question (hybrid fact search with a model below), a fact's
# strength is how close in meaning it is, not how it ranks among the hits: the best hit of a
# home with few facts is often a weak match, and lifted by rank it displaces the right turns
# (LoCoMo with half of the observations dropped: turn R@5 -0.025; with one a session: -0.046).
# The share of hits whose source turn answers the question depends on the cosine alone, not
# on how many facts there are (MiniLM: 41-42 % at 0.7 and above, whether every turn has an
# observation or one a session). Chosen on the tuning halves of LoCoMo, of half its facts and
# of one a session (i12, notes/i12-i13.md; scripts/locomo_perturb.py half-facts, few-facts):
# no weight on the session (it cost the sparse sets turn R@5), the 20 best hits, strength
# rising from nothing at the first cosine of the model's ramp to 1 at the second.
MEANING_TOP_FACTS = 20
MEANING_SESSION_WEIGHT = 0.0
MEANING_MESSAGE_WEIGHT = 1.0
RAMPS = {MINILM: (0.4, 0.8), MINILM_INT8: (0.4, 0.8)}  # model id -> (no strength, full)
# How many hits to ask the fact store for (the most either strength reads).
FACT_HITS = max(TOP_FACTS, MEANING_TOP_FACTS)
# A fact rated down weighs less (trust still multiplies): its trust over the default, at most 1.
DEFAULT_TRUST = FactsConfig.model_fields["default_trust"].default
POOL = 200  # the best this-many ranked messages are lifted (as session_rank.POOL)
CITED = 3  # at most this many facts are shown as why a conversation was found (SearchHit)


class FactHit(Protocol):
    """What a fact hit must say (hermes.memory.facts.records.Fact does)."""

    @property
    def score(self) -> float | None: ...

    @property
    def source_session_id(self) -> int | None: ...

    @property
    def source_message_ids(self) -> list[int]: ...


# The home's fact search as session search calls it: (user, query, meaning) -> hits, best first
# (hermes.memory.Memory passes per-turn recall's search, FactRecall.ranked, with FACT_HITS);
# ``meaning``: the text whose embedding the fact store compares to the facts, None for the query.
FactSearch = Callable[[str, str, "str | None"], Sequence[FactHit]]
class FactSource(Protocol):
    """The fact store's two searches :func:`hits_for` chooses between
    (hermes.memory.facts.recall.FactRecall has both)."""

    def ranked(self, user: str, query: str, *, limit: int,
               meaning: str | None = None) -> Sequence[FactHit]: ...

    def nearest(self, user: str, query: str, *, limit: int, floor: float,
                meaning: str | None = None) -> Sequence[FactHit] | None: ...


def hits_for(source: FactSource, user: str, query: str, meaning: str | None,
             model_id: str | None) -> Sequence[FactHit]:
    """The fact hits for ``user``'s question, for :func:`gather`: the fact search session
    search calls (``FactSearch``; hermes.memory.Memory and scripts/bench_locomo.py pass this
    over their FactRecall and the fact vectors' model). With ``meaning`` (session search
    embedded the question) and a model with a cosine ramp, the strength of a hit is its
    cosine alone and a fact under the ramp's first cosine gives nothing: the
    ``MEANING_TOP_FACTS`` facts nearest in meaning at that cosine or above
    (``source.nearest``), not the fused search's best (its selective words, bm25 and fusion:
    ~3-4 ms CPU a question at LoCoMo's ~270 facts a user, for the same turn and session R@5,
    every fact set, sess notes pass 10). Otherwise, or when the store cannot rank by
    meaning (no fact embedded yet), the fused search's best ``FACT_HITS`` (strength by rank)."""
    ramp = ramp_for(model_id) if meaning is not None else None
    if ramp is not None:
        near = source.nearest(user, query, limit=MEANING_TOP_FACTS, floor=ramp[0],
                              meaning=meaning)
        if near is not None:
            return near
    return source.ranked(user, query, limit=FACT_HITS, meaning=meaning)


# True: the fact store is given the text session search embedded (the speakers' names as "you":
# one query embedding, ~2-3 ms CPU less a search); False: the question as asked (a second
# embedding). LoCoMo MiniLM --with-facts, turn / session R@5 all (transcripts 0.753 / 0.891):
# one embedding 0.760 / 0.892, CPU p50 16.1 ms; two 0.762 / 0.901, 18.6 ms (load ~4.5).
# One, for the query CPU goal (lead, notes/i12-i13.md 05:18).
ONE_EMBEDDING = True


@dataclass(frozen=True)
class Evidence:
    """What the facts say, for one user's question: session id -> strength, and message id ->
    (its session id, strength); strengths in (0, 1], the best hit's 1."""

    sessions: dict[int, float] = field(default_factory=dict)
    messages: dict[int, tuple[int, float]] = field(default_factory=dict)
    # (session weight, message weight) for lift(): by meaning or by the hits' scores
    weights: tuple[float, float] = (SESSION_WEIGHT, MESSAGE_WEIGHT)
    # session id -> the facts learned there that lifted it, (fact id, text), best first: what
    # a search shows as the reason a conversation was found (SearchHit.learned)
    learned: dict[int, list[tuple[int, str]]] = field(default_factory=dict, compare=False)

    def __bool__(self) -> bool:
        return bool(self.sessions)


NO_EVIDENCE = Evidence()


class Pending:
    """One search's fact evidence, gathered once, when the round that uses it (the last one,
    after the meaning score) asks: from the hits given, or from the fact search called then
    (a search answered by its all-words round searches no fact)."""

    def __init__(self, db: Any, user: str, query: str,
                 facts: Sequence[FactHit] | FactSearch | None, *, source: str | None = None,
                 exclude_session: int | None = None,
                 ramp: tuple[float, float] | None = None) -> None:
        self.db, self.user, self.query, self.facts = db, user, query, facts
        self.source, self.exclude_session, self.ramp = source, exclude_session, ramp
        self._evidence: Evidence | None = None

    def evidence(self, meaning: str | None = None) -> Evidence:
        """``meaning``: the text session search embedded for the query (None: words only)."""
        if self._evidence is None:
            facts = self.facts
            hits = facts(self.user, self.query, meaning if ONE_EMBEDDING else None) \
                if callable(facts) else facts
            self._evidence = gather(self.db, self.user, hits, source=self.source,
                                    exclude_session=self.exclude_session, ramp=self.ramp)
        return self._evidence


def ramp_for(model_id: str | None) -> tuple[float, float] | None:
    """The cosine ramp of a fact's strength for ``model_id`` (None: no calibrated ramp)."""
    return RAMPS.get(model_id) if model_id else None


def _trusted(trust: float | None) -> float:
    """A hit's trust over the default trust, at most 1 (1 when unknown)."""
    if trust is None or not DEFAULT_TRUST:
        return 1.0
    return min(1.0, max(0.0, trust) / DEFAULT_TRUST)


def _by_meaning(cosine: float | None, trust: float | None, ramp: tuple[float, float]) -> float:
    """A fact's strength from its cosine to the question (0 below the ramp, 1 at its top),
    x its trust over the default trust (at most 1); 0 without a cosine (not embedded yet)."""
    if cosine is None or cosine != cosine:
        return 0.0
    low, high = ramp
    return min(max((cosine - low) / (high - low), 0.0), 1.0) * _trusted(trust)


def gather(db: Any, user: str, hits: Sequence[FactHit] | None, *, source: str | None = None,
           exclude_session: int | None = None, top: int | None = None,
           ramp: tuple[float, float] | None = None) -> Evidence:
    """The evidence of the best ``top`` of ``hits`` (best first) in ``user``'s own sessions
    and messages (of ``source`` only, none of ``exclude_session``: the search's own filters);
    hits without a positive score give nothing. With a cosine ``ramp`` (:func:`ramp_for`) and
    hits that carry their cosine (``Fact.cosine``), a hit's strength is its closeness in
    meaning (MEANING_TOP_FACTS hits, MEANING_* weights); else its score over the best hit's
    (TOP_FACTS hits, SESSION_WEIGHT / MESSAGE_WEIGHT)."""
    hits = list(hits or [])
    meaning = ramp is not None and any(getattr(h, "cosine", None) is not None for h in hits)
    depth = top or (MEANING_TOP_FACTS if meaning else TOP_FACTS)
    scored = [(h, float(h.score)) for h in hits[:depth] if h.score is not None and h.score > 0]
    if not scored:
        return NO_EVIDENCE
    best = max(s for _, s in scored)
    wanted_messages = {int(m) for h, _ in scored for m in (h.source_message_ids or [])}
    wanted_sessions = {int(h.source_session_id) for h, _ in scored
                       if h.source_session_id is not None}
    owner = _own_messages(db, user, wanted_messages)
    own_sessions = _own_sessions(db, user, wanted_sessions | set(owner.values()), source,
                                 exclude_session)
    owner = {m: s for m, s in owner.items() if s in own_sessions}
    sessions: dict[int, float] = {}
    messages: dict[int, tuple[int, float]] = {}
    learned: dict[int, list[tuple[int, str]]] = {}
    for hit, score in scored:
        trust = getattr(hit, "trust", None)
        strength = _by_meaning(getattr(hit, "cosine", None), trust, ramp) \
            if meaning and ramp else score / best * _trusted(trust)
        if strength <= 0:
            continue
        found = {owner[m] for m in (hit.source_message_ids or []) if m in owner}
        if hit.source_session_id in own_sessions:
            found.add(int(hit.source_session_id))
        for sid in found:
            sessions[sid] = max(sessions.get(sid, 0.0), strength)
            _cite(learned, sid, hit, user)
        for m in hit.source_message_ids or []:
            if m in owner and strength > messages.get(m, (0, 0.0))[1]:
                messages[m] = (owner[m], strength)
    if not sessions:
        return NO_EVIDENCE
    if meaning:
        return Evidence(sessions, messages, (MEANING_SESSION_WEIGHT, MEANING_MESSAGE_WEIGHT),
                        learned)
    return Evidence(sessions, messages, learned=learned)


def lifted(evidence: Evidence, session_id: int, message_id: int) -> bool:
    """Whether :func:`lift` raised this message of this session (the shown match of a hit:
    then the facts are why it was found)."""
    session_weight, message_weight = evidence.weights
    return ((session_weight > 0 and session_id in evidence.sessions)
            or (message_weight > 0 and message_id in evidence.messages))


def _cite(learned: dict[int, list[tuple[int, str]]], session_id: int, hit: FactHit,
          user: str) -> None:
    """Keep ``hit`` (a fact with an id and a text, ``user``'s own: a hit of another user's,
    a caller's mistake, is never shown) among the reasons ``session_id`` was found."""
    fact_id, text = getattr(hit, "id", None), getattr(hit, "content", None)
    if fact_id is None or not text or getattr(hit, "user", user) != user:
        return
    cited = learned.setdefault(session_id, [])
    if len(cited) < CITED and fact_id not in {i for i, _ in cited}:
        cited.append((int(fact_id), str(text)))


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
    w_session = evidence.weights[0] if session_weight is None else session_weight
    w_message = evidence.weights[1] if message_weight is None else message_weight
    pool = list(ranked[:POOL])
    best: dict[int, float] = {}
    for r in pool:
        best[r.session_id] = max(best.get(r.session_id, r.score), r.score)
    # The lift is on the scale of how far apart the conversations are (session_rank's spread);
    # a pool of one conversation, or of ties, falls back to the messages' spread, then 1.
    spread = pstdev(best.values()) or pstdev(r.score for r in pool) or 1.0
    floor = min((r.score for r in pool), default=0.0)

    def gain(message_id: int, session_id: int) -> float:
        held = evidence.messages.get(message_id)
        return spread * (w_session * evidence.sessions.get(session_id, 0.0)
                         + w_message * (held[1] if held else 0.0))

    lifted = []
    for r in pool:
        extra = gain(r.message_id, r.session_id)
        lifted.append(replace(r, score=r.score + extra, parts={**r.parts, "facts": extra})
                      if extra else r)
    present = {r.message_id for r in ranked}
    for mid, (sid, _) in evidence.messages.items() if join else ():
        if mid not in present:
            extra = gain(mid, sid)
            lifted.append(RankedMessage(mid, sid, floor + extra, {"facts": extra}, matched=""))
    lifted.sort(key=lambda r: (-r.score, -r.message_id))
    return lifted + list(ranked[POOL:])
