"""The composition root shared by the CLI, the daemon and the benchmarks.

Holds the settings, the clock, one migrated database connection and the one :class:`Memory` of
the home on it (one instance of each store). It wires things together and holds no memory logic
of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import sqlite_utils

from hermes.clock import Clock, SystemClock
from hermes.config import Settings
from hermes.errors import ConfigError
from hermes.home import make_home
from hermes.memory import Memory
from hermes.store.db import connect


@dataclass
class Runtime:
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)

    @cached_property
    def db(self) -> sqlite_utils.Database:
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

    @cached_property
    def memory(self) -> Memory:
        """The home's memory on :attr:`db`: built once, passed to whoever reads or writes it."""
        return Memory(self.db, self.settings, self.clock)

    def preload_embeddings(self) -> None:
        """With recall by meaning on, start loading the embedding model in the background (see
        :meth:`hermes.memory.embeddings.Embedders.preload`): for a server that starts once and
        then searches on requests (the MCP server, the web panel), so that its first search
        does not pay for the load."""
        sessions = self.settings.sessions
        if sessions.embeddings:
            self.memory.embedders.preload(sessions.embedding_model)

    def user(self, given: str | None) -> str:
        """The user a command acts for: ``--user`` when given, else the configured default."""
        return given or self.settings.users.default

    def close(self) -> None:
        self.__dict__.pop("memory", None)
        if "db" in self.__dict__:
            self.db.conn.close()
            del self.__dict__["db"]
