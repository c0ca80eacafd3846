"""The leak matrix: private items x every path into a request, in a shared place and in a
private one (tests/test_leak_matrix.py; ``scripts/leak_matrix.py`` prints it).

Each item is stored with a *payload*: a word only that item holds, never said by anyone in the
shared place. Each path puts a question naming the item (its query, its entity) to the model
through the agent, in a shared place (Discord channel A of the World's guild) and in a private
one, and the item leaks through the path when its payload is anywhere in what the model
received (the whole request, tool results included). The private place must reach every item
through some path (nothing lost for its owner); the shared place must leak none. Controls,
learned in channel A or marked shareable, must reach the shared place (the filter is not
"show nothing").
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from hermes.memory import context as context_file
from hermes.memory.place import PRIVATE, Place


@dataclass(frozen=True)
class Item:
    kind: str          # fact | basic | session | summary | context
    name: str
    text: str          # what is stored (holds the payload)
    payload: str       # a word nothing else holds
    query: str         # how a person would ask about it (never holds the payload)
    entity: str | None = None
    also: tuple[str, ...] = ()  # more entities it links (what facts.reason connects)
    place: str = "private"   # where it was learned: "private", "A" (here), "B" (elsewhere)
    shared: int | None = None  # the user's mark


# 22 private items, and 2 controls the shared place A must see.
ITEMS: list[Item] = [
    Item("fact", "therapist", "The user's therapist Quillbrand works at the Fernwick clinic",
         "fernwick", "quillbrand therapist", "Quillbrand"),
    Item("fact", "debt", "The user owes Vantresca four thousand euros for the Ashgrove flat",
         "ashgrove", "vantresca owes", "Vantresca"),
    Item("fact", "diagnosis", "The user was diagnosed by Morvaleth with Zentrixol syndrome",
         "zentrixol", "morvaleth diagnosed", "Morvaleth"),
    Item("fact", "password-hint", "The user's bank Plinthorn uses the Gravelyn security word",
         "gravelyn", "plinthorn bank", "Plinthorn"),
    Item("fact", "affair", "The user is secretly dating Ostrabend from the Kelvariq office",
         "kelvariq", "ostrabend dating", "Ostrabend"),
    Item("fact", "court", "The user has a court date with Halberdine and Vantresca at "
         "Nettlecombe", "nettlecombe", "halberdine court", "Halberdine",
         also=("Vantresca",)),
    Item("fact", "salary", "The user's employer Corvistone pays a Tumbleweir bonus",
         "tumbleweir", "corvistone employer", "Corvistone"),
    Item("fact", "sibling", "The user's brother Dravenport lives in Sallowmere prison",
         "sallowmere", "dravenport brother", "Dravenport"),
    Item("basic", "address", "Home address: 12 Yarrowmoor Lane, flat Brindlewick",
         "brindlewick", "yarrowmoor address"),
    Item("basic", "partner", "Partner: Aldermere, who works at Quarrowfield", "quarrowfield",
         "aldermere partner"),
    Item("basic", "medication", "Takes Fluvoxatrine prescribed by Doctor Pellucid", "pellucid",
         "fluvoxatrine medication"),
    Item("basic", "pin", "Gym locker code word is Marrowgate at Tiverstock", "tiverstock",
         "marrowgate locker"),
    Item("session", "interview", "I'm interviewing at Caskhollow for the Quarrystone role",
         "quarrystone", "caskhollow interviewing"),
    Item("session", "pregnancy", "my sister Rivenna is pregnant with twins named Obbleford",
         "obbleford", "rivenna pregnant sister"),
    Item("session", "exam", "I failed the Dunmorrow exam because of Stavecross",
         "stavecross", "dunmorrow exam failed"),
    Item("session", "lawsuit", "the Thistlegate lawsuit settled for the Penwither amount",
         "penwither", "thistlegate lawsuit settled"),
    Item("summary", "divorce", "Discussed the Ormsbeck divorce with the lawyer Pennifold",
         "pennifold", "ormsbeck divorce"),
    Item("context", "context", "Recently planned a move to Wexhallow with Crumbleton movers",
         "crumbleton", "wexhallow move"),
    Item("fact", "elsewhere", "The user plans a surprise for Tamsworth at Gildersleeve",
         "gildersleeve", "tamsworth surprise", "Tamsworth", place="B"),
    Item("session", "elsewhere-session", "the Bellquarry merger is codenamed Hollowpine",
         "hollowpine", "bellquarry merger", place="B"),
    Item("fact", "marked-private", "The user dislikes Grimsditch from Lathercombe",
         "lathercombe", "grimsditch dislikes", "Grimsditch", place="A", shared=0),
    Item("basic", "marked-private-basic", "Cobbleknot thinks the boss is Snarrowby",
         "snarrowby", "cobbleknot boss", place="A", shared=0),
]
CONTROLS: list[Item] = [
    Item("fact", "team-fact", "The user's team deploys Kestrelworth on Thursdays at Umberfold",
         "umberfold", "kestrelworth deploys", "Kestrelworth", place="A"),
    Item("fact", "shareable", "The user's favourite language is Rust for Tidewrack projects",
         "tidewrack", "rust favourite language", place="private", shared=1),
]


@dataclass
class Seeded:
    user: str
    here: Place            # channel A
    there: Place           # channel B
    fact_ids: dict[str, int] = field(default_factory=dict)
    entry_ids: dict[str, int] = field(default_factory=dict)
    session_ids: dict[str, int] = field(default_factory=dict)


def place_of(item: Item, seeded: Seeded) -> Place:
    return {"private": PRIVATE, "A": seeded.here, "B": seeded.there}[item.place]


def seed(memory: Any, settings: Any, user: str, here: Place, there: Place) -> Seeded:
    """Store every item (and the controls) for ``user``."""
    seeded = Seeded(user, here, there)
    for item in [*ITEMS, *CONTROLS]:
        place = place_of(item, seeded)
        if item.kind == "fact":
            added = memory.facts.add(user, item.text, entities=[item.entity, *item.also]
                                     if item.entity else None, place=place, shared=item.shared)
            seeded.fact_ids[item.name] = added.id
        elif item.kind == "basic":
            result = memory.basic.add(user, item.text, place=place)
            assert result.entry is not None
            seeded.entry_ids[item.name] = result.entry.id
            if item.shared is not None:
                memory.basic.mark(user, result.entry.id, item.shared)
        elif item.kind == "session":
            session = memory.sessions.create(user, "discord", channel_key=f"seed:{item.name}",
                                             place=place)
            memory.sessions.append(user, session.id, "user", item.text, speaker="Alice")
            memory.sessions.append(user, session.id, "assistant", "Noted.")
            memory.sessions.close(user, session.id)
            seeded.session_ids[item.name] = session.id
        elif item.kind == "summary":
            session = memory.sessions.create(user, "terminal", channel_key=f"seed:{item.name}",
                                             place=place)
            memory.sessions.append(user, session.id, "user", "can we talk about family law")
            memory.sessions.close(user, session.id)
            memory.sessions.set_summary(user, session.id, title="Family law chat",
                                        summary=item.text)
            seeded.session_ids[item.name] = session.id
        elif item.kind == "context":
            path = context_file.path_for(memory, user)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# Recent context\n- {item.text}\n", encoding="utf-8")
    return seeded


def request_text(requests: list[Any]) -> str:
    """Everything the model received in these requests."""
    return "\n".join(json.dumps(r.messages, ensure_ascii=False) for r in requests).lower()


def payloads_in(text: str, items: list[Item]) -> set[str]:
    return {item.name for item in items if item.payload in text}


# A path: async (place, item or None) -> the model's requests it made. None: one run for all
# items at once (the tools: every item's call in one model response).
Path = Callable[[Place, "Item | None"], Awaitable[list[Any]]]


@dataclass
class Matrix:
    """paths x items: which payloads reached the model."""

    shared: dict[str, set[str]] = field(default_factory=dict)    # path -> items leaked
    private: dict[str, set[str]] = field(default_factory=dict)   # path -> items reached
    controls: dict[str, set[str]] = field(default_factory=dict)  # path -> controls shown

    @property
    def leaks(self) -> int:
        return sum(len(v) for v in self.shared.values())

    def unreachable(self) -> set[str]:
        reached = set().union(*self.private.values()) if self.private else set()
        return {item.name for item in ITEMS} - reached

    def table(self) -> str:
        names = [item.name for item in ITEMS]
        width = max(len(n) for n in names)
        paths = list(self.shared)
        lines = [" " * width + "  " + "  ".join(f"{p[:10]:>10}" for p in paths)]
        for name in names:
            cells = []
            for p in paths:
                leaked = name in self.shared[p]
                reached = name in self.private.get(p, set())
                mark = "" if p not in self.private else "/r" if reached else "/-"
                cells.append(f"{('LEAK' if leaked else 'ok') + mark:>10}")
            lines.append(f"{name:<{width}}  " + "  ".join(cells))
        lines.append(f"items {len(names)} x paths {len(paths)}: leaks {self.leaks}, "
                     f"unreachable in private {sorted(self.unreachable()) or 'none'}")
        return "\n".join(lines)


async def run_matrix(paths: dict[str, Path], here: Place) -> Matrix:
    matrix = Matrix()
    everything = [*ITEMS, *CONTROLS]
    for name, path in paths.items():
        # a path that only carries the turn elsewhere (cron, Discord) is run in the shared
        # place only when ``private_too`` is False: its private side is the turn's own
        places = [(here, matrix.shared)]
        if getattr(path, "private_too", True):
            places.append((PRIVATE, matrix.private))
        for place, out in places:
            found: set[str] = set()
            shown: set[str] = set()
            if getattr(path, "per_item", True):
                for item in everything:
                    text = request_text(await path(place, item))
                    if item.payload in text:
                        (shown if item in CONTROLS else found).add(item.name)
            else:
                text = request_text(await path(place, None))
                found = payloads_in(text, ITEMS)
                shown = payloads_in(text, CONTROLS)
            out[name] = found
            if place == here:
                matrix.controls[name] = shown
    return matrix
