"""The composition root shared by the CLI, the daemon and the benchmarks.

Holds the settings, the clock and one migrated database connection. It wires things together
and holds no memory logic of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import sqlite_utils

from hermes.clock import Clock, SystemClock
from hermes.config import Settings
from hermes.store.db import connect


@dataclass
class Runtime:
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)

    @cached_property
    def db(self) -> sqlite_utils.Database:
        self.settings.home_path.mkdir(parents=True, exist_ok=True)
        return connect(self.settings.db_path)

    def user(self, given: str | None) -> str:
        """The user a command acts for: ``--user`` when given, else the configured default."""
        return given or self.settings.users.default

    def close(self) -> None:
        if "db" in self.__dict__:
            self.db.conn.close()
            del self.__dict__["db"]
