"""Tier 3 search: FTS5 over messages and session titles/summaries, ranked and grouped.

All terms first, then any non-stopword term (hermes.store.fts), candidates bounded by
``SCORE_CAP`` and scored by hermes.memory.sessions.bm25, re-ranked in their conversations by
hermes.memory.sessions.rerank (and by meaning, hermes.memory.sessions.semantic), then re-read by
their sessions (hermes.memory.sessions.session_rank), grouped by session with cron below
conversations. No model call.
``SessionSearch`` is built by ``SessionStore`` from the connection, the clock and the message
vectors (or None); it reads sessions and windows through ``sessions.records``, never through the
store.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from itertools import combinations
from typing import TYPE_CHECKING

import sqlite_utils

from hermes.clock import Clock
from hermes.errors import QueryError
from hermes.memory.sessions import fact_evidence, fusion, rerank, semantic, session_rank
from hermes.memory.sessions.bm25 import (
    DF_CAP,
    SAID,
    Bm25,
    best_scored,
    terms_for,
)
from hermes.memory.sessions.disclosure import speaks_of_self
from hermes.memory.sessions.hits import Ranked, hits_of
from hermes.memory.sessions.records import (
    _MESSAGE_COLUMNS,
    Message,
    MessageHit,
    SearchHit,
    _Candidate,
    read_sessions,
)
from hermes.memory.sessions.timewords import TIME_SCAN_CHARS, asks_when, names_a_time
from hermes.memory.words import dates, trust
from hermes.memory.words.substance import is_chatter
from hermes.safe_text import scrub
from hermes.store.fts import MatchPlan, all_of, brief, build_match, like_pattern

if TYPE_CHECKING:
    from hermes.memory.sessions.vectors import MessageVectors

# bm25 column weights. Messages: content counts fully, the speaker's name a little (a query
# "alice" should prefer what was said about Alice over everything Alice said). Sessions: a title
# hit is worth more than a summary hit.
MESSAGE_WEIGHTS = (1.0, 0.3)
SESSION_WEIGHTS = (2.0, 1.0)
# At most this many matching messages are scored per query (see _fts_candidates): what keeps a
# common word fast on a million messages. Measured in scripts/bench_sessions.py.
SCORE_CAP = 500
# A query matching at most this many messages in the whole table is ranked by FTS5's own bm25
# (C, same column weights): computing its IDFs costs a pass over these matches, cheap at this
# size, and only the best few come back to Python. Past it, the bounded path below.
FTS_RANKED_MATCHES = 3000
# An any-word query looks for messages holding two of its first this-many words.
MAX_PAIR_TERMS = 6
# CJK runs are matched with LIKE (unicode61 cannot split them into words): a scan, so bounded.
CJK_CANDIDATES = 2000


# Words only: a when-question's best this-many messages that name a time gain this share of the
# best score (_time_named_first). Chosen on LoCoMo's tuning half among 0.15-0.8 (bm25 turn R@5
# 0.684 -> 0.693 there, held-out 0.668 -> 0.672); with the model, semantic's own weight.
WORDS_POOL = 100
WORDS_TEMPORAL = 0.2


@dataclass(frozen=True)
class SearchProfile:
    """How deep :meth:`SessionSearch.search_messages` looks. The full search (None everywhere:
    the defaults of rerank.DEFAULT_PARAMS and semantic.DEFAULT_SEMANTIC) serves the CLI and the
    model's session_search tool; a caller that shows only a few matches (past messages in the
    prompt, hermes.memory.sessions.past_messages.PROMPT_PROFILE) can read fewer candidates."""

    candidates: int | None = None  # best bm25 matches read in their conversation
    pool: int | None = None  # the word ranking's best this-many re-scored by meaning
    extra: int | None = None  # nearest messages, and nearest windows, joining the candidates
    # SemanticParams.in_place_of_words: a list a person reads (None: the default); the prompt's
    # past messages take none (0), nothing shown under the floor rather than a guess
    in_place_of_words: int | None = None
    # SemanticParams.beyond_pool (None: the default, the word matches the trust read)
    beyond_pool: int | None = None

    def recall_params(self) -> rerank.RecallParams:
        params = rerank.DEFAULT_PARAMS
        return params if self.candidates is None else replace(params, candidates=self.candidates)

    def semantic_params(self) -> semantic.SemanticParams:
        params = semantic.DEFAULT_SEMANTIC
        changed = {k: v for k, v in (("pool", self.pool), ("extra", self.extra),
                                     ("in_place_of_words", self.in_place_of_words),
                                     ("beyond_pool", self.beyond_pool))
                   if v is not None}
        return replace(params, **changed) if changed else params


FULL_SEARCH = SearchProfile()

# A ranked session: (session id, score, its best message or None when only the title or
# summary matched, the title/summary score)

class SessionSearch:
    """Search over a user's sessions (the read side that ranks; see the module docstring)."""

    def __init__(self, db: sqlite_utils.Database, clock: Clock,
                 vectors: MessageVectors | None = None,
                 fact_search: fact_evidence.FactSearch | None = None) -> None:
        self.db = db
        self.clock = clock
        # hermes.memory.sessions.vectors.MessageVectors when hybrid recall is on, else None
        self.vectors = vectors
        # the home's fact search, for :meth:`search`'s fact evidence (None: transcripts only)
        self.fact_search = fact_search

    def search(
        self,
        user: str,
        query: str,
        *,
        limit: int = 5,
        context: int = 2,
        source: str | None = None,
        facts: Sequence[fact_evidence.FactHit] | fact_evidence.FactSearch | None = None,
    ) -> list[SearchHit]:
        """Search every past conversation of ``user``. Zero model calls.

        All terms first; when that finds fewer than ``limit`` conversations, the best of the
        any-word round fill the rest below them (each hit's ``mode`` says which round found
        it), as :meth:`search_messages` does. Results are grouped by session, best first,
        conversations before cron runs. Raises QueryError when the query holds nothing
        searchable; a MATCH error propagates (it is a bug, never "no results").
        ``facts``: the fact store's hits for the query (best first), evidence for the
        conversations and turns they were learned from (hermes.memory.sessions.fact_evidence);
        when None, this search's ``fact_search`` finds them (``()``: no fact evidence); a
        callable: a fact search (``fact_evidence.FactSearch``), called in the any-word round.
        """
        query = scrub(query)  # whatever a caller's JSON decoded to
        plan = build_match(query)
        if plan.empty:
            raise QueryError(f"Nothing to search for in {brief(query)!r}: it has no words.")
        limit = max(1, limit)
        pending = fact_evidence.Pending(self.db, user, query, self.fact_search if facts is None
                                        else facts, source=source, ramp=self._fact_ramp())
        hits: list[SearchHit] = []
        modes = _modes(plan, self.vectors is not None)
        for mode, expr in modes:
            seen = {hit.session.id for hit in hits}
            ranked = [r for r in self._rank(user, plan, mode, expr, source, limit,
                                            pending if (mode, expr) == modes[-1] else None)
                      if r[0] not in seen][: limit - len(hits)]
            # the round's evidence (gathered in it, when it is the last): why a hit was found
            evidence = pending.evidence() if (mode, expr) == modes[-1] \
                else fact_evidence.NO_EVIDENCE
            hits += hits_of(self.db, user, plan, mode, expr, ranked, context, evidence)
            if len(hits) >= limit:
                break
        return hits

    def search_messages(
        self, user: str, query: str, *, limit: int = 10, source: str | None = None,
        exclude_session: int | None = None, any_word: bool = False,
        meaning: str | None = None, profile: SearchProfile = FULL_SEARCH,
        facts: Sequence[fact_evidence.FactHit] | fact_evidence.FactSearch | None = None,
    ) -> list[MessageHit]:
        """The messages that best answer ``query``, best first: the ranking :meth:`search`
        groups by session, ungrouped. Zero model calls. Raises QueryError like search. The
        all-words round first; when it finds fewer than ``limit``, the any-word round's best
        fill the rest, below them (each hit's ``mode`` says which round found it; :meth:`search`
        fills its conversations the same way). ``profile``: how many candidates to read
        (:class:`SearchProfile`; default the full search).

        ``exclude_session``: none from this session (the conversation in progress, whose new
        message matches itself); ``any_word``: skip the all-words round (a weak match holding
        every word would otherwise hide the best partial ones); ``meaning``: the text whose
        embedding finds messages by meaning, as written (default: the query's words), when
        the query holds only some of the message's words; ``facts``: the fact store's hits,
        as for :meth:`search`, but only those given (a caller that recalled facts already
        passes them rather than searching twice)."""
        query = scrub(query)
        meaning = scrub(meaning) if meaning else None
        plan = build_match(query)
        if plan.empty:
            raise QueryError(f"Nothing to search for in {brief(query)!r}: it has no words.")
        modes = _modes(plan, self.vectors is not None)
        if any_word:
            modes = modes[-1:]
        limit = max(1, limit)
        pending = fact_evidence.Pending(self.db, user, query, facts, source=source,
                                        exclude_session=exclude_session, ramp=self._fact_ramp())
        # (ranked message, the round that found it): the all-words round first; when it finds
        # fewer than `limit`, the any-word round fills the rest below them ("what has Melanie
        # painted?" holds every word in 3 messages of one conversation; the others it painted
        # in say "painting" or "a sunset" and were never shown).
        found: list[tuple[rerank.RankedMessage, str]] = []
        for mode, expr in modes:
            seen = {r.message_id for r, _ in found}
            ranked = self._reranked(user, plan, mode, expr, source, limit, exclude_session,
                                    meaning, profile,
                                    pending if (mode, expr) == modes[-1] else None)
            found += [(r, mode) for r in ranked if r.message_id not in seen][: limit - len(found)]
            if len(found) >= limit:
                break
        if not found:
            return []
        ids = [r.message_id for r, _ in found]
        rows = self.db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.user = ? AND m.id IN "
            f"({','.join('?' * len(ids))})", [user, *ids]).fetchall()
        messages = {row[0]: Message(*row) for row in rows}
        # one query for every session (a search of 32 hits has ~30: asmp, notes pass 10)
        sessions = read_sessions(self.db, user, (r.session_id for r, _ in found))
        return [MessageHit(sessions[r.session_id], messages[r.message_id], r.score,
                           "like" if plan.cjk else mode, r.parts, _matched(r))
                for r, mode in found]

    def _fact_ramp(self) -> tuple[float, float] | None:
        """The cosine ramp of the fact evidence's strength for this search's model (the
        home's facts are embedded with it: hermes.memory.Memory), or None."""
        return fact_evidence.ramp_for(
            self.vectors.embedder.model_id if self.vectors is not None else None)

    def _reranked(
        self, user: str, plan: MatchPlan, mode: str, expr: str | None, source: str | None,
        limit: int, exclude_session: int | None = None, meaning: str | None = None,
        profile: SearchProfile = FULL_SEARCH,
        facts: fact_evidence.Pending | None = None,
    ) -> list[rerank.RankedMessage]:
        """The best ``limit`` matching messages by BM25, re-ranked in their conversations
        (hermes.memory.sessions.rerank)."""
        return self._reranked_and_empty(user, plan, mode, expr, source, limit,
                                        exclude_session, meaning, profile, facts)[0]

    def _reranked_and_empty(
        self, user: str, plan: MatchPlan, mode: str, expr: str | None, source: str | None,
        limit: int | None = None, exclude_session: int | None = None,
        meaning: str | None = None, profile: SearchProfile = FULL_SEARCH,
        facts: fact_evidence.Pending | None = None,
    ) -> tuple[list[rerank.RankedMessage], list[tuple[int, float]]]:
        """:meth:`_reranked`, and the sessions without messages whose title or summary match
        (session id, score on the same scale), which the message ranking cannot return.
        ``facts``: the search's fact evidence (hermes.memory.sessions.fact_evidence), in its
        last round only, lifting the ranking last; its source messages join the any-word round."""
        recall_params, semantic_params = profile.recall_params(), profile.semantic_params()
        if plan.cjk:
            messages = self._cjk_candidates(user, plan, mode, expr, source, CJK_CANDIDATES)
            sessions = self._cjk_session_scores(user, plan, mode, expr, source)
        else:
            assert expr is not None
            aliases = rerank.other_names(self.db, user, plan) if mode != "strict" else []
            if aliases:  # any word may match: so may another name of what the query names
                plan = build_match(rerank.plan_text(plan) + "".join(f' "{a}"' for a in aliases))
                expr = plan.loose or plan.strict
                assert expr is not None
            messages = self._fts_candidates(user, plan, mode, expr, source,
                                            recall_params.candidates)
            sessions = self._session_scores(user, plan, mode, expr, source)
        sims, dense, text = None, None, None
        # Meaning re-scores the any-word round (the one that always runs with embeddings): a
        # query whose every word matches is answered by words alone, without the model.
        if self.vectors is not None and mode != "strict":
            text = semantic.meaning_text(
                self.db, user, meaning or rerank.plan_text(plan),
                [c.message_id for c in messages])
            sims = semantic.similarities(self.vectors, user, text)
            # The nearest messages need no word, only the model's floor of meaning (its
            # message's or its window's): with a short history the nearest are everything.
            from hermes.memory.embeddings.embedders import meaning_floor

            extra = sims.nearest(semantic_params.extra)
            shown_floor = meaning_floor(self.vectors.embedder.model_id)
            floor = shown_floor * semantic_params.floor_share
            near, around = sims.of(extra)
            dense = sorted(((m, float(c)) for m, c, w in zip(extra, near, around, strict=True)
                            if max(c, w) >= floor), key=lambda d: -d[1])
        wanted = len(messages) * 3 + len(sessions) + 100
        # Words only (no model): a when-question's best candidates that name a time are lifted
        # here, as the re-scoring by meaning does with its own weight.
        # Whether the question asks when, from the query's own words. Not from `meaning` (past
        # messages in the prompt search the message's rarest words, the whole message as
        # `meaning`): read from it, the prompt showed less (bench_locomo --mode prompt, MiniLM
        # 0.875 -> 0.874, words only 0.821 -> 0.820): its facts already carry the dates.
        when = asks_when(rerank.plan_text(plan))
        dated = self.vectors is None and when
        # The times the question names: the session-level stage lifts the conversations held
        # then (hermes.memory.sessions.session_rank), so the stages before it keep their pool.
        spans = dates.time_spans(rerank.plan_text(plan), self.clock.now())
        # the fact search by the text embedded above: the model's recent query, no second run
        evidence = facts.evidence(text) if facts else fact_evidence.NO_EVIDENCE
        # The facts lift the best fact_evidence.POOL: those are kept until then.
        cut = wanted if spans else max(limit or wanted, fact_evidence.POOL) if evidence \
            else limit or wanted
        ranked = rerank.rerank(self.db, user, plan, [(c.message_id, c.score) for c in messages],
                               sessions,
                               limit=wanted if sims is not None or dated else cut,
                               source=source, now=self.clock.now(), dense=dense,
                               exclude_session=exclude_session, params=recall_params)
        if dated:
            ranked = _time_named_first(self.db, user, ranked, cut)
        if sims is not None:
            extras = [m for m, _ in dense or []]
            pool = [r.message_id for r in ranked[: semantic_params.pool]] + extras
            texts = semantic.message_texts(self.db, user, pool, TIME_SCAN_CHARS)
            timed = {mid for mid, (_, text) in texts.items() if names_a_time(text)} \
                if when else set()
            # How far the query's words are trusted (hermes.memory.words.trust): the
            # coverage of its content words by the word ranking's best few messages.
            # (trust_high <= 0: the words trusted wholly, as before; their coverage not read)
            words = trust.query_words(self.db, plan, spans) \
                if not plan.cjk and semantic_params.trust_high > 0 else trust.NO_WORDS
            # Turns that say nothing ("hello there") are close to any short query for a small
            # model: never a match by meaning, nor their neighbours through them.
            chatter = {mid for mid, (_, text) in texts.items() if is_chatter(text)}
            cover = fusion.coverage(
                self.db, user, words,
                [r.message_id for r in ranked[: semantic_params.trust_pool]]) \
                if words.terms else None
            ranked = semantic.rerank_by_meaning(
                ranked, sims, extras=extras, limit=cut,
                lengths={mid: length for mid, (length, _) in texts.items()}, timed=timed,
                voices={mid: speaks_of_self(text) for mid, (_, text) in texts.items()},
                params=semantic_params, cover=cover, floor=shown_floor, chatter=chatter,
                beside_chatter=_next_to(self.db, user, chatter))
        if spans:
            ranked = session_rank.by_session_date(self.db, user, ranked, spans)
        if evidence:
            ranked = fact_evidence.lift(ranked, evidence, join=mode != "strict")
        if spans or evidence:
            ranked = ranked[: limit or wanted]
        empty: list[tuple[int, float]] = []
        if sessions:
            present = {r.session_id for r in ranked}
            candidates = [sid for sid in sessions if sid not in present]
            if candidates:
                marks = ",".join("?" * len(candidates))
                rows = self.db.execute(
                    f"SELECT id FROM sessions WHERE id IN ({marks}) AND NOT EXISTS "
                    "(SELECT 1 FROM messages m WHERE m.session_id = sessions.id)", candidates,
                ).fetchall()
                # The scale rerank.rerank gives a title/summary-only session.
                top = max((c.score for c in messages), default=0.0) \
                    or max(sessions.values(), default=0.0) or 1.0
                weight = rerank.DEFAULT_PARAMS.meta_weight
                empty = [(r[0], weight * sessions[r[0]] / top) for r in rows]
        return ranked, empty

    def _rank(
        self, user: str, plan: MatchPlan, mode: str, expr: str | None, source: str | None,
        limit: int, facts: fact_evidence.Pending | None = None,
    ) -> list[Ranked]:
        """Sessions ranked by their best message: (session_id, score, best message or None
        when only the title or summary matched, title/summary score)."""
        ranked: list[Ranked] = []
        seen: set[int] = set()
        messages, empty = self._reranked_and_empty(user, plan, mode, expr, source,
                                                   facts=facts)
        for r in messages:
            # A fill-in that matched neither words nor meaning (a candidate by meaning under
            # the floor of what is shown) lists no conversation: "tomato variety" listed
            # Kyoto, Lisbon and "hello there" below the tomato session.
            if r.session_id not in seen and rerank.shown(r):
                seen.add(r.session_id)
                cand = None if "title/summary" in r.parts else _Candidate(
                    r.message_id, r.session_id, r.score, _matched(r))
                ranked.append((r.session_id, r.score, cand, float(r.session_matched)))
        if empty:  # sessions without messages, found by their title or summary
            ranked.extend((sid, score, None, 1.0) for sid, score in empty)
            ranked.sort(key=lambda r: -r[1])
        # Cron output is background noise next to a real conversation: demoted below them all.
        # Sources are looked up best first, only until `limit` conversations are found.
        conversations: list[Ranked] = []
        cron: list[Ranked] = []
        for start in range(0, len(ranked), 100):
            chunk = ranked[start : start + 100]
            sources = self._sources({entry[0] for entry in chunk})
            for entry in chunk:
                (cron if sources[entry[0]] == "cron" else conversations).append(entry)
            if len(conversations) >= limit:
                break
        return conversations + cron

    def _stream(
        self, expr: str, user: str, source: str | None, limit: int
    ) -> list[tuple[int, int, str, str | None]]:
        """The user's newest messages matching ``expr``: (id, session id, content, speaker).
        FTS5 yields matches in rowid order without scoring them, so this costs what it returns
        (plus other users' matches skipped on the way)."""
        return self.db.execute(
            "SELECT m.id, m.session_id, m.content, m.speaker FROM messages_fts "
            "CROSS JOIN messages m ON m.id = messages_fts.rowid "
            f"WHERE messages_fts MATCH ? AND m.user = ? AND {SAID} "
            "AND (? IS NULL OR (SELECT source FROM sessions WHERE id = m.session_id) = ?) "
            "ORDER BY messages_fts.rowid DESC LIMIT ?",
            [expr, user, source, source, limit],
        ).fetchall()

    def _best(
        self, expr: str, user: str, source: str | None, limit: int
    ) -> list[tuple[int, int, str, str | None]]:
        """The user's best ``limit`` messages matching ``expr`` by FTS5's own bm25 (same column
        weights), whatever their age. FTS5 scores every match to sort them: the cost grows with
        the number of matches (fewer than DF_CAP where it is used)."""
        return self.db.execute(
            "SELECT m.id, m.session_id, m.content, m.speaker FROM messages_fts "
            "CROSS JOIN messages m ON m.id = messages_fts.rowid "
            f"WHERE messages_fts MATCH ? AND m.user = ? AND {SAID} "
            "AND (? IS NULL OR (SELECT source FROM sessions WHERE id = m.session_id) = ?) "
            "ORDER BY bm25(messages_fts, ?, ?) LIMIT ?",
            [expr, user, source, source, *MESSAGE_WEIGHTS, limit],
        ).fetchall()

    def _best_scored(
        self, expr: str, user: str, source: str | None, limit: int, matches: int | None = None
    ) -> list[tuple[int, int, float]]:
        """The user's best ``limit`` matches by FTS5's bm25: (id, session id, score), higher
        is better (hermes.memory.sessions.bm25.best_scored: with many ``matches``, the user's
        rows read for the best few matches only)."""
        return best_scored(self.db, expr, user, source, limit, MESSAGE_WEIGHTS,
                           self.clock.now().timestamp(), matches)

    def _fts_candidates(
        self, user: str, plan: MatchPlan, mode: str, expr: str, source: str | None,
        best: int | None = None,
    ) -> list[_Candidate]:
        """Matching messages scored by BM25. With at most FTS_RANKED_MATCHES matches (in the
        whole table), FTS5's own bm25 ranks them all and the best few are the candidates. Past
        that, Python scores a bounded set: every match when the user has at most SCORE_CAP;
        past that (a common word on a big history), the candidates are the newest
        SCORE_CAP matches, plus, for an all-words query, the SCORE_CAP best by FTS5's bm25 (so
        that age alone never hides the best match) unless even its rarest word is in DF_CAP
        messages or more (ranking them all would cost too much, and a word that common says
        little), and, for an any-word query, the messages holding at least two of the words
        and every match of each rare word."""
        matches = self.db.execute(
            "SELECT count(*) FROM (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? "
            "LIMIT ?)", [expr, FTS_RANKED_MATCHES + 1]).fetchone()[0]
        if not matches:
            return []
        if matches <= FTS_RANKED_MATCHES:
            return [_Candidate(mid, sid, score) for mid, sid, score in
                    self._best_scored(expr, user, source,
                                      best or rerank.DEFAULT_PARAMS.candidates, matches)]
        terms = terms_for(plan, mode)
        rows = self._stream(expr, user, source, SCORE_CAP + 1)
        if not rows:
            return []
        pool = {row[0]: row for row in rows[:SCORE_CAP]}
        total = self.db.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0]
        bm25 = Bm25.for_terms(self.db, "messages_fts", terms, total)
        if len(rows) > SCORE_CAP and mode == "strict" and min(bm25.df) < DF_CAP:
            for row in self._best(expr, user, source, SCORE_CAP):
                pool.setdefault(row[0], row)
        if len(rows) > SCORE_CAP and mode == "loose" and len(terms) > 1:
            firsts = terms[:MAX_PAIR_TERMS]
            pairs = " OR ".join(f"({all_of((a, b))})" for a, b in combinations(firsts, 2))
            for row in self._stream(pairs, user, source, SCORE_CAP):
                pool.setdefault(row[0], row)
            for term, df in zip(terms, bm25.df, strict=True):
                if df <= SCORE_CAP:
                    for row in self._stream(term.fts, user, source, SCORE_CAP):
                        pool.setdefault(row[0], row)
        found = list(pool.values())
        content = bm25.score_all([row[2] for row in found])
        speaker = bm25.score_all([row[3] for row in found])
        return [
            _Candidate(row[0], row[1], c + MESSAGE_WEIGHTS[1] * s)
            for row, c, s in zip(found, content, speaker, strict=True)
        ]

    def _session_scores(
        self, user: str, plan: MatchPlan, mode: str, expr: str, source: str | None
    ) -> dict[int, float]:
        """Sessions whose title or summary match, scored by BM25 (a title hit weighs more)."""
        rows = self.db.execute(
            # CROSS JOIN keeps the full-text match as the outer loop: the planner would
            # otherwise walk the user's sessions and run the match once per session.
            "SELECT s.id, s.title, s.summary FROM sessions_fts "
            "CROSS JOIN sessions s ON s.id = sessions_fts.rowid "
            "WHERE sessions_fts MATCH ? AND s.user = ? AND (? IS NULL OR s.source = ?) "
            "ORDER BY sessions_fts.rowid DESC LIMIT ?",
            [expr, user, source, source, SCORE_CAP],
        ).fetchall()
        if not rows:
            return {}
        total = self.db.execute("SELECT coalesce(max(id), 0) FROM sessions").fetchone()[0]
        bm25 = Bm25.for_terms(self.db, "sessions_fts", terms_for(plan, mode), total)
        titles = bm25.score_all([r[1] for r in rows])
        summaries = bm25.score_all([r[2] for r in rows])
        return {
            r[0]: SESSION_WEIGHTS[0] * t + SESSION_WEIGHTS[1] * m
            for r, t, m in zip(rows, titles, summaries, strict=True)
        }

    def _like_clause(self, column: str, plan: MatchPlan, mode: str) -> tuple[str, list[str]]:
        joiner = " AND " if mode == "strict" else " OR "
        clause = joiner.join(f"{column} LIKE ? ESCAPE '\\'" for _ in plan.cjk)
        return f"({clause})", [like_pattern(run) for run in plan.cjk]

    def _cjk_candidates(
        self, user: str, plan: MatchPlan, mode: str, expr: str | None, source: str | None,
        wanted: int,
    ) -> list[_Candidate]:
        """CJK text: LIKE on the runs (all in strict mode, any in loose), newest first; the
        other terms, if any, must match through FTS5 as well in strict mode."""
        like, params = self._like_clause("m.content", plan, mode)
        fts, fts_params = _fts_alongside_like("m.id", "messages_fts", mode, expr)
        rows = self.db.execute(
            f"SELECT m.id, m.session_id, m.content FROM messages m "
            "JOIN sessions s ON s.id = m.session_id "
            f"WHERE m.user = ? AND {SAID} AND (? IS NULL OR s.source = ?) AND ({like}{fts}) "
            "ORDER BY m.id DESC LIMIT ?",
            [user, source, source, *params, *fts_params, wanted],
        ).fetchall()
        # Score: how many of the runs (and how often) the message holds; no bm25 for LIKE.
        return [
            _Candidate(r[0], r[1], float(sum(r[2].count(run) for run in plan.cjk)) or 0.5)
            for r in rows
        ]

    def _cjk_session_scores(
        self, user: str, plan: MatchPlan, mode: str, expr: str | None, source: str | None
    ) -> dict[int, float]:
        text = "(coalesce(s.title, '') || ' ' || coalesce(s.summary, ''))"
        like, params = self._like_clause(text, plan, mode)
        fts, fts_params = _fts_alongside_like("s.id", "sessions_fts", mode, expr)
        rows = self.db.execute(
            f"SELECT s.id FROM sessions s WHERE s.user = ? AND (? IS NULL OR s.source = ?) "
            f"AND ({like}{fts})",
            [user, source, source, *params, *fts_params],
        ).fetchall()
        return {r[0]: 1.0 for r in rows}

    def _sources(self, session_ids: set[int]) -> dict[int, str]:
        ids = sorted(session_ids)
        result: dict[int, str] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for sid, source in self.db.execute(
                f"SELECT id, source FROM sessions WHERE id IN ({marks})", chunk
            ):
                result[sid] = source
        return result


def _matched(r: rerank.RankedMessage) -> str:
    """What a ranked message matched, as a hit says it: its own ``matched``, else "facts" when
    a fact learned from it lifted it."""
    return r.matched or ("facts" if r.parts.get("facts") else "")


def _next_to(db: sqlite_utils.Database, user: str, message_ids: Collection[int]) -> set[int]:
    """The turns just before and just after each of ``user``'s ``message_ids`` in its
    conversation (another user's: none)."""
    if not message_ids:
        return set()
    ids = list(message_ids)
    marks = ",".join("?" * len(ids))
    rows = db.execute(
        "SELECT (SELECT max(b.id) FROM messages b WHERE b.session_id = m.session_id "
        "AND b.id < m.id), (SELECT min(a.id) FROM messages a WHERE a.session_id = m.session_id "
        f"AND a.id > m.id) FROM messages m WHERE m.user = ? AND m.id IN ({marks})",
        [user, *ids]).fetchall()
    return {int(i) for row in rows for i in row if i is not None}


def _time_named_first(
    db: sqlite_utils.Database, user: str, ranked: Sequence[rerank.RankedMessage], limit: int
) -> list[rerank.RankedMessage]:
    """The word ranking of a when-question with its best ``WORDS_POOL`` messages that name a
    time (hermes.memory.sessions.timewords; ``user``'s own messages only) lifted by
    ``WORDS_TEMPORAL`` of the best score, re-sorted; at most ``limit``."""
    pool = list(ranked[:WORDS_POOL])
    if not pool:
        return []
    texts = semantic.message_texts(db, user, [r.message_id for r in pool], TIME_SCAN_CHARS)
    bonus = WORDS_TEMPORAL * (max(r.score for r in pool) or 1.0)
    lifted = [replace(r, score=r.score + bonus, parts={**r.parts, "temporal": bonus})
              if names_a_time(texts.get(r.message_id, (0, ""))[1]) else r for r in pool]
    lifted.sort(key=lambda r: (-r.score, -r.message_id))
    return (lifted + list(ranked[WORDS_POOL:]))[:limit]


def _modes(plan: MatchPlan, dense: bool = False) -> list[tuple[str, str | None]]:
    """All terms first; any non-stopword term (or any CJK run) next: the callers fill with it
    what the first round leaves short of the limit. With embeddings there is always a loose
    round, even for a query without a loose expression: it is where the nearest messages join.

    The same order as hermes.store.fts.search_with_fallback, which cannot be used here as it is:
    a CJK-only query has no FTS expression at all (it is matched with LIKE), and with embeddings
    a query without a loose expression still needs a second round."""
    modes: list[tuple[str, str | None]] = [("strict", plan.strict)]
    if plan.loose is not None or len(plan.cjk) > 1 or (plan.cjk and plan.strict) or dense:
        modes.append(("loose", plan.loose or plan.strict))
    return modes


def _fts_alongside_like(
    id_column: str, fts_table: str, mode: str, expr: str | None
) -> tuple[str, list[str]]:
    """The FTS5 part of a CJK query's WHERE clause: the non-CJK terms must also match (strict)
    or may match instead (loose)."""
    if expr is None:
        return "", []
    op = "AND" if mode == "strict" else "OR"
    return (f" {op} {id_column} IN (SELECT rowid FROM {fts_table} WHERE {fts_table} MATCH ?)",
            [expr])
