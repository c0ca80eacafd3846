"""The gate: decide, without a model call, whether new messages are worth an extraction run.

Most turns of a conversation carry nothing durable ("thanks!", "ok cool", "what's 17% of 230?"),
and a model call for each of them is what makes extraction expensive. The gate skips:

- ``disabled``: extraction is off;
- ``cron``: a cron session (unless ``extraction.include_cron``);
- ``memory_written``: the model already wrote memory with its tools this turn;
- ``no_user_message``: nothing the user said is new;
- ``fast_lane``: everything substantive was an explicit "remember ..." already stored (one
  stored in the user's own words runs, reason ``verbatim``: the model writes it cleanly);
- ``small_talk``: greetings, thanks, acknowledgements, short chit-chat;
- ``no_statement``: questions and requests that say nothing about the user, their world or
  their plans ("what's the capital of Peru?", "write a haiku about rain").

Anything else runs (reason ``statement``, or ``answer`` for a short reply to the assistant's
question, such as "Berlin" after "Where do you live?"). The rules lean towards running: a
wasted call costs a little, a missed fact is lost.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from hermes.learn import fastlane


class MessageLike(Protocol):
    role: str
    content: str


@dataclass(frozen=True)
class GateDecision:
    run: bool
    reason: str
    detail: str = ""


# Words that make up small talk on their own. A message made only of these (and emoji,
# punctuation) is small talk.
_SMALL_TALK_TEXT = """
    hi hello hey heya hiya yo howdy sup morning evening afternoon night gm gn good great nice
    cool awesome amazing perfect excellent wonderful lovely fine fantastic brilliant sweet neat
    thanks thank thx ty tysm cheers appreciate appreciated much lot so very really too a the
    you u ya your welcome np problem no nope nah worries yes yeah yep yup yea sure ok okay k kk
    alright
    right got it that's thats this is was sounds makes sense see i understand understood agreed
    lol lmao haha hahaha hehe rofl wow oh ah uh hmm hm huh bye goodbye later cya ttyl see soon
    take care have day weekend all well done job again for and just wanted to say how are
    doing what's whats up going how's hows things nvm never mind anyway btw well then fair enough
    indeed exactly true totally absolutely definitely bad not too shabby same here me either
    neither back at glad hear love hermes buddy mate dude man pal friend there everyone guys
    please thankyou gotcha noted roger kind of its it's also yours ciao hola bonjour
"""
_SMALL_TALK_WORDS = frozenset(_SMALL_TALK_TEXT.split())
_SMALL_TALK_PHRASES = [
    re.compile(p)
    for p in (
        r"^how (?:are|r) (?:you|u)(?: doing)?(?: today)?$",
        r"^what'?s up$",
        r"^how'?s it going$",
        r"^(?:good|great|nice) (?:morning|afternoon|evening|night)(?: hermes)?$",
        r"^(?:i'?m|im) (?:fine|good|great|ok|okay|alright|well)(?: thanks?)?(?: you)?$",
        r"^not much(?: you)?$",
    )
]
# Words that make a sentence about the user (or their household, team, plans).
_SELF = re.compile(
    r"\b(?:my|mine|our|ours|myself|ourselves|i'm|im|i've|i'd|i'll|we're|we've|we'll)\b"
    r"|\bi\s+(?!(?:mean|guess|see|think so|wonder)\b)[a-z]+"
    r"|\bwe\s+(?!(?:can|could|should)\b)[a-z]+",
    re.I,
)
# First person after an auxiliary is question inversion ("should I", "can we"), not a statement.
_INVERTED = re.compile(
    r"\b(?:should|can|could|would|will|shall|do|did|may|might|must|am|if)\s+(?:i|we)\b", re.I
)
_QUESTION_START = re.compile(
    r"^(?:what|what's|whats|who|whom|whose|where|when|why|how|which|is|are|was|were|do|does|did|"
    r"can|could|would|will|should|shall|may|might|have|has|any|is there|are there)\b",
    re.I,
)
_REQUEST_START = re.compile(
    r"^(?:(?:please|actually|just|ok|okay|so|and|but|now|then|also|oh|hmm|hermes),?\s+)*"
    r"(?:write|explain|summari[sz]e|translate|tell|show|give|list|calculate|"
    r"compute|convert|generate|make|create|draft|find|search|look up|help|define|describe|"
    r"compare|suggest|recommend|fix|debug|refactor|rewrite|check|count|sort|format|"
    r"let's|lets|go ahead|continue|try|do it|again|one more|another)\b",
    re.I,
)
_POSSESSIVE = re.compile(r"\b(?:my|mine|our|ours)\b", re.I)
_WORD = re.compile(r"[a-z0-9']+", re.I)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _words(text: str) -> list[str]:
    return [w.lower().strip("'") for w in _WORD.findall(text) if w.strip("'")]


def is_small_talk(text: str) -> bool:
    """Greetings, thanks, acknowledgements: nothing but small-talk words, emoji, punctuation."""
    words = _words(text)
    if not words:
        return True  # only emoji / punctuation ("👍", "!!")
    phrase = " ".join(words)
    if any(p.match(phrase) for p in _SMALL_TALK_PHRASES):
        return True
    return all(w in _SMALL_TALK_WORDS for w in words)


def says_something_about_the_user(sentence: str) -> bool:
    without_inversion = _INVERTED.sub(" ", sentence)
    return bool(_SELF.search(without_inversion))


def is_statement(sentence: str) -> bool:
    """A sentence that may hold something durable (about the user, their world or plans)."""
    text = sentence.strip()
    if not text or is_small_talk(text):
        return False
    if _REQUEST_START.match(text):
        # In a request, "I'm" is usually a figure of speech ("explain it like I'm five"); only
        # something the user owns ("fix my nginx config") says anything about them.
        return bool(_POSSESSIVE.search(text))
    if says_something_about_the_user(text):
        return True
    if text.endswith("?") or _QUESTION_START.match(text):
        return False
    # A declarative sentence about the world ("the deploy moved to Friday"): needs a few words.
    content = [w for w in _words(text) if w not in _SMALL_TALK_WORDS]
    return len(content) >= 3


def has_substance(text: str, *, min_chars: int = 0) -> bool:
    """Whether a user message holds anything an extraction run could learn from."""
    if is_small_talk(text):
        return False
    if len(text.strip()) < min_chars and not says_something_about_the_user(text):
        return False
    return any(is_statement(s) for s in _SENTENCE.split(text))


def decide(
    messages: Sequence[MessageLike],
    *,
    enabled: bool = True,
    source: str = "terminal",
    include_cron: bool = False,
    memory_written: bool = False,
    min_chars: int = 12,
    prior_assistant: str | None = None,
) -> GateDecision:
    """Whether to run extraction over ``messages`` (the session's messages past the watermark).

    ``prior_assistant`` is the assistant's last message before them, so that a short answer to
    its question ("Berlin", "two kids") still counts.
    """
    if not enabled:
        return GateDecision(False, "disabled")
    if source == "cron" and not include_cron:
        return GateDecision(False, "cron")
    if memory_written:
        return GateDecision(False, "memory_written", "the model wrote memory with its tools")
    user_texts = [m.content for m in messages if m.role == "user" and m.content.strip()]
    if not user_texts:
        return GateDecision(False, "no_user_message")
    remembered_any = False
    asked = _last_question(messages, prior_assistant)
    for text in user_texts:
        found = fastlane.detect(text)
        rest = fastlane.remainder(text, found) if found else text
        remembered_any = remembered_any or bool(found)
        if any(item.verbatim for item in found):
            # Stored in the user's own words: the model writes the clean statement.
            return GateDecision(True, "verbatim", found[0].body[:80])
        if has_substance(rest, min_chars=min_chars):
            return GateDecision(True, "statement", rest[:80])
        if asked and rest.strip() and not is_small_talk(rest):
            return GateDecision(True, "answer", rest[:80])
    if remembered_any:
        return GateDecision(False, "fast_lane", "already stored before the reply")
    if all(is_small_talk(t) for t in user_texts):
        return GateDecision(False, "small_talk")
    return GateDecision(False, "no_statement", "questions or requests only")


def _last_question(messages: Sequence[MessageLike], prior_assistant: str | None) -> bool:
    """Whether the assistant asked a question right before the user's first new message."""
    last = prior_assistant
    for message in messages:
        if message.role == "assistant":
            last = message.content
        elif message.role == "user":
            break
    return bool(last and "?" in last.strip()[-200:])
