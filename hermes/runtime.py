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
from hermes.errors import ConfigError
from hermes.store.db import connect


@dataclass
class Runtime:
    settings: Settings
    clock: Clock = field(default_factory=SystemClock)

    @cached_property
    def db(self) -> sqlite_utils.Database:
        home = self.settings.home_path
        try:
            home.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            blocker = next((p for p in (home, *home.parents) if p.exists() and not p.is_dir()),
                           None)
            why = f"{blocker} is a file, not a directory" if blocker else exc.strerror
            raise ConfigError(f"The Hermes home {home} cannot be used: {why}. Point HERMES_HOME, "
                              "--home or the config's `home` at a directory.") from None
        return connect(self.settings.db_path)

    def user(self, given: str | None) -> str:
        """The user a command acts for: ``--user`` when given, else the configured default."""
        return given or self.settings.users.default

    def close(self) -> None:
        if "db" in self.__dict__:
            self.db.conn.close()
            del self.__dict__["db"]
