"""When a new statement gives another value for what a fact says there is only one of.

"The user lives in Berlin" contradicts "The user lives in Porto": the same subject and a
single-valued relation (where someone lives, works, their doctor, their age) with another value.
Learning uses it to supersede an older fact even when the model forgot to say "update"
(:mod:`hermes.learn.consolidate`); the user's own statements use it so that a second "remember
that my doctor is Dr. Jones" replaces the first instead of leaving both active
(:meth:`hermes.memory.facts.store.FactStore.add` with ``supersede``). Words kept as the user said
them (``The user said: "I live in Porto"``) are read inside their quotes, in the first person.
Rules only: a relation they do not know is never a contradiction (both facts stay).
"""

from __future__ import annotations

import re

from hermes.memory.facts.statement import VERBATIM_PREFIX, is_verbatim

# Relations a subject has only one of at a time. A new value replaces the old one. The verbs
# take the first person too ("I live in", "I am working at"): the user's own words.
_SINGLE_VALUED: list[tuple[str, re.Pattern[str]]] = [
    ("lives_in", re.compile(
        r"^(?P<subject>.+?)\s+(?:now\s+|currently\s+)?(?:lives|live|is living|am living|"
        r"resides|reside|is based|am based|has moved|have moved|moved|relocated)\s+(?:in|to)\s+"
        r"(?P<value>.+)$", re.I)),
    ("works_at", re.compile(
        r"^(?P<subject>.+?)\s+(?:now\s+|currently\s+)?(?:works|work|is working|am working|"
        r"is employed|am employed|started working|has started working|have started working)"
        r"\b[^.]*?\s(?:at|for|by)\s+(?P<value>.+)$", re.I)),
    ("works_at", re.compile(
        r"^(?P<subject>.+?)\s+(?:has\s+|have\s+)?joined\s+(?P<value>.+)$", re.I)),
    ("relation_is", re.compile(
        r"^(?P<subject>.+?)'s?\s+(?P<what>(?:current\s+)?(?:favou?rite\s+\w+(?:\s+\w+)?|manager|"
        r"boss|employer|partner|wife|husband|girlfriend|boyfriend|birthday|email(?: address)?|"
        r"phone number|job title|title|role|team|home city|city|address|car|laptop|phone|"
        r"editor|shell|os|operating system|dentist|doctor|gym))\s+(?:is|are)\s+(?P<value>.+)$",
        re.I)),
    ("age", re.compile(
        r"^(?P<subject>.+?)\s+(?:is|am)\s+(?P<value>\d+)\s+years?\s+old\b", re.I)),
]
# The first person of words kept as said, as the subject the rules read ("I", "my").
_FIRST_PERSON = [
    (re.compile(r"^(?:I'm|I’m)\s+", re.I), "the user am "),
    (re.compile(r"^I\s+", re.I), "the user "),
    (re.compile(r"^my\s+", re.I), "the user's "),
]


def norm(text: str) -> str:
    """Lower case, "favorite" as "favourite", punctuation but apostrophes as spaces."""
    text = re.sub(r"\bfavorite\b", "favourite", text.casefold())
    return re.sub(r"\s+", " ", re.sub(r"[^\w\s']", " ", text)).strip()


def _said(content: str) -> str:
    """A statement kept in the user's words, as a statement about "the user"."""
    if not (is_verbatim(content) and content.endswith('"')):
        return content
    text = content[len(VERBATIM_PREFIX) + 1:-1].strip()
    for pattern, subject in _FIRST_PERSON:
        if pattern.match(text):
            return pattern.sub(subject, text, count=1)
    return text


def frame(content: str) -> tuple[str, str, str] | None:
    """(relation, subject, value) of a single-valued statement, or None."""
    text = _said(content).strip().rstrip(".!")
    for name, pattern in _SINGLE_VALUED:
        match = pattern.match(text)
        if match:
            relation = name
            if "what" in match.groupdict():
                relation = f"{name}:{norm(match.group('what')).replace('current ', '')}"
            subject = norm(match.group("subject"))
            subject = re.sub(r"^the user$", "user", subject)
            return relation, subject, norm(match.group("value"))
    return None


def contradicts(new: str, old: str) -> bool:
    """Whether ``new`` gives another value for the same subject and single-valued relation."""
    a, b = frame(new), frame(old)
    if a is None or b is None:
        return False
    if a[0] != b[0] or a[1] != b[1]:
        return False
    # "lives in Berlin since October" vs "lives in Berlin": the same value, not a contradiction
    return not (a[2].startswith(b[2]) or b[2].startswith(a[2]))
