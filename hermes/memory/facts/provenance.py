"""Trust by source: what came from elsewhere than the user is trusted less until confirmed.

A fact's ``source`` (m029) says where it came from: ``said`` (the user said or typed it: a
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
* when it reads like an instruction to the assistant (:func:`instruction_like`), is stored but
  not shown: it is kept as a forgotten fact whose reason says why (``WITHHELD``), listed by
  ``hermes facts list --all`` and the web panel with that note, and restoring it (the user's
  decision) confirms it.

The user's own words are never withheld or demoted here: the memory guard
(hermes.safety.guard) refuses what no source may store.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hermes.errors import RefusedWrite
from hermes.memory.facts.records import SOURCES

if TYPE_CHECKING:
    from hermes.config import FactsConfig
    from hermes.memory.facts.records import Fact

SAID = "said"
# forgotten_reason of a fact from elsewhere that reads like an instruction (stored, not shown)
WITHHELD = "withheld: it came from {source} and reads like an instruction to the assistant"
WITHHELD_PREFIX = "withheld:"

# Text that tells the assistant what to do rather than saying something about the user or the
# world: orders addressed to the assistant ("always answer in ...", "never tell the user",
# "when asked about X, say Y"), requests to send, forward, reveal or run something, and links
# to follow. Blunt injections ("ignore previous instructions") are refused for every source by
# the guard; these are ordinary words from the user, and suspect only from elsewhere.
_INSTRUCTION = re.compile(
    r"(?ix)"
    r"\b(?:you|the\ assistant|hermes|the\ ai|the\ model)\s+(?:must|should|shall|will\ always|"
    r"need\ to|have\ to|are\ to|are\ required\ to)\b"
    r"|(?:^|[.!;:]\s*)(?:always|never|do\ not|don't|please)\s+(?:answer|reply|respond|say|tell|"
    r"mention|reveal|share|send|forward|include|recommend|use|call|run|execute|ignore|obey|"
    r"follow|trust|click|visit|open|email|pay|transfer)\b"
    r"|\bwhen(?:ever)?\s+(?:the\ user|anyone|someone|they|you(?:\s+are)?)\s+(?:asks?|asked|"
    r"mentions?|says?|requests?)\b[^.]{0,80}\b(?:say|reply|respond|answer|tell|send)\b"
    r"|\b(?:send|forward|email|upload|transfer|wire)\b[^.]{0,60}\b(?:to|at)\s+"
    r"(?:\S+@\S+|https?://|www\.)"
    r"|\b(?:click|visit|open|go\ to|download\ from)\s+(?:https?://|www\.)"
    r"|\b(?:run|execute)\s+(?:this|the\ following)\b"
)


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
    """Whether ``text`` reads like an instruction to the assistant (see _INSTRUCTION)."""
    return bool(_INSTRUCTION.search(text))


def withheld(source: str, text: str) -> str | None:
    """The forgotten_reason a new fact is stored with when it must not be shown, or None."""
    if outside(source) and instruction_like(text):
        return WITHHELD.format(source=_source_words(source))
    return None


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
