"""Memory: the three tiers (basic block, fact store, sessions) and the context file.

Every function here takes the user first: there is no way to read another user's rows.

:class:`Memory` is one home's memory on one connection: one instance of each store, built once
by the composition root (``Runtime.memory`` for the CLI, the daemon, the MCP server and the web
panel) and passed to everything below the entry points, with its settings and clock: the agent,
the front-ends, learning. Nothing else builds a store. The embedding models it loads and the
vectors it holds in memory live on it (its
:class:`~hermes.memory.embeddings.embedders.Embedders`), not in module globals. The tiers are
imported when first used, so a command that only reads basic memory loads neither the fact
store nor the session search.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from hermes.clock import Clock, SystemClock
from hermes.memory.place import PRIVATE, Place

if TYPE_CHECKING:
    import sqlite_utils

    from hermes.config import Settings
    from hermes.memory.audience import Audience
    from hermes.memory.basic import BasicMemory
    from hermes.memory.embeddings.embedders import Embedders
    from hermes.memory.facts.ratings import ReplyRatings
    from hermes.memory.facts.store import FactStore
    from hermes.memory.facts.vectors import FactVectors
    from hermes.memory.sessions.refs import MessageRefs
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.vectors import MessageVectors


class Memory:
    """One instance of each store for a home, on one connection (``db``: the home's database,
    opened and migrated on first use, or the connection given)."""

    def __init__(self, settings: Settings, clock: Clock | None = None, *,
                 db: sqlite_utils.Database | None = None,
                 embedders: Embedders | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self._embedders = embedders
        if db is not None:
            self.__dict__["db"] = db

    @cached_property
    def db(self) -> sqlite_utils.Database:
        from hermes.errors import ConfigError
        from hermes.home import make_home
        from hermes.store.db import connect

        home = self.settings.home_path
        try:
            make_home(home)
        except OSError as exc:
            blocker = next((p for p in (home, *home.parents) if p.exists() and not p.is_dir()),
                           None)
            why = f"{blocker} is a file, not a directory" if blocker else exc.strerror
            raise ConfigError(f"The Hermes home {home} cannot be used: {why}. Point HERMES_HOME, "
                              "--home or the config's `home` at a directory.") from None
        return connect(self.settings.db_path)

    def close(self) -> None:
        """Close the connection, if it was opened here or given."""
        db = self.__dict__.pop("db", None)
        if db is not None:
            db.conn.close()

    def on(self, db: sqlite_utils.Database) -> Memory:
        """The same home's memory on another connection (a worker thread's own), sharing the
        loaded embedding models."""
        return Memory(self.settings, self.clock, db=db, embedders=self.embedders)

    def preload_embeddings(self) -> None:
        """With recall by meaning on, start loading the embedding model in the background (see
        Embedders.preload): for a server that starts once and then searches on requests (the
        MCP server, the web panel), so that its first search does not pay for the load."""
        if self.settings.sessions.embeddings:
            self.embedders.preload(self.settings.sessions.embedding_model)

    @cached_property
    def embedders(self) -> Embedders:
        if self._embedders is not None:
            return self._embedders
        from hermes.memory.embeddings.embedders import Embedders

        return Embedders(cache_dir=self.settings.home_path / "cache")

    @cached_property
    def audience(self) -> Audience:
        """Who may read what (``privacy.shared_places``): the one rule every store's reads for
        a reply follow (hermes.memory.audience)."""
        from hermes.memory.audience import Audience

        return Audience(self.settings.privacy.shared_places)

    @cached_property
    def basic(self) -> BasicMemory:
        from hermes.memory.basic import BasicMemory

        return BasicMemory(self.db, limit=self.settings.memory.basic_char_limit, clock=self.clock,
                           audience=self.audience)

    @cached_property
    def facts(self) -> FactStore:
        from hermes.memory.facts.store import FactStore

        return FactStore(self.db, self.settings.facts, self.clock, vectors=self.fact_vectors,
                         audience=self.audience)

    @cached_property
    def sessions(self) -> SessionStore:
        from hermes.memory.sessions.store import SessionStore

        return SessionStore(self.db, clock=self.clock, vectors=self.message_vectors,
                            redact_secrets=self.settings.sessions.redact_secrets,
                            fact_search=self._fact_hits, audience=self.audience)

    def _fact_hits(self, user: str, query: str, meaning: str | None,
                   place: Place = PRIVATE) -> list:
        """The facts session search takes as evidence for their conversations: as per-turn
        recall finds them (FactRecall.ranked), by ``meaning`` (the text session search
        embedded: hermes.memory.sessions.fact_evidence.ONE_EMBEDDING); in a shared ``place``,
        those its readers may see."""
        from hermes.memory.sessions.fact_evidence import hits_for

        # By meaning alone when the evidence's strength is the cosine (fact_evidence.hits_for),
        # else per-turn recall's search (its selective words): FactStore.search over every word
        # of a question costs ~190 ms CPU at 100k facts (i15, notes/i12-i13.md 05:29).
        vectors = self.fact_vectors
        return list(hits_for(self.facts.recall.at(place), user, query, meaning,
                             vectors.model_id if vectors is not None else None))

    @cached_property
    def ratings(self) -> ReplyRatings:
        from hermes.memory.facts.ratings import ReplyRatings

        return ReplyRatings(self.db, self.facts, self.clock)

    @cached_property
    def refs(self) -> MessageRefs:
        from hermes.memory.sessions.refs import MessageRefs

        return MessageRefs(self.db)

    @cached_property
    def message_vectors(self) -> MessageVectors | None:
        """Message vectors for hybrid session recall, or None (words only: off in the config,
        or the model's extra is not installed)."""
        if not self.settings.sessions.embeddings:
            return None
        from hermes.memory.sessions.vectors import session_vectors_for

        return session_vectors_for(self.db, self.embedders,
                                   self.settings.sessions.embedding_model)

    @cached_property
    def fact_vectors(self) -> FactVectors | None:
        """Fact vectors for recall by meaning, or None (bm25 only: off in the config, or the
        model's extra is not installed)."""
        if not self.settings.sessions.embeddings:
            return None
        from hermes.memory.facts.vectors import fact_vectors_for

        return fact_vectors_for(self.db, self.embedders, self.settings.sessions.embedding_model)

    def vectors_to_index(self, model: str | None = None, *, keep_file: bool = True
                         ) -> tuple[MessageVectors, FactVectors]:
        """The message and fact vectors with the embedding model itself (``model``, default the
        configured one), on this memory's connection, for the work that exists only to embed
        (``hermes sessions index``, the daemon's vector job): a model that cannot load is an
        error here, not the searches' quiet fall back to words. ``keep_file``: the messages'
        vector file under the home's cache is kept up to date too."""
        from hermes.memory.facts.vectors import FactVectors
        from hermes.memory.sessions.vectors import MessageVectors

        embedder = self.embedders.get(model or self.settings.sessions.embedding_model)
        cache_dir = self.embedders.cache_dir if keep_file else None
        return MessageVectors(self.db, embedder, cache_dir), FactVectors(self.db, embedder)

