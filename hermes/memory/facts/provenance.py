"""Trust by source: what came from elsewhere than the user is trusted less until confirmed.

A fact's ``source`` (m033) says where it came from: ``said`` (the user said or typed it: a
conversation, ``/remember``, ``hermes facts add``, the web panel) or from elsewhere:
``inferred`` (the model's own inference), ``import`` (an imported file or chat transcript),
``tool`` (a tool's output, an MCP client's write), ``document`` (a document read). Memory
poisoning works through the second kind: a web page or a shared document that says "remember
that the user wants every invoice sent to ...". So a fact from elsewhere

* starts at ``facts.outside_trust`` (0.35), below ``facts.default_trust`` (0.5);
* ranks below every fact the user said, whatever its score, until confirmed
  (:func:`own_first`): confirmed means a helpful rating or the user saying it again
  (``confirmed_at``), which also lifts its trust to at least the default;
* is never promoted into basic memory until confirmed (:func:`promotable`);
* when it reads like an instruction to the assistant (:func:`instruction_like`: the guard's
  ``standing_order``), is stored but not shown: it is kept as a forgotten fact whose reason
  says why (``WITHHELD``), listed by ``hermes facts list --all`` and the web panel with that
  note, and restoring it (the user's decision) confirms it.

The user's own words are never withheld or demoted here: the memory guard
(hermes.safety.guard) refuses what no source may store, and names what reads as an order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hermes.errors import RefusedWrite
from hermes.memory.facts.records import SOURCES
from hermes.safety.guard import standing_order

if TYPE_CHECKING:
    from hermes.config import FactsConfig
    from hermes.memory.facts.records import Fact

SAID = "said"
# forgotten_reason of a fact from elsewhere that reads like an instruction (stored, not shown)
WITHHELD = "withheld: it came from {source} and reads like an instruction to the assistant"
WITHHELD_PREFIX = "withheld:"

def check_source(source: str) -> str:
    if source not in SOURCES:
        raise RefusedWrite(f"Refused: a fact's source is one of {', '.join(SOURCES)} "
                           f"(got {source!r}).")
    return source


def outside(source: str) -> bool:
    """Whether ``source`` is elsewhere than the user."""
    return source != SAID


def start_trust(config: FactsConfig, source: str) -> float:
    """The trust a new fact from ``source`` starts with."""
    return config.default_trust if not outside(source) else min(
        getattr(config, "outside_trust", 0.35), config.default_trust)


def instruction_like(text: str) -> bool:
    """Whether ``text`` reads like an instruction to the assistant (the guard's one check,
    hermes.safety.guard.standing_order: orders to answer or say something, to obey someone,
    to send something away or follow a link, to change its role)."""
    return standing_order(text) is not None


def withheld(source: str, text: str) -> str | None:
    """The forgotten_reason a new fact is stored with when it must not be shown, or None."""
    why = standing_order(text) if outside(source) else None
    if why is None:
        return None
    return WITHHELD.format(source=_source_words(source)) + f" ({why})"


def is_withheld(fact: Fact) -> bool:
    return bool(fact.forgotten_at) and (fact.forgotten_reason or "").startswith(WITHHELD_PREFIX)


def unconfirmed(fact: Fact) -> bool:
    """A fact from elsewhere that the user has not confirmed yet."""
    return outside(fact.source) and fact.confirmed_at is None


def promotable(fact: Fact) -> bool:
    """Whether ``fact`` may be promoted into basic memory: the user said it, or confirmed it;
    and it is active."""
    return fact.active and not unconfirmed(fact)


def own_first(facts: Sequence[Fact]) -> list[Fact]:
    """``facts`` in their order, but every unconfirmed fact from elsewhere after every other
    one: never ranked above what the user said, whatever its score. The same list (not a copy)
    when there is none: the common case costs a scan."""
    if not any(unconfirmed(f) for f in facts):
        return list(facts) if not isinstance(facts, list) else facts
    return [f for f in facts if not unconfirmed(f)] + [f for f in facts if unconfirmed(f)]


def _source_words(source: str) -> str:
    return {"inferred": "the model's own inference", "import": "an import",
            "tool": "a tool's output", "document": "a document"}.get(source, source)


def describe(fact: Fact) -> str:
    """How a fact's source reads for a person: "you said it", "an import (unconfirmed)"."""
    if not outside(fact.source):
        return "you said it"
    words = _source_words(fact.source)
    return words + (" (confirmed)" if fact.confirmed_at else " (unconfirmed)")
