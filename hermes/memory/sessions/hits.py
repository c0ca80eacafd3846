"""Ranked conversations -> what a search shows: each hit's session, the matched message with its
neighbours, a highlighted snippet, where it matched, and the facts that lifted it (split from
search.py, which ranks; this module only presents).

What the hits show is read for all of them at once: their sessions in one query, their windows in
one, their snippets in one a run of nearby rows (read a hit at a time, ~5 statements a hit were a
quarter of ``SessionStore.search``'s time on LoCoMo, 50 conversations a question)."""

from __future__ import annotations

from collections.abc import Sequence

import sqlite_utils

from hermes.errors import NotFound
from hermes.memory.sessions import fact_evidence
from hermes.memory.sessions.bm25 import FTS_MARKS, manual_snippet, marked_snippet
from hermes.memory.sessions.records import (
    _MESSAGE_COLUMNS,
    Message,
    SearchHit,
    Session,
    _Candidate,
    _storable,
    read_sessions,
    window_context,
)
from hermes.store.fts import MatchPlan

# Tokens of a snippet FTS5 cuts around the match.
SNIPPET_TOKENS = 24
# How far apart (in rowids) the hits whose snippets one statement reads may be (_highlighted).
SNIPPET_SPAN = 2000
# Hits whose windows or snippets one statement reads (two parameters a hit: far below SQLite's
# limit of 32,766, or 999 before 3.32).
_CHUNK = 200
# Past every rowid: a window with fewer than `context` messages after its hit runs to the end.
_LAST_ID = 2**63 - 1

# (session id, score, the best candidate message or None, the title/summary score)
Ranked = tuple[int, float, _Candidate | None, float]


def hits_of(
    db: sqlite_utils.Database, user: str, plan: MatchPlan, mode: str, expr: str | None,
    ranked: Sequence[Ranked], context: int,
    evidence: fact_evidence.Evidence = fact_evidence.NO_EVIDENCE,
) -> list[SearchHit]:
    if not ranked:
        return []
    sessions = read_sessions(db, user, (sid for sid, _, _, _ in ranked))
    # the message each hit shows: its best match, or (only the title or summary matched)
    # where the conversation starts
    shown: list[int | None] = []
    for sid, _, cand, _ in ranked:
        if cand is not None:
            shown.append(cand.message_id)
            continue
        first = db.execute(
            "SELECT id FROM messages WHERE session_id = ? AND user = ? "
            "ORDER BY role != 'user', id LIMIT 1",
            [sid, user],
        ).fetchone()
        shown.append(None if first is None else first[0])
    windows = read_windows(db, user, [(sid, mid) for (sid, _, _, _), mid
                                      in zip(ranked, shown, strict=True) if mid is not None],
                           context)
    highlighted = _highlighted(db, plan, expr, [cand.message_id for _, _, cand, _ in ranked
                                                if cand is not None])
    hits = []
    for (sid, score, cand, meta), match_id in zip(ranked, shown, strict=True):
        session = sessions[sid]
        matched_in = []
        learned: list[tuple[int, str]] = []
        window = [] if match_id is None else windows[match_id]
        match = next((m for m in window if m.id == match_id), None)
        if cand is not None:
            assert match is not None  # read_windows holds every hit's message, or raises
            matched_in.append("messages")
            if fact_evidence.lifted(evidence, sid, cand.message_id):  # by what was learned
                matched_in.append("facts")
                learned = evidence.learned.get(sid, [])
            snippet = highlighted.get(cand.message_id) or manual_snippet(match.content, plan)
        else:
            # Only the title or summary matched: show where the conversation starts.
            snippet = _session_snippet(db, plan, expr, session)
        if meta:
            matched_in.append("title/summary")
        hits.append(SearchHit(session, score, match, snippet, window,
                              "like" if plan.cjk else mode, matched_in, learned,
                              cand.matched if cand is not None else "words"))
    return hits


def read_windows(db: sqlite_utils.Database, user: str, around: Sequence[tuple[int, int]],
                 context: int = 2) -> dict[int, list[Message]]:
    """:func:`hermes.memory.sessions.records.read_window` of each (session id, message id) of
    ``user``, in one query a ``_CHUNK``: message id -> its window, in order. NotFound, as
    there, when a message is not in its session or not this user's."""
    context = window_context(context)
    around = list(dict.fromkeys(around))
    for sid, mid in around:
        if not (_storable(sid) and _storable(mid)):
            raise NotFound(f"No message {mid} in session {sid}.")
    windows: dict[int, list[Message]] = {}
    # Each window runs from the message `context` before the hit (or the session's first) to
    # the one `context` after it (or its last): the rows read_window reads, a query a side.
    # The bounds are found once a hit (MATERIALIZED), then each window read by the index.
    for begin in range(0, len(around), _CHUNK):
        chunk = around[begin : begin + _CHUNK]
        rows = db.execute(
            f"WITH hit(sid, mid) AS (VALUES {','.join(['(?, ?)'] * len(chunk))}), "
            "span AS MATERIALIZED (SELECT sid, mid, "
            "coalesce((SELECT b.id FROM messages b WHERE b.session_id = hit.sid "
            "AND b.user = ? AND b.id <= hit.mid ORDER BY b.id DESC LIMIT 1 OFFSET ?), 0) AS lo, "
            + ("mid" if context == 0 else
               "coalesce((SELECT a.id FROM messages a WHERE a.session_id = hit.sid "
               "AND a.user = ? AND a.id > hit.mid ORDER BY a.id LIMIT 1 OFFSET ?), "
               f"{_LAST_ID})") + " AS hi FROM hit) "
            f"SELECT span.mid, {_MESSAGE_COLUMNS} FROM span JOIN messages m "
            "ON m.session_id = span.sid AND m.id BETWEEN span.lo AND span.hi AND m.user = ? "
            "ORDER BY span.mid, m.id",
            [*(value for pair in chunk for value in pair), user, context,
             *([] if context == 0 else [user, context - 1]), user],
        ).fetchall()
        for row in rows:
            windows.setdefault(row[0], []).append(Message(*row[1:]))
    for sid, mid in around:
        if not any(m.id == mid for m in windows.get(mid, ())):
            raise NotFound(f"No message {mid} in session {sid}.")
    return windows


def _highlighted(db: sqlite_utils.Database, plan: MatchPlan, expr: str | None,
                 message_ids: Sequence[int]) -> dict[int, str]:
    """FTS5's snippets of ``message_ids`` for ``expr``, those that highlight a word of the
    content (a match on the speaker column only leaves the content without highlights; a
    message found by meaning or by a fact matches nothing): message id -> snippet.

    One statement a run of ids within ``SNIPPET_SPAN`` of its first: FTS5 sets the whole
    expression up for each lookup (~60 us a hit on LoCoMo, most of the snippets' time), and
    going through the matches of a short run of rows costs about one lookup (1M messages: 0.1-0.4
    ms for a span of 10,000 rows, as one row). Far apart, each is its own run."""
    if plan.cjk or expr is None or not message_ids:
        return {}
    found: dict[int, str] = {}
    for run in _runs(sorted(set(message_ids)), SNIPPET_SPAN, _CHUNK):
        for rowid, snippet in db.execute(
            "SELECT rowid, snippet(messages_fts, 0, ?, ?, '…', ?) FROM messages_fts "
            "WHERE messages_fts MATCH ? AND rowid BETWEEN ? AND ? "
            f"AND +rowid IN ({','.join('?' * len(run))})",
            [*FTS_MARKS, SNIPPET_TOKENS, expr, run[0], run[-1], *run],
        ):
            if FTS_MARKS[0] in (snippet or ""):
                found[rowid] = marked_snippet(snippet)
    return found


def _runs(ids: Sequence[int], span: int, most: int) -> list[list[int]]:
    """``ids`` (sorted) cut into runs, each within ``span`` of its first and at most ``most``
    long."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i - runs[-1][0] <= span and len(runs[-1]) < most:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _session_snippet(db: sqlite_utils.Database, plan: MatchPlan, expr: str | None,
                     session: Session) -> str:
    if not plan.cjk and expr is not None:
        for column, text in ((0, session.title), (1, session.summary)):
            if not text:
                continue
            row = db.execute(
                "SELECT snippet(sessions_fts, ?, ?, ?, '…', ?) FROM sessions_fts "
                "WHERE sessions_fts MATCH ? AND rowid = ?",
                [column, *FTS_MARKS, SNIPPET_TOKENS, expr, session.id],
            ).fetchone()
            if row is not None and FTS_MARKS[0] in (row[0] or ""):
                return marked_snippet(row[0])
    return manual_snippet(session.summary or session.title or "", plan)
