"""Tier 3: session transcripts. Every conversation (Discord, terminal, cron, imports) is recorded
here and searchable; nothing is deleted by summarising, the transcript is the record.

Two ways to read it, neither calls a model:

* **browse** (:meth:`SessionStore.list_sessions`): the user's sessions, newest activity first;
* **search** (:meth:`SessionStore.search`): FTS5 over message content (and the speaker) and over
  session titles and summaries, through the safe query builder (all terms first, then any
  non-stopword term), ranked by bm25 with column weights, grouped by session, cron sessions below
  conversations. Each hit carries the session's stored summary, the best matching message with a
  highlighted snippet, and a window of messages around it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import sqlite_utils

from hermes.clock import Clock, SystemClock, to_ts
from hermes.errors import NotFound, RefusedWrite
from hermes.memory.audience import Audience, and_condition, place_of_channel, visible_session_ids
from hermes.memory.place import PRIVATE, Place
from hermes.memory.sessions.bm25 import HIGHLIGHT, SAID
from hermes.memory.sessions.records import (
    _MESSAGE_COLUMNS,
    _PREVIEW,
    _SESSION_COLUMNS,
    ROLES,
    SOURCES,
    Message,
    MessageHit,
    SearchHit,
    Session,
    _storable,
    read_session,
    read_window,
)
from hermes.memory.sessions.search import FULL_SEARCH, SCORE_CAP, SearchProfile, SessionSearch
from hermes.safe_text import scrub
from hermes.safety.secrets import redact_json, redact_text
from hermes.store.db import write_transaction

if TYPE_CHECKING:
    from hermes.memory.sessions.fact_evidence import FactHit, FactSearch
    from hermes.memory.sessions.vectors import MessageVectors

__all__ = [
    "HIGHLIGHT", "ROLES", "SCORE_CAP", "SOURCES", "Message", "MessageHit", "SearchHit",
    "Screened", "Session", "SessionStore",
]


# a search hit (SearchHit or MessageHit): each names its session
_Hit = TypeVar("_Hit", SearchHit, MessageHit)


@dataclass(frozen=True)
class Screened:
    """A message's text as it is stored: secrets replaced by markers (when the store redacts)
    and lone surrogates by U+FFFD. Made by :meth:`SessionStore.screen`, which is pure work on
    the text (no database): a long message is screened on a worker thread, then appended on
    the event loop's connection."""

    content: str
    tool_args: str | None = None


class SessionStore:
    def __init__(
        self, db: sqlite_utils.Database, clock: Clock | None = None,
        vectors: MessageVectors | None = None,
        *, redact_secrets: bool = True, fact_search: FactSearch | None = None,
        audience: Audience | None = None,
    ) -> None:
        self.db = db
        self.clock = clock or SystemClock()
        # who may read what (privacy.shared_places): reads for a reply take its place
        self.audience = audience or Audience()
        # sessions.vectors.MessageVectors when hybrid recall is on (sessions.embeddings)
        self.vectors = vectors
        # The home's fact search (user, query) -> hits, whose facts are evidence for the
        # conversations they were learned from (sessions.fact_evidence); None: transcripts only
        self.searcher = SessionSearch(db, self.clock, vectors, fact_search)
        # sessions.redact_secrets: secrets in a message become markers before it is stored
        self.redact_secrets = redact_secrets

    @cached_property
    def words_only(self) -> SessionSearch:
        """Search of these sessions by their words alone (no message vectors, no facts)."""
        return SessionSearch(self.db, self.clock)

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
        place: Place | None = None,
    ) -> Session:
        """Start a new session for ``user``, held in ``place`` (where its replies are read;
        by default from its channel key: a Discord channel's is shared, see
        hermes.memory.audience.place_of_channel)."""
        if not source or not source.strip():
            raise RefusedWrite("Refused: a session needs a source (discord, terminal, cron, ...).")
        started = started_at or to_ts(self.clock.now())
        where_held = place if place is not None else place_of_channel(source, channel_key)
        with write_transaction(self.db):
            cursor = self.db.execute(
                "INSERT INTO sessions (user, source, channel_key, title, started_at, "
                "last_active_at, external_id, place) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [user, source, channel_key, title, started, started, external_id,
                 where_held.key],
            )
        return self.get(user, int(cursor.lastrowid or 0))

    def open_for(self, user: str, source: str, channel_key: str, *,
                 place: Place | None = None) -> Session:
        """The open session of a channel (a Discord thread, a terminal), or a new one held in
        ``place`` (see :meth:`create`)."""
        with write_transaction(self.db):
            row = self.db.execute(
                f"SELECT {_SESSION_COLUMNS}, {_PREVIEW} FROM sessions s "
                "WHERE s.user = ? AND s.source = ? "
                "AND s.channel_key = ? AND s.ended_at IS NULL ORDER BY s.id DESC LIMIT 1",
                [user, source, channel_key],
            ).fetchone()
            if row is not None:
                return Session(*row)
            return self.create(user, source, channel_key=channel_key, place=place)

    def append(
        self,
        user: str,
        session_id: int,
        role: str,
        content: str | Screened,
        *,
        speaker: str | None = None,
        created_at: str | None = None,
        tool_name: str | None = None,
        tool_args: str | None = None,
        tool_call_id: str | None = None,
        external_id: str | None = None,
    ) -> Message:
        """Record one message. The session's count and last activity follow (a trigger).

        Secrets in it are replaced by markers first (``sessions.redact_secrets``): the message
        returned, the store, its search index and everything that reads them later only ever
        hold the redacted text. ``content`` may come screened already (:meth:`screen`, e.g.
        on a worker thread), with its tool arguments.
        """
        if role not in ROLES:
            raise RefusedWrite(f"Refused: role must be one of {', '.join(ROLES)} (got {role!r}).")
        if content is None:
            raise RefusedWrite("Refused: a message needs content (use '' for none).")
        if isinstance(content, Screened):
            if tool_args is not None:
                raise ValueError("a screened message's tool_args are screened with it")
            screened = content
        else:
            screened = self.screen(content, tool_args)
        content, tool_args = screened.content, screened.tool_args
        created = created_at or to_ts(self.clock.now())
        speaker = _scrub(speaker)
        # Screened before the write lock is taken: only the insert (and its FTS5 indexing)
        # holds it, never the redaction of a long message.
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

    def screen(self, content: str, tool_args: str | None = None) -> Screened:
        """``content`` (and a tool call's JSON arguments) as :meth:`append` stores them:
        secrets redacted when ``sessions.redact_secrets`` says so, lone surrogates replaced
        (half an emoji from a provider, a "\\ud83e" escape in a file would make the whole
        message unstorable: U+FFFD in its place, the rest recorded). No database: safe on any
        thread."""
        if self.redact_secrets:
            content = redact_text(content)
            tool_args = None if tool_args is None else redact_json(tool_args)
        return Screened(scrub(content), _scrub(tool_args))

    def close_open(self, user: str, source: str, channel_key: str) -> Session | None:
        """End the channel's open session, if it has one (the person left); None if not."""
        row = self.db.execute(
            "SELECT id FROM sessions WHERE user = ? AND source = ? AND channel_key = ? "
            "AND ended_at IS NULL ORDER BY id DESC LIMIT 1", [user, source, channel_key],
        ).fetchone()
        return self.close(user, int(row[0])) if row is not None else None

    def close(self, user: str, session_id: int) -> Session:
        """Mark a session ended (idempotent: an ended session keeps its end time)."""
        with write_transaction(self.db):
            self.get(user, session_id)
            self.db.execute(
                "UPDATE sessions SET ended_at = ? WHERE id = ? AND user = ? AND ended_at IS NULL",
                [to_ts(self.clock.now()), session_id, user],
            )
        return self.get(user, session_id)

    def delete(self, user: str, session_id: int) -> int:
        """Delete a session of ``user`` and everything recorded with it: its messages (their
        search index and vectors), the facts shown for its replies and their ratings, its
        extraction runs (all by ON DELETE CASCADE and the tables' triggers); a cron run keeps
        its row without the session. Facts learned from it stay (they are the user's memory,
        forgotten on their own). Returns how many messages went."""
        with write_transaction(self.db):
            self.get(user, session_id)                  # NotFound for another user's
            count = self.db.execute("SELECT count(*) FROM messages WHERE session_id = ?",
                                    [session_id]).fetchone()[0]
            self.db.execute("DELETE FROM sessions WHERE id = ? AND user = ?", [session_id, user])
        return int(count)

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
        at query time). ``status="failed"`` records an attempt without text. Secrets are
        redacted whatever ``sessions.redact_secrets`` says: a summary is Hermes' own text."""
        title = None if title is None else redact_text(title)
        summary = None if summary is None else redact_text(summary)
        with write_transaction(self.db):
            self.get(user, session_id)
            self.db.execute(
                "UPDATE sessions SET title = coalesce(?, title), summary = coalesce(?, summary), "
                "summary_status = ?, summary_attempts = summary_attempts + 1 "
                "WHERE id = ? AND user = ?",
                [title, summary, status, session_id, user],
            )

    def set_title(self, user: str, session_id: int, title: str) -> bool:
        """Give a session without a title this one (a new web chat's, from its first
        exchange); False when it has one already (a summary's is never replaced by it)."""
        with write_transaction(self.db):
            self.get(user, session_id)
            cursor = self.db.execute(
                "UPDATE sessions SET title = ? WHERE id = ? AND user = ? AND title IS NULL",
                [redact_text(title), session_id, user])
        return cursor.rowcount == 1

    # -- reading ----------------------------------------------------------------------------

    def search(self, user: str, query: str, *, limit: int = 5, context: int = 2,
               source: str | None = None, facts: Sequence[FactHit] | None = None,
               place: Place = PRIVATE) -> list[SearchHit]:
        """Search every past conversation of ``user`` (:meth:`SessionSearch.search`; the
        store's fact search gives ``facts`` unless they are given, ``()`` for none). In a
        shared ``place``, only the conversations its readers may see (see "the audience of a
        search" below)."""
        allowed = self._allowed(user, place)
        if allowed is None:
            return self.searcher.search(user, query, limit=limit, context=context,
                                        source=source, facts=facts)
        if not allowed:
            return []
        fact_search = self._facts_in(place, facts)
        kept = self._until_enough(limit, lambda deeper: self.searcher.search(
            user, query, limit=deeper, context=context, source=source, facts=fact_search),
            allowed)
        for hit in kept:  # what was learned there, as its readers may see it
            hit.learned = self._visible_learned(user, place, hit.learned)
        return kept

    def search_messages(
        self, user: str, query: str, *, limit: int = 10, source: str | None = None,
        exclude_session: int | None = None, any_word: bool = False,
        meaning: str | None = None, profile: SearchProfile = FULL_SEARCH,
        facts: Sequence[FactHit] | None = None, place: Place = PRIVATE,
        words_only: bool = False,
    ) -> list[MessageHit]:
        """The messages that best answer ``query`` (:meth:`SessionSearch.search_messages`);
        in a shared ``place``, of the conversations its readers may see. ``words_only``: by
        their words even when message vectors are on (and without fact evidence)."""
        searcher = self.searcher
        if words_only and self.vectors is not None:
            searcher = self.words_only
        allowed = self._allowed(user, place)
        if allowed is None:
            return searcher.search_messages(
                user, query, limit=limit, source=source, exclude_session=exclude_session,
                any_word=any_word, meaning=meaning, profile=profile, facts=facts)
        if not allowed or allowed <= {exclude_session}:
            return []
        fact_search = self._facts_in(place, facts)
        return self._until_enough(limit, lambda deeper: searcher.search_messages(
            user, query, limit=deeper, source=source, exclude_session=exclude_session,
            any_word=any_word, meaning=meaning, profile=profile, facts=fact_search), allowed)

    # -- the audience of a search (hermes.memory.audience) ------------------------------------
    # Session search ranks over all of the user's conversations (its candidates come from the
    # words' index, bm25's best, the message vectors and fact evidence, each built for that); a
    # search for a shared place asks it for more and keeps the conversations held where the
    # reply may go, asking deeper again (DEEPER times, up to MOST_DEEP) while it has fewer than
    # asked and the search had more to give: a channel with a few conversations under a long
    # private history still finds them. Every part of a hit (its messages, context, title,
    # summary) is its session's: keeping the session keeps everything it shows. (A private
    # place: no filter at all, the search as it always ran.)
    DEEPER = 4
    MOST_DEEP = 320

    def _allowed(self, user: str, place: Place) -> set[int] | None:
        return visible_session_ids(self.db, self.audience, user, place)

    def _deeper(self, limit: int) -> int:
        return max(limit * self.DEEPER, 20)

    def _until_enough(self, limit: int, search: Callable[[int], Sequence[_Hit]],
                      allowed: set[int]) -> list[_Hit]:
        """The first ``limit`` hits of ``search(deeper)`` in the ``allowed`` sessions."""
        deeper = self._deeper(limit)
        while True:
            hits = search(deeper)
            kept = [hit for hit in hits if hit.session.id in allowed][:limit]
            if len(kept) >= limit or len(hits) < deeper or deeper >= self.MOST_DEEP:
                return kept
            deeper = min(deeper * self.DEEPER, self.MOST_DEEP)

    def _facts_in(self, place: Place, facts: Sequence[FactHit] | None
                  ) -> Sequence[FactHit] | FactSearch | None:
        """The fact evidence of a search read in ``place``: the facts given, else the store's
        fact search for that place (only facts its readers may see lift a conversation)."""
        search = self.searcher.fact_search
        if facts is not None or search is None:
            return facts

        def in_place(user: str, query: str, meaning: str | None) -> Sequence[FactHit]:
            return search(user, query, meaning, place=place)  # type: ignore[call-arg]

        return in_place

    def _visible_learned(self, user: str, place: Place,
                         learned: list[tuple[int, str]]) -> list[tuple[int, str]]:
        if not learned:
            return learned
        visible, params = self.audience.items(place, "f")
        ids = [fact_id for fact_id, _ in learned]
        marks = ",".join("?" * len(ids))
        seen = {int(r[0]) for r in self.db.execute(
            f"SELECT f.id FROM facts f WHERE f.user = ? AND f.id IN ({marks})"
            f"{and_condition(visible)}",
            [user, *ids, *params])}
        return [(fact_id, text) for fact_id, text in learned if fact_id in seen]

    def get(self, user: str, session_id: int, *, place: Place = PRIVATE) -> Session:
        """One session of this user. NotFound for unknown ids, other users' ids and (``place``
        shared) a session whose conversation a reply read there may not hold."""
        session = read_session(self.db, user, session_id)
        if place.shared and not self.audience.sees_session(place, session.place):
            raise NotFound(f"No session {session_id} for user {user!r}.")
        return session

    def place_of(self, user: str, session_id: int) -> Place:
        """Where a session of this user is held (its replies are read there). NotFound for
        unknown ids and other users' ids."""
        row = self.db.execute("SELECT place FROM sessions WHERE id = ? AND user = ?",
                              [int(session_id), user]).fetchone()
        if row is None:
            raise NotFound(f"No session {session_id} for user {user!r}.")
        return Place(row[0])

    def messages(
        self, user: str, session_id: int, *, after_id: int = 0, limit: int | None = None,
        place: Place = PRIVATE,
    ) -> list[Message]:
        """A session's messages in order, optionally only those after ``after_id`` (NotFound,
        as :meth:`get`, for a session a reply read in ``place`` may not hold)."""
        self.get(user, session_id, place=place)
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
        return read_window(self.db, user, session_id, around_message_id, context)

    def list_sessions(
        self, user: str, *, source: str | None = None, since: str | None = None, limit: int = 20,
        place: Place = PRIVATE,
    ) -> list[Session]:
        """Browse: the user's sessions, newest activity first (in a shared ``place``, those
        its readers may see). Zero model calls."""
        where, params = _session_filter(user, source, since)
        visible, visible_params = self.audience.sessions(place, "s")
        if visible:
            where.append(visible)
            params.extend(visible_params)
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

    def term_count(self, user: str, expression: str, *, cap: int,
                   mine_cap: int | None = None,
                   exclude_session: int | None = None) -> tuple[int, int]:
        """How many of ``user``'s messages match the FTS ``expression``, among the first
        ``cap`` matches of the index (and at most ``mine_cap``), outside ``exclude_session``
        (the conversation in progress, whose last line is the message being answered); and
        how many matches that scan saw (``cap`` at most).

        The second figure is the index's, whoever's messages they are: it knows no users, and
        what a search for the word costs follows every match. Only the first is this user's,
        and it is counted only when the scan stops short of ``cap`` (0 otherwise): a word that
        common is not searched for whoever wrote it, and reading each match's row to see whose
        it is cost the turn's prompt a third of its time (bench_turn: 7.4 -> 9.9 ms p50)."""
        matches = int(self.db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM messages_fts WHERE messages_fts MATCH ? LIMIT ?)",
            [expression, cap]).fetchone()[0])
        if matches == 0 or matches >= cap:
            return 0, matches
        row = self.db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM messages_fts CROSS JOIN messages m "
            "ON m.id = messages_fts.rowid WHERE messages_fts MATCH ? AND m.user = ? "
            f"AND {SAID} AND m.session_id IS NOT ? LIMIT ?)",
            [expression, user, exclude_session,
             cap if mine_cap is None else mine_cap]).fetchone()
        return int(row[0]), matches

    # -- work left to do: summaries ---------------------------------------------------------

    def needing_summary(self, user: str, *, max_attempts: int) -> list[int]:
        """Ended sessions of ``user`` still without a summary (never tried, or failed fewer
        than ``max_attempts`` times), by id. Imported sessions (an importer's external id)
        are not: they wait for ``summary_backlog``, when asked."""
        rows = self.db.execute(
            "SELECT id FROM sessions WHERE user = ? AND ended_at IS NOT NULL "
            "AND (summary_status IS NULL OR summary_status = 'failed') AND summary_attempts < ? "
            "AND external_id IS NULL ORDER BY id",
            [user, max_attempts],
        ).fetchall()
        return [int(row[0]) for row in rows]

    def summary_backlog(self, user: str, *, max_attempts: int, since: str | None = None,
                        source: str | None = None) -> list[int]:
        """``user``'s sessions without a summary that are finished or imported, oldest first
        (``since``: active at or after it; ``source``: from that source only)."""
        where = ["user = ?", "(summary_status IS NULL OR summary_status = 'failed')",
                 "summary_attempts < ?", "(ended_at IS NOT NULL OR external_id IS NOT NULL)"]
        params: list[Any] = [user, max_attempts]
        if since:
            where.append("last_active_at >= ?")
            params.append(since)
        if source:
            where.append("source = ?")
            params.append(source)
        rows = self.db.execute(f"SELECT id FROM sessions WHERE {' AND '.join(where)} "
                               "ORDER BY started_at, id", params).fetchall()
        return [int(row[0]) for row in rows]


    # -- work left to do: learning ----------------------------------------------------------

    def extracted_through(self, user: str, session_id: int) -> int:
        """The session's extraction watermark: the last message learned from (0: none, also
        for a session that is not this user's)."""
        row = self.db.execute(
            "SELECT extracted_through FROM sessions WHERE id = ? AND user = ?", [session_id, user]
        ).fetchone()
        return int(row[0]) if row else 0

    def advance_extracted(self, user: str, session_id: int, through: int) -> None:
        """Move the watermark up to ``through`` (never down). Runs inside the caller's write
        transaction, with the run record it belongs to."""
        self.db.execute(
            "UPDATE sessions SET extracted_through = max(extracted_through, ?) "
            "WHERE id = ? AND user = ?", [through, session_id, user],
        )

    def last_reply_before(self, user: str, session_id: int, before: int) -> str | None:
        """The text of the assistant's last message before message ``before``, if any."""
        row = self.db.execute(
            "SELECT content FROM messages WHERE session_id = ? AND user = ? AND id < ? "
            "AND role = 'assistant' ORDER BY id DESC LIMIT 1", [session_id, user, before],
        ).fetchone()
        return row[0] if row else None

    def learning_backlog(self, user: str, *, since: str | None = None,
                         source: str | None = None, also: Collection[int] = ()) -> list[Session]:
        """``user``'s sessions with user messages past their watermark, or among ``also``
        (sessions with a run waiting for its retry), oldest first (``since``: active at or
        after it; ``source``: from that source only)."""
        where, params = _session_filter(user, source, since)
        retry = sorted({int(i) for i in also if _storable(i)})
        marks = ",".join("?" * len(retry))
        rows = self.db.execute(
            f"""SELECT {_SESSION_COLUMNS}, {_PREVIEW} FROM sessions s
                WHERE {' AND '.join(where)} AND (
                  EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id
                          AND m.role = 'user' AND m.id > s.extracted_through)
                  OR s.id IN ({marks}))
                ORDER BY s.started_at, s.id""",
            [*params, *retry],
        ).fetchall()
        return [Session(*row) for row in rows]

    def live_behind_extraction(self, *, limit: int) -> list[tuple[str, int]]:
        """(user, session id) of every user's live sessions (not imported) with user messages
        past their watermark, most recently active first: the worker's catch-up after a crash
        is the one reader that is for everyone."""
        rows = self.db.execute(
            """
            SELECT s.user, s.id FROM sessions s
            WHERE s.source != 'import' AND s.external_id IS NULL AND EXISTS (
              SELECT 1 FROM messages m WHERE m.session_id = s.id AND m.role = 'user'
                AND m.id > s.extracted_through)
            ORDER BY s.last_active_at DESC LIMIT ?
            """,
            [limit],
        ).fetchall()
        return [(str(user), int(session_id)) for user, session_id in rows]


def _session_filter(user: str, source: str | None,
                    since: str | None) -> tuple[list[str], list[Any]]:
    """The WHERE terms and parameters of a user's sessions, of one source and active since a
    time when given (sessions aliased ``s``)."""
    where = ["s.user = ?"]
    params: list[Any] = [user]
    if source:
        where.append("s.source = ?")
        params.append(source)
    if since:
        where.append("s.last_active_at >= ?")
        params.append(since)
    return where, params


def _scrub(text: str | None) -> str | None:
    return None if text is None else scrub(text)
