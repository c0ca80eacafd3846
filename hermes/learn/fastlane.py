"""The fast lane: an explicit "remember that ..." is written before the reply.

Extraction runs after the reply, so without this the very next message could not use what the
user just asked Hermes to remember. Detection is a handful of anchored patterns (no model): the
request must open a sentence ("Remember that ...", "Please note that ...", "Don't forget ...",
"/remember ..."), so "do you remember what I said?" or "I remember when ..." never trigger it.
The same requests in Portuguese, Spanish, French, German, Italian and Dutch ("Lembra-te que ...",
"Recuerda que ...", "Souviens-toi que ...", "Merk dir, dass ...", "Ricorda che ...") store the
words after them as said, never rewritten by English rules; their questions ("¿Recuerdas
...?", "Lembras-te ...?") and "je ne me souviens pas" store nothing.
Sentences end where a period is not an abbreviation's ("Dr. Smith", "St. Mary's", "J. R. R.
Tolkien", "5 p.m."); a request goes on over the sentences after it while they say more about
it ("Remember this: ...", "... She lives in Porto.").

What is stored is :func:`hermes.memory.facts.statement.normalise_statement` of the words after
the trigger, the one rule every surface uses: first person rewritten only where that is
certain, else the user's words kept whole (extraction rewrites them later); a secret never.
A fast-lane fact's conversation is the message that said it and the reply to it
(:meth:`FastLane.after_reply` adds the reply to its sources), never an earlier message.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes.errors import HermesError, RefusedWrite
from hermes.memory.facts.statement import (
    FOREIGN_POLITE,
    FOREIGN_REQUEST,
    Statement,
    normalise_statement,
)

if TYPE_CHECKING:
    from hermes.memory import Memory

log = logging.getLogger(__name__)

FASTLANE_TAG = "fastlane"

_POLITE = r"(?:(?:hey|ok|okay|so|and|also|oh|btw)\s*,?\s+)?(?:hermes\s*,?\s+)?(?:please\s*,?\s+)?" \
          r"(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?)?"
# The request in another language (hermes.memory.facts.statement.FOREIGN_REQUEST): its words are
# stored as said. First, so that "Note que ..." and "memorize que ..." are read as French and
# Portuguese.
_FOREIGN_TRIGGER = re.compile(
    rf"^\s*¡?\s*{FOREIGN_POLITE}{FOREIGN_REQUEST}(?P<body>\S.*)", re.I | re.S)
_TRIGGERS = [
    _FOREIGN_TRIGGER,
    # /remember TEXT (the slash command, anywhere a front-end passes it through)
    re.compile(r"^\s*/remember\b\s*(?P<colon>:?)\s*(?P<body>.+)", re.I | re.S),
    re.compile(
        rf"^\s*{_POLITE}(?:remember|memori[sz]e)\b(?:\s+(?:this|that))?\s*(?P<colon>[:,\-]?)\s+"
        r"(?P<body>(?!what\b|when\b|where\b|who\b|how\b|if\b|whether\b|me\b|the\s+time\b).+)",
        re.I | re.S,
    ),
    re.compile(
        rf"^\s*{_POLITE}(?:don'?t|don’t|do\s+not|never)\s+forget\b(?:\s+that)?\s*(?P<colon>[:,\-]?)"
        r"\s+(?P<body>(?!what\b|when\b|where\b|who\b|how\b|me\b).+)",
        re.I | re.S,
    ),
    re.compile(
        rf"^\s*{_POLITE}(?:(?:make|take)\s+a\s+note|note\s+to\s+self|note|take\s+note|"
        r"keep\s+in\s+mind)\b(?:\s+(?:of\s+this|that))?\s*(?P<colon>[:,\-]?)\s+"
        r"(?P<body>(?!what\b|when\b|where\b|who\b|how\b|if\b|whether\b).+)",
        re.I | re.S,
    ),
]
# A period after one of these does not end a sentence ("Dr. Smith", "St. Mary's", "5 p.m.").
_ABBREVIATIONS_TEXT = """
    dr mr mrs ms mx prof st sr jr mt ft gen col capt lt sgt rev hon gov sen rep pres supt insp
    no nr vs approx inc ltd co corp bros ave rd blvd dept univ est fig vol ed op apt
    jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur thurs fri sat sun
    e.g i.e a.m p.m u.s u.k u.n d.c ph.d b.sc m.sc
    dra sra srta sto sta dña dª mme mlle hr fr dott sig avda av pç nº
"""
ABBREVIATIONS = frozenset(_ABBREVIATIONS_TEXT.split())
_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"'”’)]*\s+(?=\S)|\n+")
_LAST_WORD = re.compile(r"([\w.]+)\.$")
# An ordinal date ("am 3. Mai", "le 1. janvier" is rarer): the day's period ends no sentence.
_MONTHS_TEXT = """
    januar janvier enero gennaio janeiro januari jan jän februar février febrero febbraio
    fevereiro februari feb märz mars marzo março maart mär april avril abril aprile apr mai
    mayo maggio maio mei juni juin junio giugno junho jun juli juillet julio luglio julho jul
    august août agosto augustus aug september septembre septiembre settembre setembro sep sept
    oktober octobre octubre ottobre outubro okt oct november novembre noviembre novembro nov
    dezember décembre diciembre dicembre dezembro dez dec
"""
_MONTH = re.compile(rf"(?:{'|'.join(_MONTHS_TEXT.split())})\b\.?", re.I)
_INITIALS = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")   # "U.S", "e.g", "p.m"
# What is no statement to remember: "remember this", "that for me", "this conversation".
_NO_STATEMENT = re.compile(r"^(?:this|that|it|these|those|things|stuff|everything|anything|"
                           r"something|all)\b(?:\W+\w+){0,2}\W*$"
                           r"|^(?:for\s+(?:me|later|now)|down|too|as\s+well|please)\W*$", re.I)
# A sentence that goes on with what was being remembered: it refers back to it.
_CONTINUES = re.compile(r"^(?:he|she|they|it|his|her|their|its|this|that|these|those|also|"
                        r"and|but|plus|both)\b", re.I)


@dataclass(frozen=True)
class Remembered:
    """An explicit request found in a message."""

    body: str        # what the user asked to be remembered, as they wrote it
    content: str     # the fact to store
    start: int       # span of the whole request (trigger + body) in the message
    end: int
    verbatim: bool = False   # stored in the user's own words (extraction rewrites it)
    tags: list[str] = field(default_factory=list)


def sentences(text: str) -> list[tuple[int, int]]:
    """The spans of ``text``'s sentences. A period ends one unless it closes an abbreviation,
    an initial ("J. Smith") or a day before its month ("am 3. Mai"): "at 7. Thanks!" is
    two."""
    spans = []
    position = 0
    for match in _SENTENCE_END.finditer(text):
        before = text[position:match.start()].rstrip("\"'”’)")
        word = _LAST_WORD.search(before)
        if "\n" not in match.group() and before.endswith(".") and word and (
                word.group(1).lower() in ABBREVIATIONS
                or (len(word.group(1)) == 1 and word.group(1).isalpha())
                or _INITIALS.fullmatch(word.group(1))
                or (word.group(1).isdigit() and _MONTH.match(text, match.end()))):
            continue
        spans.append((position, match.start()))
        position = match.end()
    spans.append((position, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?")


def detect(text: str) -> list[Remembered]:
    """Every explicit remember-request in ``text``. A secret, or a request with nothing to
    store, is left out (the turn's own note says a secret was not kept)."""
    found: list[Remembered] = []
    spans = sentences(text)
    index = 0
    while index < len(spans):
        start, end = spans[index]
        index += 1
        sentence = text[start:end]
        for pattern in _TRIGGERS:
            match = pattern.match(sentence)
            if not match:
                continue
            body = match.group("body").strip()
            polite_question = re.search(r"\b(?:can|could|would|will)\s+you\b", sentence, re.I)
            if _is_question(body) and not polite_question:
                # "remember what?" / "note that it's fine?" read as questions, not requests
                break
            # The sentences after it that say more about it belong to the request.
            while index < len(spans):
                following = text[spans[index][0]:spans[index][1]]
                if _is_question(following) or any(p.match(following) for p in _TRIGGERS):
                    break
                if not (match.group("colon") == ":" or _CONTINUES.match(following)):
                    break
                end = spans[index][1]
                body = f"{body.rstrip()} {following.strip()}"
                index += 1
            body = body.strip().rstrip("?").strip()
            # "remember that conversation": one English word is no statement (CJK has no
            # spaces to count)
            one_word = (len(body.split()) < 2 and body.isascii()
                        and not match.group("colon"))
            if len(body.rstrip(".!")) < 3 or one_word or _NO_STATEMENT.match(body):
                break
            try:
                # another language's request: its words as said ("(colon)" after "Note" is
                # English too)
                as_said = pattern is _FOREIGN_TRIGGER and not (
                    match.group("colon") and any(p.match(sentence) for p in _TRIGGERS[1:]))
                statement: Statement = normalise_statement(body, sentence=True,
                                                           as_said=as_said)
            except RefusedWrite as exc:
                log.info("fast lane: not stored: %s", exc)
                break
            found.append(Remembered(body.rstrip(".! "), statement.content, start, end,
                                    statement.verbatim, statement.tags))
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


# -- the hook ---------------------------------------------------------------------------------

class FastLane:
    """``Agent.before_reply`` hook: write explicit remember-requests to the fact store now;
    ``after_reply``: cite the reply too, so the fact's conversation is its own exchange."""

    def __init__(self, memory: Memory, facts: Any | None = None) -> None:
        self.memory = memory
        self._facts = facts
        # (user, user message id) -> the facts written for it, until its reply is recorded
        self._written: dict[tuple[str, int], list[int]] = {}

    @property
    def facts(self) -> Any:
        if self._facts is None:
            self._facts = self.memory.facts
        return self._facts

    def __call__(self, user: str, session_id: int, message: Any) -> str | None:
        """Store the message's remember-requests; what they replaced, as a note for the end
        of the reply (None when they replaced nothing)."""
        if getattr(message, "role", "user") != "user":
            return None
        replaced: list[str] = []
        # Facts say "The user ...": a display name is how the model addresses the person, not
        # the subject of their memory (and never an identity such as terminal:root).
        for item in detect(message.content):
            try:
                result = self.facts.add(
                    user,
                    item.content,
                    tags=[FASTLANE_TAG, *item.tags],
                    importance=0.8,
                    source_session_id=session_id,
                    source_message_ids=[message.id],
                    said_at=getattr(message, "created_at", None),
                    supersede=True,     # said outright: it replaces what it contradicts
                )
            except HermesError as exc:
                # A refused write (an injection) must not break the turn; the model still sees
                # the message and can answer that it will not store it.
                log.warning("fast lane: not stored (%s): %s", exc, item.content)
                continue
            self._written.setdefault((user, message.id), []).append(result.id)
            log.info("fast lane: %s fact %s: %s", result.status, result.id, item.content)
            for old_id in result.superseded:
                old = self.facts.get(user, old_id)
                replaced.append(f"fact {old_id} ({old.content}) is replaced by fact "
                                f"{result.id} ({result.fact.content})")
        if not replaced:
            return None
        return f"(Remembered: {'; '.join(replaced)}, kept in its history.)"

    def after_reply(self, result: Any) -> None:
        """``Agent.after_reply`` hook: the reply joins the sources of the facts written for
        its message."""
        written = self._written.pop((result.user, result.user_message_id), [])
        if not written or result.assistant_message_id is None:
            return
        for fact_id in written:
            try:
                self.facts.add_sources(result.user, fact_id, [result.assistant_message_id])
            except HermesError as exc:   # purged meanwhile: nothing to cite
                log.info("fast lane: reply not cited by fact %s: %s", fact_id, exc)
