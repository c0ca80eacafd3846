"""Tier 3: session transcripts. Every conversation (Discord, terminal, cron, imports) is recorded
here and searchable; nothing is deleted by summarising, the transcript is the record.

Two ways to read it, neither calls a model:

* **browse** (:meth:`SessionStore.list`): the user's sessions, newest activity first;
* **search** (:meth:`SessionStore.search`): FTS5 over message content (and the speaker) and over
  session titles and summaries, through the safe query builder (all terms first, then any
  non-stopword term), ranked by bm25 with column weights, grouped by session, cron sessions below
  conversations. Each hit carries the session's stored summary, the best matching message with a
  highlighted snippet, and a window of messages around it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlite_utils

from hermes.clock import Clock, SystemClock, to_ts
from hermes.errors import NotFound, QueryError, RefusedWrite
from hermes.memory import recall
from hermes.store.db import write_transaction
from hermes.store.fts import MatchPlan, build_match, like_pattern

ROLES = ("user", "assistant", "tool", "system")
SOURCES = ("discord", "terminal", "cron", "import")

# bm25 column weights. Messages: content counts fully, the speaker's name a little (a query
# "alice" should prefer what was said about Alice over everything Alice said). Sessions: a title
# hit is worth more than a summary hit.
MESSAGE_WEIGHTS = (1.0, 0.3)
SESSION_WEIGHTS = (2.0, 1.0)
# How many of the best-ranked matching messages are grouped into sessions. Bounding this before
# the join is what keeps a common term fast on a million messages; measured in
# scripts/bench_sessions.py.
MIN_CANDIDATES = 300
CANDIDATES_PER_RESULT = 60
# CJK runs are matched with LIKE (unicode61 cannot split them into words): a scan, so bounded.
CJK_CANDIDATES = 2000

HIGHLIGHT = ("**", "**")
SNIPPET_TOKENS = 24

_SESSION_COLUMNS = (
    "s.id, s.user, s.source, s.channel_key, s.title, s.summary, s.started_at, s.last_active_at, "
    "s.ended_at, s.message_count, s.external_id"
)
# The first user line: what browse shows for a session without a title.
_PREVIEW = (
    "(SELECT m.content FROM messages m WHERE m.session_id = s.id AND m.role = 'user' "
    "ORDER BY m.id LIMIT 1)"
)
_MESSAGE_COLUMNS = (
    "m.id, m.session_id, m.role, m.speaker, m.content, m.created_at, m.tool_name, m.tool_args, "
    "m.tool_call_id, m.external_id"
)


@dataclass
class Session:
    id: int
    user: str
    source: str
    channel_key: str | None
    title: str | None
    summary: str | None
    started_at: str
    last_active_at: str
    ended_at: str | None
    message_count: int
    external_id: str | None
    # The first user line, filled in by browse, shown when the session has no title.
    preview: str | None = None

    @property
    def display_title(self) -> str:
        text = self.title or self.preview or "(no messages)"
        text = " ".join(text.split())
        return text if len(text) <= 80 else text[:79] + "…"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data = {"session_id": data.pop("id"), **data}
        data["title"] = self.title
        data["display_title"] = self.display_title
        return data


@dataclass
class Message:
    id: int
    session_id: int
    role: str
    speaker: str | None
    content: str
    created_at: str
    tool_name: str | None = None
    tool_args: str | None = None
    tool_call_id: str | None = None
    external_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class SearchHit:
    session: Session
    score: float
    match: Message
    snippet: str
    context: list[Message]
    # How the query matched: "strict" (all terms), "loose" (any term) or "like" (CJK text).
    mode: str = "strict"
    matched_in: list[str] = field(default_factory=list)  # "messages", "title/summary"

    def to_json(self) -> dict[str, Any]:
        s = self.session
        return {
            "session_id": s.id,
            "source": s.source,
            "title": s.title,
            "display_title": s.display_title,
            "started_at": s.started_at,
            "last_active_at": s.last_active_at,
            "message_count": s.message_count,
            "external_id": s.external_id,
            "summary": s.summary,
            "score": round(self.score, 4),
            "mode": self.mode,
            "matched_in": self.matched_in,
            "snippet": self.snippet,
            "match": self.match.to_json(),
            "context": [m.to_json() for m in self.context],
        }


@dataclass
class MessageHit:
    """One message found by :meth:`SessionStore.search_messages`, with its session."""

    session: Session
    message: Message
    score: float
    parts: dict[str, float] = field(default_factory=dict)  # what the score is made of

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session.id, "session_title": self.session.display_title,
                "started_at": self.session.started_at, "score": round(self.score, 4),
                "parts": {k: round(v, 4) for k, v in self.parts.items()},
                "message": self.message.to_json()}


@dataclass
class _Candidate:
    message_id: int
    session_id: int
    score: float  # higher is better


class SessionStore:
    def __init__(self, db: sqlite_utils.Database, clock: Clock | None = None) -> None:
        self.db = db
        self.clock = clock or SystemClock()

    @classmethod
    def from_runtime(cls, rt: Any) -> SessionStore:
        return cls(rt.db, clock=rt.clock)

    # -- writing ----------------------------------------------------------------------------

    def create(
        self,
        user: str,
        source: str,
        *,
        channel_key: str | None = None,
        title: str | None = None,
        started_at: str | None = None,
        external_id: str | None = None,
    ) -> Session:
        """Start a new session for ``user``."""
        if not source or not source.strip():
            raise RefusedWrite("Refused: a session needs a source (discord, terminal, cron, ...).")
        started = started_at or to_ts(self.clock.now())
        with write_transaction(self.db):
            cursor = self.db.execute(
                "INSERT INTO sessions (user, source, channel_key, title, started_at, "
                "last_active_at, external_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [user, source, channel_key, title, started, started, external_id],
            )
        return self.get(user, int(cursor.lastrowid or 0))

    def open_for(self, user: str, source: str, channel_key: str) -> Session:
        """The open session of a channel (a Discord thread, a terminal), or a new one."""
        with write_transaction(self.db):
            row = self.db.execute(
                f"SELECT {_SESSION_COLUMNS}, {_PREVIEW} FROM sessions s "
                "WHERE s.user = ? AND s.source = ? "
                "AND s.channel_key = ? AND s.ended_at IS NULL ORDER BY s.id DESC LIMIT 1",
                [user, source, channel_key],
            ).fetchone()
            if row is not None:
                return Session(*row)
            return self.create(user, source, channel_key=channel_key)

    def append(
        self,
        user: str,
        session_id: int,
        role: str,
        content: str,
        *,
        speaker: str | None = None,
        created_at: str | None = None,
        tool_name: str | None = None,
        tool_args: str | None = None,
        tool_call_id: str | None = None,
        external_id: str | None = None,
    ) -> Message:
        """Record one message. The session's count and last activity follow (a trigger)."""
        if role not in ROLES:
            raise RefusedWrite(f"Refused: role must be one of {', '.join(ROLES)} (got {role!r}).")
        if content is None:
            raise RefusedWrite("Refused: a message needs content (use '' for none).")
        created = created_at or to_ts(self.clock.now())
        with write_transaction(self.db):
            self.get(user, session_id)
            cursor = self.db.execute(
                "INSERT INTO messages (session_id, user, role, speaker, content, created_at, "
                "tool_name, tool_args, tool_call_id, external_id) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [session_id, user, role, speaker, content, created, tool_name, tool_args,
                 tool_call_id, external_id],
            )
        return Message(int(cursor.lastrowid or 0), session_id, role, speaker, content, created,
                       tool_name, tool_args, tool_call_id, external_id)

    def close(self, user: str, session_id: int) -> Session:
        """Mark a session ended (idempotent: an ended session keeps its end time)."""
        with write_transaction(self.db):
            self.get(user, session_id)
            self.db.execute(
                "UPDATE sessions SET ended_at = ? WHERE id = ? AND user = ? AND ended_at IS NULL",
                [to_ts(self.clock.now()), session_id, user],
            )
        return self.get(user, session_id)

    def set_summary(
        self,
        user: str,
        session_id: int,
        *,
        title: str | None = None,
        summary: str | None = None,
        status: str = "done",
    ) -> None:
        """Store the summariser's output (written once per session; searched, never regenerated
        at query time). ``status="failed"`` records an attempt without text."""
        with write_transaction(self.db):
            self.get(user, session_id)
            self.db.execute(
                "UPDATE sessions SET title = coalesce(?, title), summary = coalesce(?, summary), "
                "summary_status = ?, summary_attempts = summary_attempts + 1 "
                "WHERE id = ? AND user = ?",
                [title, summary, status, session_id, user],
            )

    # -- reading ----------------------------------------------------------------------------

    def get(self, user: str, session_id: int) -> Session:
        row = self.db.execute(
            f"SELECT {_SESSION_COLUMNS}, {_PREVIEW} FROM sessions s WHERE s.id = ? AND s.user = ?",
            [session_id, user],
        ).fetchone()
        if row is None:
            raise NotFound(f"No session {session_id} for user {user!r}.")
        return Session(*row)

    def messages(
        self, user: str, session_id: int, *, after_id: int = 0, limit: int | None = None
    ) -> list[Message]:
        """A session's messages in order, optionally only those after ``after_id``."""
        self.get(user, session_id)
        rows = self.db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ? AND m.user = ? "
            "AND m.id > ? ORDER BY m.id LIMIT ?",
            [session_id, user, after_id, -1 if limit is None else limit],
        ).fetchall()
        return [Message(*row) for row in rows]

    def window(
        self, user: str, session_id: int, around_message_id: int, context: int = 2
    ) -> list[Message]:
        """The message ``around_message_id`` with up to ``context`` messages either side."""
        self.get(user, session_id)
        context = max(0, context)
        before = self.db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ? AND m.user = ? "
            "AND m.id <= ? ORDER BY m.id DESC LIMIT ?",
            [session_id, user, around_message_id, context + 1],
        ).fetchall()
        if not before or before[0][0] != around_message_id:
            raise NotFound(f"No message {around_message_id} in session {session_id}.")
        after = self.db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ? AND m.user = ? "
            "AND m.id > ? ORDER BY m.id LIMIT ?",
            [session_id, user, around_message_id, context],
        ).fetchall()
        return [Message(*row) for row in reversed(before)] + [Message(*row) for row in after]

    def list(
        self, user: str, *, source: str | None = None, since: str | None = None, limit: int = 20
    ) -> list[Session]:
        """Browse: the user's sessions, newest activity first. Zero model calls."""
        where = ["s.user = ?"]
        params: list[Any] = [user]
        if source:
            where.append("s.source = ?")
            params.append(source)
        if since:
            where.append("s.last_active_at >= ?")
            params.append(since)
        rows = self.db.execute(
            f"SELECT {_SESSION_COLUMNS}, {_PREVIEW} "
            f"FROM sessions s WHERE {' AND '.join(where)} "
            "ORDER BY s.last_active_at DESC, s.id DESC LIMIT ?",
            [*params, limit],
        ).fetchall()
        return [Session(*row) for row in rows]

    def idle(self, user: str, before: str) -> list[Session]:
        """Open sessions whose last activity is older than ``before`` (to close and summarise)."""
        rows = self.db.execute(
            f"SELECT {_SESSION_COLUMNS}, {_PREVIEW} FROM sessions s "
            "WHERE s.user = ? AND s.ended_at IS NULL "
            "AND s.last_active_at < ? ORDER BY s.last_active_at",
            [user, before],
        ).fetchall()
        return [Session(*row) for row in rows]

    def users(self) -> list[str]:
        """Every user with any memory (for per-user daemon jobs)."""
        rows = self.db.execute(
            "SELECT user FROM sessions UNION SELECT user FROM basic_memory "
            "UNION SELECT user FROM facts ORDER BY 1"
        ).fetchall()
        return [row[0] for row in rows]

    # -- search -----------------------------------------------------------------------------

    def search_messages(
        self, user: str, query: str, *, limit: int = 10, source: str | None = None
    ) -> list[MessageHit]:
        """The messages of ``user`` that best answer ``query``, best first (see
        :mod:`hermes.memory.recall` for the ranking). Zero model calls. Raises QueryError when
        the query has no words."""
        ranked = recall.rank_messages(self.db, user, query, limit=limit, source=source,
                                      now=self.clock.now())
        if not ranked:
            return []
        ids = [r.message_id for r in ranked]
        marks = ",".join("?" * len(ids))
        messages = {row[0]: Message(*row) for row in self.db.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.user = ? AND m.id IN ({marks})",
            [user, *ids])}
        sessions: dict[int, Session] = {}
        hits = []
        for r in ranked:
            if r.session_id not in sessions:
                sessions[r.session_id] = self.get(user, r.session_id)
            hits.append(MessageHit(sessions[r.session_id], messages[r.message_id], r.score,
                                   r.parts))
        return hits

    def search(
        self,
        user: str,
        query: str,
        *,
        limit: int = 5,
        context: int = 2,
        source: str | None = None,
    ) -> list[SearchHit]:
        """Search every past conversation of ``user``. Zero model calls.

        The messages are ranked by :func:`hermes.memory.recall.rank_messages` (what
        :meth:`search_messages` returns) and grouped by session, each session at the place of
        its best message, conversations before cron runs. A hit's ``mode`` is "strict" when its
        message holds every term of the query, else "loose". CJK text is matched with LIKE, all
        runs first, then any. Raises QueryError when the query holds nothing searchable; a
        MATCH error propagates (it is a bug, never "no results").
        """
        plan = build_match(query)
        if plan.empty:
            raise QueryError(f"Nothing to search for in {query!r}: it has no words.")
        limit = max(1, limit)
        if plan.cjk:
            return self._search_like(user, plan, limit, context, source)
        ranked = recall.rank_messages(
            self.db, user, query, limit=max(MIN_CANDIDATES, limit * CANDIDATES_PER_RESULT),
            source=source, now=self.clock.now(), plan=plan)
        best: dict[int, recall.RankedMessage] = {}
        for r in ranked:
            best.setdefault(r.session_id, r)
        sources = self._sources(set(best))
        # Cron output is background noise next to a real conversation: demoted below them all.
        order = sorted(best.values(), key=lambda r: sources[r.session_id] == "cron")[:limit]
        expr = recall.ranked_expression(plan)
        hits = []
        for r in order:
            session = self.get(user, r.session_id)
            from_messages = "title/summary" not in r.parts
            matched_in = (["messages"] if from_messages else []) + (
                ["title/summary"] if r.session_matched else [])
            snippet = (self._message_snippet(plan, expr, r.message_id) if from_messages
                       else self._session_snippet(plan, expr, session))
            window = self.window(user, r.session_id, r.message_id, context)
            match = next(m for m in window if m.id == r.message_id)
            mode = "strict" if "all terms" in r.parts or (
                len(plan.terms) == 1 and from_messages) else "loose"
            hits.append(SearchHit(session, r.score, match, snippet, window, mode, matched_in))
        return hits

    def _search_like(
        self, user: str, plan: MatchPlan, limit: int, context: int, source: str | None
    ) -> list[SearchHit]:
        modes: list[tuple[str, str | None]] = [("strict", plan.strict)]
        if plan.loose is not None or len(plan.cjk) > 1 or (plan.cjk and plan.strict):
            modes.append(("loose", plan.loose or plan.strict))
        for mode, expr in modes:
            ranked = self._rank(user, plan, mode, expr, source, limit)
            if ranked:
                return self._hits(user, plan, mode, expr, ranked[:limit], context)
        return []

    def _rank(
        self, user: str, plan: MatchPlan, mode: str, expr: str | None, source: str | None,
        limit: int,
    ) -> list[tuple[int, float, _Candidate | None, float]]:
        """Sessions ranked: (session_id, score, best message or None, title/summary score)."""
        wanted = max(MIN_CANDIDATES, limit * CANDIDATES_PER_RESULT)
        if plan.cjk:
            messages = self._cjk_candidates(user, plan, mode, expr, source, wanted)
            sessions = self._cjk_session_scores(user, plan, mode, expr, source)
        else:
            assert expr is not None
            messages = self._fts_candidates(user, expr, source, wanted)
            sessions = self._session_scores(user, expr, source)
        best: dict[int, _Candidate] = {}
        for cand in messages:
            if cand.session_id not in best or cand.score > best[cand.session_id].score:
                best[cand.session_id] = cand
        session_ids = set(best) | set(sessions)
        if not session_ids:
            return []
        sources = self._sources(session_ids)
        ranked = []
        for sid in session_ids:
            cand = best.get(sid)
            meta = sessions.get(sid, 0.0)
            ranked.append((sid, (cand.score if cand else 0.0) + meta, cand, meta))
        # Cron output is background noise next to a real conversation: demoted below them all.
        ranked.sort(key=lambda r: (sources[r[0]] == "cron", -r[1], -r[0]))
        return ranked

    def _fts_candidates(
        self, user: str, expr: str, source: str | None, wanted: int
    ) -> list[_Candidate]:
        weights = ", ".join(str(w) for w in MESSAGE_WEIGHTS)
        # Fast path: the best `wanted` matches overall (FTS5 sorts them without touching the
        # base table), then scoped to the user. Exact whenever nothing was filtered out.
        rows = self.db.execute(
            "SELECT m.id, m.session_id, hits.rank, m.user = ? AND "
            "(? IS NULL OR (SELECT source FROM sessions WHERE id = m.session_id) = ?) "
            f"FROM (SELECT rowid AS id, bm25(messages_fts, {weights}) AS rank FROM messages_fts "
            "      WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?) AS hits "
            "JOIN messages m ON m.id = hits.id ORDER BY hits.rank",
            [user, source, source, expr, wanted],
        ).fetchall()
        kept = [_Candidate(r[0], r[1], -r[2]) for r in rows if r[3]]
        if len(rows) < wanted or len(kept) == len(rows):
            return kept
        # Other users' (or other sources') messages took some of the places: rank within scope.
        rows = self.db.execute(
            f"SELECT m.id, m.session_id, bm25(messages_fts, {weights}) AS rank "
            "FROM messages_fts CROSS JOIN messages m ON m.id = messages_fts.rowid "
            "CROSS JOIN sessions s ON s.id = m.session_id "
            "WHERE messages_fts MATCH ? AND m.user = ? AND (? IS NULL OR s.source = ?) "
            "ORDER BY rank LIMIT ?",
            [expr, user, source, source, wanted],
        ).fetchall()
        return [_Candidate(r[0], r[1], -r[2]) for r in rows]

    def _session_scores(self, user: str, expr: str, source: str | None) -> dict[int, float]:
        weights = ", ".join(str(w) for w in SESSION_WEIGHTS)
        rows = self.db.execute(
            # CROSS JOIN keeps the full-text match as the outer loop: the planner would
            # otherwise walk the user's sessions and run the match once per session.
            f"SELECT s.id, bm25(sessions_fts, {weights}) FROM sessions_fts "
            "CROSS JOIN sessions s ON s.id = sessions_fts.rowid "
            "WHERE sessions_fts MATCH ? AND s.user = ? AND (? IS NULL OR s.source = ?)",
            [expr, user, source, source],
        ).fetchall()
        return {r[0]: -r[1] for r in rows}

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
        fts = ""
        fts_params: list[str] = []
        if expr is not None:
            op = "AND" if mode == "strict" else "OR"
            fts = f" {op} m.id IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)"
            fts_params = [expr]
        rows = self.db.execute(
            f"SELECT m.id, m.session_id, m.content FROM messages m "
            "JOIN sessions s ON s.id = m.session_id "
            f"WHERE m.user = ? AND (? IS NULL OR s.source = ?) AND ({like}{fts}) "
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
        fts = ""
        fts_params: list[str] = []
        if expr is not None:
            op = "AND" if mode == "strict" else "OR"
            fts = f" {op} s.id IN (SELECT rowid FROM sessions_fts WHERE sessions_fts MATCH ?)"
            fts_params = [expr]
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

    def _hits(
        self, user: str, plan: MatchPlan, mode: str, expr: str | None,
        ranked: Sequence[tuple[int, float, _Candidate | None, float]], context: int,
    ) -> list[SearchHit]:
        hits = []
        for sid, score, cand, meta in ranked:
            session = self.get(user, sid)
            matched_in = []
            if cand is not None:
                matched_in.append("messages")
                match_id = cand.message_id
                snippet = self._message_snippet(plan, expr, match_id)
            else:
                # Only the title or summary matched: show where the conversation starts.
                first = self.db.execute(
                    "SELECT id FROM messages WHERE session_id = ? AND user = ? "
                    "ORDER BY role != 'user', id LIMIT 1",
                    [sid, user],
                ).fetchone()
                if first is None:
                    continue
                match_id = first[0]
                snippet = self._session_snippet(plan, expr, session)
            if meta:
                matched_in.append("title/summary")
            window = self.window(user, sid, match_id, context)
            match = next(m for m in window if m.id == match_id)
            hits.append(SearchHit(session, score, match, snippet, window,
                                  "like" if plan.cjk else mode, matched_in))
        return hits

    def _message_snippet(self, plan: MatchPlan, expr: str | None, message_id: int) -> str:
        if not plan.cjk and expr is not None:
            row = self.db.execute(
                "SELECT snippet(messages_fts, 0, ?, ?, '…', ?) FROM messages_fts "
                "WHERE messages_fts MATCH ? AND rowid = ?",
                [*HIGHLIGHT, SNIPPET_TOKENS, expr, message_id],
            ).fetchone()
            # A match on the speaker column only leaves the content without highlights.
            if row is not None and HIGHLIGHT[0] in (row[0] or ""):
                return row[0]
        content = self.db.execute(
            "SELECT content FROM messages WHERE id = ?", [message_id]
        ).fetchone()[0]
        return _manual_snippet(content, plan)

    def _session_snippet(self, plan: MatchPlan, expr: str | None, session: Session) -> str:
        if not plan.cjk and expr is not None:
            for column, text in ((0, session.title), (1, session.summary)):
                if not text:
                    continue
                row = self.db.execute(
                    "SELECT snippet(sessions_fts, ?, ?, ?, '…', ?) FROM sessions_fts "
                    "WHERE sessions_fts MATCH ? AND rowid = ?",
                    [column, *HIGHLIGHT, SNIPPET_TOKENS, expr, session.id],
                ).fetchone()
                if row is not None and HIGHLIGHT[0] in (row[0] or ""):
                    return row[0]
        return _manual_snippet(session.summary or session.title or "", plan)


def _manual_snippet(content: str, plan: MatchPlan, width: int = 160) -> str:
    """A snippet for text FTS5 did not highlight (CJK runs, LIKE): the first occurrence of any
    query fragment, highlighted, with some text either side."""
    fragments = list(plan.cjk) + [" ".join(t.tokens) for t in plan.terms]
    positions = []
    for fragment in fragments:
        found = re.search(re.escape(fragment), content, re.IGNORECASE)
        if found:
            positions.append((found.start(), found.end()))
    if not positions:
        text = " ".join(content.split())
        return text if len(text) <= width else text[: width - 1] + "…"
    start, end = min(positions)
    left = max(0, start - width // 2)
    right = min(len(content), end + width // 2)
    text = (
        ("…" if left else "")
        + content[left:start]
        + HIGHLIGHT[0] + content[start:end] + HIGHLIGHT[1]
        + content[end:right]
        + ("…" if right < len(content) else "")
    )
    return " ".join(text.split())
