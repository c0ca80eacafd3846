"""Tier 3 records: sessions, messages and search hits, and the SQL that reads them (one session,
a window of messages: what the store and its search both read)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from hermes.errors import NotFound
from hermes.safe_text import one_line

if TYPE_CHECKING:  # the records are read without the store (a daemon's answer)
    import sqlite_utils

ROLES = ("user", "assistant", "tool", "system")
SOURCES = ("discord", "terminal", "cron", "import", "web")

_SESSION_COLUMNS = (
    "s.id, s.user, s.source, s.channel_key, s.title, s.summary, s.started_at, s.last_active_at, "
    "s.ended_at, s.message_count, s.external_id, s.place"
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
    # Where it was held (hermes.memory.place: "private" or a shared place's key); its
    # messages, title and summary are read where it may be (hermes.memory.audience).
    place: str = "private"
    # The first user line, filled in by browse, shown when the session has no title.
    preview: str | None = None

    @property
    def display_title(self) -> str:
        return one_line(self.title or self.preview or "(no messages)", 80)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data = {"session_id": data.pop("id"), **data}
        data["title"] = self.title
        data["display_title"] = self.display_title
        return data


# A front-end identity (terminal:root, discord:1234, mcp:cursor, a plugin front-end's
# postbox:ana) is plumbing, never a name: ``<kind>:<id>``, the kind a front-end's registered
# name (an identifier, hermes.plugins.Frontends.register) or mcp.
_IDENTITY = re.compile(r"[a-z_][a-z0-9_]*:\S*")


def speaker_name(speaker: str | None) -> str | None:
    """The name a message's speaker goes by for the model, or None (say "the user").

    Older terminal messages stored the identity (``terminal:root``) as their speaker."""
    if not speaker or _IDENTITY.fullmatch(speaker.strip()):
        return None
    return speaker


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
    match: Message | None  # None: only the title or summary matched (a session without messages)
    snippet: str
    context: list[Message]
    # How the query matched: "strict" (all terms), "loose" (any term) or "like" (CJK text).
    mode: str = "strict"
    matched_in: list[str] = field(default_factory=list)  # "messages", "facts", "title/summary"
    # "facts" in matched_in: the facts learned in this conversation that lifted it, (fact id,
    # text), best first (hermes.memory.sessions.fact_evidence): why it was found
    learned: list[tuple[int, str]] = field(default_factory=list)
    # What the shown match matched: "words", "meaning" (close in meaning, no word of the
    # query), "both", or "facts" (neither: a fact learned there lifted it); "words" for a
    # session found by its title or summary (hermes.memory.sessions.rerank.RankedMessage)
    matched: str = "words"

    @property
    def found_by(self) -> str:
        """What the hit matched, as the CLI and the web panel say it: "words" (all of them),
        "any word" (some), "... nearby" (in the turns around the shown one, not in it), "by
        meaning" (none, close in meaning), "words, by meaning" / "any word, by meaning"
        (both), "through a fact" (no word of the query in the shown turn, lifted by a fact
        learned there: hermes.memory.sessions.fact_evidence)."""
        from hermes.memory.sessions.bm25 import HIGHLIGHT

        if self.matched == "facts" or ("facts" in self.matched_in
                                       and HIGHLIGHT[0] not in self.snippet
                                       and self.matched not in ("meaning", "both")):
            return "through a fact"
        if self.matched == "meaning":
            return "by meaning"
        words = "any word" if self.mode == "loose" else "words"
        if self.match is not None and HIGHLIGHT[0] not in self.snippet:
            # the shown line holds none of them: the turn around it does (an answer lifted
            # by its question's words, hermes.memory.sessions.rerank)
            words += " nearby"
        return words + (", by meaning" if self.matched == "both" else "")

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
            "place": s.place,
            "score": round(self.score, 4),
            "mode": self.mode,
            "matched_in": self.matched_in,
            "matched": self.matched,
            "learned": [{"fact_id": i, "content": text} for i, text in self.learned],
            "snippet": self.snippet,
            "match": None if self.match is None else self.match.to_json(),
            "context": [m.to_json() for m in self.context],
        }


@dataclass
class MessageHit:
    """One message found by :meth:`SessionStore.search_messages`, with its session."""

    session: Session
    message: Message
    score: float
    mode: str  # "strict" (all terms), "loose" (any term) or "like" (CJK)
    parts: dict[str, float] = field(default_factory=dict)  # what the score is made of
    # "words", "meaning", "both", "facts", or "" (a fill-in of neither, not to be shown: past
    # messages in the prompt leave it out): hermes.memory.sessions.rerank.RankedMessage
    matched: str = "words"

    def to_json(self) -> dict[str, Any]:
        return {"session_id": self.session.id, "started_at": self.session.started_at,
                "score": round(self.score, 4), "mode": self.mode, "matched": self.matched,
                "parts": {k: round(v, 4) for k, v in self.parts.items()},
                "message": self.message.to_json()}


@dataclass
class _Candidate:
    message_id: int
    session_id: int
    score: float  # higher is better
    matched: str = "words"  # SearchHit.matched


def _storable(number: int) -> bool:
    """Whether an id fits SQLite's 64-bit integers (a bigger one cannot name a row)."""
    return -(2**63) <= number < 2**63


def read_session(db: sqlite_utils.Database, user: str, session_id: int) -> Session:
    """One session of this user. NotFound for unknown ids and other users' ids."""
    if not _storable(session_id):
        raise NotFound(f"No session {session_id} for user {user!r}.")
    row = db.execute(
        f"SELECT {_SESSION_COLUMNS}, {_PREVIEW} FROM sessions s WHERE s.id = ? AND s.user = ?",
        [session_id, user],
    ).fetchone()
    if row is None:
        raise NotFound(f"No session {session_id} for user {user!r}.")
    return Session(*row)


def read_sessions(db: sqlite_utils.Database, user: str,
                  session_ids: Iterable[int]) -> dict[int, Session]:
    """:func:`read_session` of each of ``session_ids``, in one query a 500 ids: session id ->
    Session. NotFound, as there, when one is unknown or another user's."""
    wanted = sorted({int(s) for s in session_ids})
    if not all(_storable(s) for s in wanted):
        raise NotFound(f"No session {next(s for s in wanted if not _storable(s))} for user "
                       f"{user!r}.")
    found: dict[int, Session] = {}
    for begin in range(0, len(wanted), 500):
        chunk = wanted[begin : begin + 500]
        for row in db.execute(
                f"SELECT {_SESSION_COLUMNS}, {_PREVIEW} FROM sessions s WHERE s.user = ? "
                f"AND s.id IN ({','.join('?' * len(chunk))})", [user, *chunk]).fetchall():
            found[row[0]] = Session(*row)
    missing = [s for s in wanted if s not in found]
    if missing:
        raise NotFound(f"No session {missing[0]} for user {user!r}.")
    return found


# More messages either side than a session holds: a wider window is the whole session (a
# wider one asked, `hermes sessions search -C 2**63`, overflowed SQLite's integers).
MAX_CONTEXT = 2**31


def window_context(context: int) -> int:
    """``context`` as a window reads it: 0 to MAX_CONTEXT."""
    return min(max(0, context), MAX_CONTEXT)


def read_window(
    db: sqlite_utils.Database, user: str, session_id: int, around_message_id: int,
    context: int = 2,
) -> list[Message]:
    """The message ``around_message_id`` with up to ``context`` messages either side."""
    # Both queries are scoped by user: another user's session has no such message.
    context = window_context(context)
    if not (_storable(session_id) and _storable(around_message_id)):
        raise NotFound(f"No message {around_message_id} in session {session_id}.")
    before = db.execute(
        f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ? AND m.user = ? "
        "AND m.id <= ? ORDER BY m.id DESC LIMIT ?",
        [session_id, user, around_message_id, context + 1],
    ).fetchall()
    if not before or before[0][0] != around_message_id:
        raise NotFound(f"No message {around_message_id} in session {session_id}.")
    after = db.execute(
        f"SELECT {_MESSAGE_COLUMNS} FROM messages m WHERE m.session_id = ? AND m.user = ? "
        "AND m.id > ? ORDER BY m.id LIMIT ?",
        [session_id, user, around_message_id, context],
    ).fetchall()
    return [Message(*row) for row in reversed(before)] + [Message(*row) for row in after]
