"""One budgeted query rewrite before recall, for a message that refers back.

"Remember the thing I told you about my sister? The date is set." shares no word with what it
refers to ("My sister got engaged on a hike"), and the embedding of the new message is about a
date being set. When a message refers back (:func:`refers_back`: "as I said", "the thing I told
you about", "remember when ..."; English only), the turn may ask the background model, once,
what that earlier message most likely said (:data:`PROMPT`), and recall (facts and past
messages) searches that text instead of the new message (:func:`recall_text`). The reply
itself never waits for more than ``agent.recall_rewrite_seconds``; a model that fails, times
out or answers nothing usable leaves recall with the message alone, in one log line.

Off with ``agent.recall_rewrite: false``. Cost: one background call for each message that
refers back (none for the others), measured in ``scripts/bench_locomo.py --mode prompt
--probes refers-back --rewrite``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from hermes.safe_text import one_line

# "Remember the ...?" is read this far for its question mark (a sentence, not a pasted page:
# unbounded, each "remember the" of 64,000 characters was scanned to the end, 0.94 s).
QUESTION_CHARS = 300

# A message refers back when it points at something said before without saying it again.
_REFERS_BACK = re.compile(
    r"\b(?:as i (?:said|mentioned|told you|was saying)"
    r"|like i (?:said|mentioned|told you)"
    r"|(?:i|we) (?:told|mentioned to) you (?:about|before|earlier|last time)"
    r"|i (?:mentioned|said) (?:before|earlier|last time)"
    r"|(?:the|that) (?:\w+ ){0,2}(?:thing|stuff|issue|problem|news|matter|situation|one|plan)"
    r" (?:i|we) (?:told you|mentioned|talked about|was telling you|said)"
    # "remember when/what/how" about the person's own past with the assistant: a first person
    # soon after, not "I remember when I was a kid" (their own memory) nor "do you remember
    # how to make pancakes?" (what the assistant knows)
    r"|(?<!\bi )remember (?:when|what|how)\b[^.!?\n]{0,40}?\b(?:i|we|my|our|me|us)\b"
    # "remember the/that ..." refers back only as a question ("Remember the race I entered?");
    # said as a sentence it asks for something to be kept ("Remember that I use Helix.")
    rf"|remember (?:that|the)\b[^.!?\n]{{0,{QUESTION_CHARS}}}\?"
    r"|you know the (?:\w+ ){0,2}(?:thing|one|stuff|issue) (?:i|we)"
    r"|what i told you)", re.IGNORECASE)

PROMPT = """\
The user's new message refers back to something they said in an earlier conversation, which you \
cannot see. Write what that earlier message most likely said, in the user's own words: one or \
two short sentences naming the people, things and events it was about. Use the new message \
and the recent conversation below; guess the likeliest subject when it is not named. Reply \
with that text only."""

MAX_CHARS = 300  # of the rewrite kept (a model that writes a page is cut here)
MAX_TOKENS = 120
# What the request holds, at most: the new message's part around its pointer ("as I said"),
# and each recent line (a pasted page that refers back, after pasted pages, was sent whole:
# up to 7 x 64,000 characters for a one-line guess)
MESSAGE_CHARS = 2000
LINE_CHARS = 400

Ask = Callable[[list[dict[str, Any]]], Awaitable[str]]


# "I still remember when ...": the person's own memory, a word between (the pattern's
# look-behind takes "I remember" only, a fixed width).
_OWN_MEMORY = re.compile(r"\bi (?:\w+ )?$", re.IGNORECASE)


def refers_back(text: str) -> bool:
    """Whether ``text`` points at something said before without saying it again."""
    text = text or ""
    for found in _REFERS_BACK.finditer(text):
        if found.group()[:8].lower() == "remember" and _OWN_MEMORY.search(
                text[max(0, found.start() - 24):found.start()]):
            continue
        return True
    return False


def request(text: str, recent: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The messages asked of the model: the prompt, the recent conversation (newest last, a
    few lines) and the new message."""
    lines = "\n".join(f"- {one_line(line, LINE_CHARS)}" for line in recent[-6:])
    context = f"Recent conversation:\n{lines}\n\n" if lines else ""
    return [{"role": "system", "content": PROMPT},
            {"role": "user", "content": f"{context}New message: {_around_pointer(text)}"}]


def _around_pointer(text: str) -> str:
    """``text``, or its MESSAGE_CHARS around where it refers back when it is longer."""
    if len(text) <= MESSAGE_CHARS:
        return text
    found = _REFERS_BACK.search(text)
    start = max(0, min((found.start() if found else 0) - MESSAGE_CHARS // 4,
                       len(text) - MESSAGE_CHARS))
    part = text[start:start + MESSAGE_CHARS]
    return ("…" if start else "") + part + ("…" if start + MESSAGE_CHARS < len(text) else "")


_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")
_LABEL = re.compile(r"^(?:earlier message|the earlier message|rewrite|answer|text)\s*:\s*",
                    re.IGNORECASE)


# A reply that will not guess: recall searching it instead of the message finds chit-chat and
# loses what the message alone finds. A word of its own ("Unknown."), or a sentence about not
# seeing the earlier conversation; a user's own "I can't have dairy" is a rewrite.
# The same word in the languages a person may write in (the background model answers in
# theirs: "Je ne sais pas.").
_NO_ANSWER = re.compile(r"(?:unknown|n/?a|none|null|nothing|not sure|no idea|unclear"
                        r"|i (?:do not|don'?t) know|[?.…\s]*"
                        r"|inconnu|je ne sais pas|desconocido|no (?:lo )?s[ée]|unbekannt"
                        r"|ich wei(?:ß|ss) (?:es )?nicht|sconosciuto|non lo so|desconhecido"
                        r"|n[ãa]o sei|不明|未知|不知道|わかりません|分かりません)[.!。！]?",
                        re.IGNORECASE)
_WILL_NOT_GUESS = re.compile(
    r"^(?:as an ai\b|(?:i'?m |i am )?sorry,? (?:but )?i (?:can(?:no|')?t|do(?: not|n'?t)|am unable"
    r"|have no)\b)"
    r"|\b(?:can(?:no|')?t|(?:do(?: not|n'?t)|no) (?:have )?(?:access|way|memory)|unable to)\b"
    r"[^.]{0,60}\b(?:earlier|previous|past|prior|that) (?:message|conversation|chat)s?\b",
    re.IGNORECASE)


# Keys a model names its answer by, in a reply in JSON ({"rewrite": ...}).
_TEXT_KEYS = re.compile(r"rewrite|rewritten|text|message|earlier_message|guess|answer|query"
                        r"|content|result", re.IGNORECASE)
# A reply cut off inside its JSON (max_tokens): '{"rewrite": "My sister got engaged in Po'.
_CUT_JSON = re.compile(r'[\[{]\s*(?:"\w+"\s*:\s*)?"((?:[^"\\]|\\.)*)"?\s*[}\]]?\s*',
                       re.DOTALL)


def _text_of(value: object) -> str:
    """The text in a JSON value (a model that answered in JSON): under a key that names it
    ("rewrite", "text", ...), else its longest text ({"confidence": "low", "rewrite": ...}
    gave "low")."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        named = [_text_of(v) for k, v in value.items() if _TEXT_KEYS.fullmatch(str(k))]
        if any(t.strip() for t in named):
            return max(named, key=lambda t: len(t.strip()))
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) \
        else ()
    return max(map(_text_of, items), key=lambda t: len(t.strip()), default="")


def _from_json(text: str) -> str:
    """A reply in JSON as its text; one cut off inside it as the text it had begun; else as
    written."""
    try:
        return _text_of(json.loads(text)).strip()
    except ValueError:
        cut = _CUT_JSON.fullmatch(text)
        if cut is None:
            return text
        with contextlib.suppress(ValueError):
            return str(json.loads(f'"{cut.group(1).rstrip(chr(92))}"')).strip()
        return cut.group(1)


def parse(reply: str | None) -> str | None:
    """The rewrite in a model's reply: code fences, a label ("Earlier message:"), quotes and a
    JSON wrapping taken off, cut at MAX_CHARS; None when nothing is left or the reply will not
    guess ("Unknown.", "I can't see your earlier conversations")."""
    text = _FENCE.sub("", (reply or "").strip()).strip()
    if text[:1] in ("{", "["):
        text = _from_json(text)
    text = _LABEL.sub("", text).strip().strip('"“”\'').strip()
    text = " ".join(text.split())
    if not text or _NO_ANSWER.fullmatch(text) or _WILL_NOT_GUESS.search(text):
        return None
    return text[:MAX_CHARS]


def recall_text(message: str, rewrite: str | None) -> str:
    """What recall searches: the rewrite when there is one (what the earlier message said: its
    words and its meaning; the message's own words are mostly the pointer, "the thing I told
    you about", and would fail past messages' gate), else the message."""
    return rewrite or message


async def rewrite(ask: Ask, text: str, recent: Sequence[str] = ()) -> str | None:
    """One call: what the earlier message ``text`` refers back to most likely said, or None.
    ``ask`` sends the messages to the background model and returns its text (it raises what
    the model raises: the caller logs it and recalls with the message alone)."""
    return parse(await ask(request(text, recent)))
