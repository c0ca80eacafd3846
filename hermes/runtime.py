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
from hermes.memory import Memory


@dataclass
class Runtime:
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)

    @cached_property
    def memory(self) -> Memory:
        """The home's memory (its database opened on first use): built once, passed to
        whoever reads or writes it."""
        return Memory(self.settings, self.clock)

    @property
    def db(self) -> sqlite_utils.Database:
        """The home's database connection (the memory's)."""
        return self.memory.db

    def preload_embeddings(self) -> None:
        self.memory.preload_embeddings()

    def user(self, given: str | None) -> str:
        """The user a command acts for: ``--user`` when given, else the configured default."""
        return given or self.settings.users.default

    def close(self) -> None:
        memory = self.__dict__.pop("memory", None)
        if memory is not None:
            memory.close()
