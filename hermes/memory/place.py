"""Who a memory operation is for, and where what it returns will be read.

Every stored item is learned in a *place*, and every reply is read in one. A place is private
(only its user reads it: a Discord DM, the terminal, the web panel, MCP, the CLI, an import) or
shared (a Discord guild channel: every member of the channel reads the reply; a thread counts as
its parent channel). A :class:`Scope` (the user and the place a reply goes to) travels with every
memory operation, so that a read for a shared place can only return what its readers may see.

This module holds the records only; the rule that filters by them lives with the stores
(:mod:`hermes.memory.audience`).
"""

from __future__ import annotations

from dataclasses import dataclass

PRIVATE_KEY = "private"
# A Discord channel whose server is not known (yet): rows placed by migration m033 from a
# channel key that never recorded the server, and a cron delivery to a channel Hermes cannot
# look up. The Discord front-end renames them to the channel's full key when it next sees the
# channel (hermes.memory.audience.adopt_place).
UNKNOWN_GUILD = "?"


@dataclass(frozen=True)
class Place:
    """Where something was said or learned, or where a reply will be read.

    ``key`` is ``"private"`` for every private place, or a shared place's own key
    (``discord:<guild id>:<channel id>``; a thread's key is its parent channel's)."""

    key: str = PRIVATE_KEY

    @property
    def shared(self) -> bool:
        return self.key != PRIVATE_KEY

    @classmethod
    def discord_channel(cls, guild_id: int, channel_id: int) -> Place:
        """A Discord guild channel (for a thread, pass its parent channel's id)."""
        return cls(f"discord:{guild_id}:{channel_id}")

    @classmethod
    def discord_unknown(cls, channel_id: int | str) -> Place:
        """A Discord channel whose server is not known: a shared place all the same."""
        return cls(f"discord:{UNKNOWN_GUILD}:{channel_id}")

    @classmethod
    def discord_unknown_thread(cls, thread_id: int | str) -> Place:
        """A Discord thread whose parent channel is not known (migration m033's threads)."""
        return cls(f"discord:{UNKNOWN_GUILD}:thread:{thread_id}")

    def describe(self) -> str:
        """How the place is shown to a person: ``private`` or ``discord #<channel id>``."""
        if not self.shared:
            return "private"
        parts = self.key.split(":")
        if parts[0] == "discord" and len(parts) >= 3:
            if parts[2] == "thread":
                return f"discord thread {parts[-1]}"
            return f"discord channel {parts[2]}"
        return self.key


PRIVATE = Place()


@dataclass(frozen=True)
class Scope:
    """The user a memory operation acts for, and the place its result will be read in."""

    user: str
    place: Place = PRIVATE
