"""Where a memory may go: the one rule that decides what a reply read in a place may hold.

Every fact, basic-memory entry and session carries the place it was learned in
(:class:`~hermes.memory.place.Place`, migration m033), and facts and basic-memory entries a mark
the user may set (``shared``: NULL follows the home's default, 1 shareable, 0 private). A reply
read in a **private** place (a DM, the terminal, the web panel, MCP, the CLI) may hold all of the
user's memory. A reply read in a **shared** place (a Discord channel; a thread counts as its
channel) may hold, under ``privacy.shared_places``:

* ``place_only`` (the default): what was learned in that place, and what the user marked
  shareable;
* ``shareable``: also what was learned in any shared place (already said in public somewhere);
* ``everything``: everything but what the user marked private (Hermes before places).

A sessions' transcript, title and summary follow its session's place (sessions carry no mark).
What the user marked private never reaches a shared place, not even the one it was learned in.

The stores ask this module for the SQL of the rule (:meth:`Audience.items`,
:meth:`Audience.sessions`): in a private place there is none, so a private read runs exactly as
it did before places. No read for a reply builds this condition itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hermes.memory.place import PRIVATE, PRIVATE_KEY, Place

if TYPE_CHECKING:  # who_sees is read by a command the daemon answered (no store there)
    import sqlite_utils

Policy = Literal["place_only", "shareable", "everything"]
POLICIES: tuple[Policy, ...] = ("place_only", "shareable", "everything")
# facts.shared / basic_memory.shared
SHAREABLE = 1
KEEP_PRIVATE = 0
# The user's marks by name (``hermes facts mark``, ``/facts mark``, the web panel)
MARKS: dict[str, int | None] = {"shareable": SHAREABLE, "private": KEEP_PRIVATE,
                                "default": None}


def mark_value(name: str) -> int | None:
    """The stored value of a mark named by a person; one clear error for anything else."""
    from hermes.errors import QueryError

    key = name.strip().lower()
    if key not in MARKS:
        raise QueryError(f"Unknown mark {name!r}: use shareable, private or default.")
    return MARKS[key]


def mark_name(shared: int | None) -> str:
    return next(k for k, v in MARKS.items() if v == shared)


def who_sees(place_key: str, shared: int | None, policy: Policy = "place_only") -> str:
    """Where an item may be repeated, in a few words, for a person reading the list."""
    place = Place(place_key)
    if shared == KEEP_PRIVATE:
        return "private places only (marked private)"
    if shared == SHAREABLE:
        return "any channel (marked shareable)"
    if policy == "everything":
        return "any channel (privacy.shared_places: everything)"
    if not place.shared:
        return "private places only"
    if policy == "shareable":
        return "any channel (learned in a channel)"
    return f"private places and {place.describe()}"
NO_CONDITION: tuple[str, list[Any]] = ("", [])


@dataclass(frozen=True)
class Audience:
    """The rule of one home (``privacy.shared_places``), asked with the place a reply is read in.
    """

    policy: Policy = "place_only"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"privacy.shared_places must be one of {', '.join(POLICIES)} "
                             f"(got {self.policy!r})")

    def items(self, place: Place, alias: str) -> tuple[str, list[Any]]:
        """The SQL condition (over ``alias``.place and ``alias``.shared) of the facts or
        basic-memory entries a reply read in ``place`` may hold, with its parameters; no
        condition in a private place."""
        if not place.shared:
            return NO_CONDITION
        a = alias
        if self.policy == "place_only":
            return (f"({a}.shared = {SHAREABLE} OR ({a}.shared IS NULL AND {a}.place = ?))",
                    [place.key])
        if self.policy == "shareable":
            return (f"({a}.shared = {SHAREABLE} OR ({a}.shared IS NULL AND "
                    f"{a}.place != '{PRIVATE_KEY}'))", [])
        return f"({a}.shared IS NOT {KEEP_PRIVATE})", []

    def sessions(self, place: Place, alias: str) -> tuple[str, list[Any]]:
        """The SQL condition (over ``alias``.place) of the sessions whose messages, title and
        summary a reply read in ``place`` may hold; no condition in a private place (and under
        ``everything``)."""
        if not place.shared or self.policy == "everything":
            return NO_CONDITION
        if self.policy == "place_only":
            return f"{alias}.place = ?", [place.key]
        return f"{alias}.place != '{PRIVATE_KEY}'", []

    def sees_item(self, place: Place, item_place: str, shared: int | None) -> bool:
        """:meth:`items` for one row already read (the same rule, in Python)."""
        if not place.shared:
            return True
        if shared is not None:
            return shared == SHAREABLE or (self.policy == "everything"
                                           and shared != KEEP_PRIVATE)
        if self.policy == "place_only":
            return item_place == place.key
        if self.policy == "shareable":
            return item_place != PRIVATE_KEY
        return True

    def covers(self, place_key: str, shared: int | None, new_place: Place) -> bool:
        """Whether every shared place that may see an item (learned in ``place_key``, marked
        ``shared``) would also see a new item learned in ``new_place`` (unmarked): only then
        may the new item's words go into the old one (a merge of facts) without reaching
        readers who never heard them."""
        if shared == KEEP_PRIVATE or self.policy == "everything":
            return True
        if shared != SHAREABLE and not Place(place_key).shared:
            return True                    # seen in no shared place
        if self.policy == "shareable":
            return new_place.shared        # every shared place sees either
        return shared != SHAREABLE and new_place.key == place_key

    def sees_session(self, place: Place, session_place: str) -> bool:
        """:meth:`sessions` for one session already read."""
        return self.sees_item(place, session_place, None)


def and_condition(condition: str, joiner: str = " AND ") -> str:
    """A condition's SQL to append to a WHERE clause (with ``joiner``), or ``""`` for none."""
    return f"{joiner}{condition}" if condition else ""


def visible_session_ids(db: sqlite_utils.Database, audience: Audience, user: str,
                        place: Place) -> set[int] | None:
    """The ids of ``user``'s sessions a reply read in ``place`` may draw on, or None for all
    of them (a private place)."""
    sql, params = audience.sessions(place, "s")
    if not sql:
        return None
    return {int(row[0]) for row in db.execute(
        f"SELECT s.id FROM sessions s WHERE s.user = ? AND {sql}", [user, *params])}


def place_of_channel(source: str, channel_key: str | None) -> Place:
    """The place of a session opened without one, from its channel key: what a front-end that
    names no place gets (the same reading as migration m033's). A Discord key that is not a
    DM's is a shared place whose server is unknown, never private."""
    if source != "discord" or not channel_key:
        return PRIVATE
    parts = channel_key.split(":")
    if parts[:2] == ["discord", "dm"]:
        return PRIVATE
    if parts[:2] == ["discord", "channel"] and len(parts) > 2 and parts[2].isdigit():
        return Place.discord_unknown(parts[2])
    if parts[:2] == ["discord", "thread"] and len(parts) > 2 and parts[2].isdigit():
        return Place.discord_unknown_thread(parts[2])
    # a Discord key of another shape: shared, in a place of its own that no reply is read in
    return Place(channel_key)


# The tables whose rows carry a place (a message's is its session's).
PLACED_TABLES = ("sessions", "facts", "basic_memory")


def adopt_place(db: sqlite_utils.Database, place: Place, *, channel_id: int,
                thread_id: int | None = None) -> int:
    """Give the rows placed in a Discord channel (or thread) whose server was not known (by
    migration m033, or a cron delivery that could not look the channel up) the channel's full
    ``place``. Every user's rows: the channel is the same for everyone. How many rows moved."""
    old = [Place.discord_unknown(channel_id).key]
    if thread_id is not None:
        old += [Place.discord_unknown(thread_id).key,
                Place.discord_unknown_thread(thread_id).key]
    marks = ",".join("?" * len(old))
    moved = 0
    for table in PLACED_TABLES:
        cursor = db.execute(f"UPDATE {table} SET place = ? WHERE place != '{PRIVATE_KEY}' "
                            f"AND place IN ({marks})", [place.key, *old])
        moved += cursor.rowcount or 0
    return moved


def places_of(db: sqlite_utils.Database, user: str, table: str,
              ids: Iterable[int]) -> dict[int, tuple[str, int | None]]:
    """(place, shared) of some of ``user``'s facts or basic-memory entries, by id."""
    wanted = [int(i) for i in ids]
    if table not in ("facts", "basic_memory") or not wanted:
        return {}
    marks = ",".join("?" * len(wanted))
    return {int(r[0]): (r[1], r[2]) for r in db.execute(
        f"SELECT id, place, shared FROM {table} WHERE user = ? AND id IN ({marks})",
        [user, *wanted])}
