"""The one set of memory operations every surface calls: the model's chat tools, the MCP
server, the front-ends' commands (Discord, the terminal), the web panel and the CLI.

Each operation takes a :class:`~hermes.memory.place.Scope` (the user it acts for, and the place
its result will be read in) and returns records (:class:`Fact`, :class:`Session`, ...); their one
JSON shape is :mod:`hermes.memory.operations.shapes`. A rule about what may be written, read or
shown (where a memory may go, how "remember X" is worded, what a forgotten fact leaves behind)
is written here, or in the store under it, once, and every surface has it.

The operations hold no state of their own: they are the home's :class:`~hermes.memory.Memory`
seen from outside.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from hermes.errors import QueryError
from hermes.memory.facts.statement import normalise_statement
from hermes.memory.place import Scope

if TYPE_CHECKING:
    from hermes.memory import Memory
    from hermes.memory.basic import Entry, Op, WriteResult
    from hermes.memory.facts.entities import Entity
    from hermes.memory.facts.questions import Question
    from hermes.memory.facts.ratings import Reach
    from hermes.memory.facts.store import AddResult, Fact, RateResult, ReasonResult
    from hermes.memory.facts.tombstones import Tombstone
    from hermes.memory.sessions.records import Message, SearchHit, Session

__all__ = ["MemoryOperations", "Scope"]


class MemoryOperations:
    """The memory operations of one home.

    ``embed_writes``: a fact written here gets its vector at once (with recall by meaning on).
    For the surfaces that run no vector job of their own (the CLI, the MCP server); the daemon's
    job embeds what its chat turns write."""

    def __init__(self, memory: Memory, *, embed_writes: bool = False) -> None:
        self.memory = memory
        self.embed_writes = embed_writes

    # -- basic memory -----------------------------------------------------------------------

    @property
    def basic_limit(self) -> int:
        return self.memory.basic.limit

    def basic_entries(self, scope: Scope) -> list[Entry]:
        return self.memory.basic.entries(scope.user, place=scope.place)

    def basic_usage(self, scope: Scope) -> int:
        return self.memory.basic.usage(scope.user)

    def basic_render(self, scope: Scope) -> str:
        """The block exactly as the model sees it (where the scope's reply is read)."""
        return self.memory.basic.render(scope.user, place=scope.place)

    def basic_add(self, scope: Scope, text: str) -> WriteResult:
        return self.memory.basic.add(scope.user, text, place=scope.place)

    def basic_replace(self, scope: Scope, target: int | str, text: str) -> WriteResult:
        return self.memory.basic.replace(scope.user, target, text, place=scope.place)

    def basic_remove(self, scope: Scope, target: int | str) -> WriteResult:
        return self.memory.basic.remove(scope.user, target, place=scope.place)

    def basic_batch(self, scope: Scope, ops: Sequence[Op]) -> WriteResult:
        """Several ops, all or none; the cap is checked on the result."""
        return self.memory.basic.batch(scope.user, ops, place=scope.place)

    def basic_mark(self, scope: Scope, target: int | str, shared: int | None) -> Entry:
        """Where an entry may be shown: shareable (1), private (0), the default (None)."""
        return self.memory.basic.mark(scope.user, target, shared)

    def basic_edit(self, scope: Scope, before: Sequence[Entry],
                   texts: Sequence[str]) -> WriteResult:
        """The block as edited (``before``: what the editor showed; ``texts``: what came
        back), applied at once."""
        return self.memory.basic.apply_edit(scope.user, before, texts)

    # -- facts: writing ---------------------------------------------------------------------

    def add(self, scope: Scope, content: str, *, entities: list[str] | None = None,
            category: str = "general", tags: Iterable[str] = (), kind: str = "semantic",
            importance: float | None = None,
            source_session_id: int | None = None, source: str | None = None,
            shared: int | None = None) -> AddResult:
        """Store a fact, or merge it into the duplicate already there. It is learned where its
        source session is held (else where the scope's reply is read); ``source``: where it
        came from (hermes.memory.facts.provenance; default: its session's, else said).

        What a person typed (no conversation behind it: /remember, the web panel, MCP, the CLI)
        is worded by the one "remember X" rule first
        (:func:`hermes.memory.facts.statement.normalise_statement`: first person as "the user"
        where certain, else their words kept whole; a secret refused). The model's own writes
        in a chat (``source_session_id``) are statements already."""
        place = None if source_session_id is not None else scope.place
        tags = list(tags)
        typed = source_session_id is None
        if typed:
            statement = normalise_statement(content)
            content, tags = statement.content, [*tags, *statement.tags]
        # What a person states outright replaces the fact it contradicts ("my doctor is Dr.
        # Jones" after "... Dr. Smith"): superseded, in the history, not both active.
        added = self.memory.facts.add(scope.user, content, entities=entities, category=category,
                                      tags=tags, kind=kind, importance=importance,
                                      source_session_id=source_session_id, place=place,
                                      source=source, shared=shared, supersede=typed)
        self._embed(scope, added.id)
        return added

    def update(self, scope: Scope, fact_id: int, content: str, *, note: str | None = None,
               entities: list[str] | None = None,
               source_session_id: int | None = None) -> Fact:
        """A new version of a fact; the old one is kept as superseded."""
        self._named(scope, fact_id)
        new = self.memory.facts.update(scope.user, fact_id, content, note=note,
                                       entities=entities, source_session_id=source_session_id)
        self._embed(scope, new.id)
        return new

    def forget(self, scope: Scope, fact_id: int, reason: str | None = None) -> Fact:
        self._named(scope, fact_id)
        return self.memory.facts.forget(scope.user, fact_id, reason)

    def restore(self, scope: Scope, fact_id: int) -> Fact:
        self._named(scope, fact_id)
        return self.memory.facts.restore(scope.user, fact_id)

    def purge(self, scope: Scope, fact_id: int) -> None:
        self._named(scope, fact_id)
        self.memory.facts.purge(scope.user, fact_id)

    # -- what was forgotten, and what waits for the user's word (issue 31) -------------------

    def tombstones(self, scope: Scope, *, limit: int = 100) -> list[Tombstone]:
        """What was forgotten, corrected or purged (never learned again from older messages)."""
        return self.memory.facts.tombstones.of_user(scope.user, limit=limit)

    def fact_tombstones(self, scope: Scope, fact_id: int) -> list[Tombstone]:
        return self.memory.facts.tombstones.of_fact(scope.user, fact_id)

    def remove_tombstone(self, scope: Scope, tombstone_id: int) -> Tombstone:
        """Older conversations may teach that statement again."""
        from hermes.store.db import write_transaction

        with write_transaction(self.memory.facts.db):
            return self.memory.facts.tombstones.remove(scope.user, tombstone_id)

    def pending_questions(self, scope: Scope) -> list[Question]:
        """Inferences kept instead of overriding what the user said."""
        return self.memory.facts.pending_questions(scope.user, place=scope.place)

    def settle_question(self, scope: Scope, question_id: int, *, accept: bool) -> Fact:
        return self.memory.facts.settle_question(scope.user, question_id, accept,
                                                 place=scope.place)

    def rate(self, scope: Scope, fact_id: int, helpful: bool, *,
             confirms: bool = False) -> RateResult:
        """``confirms``: the person rated this one fact themselves (a command, the panel), so
        a helpful rating confirms a fact from elsewhere; a model's rating never does."""
        self._named(scope, fact_id)
        return self.memory.facts.rate(scope.user, fact_id, helpful, confirms=confirms)

    def mark(self, scope: Scope, fact_id: int, shared: int | None) -> Fact:
        """Where a fact may be repeated: shareable (1), private (0), the default (None)."""
        self._named(scope, fact_id)
        return self.memory.facts.mark(scope.user, fact_id, shared)

    def _named(self, scope: Scope, fact_id: int) -> None:
        """A fact named by id where the scope's reply is read must be one its readers may see
        (NotFound otherwise, as for another user's): a write never reaches past the place."""
        if scope.place.shared:
            self.memory.facts.get(scope.user, fact_id, place=scope.place)

    def alias(self, scope: Scope, entity: str, other_name: str) -> Entity:
        return self.memory.facts.entity_store.add_alias(scope.user, entity, other_name)

    def _embed(self, scope: Scope, fact_id: int) -> None:
        """The fact just written gets its vector now (a failure is one log line; the fact is
        saved)."""
        vectors = self.memory.facts.vectors
        if self.embed_writes and vectors is not None:
            vectors.catch_up(scope.user, [fact_id])

    # -- a reply's rating (a Discord reaction, /rate in the terminal, the web panel's thumbs) -

    def shown_facts(self, scope: Scope, message_id: int) -> list[int]:
        """The facts the model was shown for the reply ``message_id`` (the user's only)."""
        return self.memory.ratings.shown_fact_ids(scope.user, message_id)

    def rate_reply(self, scope: Scope, message_id: int, helpful: bool) -> list[RateResult]:
        """Rate the facts the reply used (``reply_reach``). Empty when it used none, or it is
        not clear which."""
        return self.memory.ratings.rate_reply(scope.user, message_id, helpful)

    def reply_reach(self, scope: Scope, message_id: int) -> Reach:
        """The facts a rating of the reply reaches and why (what a front-end says back)."""
        return self.memory.ratings.reach(scope.user, message_id)

    def set_reply_rating(self, scope: Scope, message_id: int, rater: str,
                         helpful: bool | None) -> list[RateResult]:
        """One person's rating of a reply (``rater``, e.g. ``discord:<id>``), idempotent; None
        withdraws it. The trust changes made now."""
        return self.memory.ratings.set_rating(scope.user, message_id, rater, helpful)

    def reply_rating(self, scope: Scope, message_id: int, rater: str) -> bool | None:
        """The rating in effect for a reply by ``rater``: True (👍), False (👎) or None."""
        return self.memory.ratings.rating(scope.user, message_id, rater)

    def link_ref(self, scope: Scope, ref: str, message_id: int) -> None:
        """Remember that a front-end's ``ref`` (a Discord message) shows ``message_id``."""
        self.memory.refs.link(scope.user, ref, message_id)

    def message_for_ref(self, scope: Scope, ref: str) -> int | None:
        """The message behind a front-end's ``ref``, or None (also for another user's)."""
        return self.memory.refs.message_for(scope.user, ref)

    # -- facts: reading ---------------------------------------------------------------------

    def search(self, scope: Scope, query: str, *, limit: int = 10,
               category: str | None = None, min_trust: float | None = None,
               explain: bool = False) -> list[Fact]:
        """The user's facts for ``query``; a query with no words (an emoji) is refused in one
        line, as session search refuses it, not answered "nothing matches"."""
        from hermes.store.fts import brief, build_match

        if build_match(query).empty:
            raise QueryError(f"Nothing to search for in {brief(query)!r}: it has no words.")
        return self.memory.facts.search(scope.user, query, limit=limit, category=category,
                                        min_trust=min_trust, explain=explain,
                                        place=scope.place)

    def probe(self, scope: Scope, entity: str, *, limit: int | None = None) -> list[Fact]:
        return self.memory.facts.probe(scope.user, entity, limit=limit, place=scope.place)

    def reason(self, scope: Scope, entities: list[str], *, limit: int = 20) -> ReasonResult:
        return self.memory.facts.reason(scope.user, entities, limit=limit, place=scope.place)

    @property
    def categories(self) -> list[str]:
        """The fact categories this home knows (facts.categories)."""
        return list(self.memory.settings.facts.categories)

    def get(self, scope: Scope, fact_id: int) -> Fact:
        return self.memory.facts.get(scope.user, fact_id, place=scope.place)

    def list_facts(self, scope: Scope, *, category: str | None = None,
                   include_inactive: bool = False, limit: int = 50) -> list[Fact]:
        return self.memory.facts.list_facts(scope.user, category=category,
                                            include_inactive=include_inactive, limit=limit,
                                            place=scope.place)

    def history(self, scope: Scope, fact_id: int) -> list[dict[str, Any]]:
        self._named(scope, fact_id)
        return self.memory.facts.history(scope.user, fact_id)

    def entities(self, scope: Scope) -> list[Entity]:
        return self.memory.facts.entities(scope.user)

    # -- sessions and the context file ------------------------------------------------------

    def sessions_list(self, scope: Scope, *, source: str | None = None,
                      since: str | None = None, limit: int = 20) -> list[Session]:
        return self.memory.sessions.list_sessions(scope.user, source=source, since=since,
                                                  limit=limit, place=scope.place)

    def sessions_search(self, scope: Scope, query: str, *, limit: int = 5, context: int = 2,
                        source: str | None = None) -> list[SearchHit]:
        return self.memory.sessions.search(scope.user, query, limit=limit, context=context,
                                           source=source, place=scope.place)

    def session(self, scope: Scope, session_id: int) -> Session:
        return self.memory.sessions.get(scope.user, session_id, place=scope.place)

    def session_messages(self, scope: Scope, session_id: int, *, around: int | None = None,
                         context: int = 5, after: int = 0) -> list[Message]:
        """A session's messages (those after the message id ``after``), or the window of
        ``context`` either side of ``around``."""
        if around is not None:
            self.memory.sessions.get(scope.user, session_id, place=scope.place)
            return self.memory.sessions.window(scope.user, session_id, around, context)
        return self.memory.sessions.messages(scope.user, session_id, after_id=after,
                                             place=scope.place)

    def context(self, scope: Scope) -> str | None:
        """The context file, or None before its first refresh (and in a shared place: it is
        written from every conversation of the user, hermes.memory.audience)."""
        from hermes.memory import context

        if scope.place.shared:
            return None
        return context.read(self.memory, scope.user)
