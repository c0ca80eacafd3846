"""Ranked conversations -> what a search shows: each hit's session, the matched message with its
neighbours, a highlighted snippet, where it matched, and the facts that lifted it (split from
search.py, which ranks; this module only presents)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlite_utils

from hermes.memory.sessions import fact_evidence
from hermes.memory.sessions.bm25 import HIGHLIGHT, manual_snippet
from hermes.memory.sessions.records import SearchHit, Session, _Candidate, read_session, read_window
from hermes.store.fts import MatchPlan

# Tokens of a snippet FTS5 cuts around the match.
SNIPPET_TOKENS = 24

# (session id, score, the best candidate message or None, the title/summary score)
Ranked = tuple[int, float, _Candidate | None, float]


def hits_of(
    db: sqlite_utils.Database, user: str, plan: MatchPlan, mode: str, expr: str | None,
    ranked: Sequence[Ranked], context: int,
    evidence: fact_evidence.Evidence = fact_evidence.NO_EVIDENCE,
) -> list[SearchHit]:
    hits = []
    for sid, score, cand, meta in ranked:
        session = read_session(db, user, sid)
        matched_in = []
        learned: list[tuple[int, str]] = []
        match_id: int | None
        if cand is not None:
            matched_in.append("messages")
            if fact_evidence.lifted(evidence, sid, cand.message_id):  # by what was learned
                matched_in.append("facts")
                learned = evidence.learned.get(sid, [])
            match_id = cand.message_id
            snippet = _message_snippet(db, plan, expr, match_id)
        else:
            # Only the title or summary matched: show where the conversation starts.
            first = db.execute(
                "SELECT id FROM messages WHERE session_id = ? AND user = ? "
                "ORDER BY role != 'user', id LIMIT 1",
                [sid, user],
            ).fetchone()
            match_id = None if first is None else first[0]
            snippet = _session_snippet(db, plan, expr, session)
        if meta:
            matched_in.append("title/summary")
        window, match = [], None
        if match_id is not None:
            window = read_window(db, user, sid, match_id, context)
            match = next(m for m in window if m.id == match_id)
        hits.append(SearchHit(session, score, match, snippet, window,
                              "like" if plan.cjk else mode, matched_in, learned,
                              cand.matched if cand is not None else "words"))
    return hits


def _message_snippet(db: sqlite_utils.Database, plan: MatchPlan, expr: str | None,
                     message_id: int) -> str:
    if not plan.cjk and expr is not None:
        row = db.execute(
            "SELECT snippet(messages_fts, 0, ?, ?, '…', ?) FROM messages_fts "
            "WHERE messages_fts MATCH ? AND rowid = ?",
            [*HIGHLIGHT, SNIPPET_TOKENS, expr, message_id],
        ).fetchone()
        # A match on the speaker column only leaves the content without highlights.
        if row is not None and HIGHLIGHT[0] in (row[0] or ""):
            return row[0]
    content = db.execute(
        "SELECT content FROM messages WHERE id = ?", [message_id]
    ).fetchone()[0]
    return manual_snippet(content, plan)


def _session_snippet(db: sqlite_utils.Database, plan: MatchPlan, expr: str | None,
                     session: Session) -> str:
    if not plan.cjk and expr is not None:
        for column, text in ((0, session.title), (1, session.summary)):
            if not text:
                continue
            row = db.execute(
                "SELECT snippet(sessions_fts, ?, ?, ?, '…', ?) FROM sessions_fts "
                "WHERE sessions_fts MATCH ? AND rowid = ?",
                [column, *HIGHLIGHT, SNIPPET_TOKENS, expr, session.id],
            ).fetchone()
            if row is not None and HIGHLIGHT[0] in (row[0] or ""):
                return row[0]
    return manual_snippet(session.summary or session.title or "", plan)
