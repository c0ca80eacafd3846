"""The fast lane: an explicit "remember that ..." is written before the reply.

Extraction runs after the reply, so without this the very next message could not use what the
user just asked Hermes to remember. Detection is a handful of anchored patterns (no model): the
request must open a sentence ("Remember that ...", "Please note that ...", "Don't forget ...",
"/remember ..."), so "do you remember what I said?" or "I remember when ..." never trigger it.

The remembered clause is rewritten from the first person ("my flight is at 9") to a
self-contained statement ("The user's flight is at 9"). Facts always say "the user": a
display name is how the model addresses the person, not the subject of their memory.
Only safe rewrites are done; anything else is kept verbatim.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hermes.errors import HermesError

if TYPE_CHECKING:
    from hermes.memory import Memory

log = logging.getLogger(__name__)

FASTLANE_TAG = "fastlane"

_POLITE = r"(?:(?:hey|ok|okay|so|and|also|oh|btw)\s*,?\s+)?(?:hermes\s*,?\s+)?(?:please\s*,?\s+)?" \
          r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
_TRIGGERS = [
    # /remember TEXT (the slash command, anywhere a front-end passes it through)
    re.compile(r"^\s*/remember\b\s*:?\s*(?P<body>.+)", re.I | re.S),
    re.compile(
        rf"^\s*{_POLITE}(?:remember|memori[sz]e)\b(?:\s+(?:this|that))?\s*[:,\-]?\s+"
        r"(?P<body>(?!what\b|when\b|where\b|who\b|how\b|if\b|whether\b|me\b).+)",
        re.I | re.S,
    ),
    re.compile(
        rf"^\s*{_POLITE}(?:don'?t|do\s+not|never)\s+forget\b(?:\s+that)?\s*[:,\-]?\s+(?P<body>.+)",
        re.I | re.S,
    ),
    re.compile(
        rf"^\s*{_POLITE}(?:(?:make|take)\s+a\s+note|note|take\s+note|keep\s+in\s+mind)\b"
        r"(?:\s+(?:of\s+this|that))?\s*[:,\-]?\s+(?P<body>.+)",
        re.I | re.S,
    ),
]
# A sentence ends at . ! ? or a newline followed by space and a capital / end of text.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])|\n+")


@dataclass(frozen=True)
class Remembered:
    """An explicit request found in a message."""

    body: str        # the clause as the user wrote it
    content: str     # the self-contained fact to store
    start: int       # span of the whole request (trigger + body) in the message
    end: int


def _sentences(text: str) -> list[tuple[int, int]]:
    spans = []
    position = 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((position, match.start()))
        position = match.end()
    spans.append((position, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def detect(text: str, *, subject: str | None = None) -> list[Remembered]:
    """Every explicit remember-request in ``text`` (one per sentence at most)."""
    found: list[Remembered] = []
    for start, end in _sentences(text):
        sentence = text[start:end]
        for pattern in _TRIGGERS:
            match = pattern.match(sentence)
            if not match:
                continue
            body = match.group("body").strip().rstrip(".!").strip()
            polite_question = re.search(r"\b(?:can|could|would|will)\s+you\b", sentence, re.I)
            if body.endswith("?") and not polite_question:
                # "remember what?" / "note that it's fine?" read as questions, not requests
                break
            body = body.rstrip("?").strip()
            if len(body) < 3:
                break
            found.append(Remembered(body, to_statement(body, subject), start, end))
            break
    return found


def remainder(text: str, found: list[Remembered]) -> str:
    """The message with the remember-requests cut out (what the gate still has to judge)."""
    parts = []
    position = 0
    for item in sorted(found, key=lambda r: r.start):
        parts.append(text[position : item.start])
        position = item.end
    parts.append(text[position:])
    return " ".join(p.strip() for p in parts if p.strip())


# -- first person -> a named subject --------------------------------------------------------

_ADVERBS = (
    "really|also|usually|always|never|often|sometimes|mostly|still|just|only|actually|generally|"
    "typically|absolutely|definitely|now|currently|already|rarely|normally"
)
_IRREGULAR = {"have": "has", "do": "does", "go": "goes", "be": "is", "am": "is"}
_MODALS = (
    "can|can't|cannot|could|couldn't|should|shouldn't|would|wouldn't|will|won't|must|might|may|"
    "didn't|did|was|wasn't"
)


def _third_person(verb: str) -> str:
    lower = verb.lower()
    if lower in _IRREGULAR:
        return _IRREGULAR[lower]
    if re.search(r"(?:s|sh|ch|x|z|o)$", lower):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    return verb + "s"


def to_statement(body: str, subject: str | None = None) -> str:
    """Rewrite first-person words so the fact stands on its own ("my" -> "the user's")."""
    name = subject or "the user"
    possessive = f"{name}'" if name.endswith("s") else f"{name}'s"
    text = body.strip()
    text = re.sub(r"^that\s+", "", text, flags=re.I)
    # "I" is matched case-sensitively (a capital I is the pronoun); the rest ignore case.
    rules: list[tuple[str, str | Callable[[re.Match[str]], str], int]] = [
        (r"\bI\s+am\b|\bI'm\b|\bIm\b(?=\s)", f"{name} is", 0),
        (r"\bI've\b|\bI\s+have\b", f"{name} has", 0),
        (r"\bI'll\b|\bI\s+will\b", f"{name} will", 0),
        (r"\bI'd\b", f"{name} would", 0),
        (r"\bI\s+don'?t\b", f"{name} doesn't", 0),
        (r"\bI\s+do\s+not\b", f"{name} does not", 0),
        (rf"\bI\s+({_MODALS})\b", lambda m: f"{name} {m.group(1)}", 0),
        (
            rf"\bI\s+((?:(?:{_ADVERBS})\s+)*)([a-z]+)\b",
            lambda m: f"{name} {m.group(1)}{_third_person(m.group(2))}",
            0,
        ),
        (r"\b(?:my|mine)\b", possessive, re.I),
        (r"\b(?:myself|me)\b", name, re.I),
    ]
    for pattern, replacement, flags in rules:
        text = re.sub(pattern, replacement, text, flags=flags)
    if re.match(r"^to\s+\w", text, re.I):
        # "don't forget to call the dentist" -> an intention of the user
        text = f"{name} needs {text}"
    return text[:1].upper() + text[1:]


# -- the hook ---------------------------------------------------------------------------------

class FastLane:
    """``Agent.before_reply`` hook: write explicit remember-requests to the fact store now."""

    def __init__(self, memory: Memory, facts: Any | None = None) -> None:
        self.memory = memory
        self._facts = facts

    @property
    def facts(self) -> Any:
        if self._facts is None:
            self._facts = self.memory.facts
        return self._facts

    def __call__(self, user: str, session_id: int, message: Any) -> None:
        if getattr(message, "role", "user") != "user":
            return
        # Facts say "The user ...": a display name is how the model addresses the person, not
        # the subject of their memory (and never an identity such as terminal:root).
        for item in detect(message.content):
            try:
                result = self.facts.add(
                    user,
                    item.content,
                    tags=[FASTLANE_TAG],
                    importance=0.8,
                    source_session_id=session_id,
                    source_message_ids=[message.id],
                )
            except HermesError as exc:
                # A refused write (a secret, an injection) must not break the turn; the model
                # still sees the message and can answer that it will not store it.
                log.warning("fast lane: not stored (%s): %s", exc, item.content)
                continue
            log.info("fast lane: %s fact %s: %s", result.status, result.id, item.content)
