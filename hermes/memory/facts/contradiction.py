"""When a new statement gives another value for what a fact says there is only one of.

"The user lives in Berlin" contradicts "The user lives in Porto": the same subject and a
single-valued relation (where someone lives, works, their doctor, their age) with another value.
Learning uses it to supersede an older fact even when the model forgot to say "update"
(:mod:`hermes.learn.consolidate`); the user's own statements use it so that a second "remember
that my doctor is Dr. Jones" replaces the first instead of leaving both active
(:meth:`hermes.memory.facts.store.FactStore.add` with ``supersede``). Words kept as the user said
them (``The user said: "I live in Porto"``) are read inside their quotes, in the first person.
Rules only: a relation they do not know is never a contradiction (both facts stay), and
neither is a statement that does not name a new value of the relation's kind
(:func:`_names_a_value`): "my doctor is on holiday until March" names no other doctor, "my car
is in the garage until Friday" no other car, "I moved to a desk near the window at work" no
other home, "I work at home on Fridays" no other employer. A passing state, a part-time or
temporary qualifier, or a value of another kind keeps both facts; where the rules are unsure,
both stay.
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


# A passing state or a part-time / temporary qualifier: the statement is no new value.
_PASSING = re.compile(
    r"\b(?:until|till|til|through|for\s+now|for\s+the\s+(?:time\s+being|week|weekend|day|"
    r"month|summer|winter|holidays?)|for\s+(?:a|an|one|two|three|four|a\s+few|some|\d+)\s+"
    r"(?:days?|weeks?|months?|nights?)|this\s+(?:week|weekend|month|year|morning|afternoon|"
    r"evening|summer|winter)|today|tonight|tomorrow|temporar\w*|part[- ]time|"
    r"on\s+(?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends?|"
    r"weekdays)|at\s+(?:the\s+)?weekends?|sometimes|occasionally|some\s+days|once\s+a|"
    r"twice\s+a|(?:one|two|three|four)\s+days?\s+a\s+week|every\s+(?:other|monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|on\s+(?:holiday|vacation|leave|sick\s+leave|"
    r"a\s+trip|a\s+break|strike)|also|as\s+well|too|on\s+the\s+side)\b", re.I)
# A value opening with one of these is a state or a place inside something, not a value:
# "is on holiday", "is in the garage", "is being repaired", "is broken".
_STATE_START = frozenset({
    "on", "in", "at", "off", "out", "away", "back", "under", "with", "without", "from", "to",
    "into", "by", "near", "over", "still", "not", "no", "being", "getting", "sick", "ill",
    "busy", "broken", "closed", "late", "unavailable", "retiring", "leaving", "moving",
    "going", "having", "doing", "very", "really", "so", "too", "always", "never"
})
# Possessives, determiners and pronouns: "moved to a desk", "work for myself", "my flat".
_NO_NAME_START = frozenset({
    "a", "an", "my", "our", "his", "her", "their", "your", "its", "this", "that", "these",
    "those", "another", "some", "any", "myself", "ourselves", "himself", "herself",
    "themselves", "home", "work", "bed", "here", "there", "somewhere", "remotely"
})
# A place within a home or an employer, not another one: "the Lisbon office", "a desk".
_INSIDE = re.compile(r"\b(?:office|desk|branch|site|campus|building|floor|room|window|hq|"
                     r"headquarters|home|remote(?:ly)?|shift|department)\b", re.I)
_TITLES = frozenset({
    "dr", "dr.", "doctor", "mr", "mr.", "mrs", "mrs.", "ms", "ms.", "mx", "miss", "prof",
    "prof.", "professor"
})
# Kinds of relation_is whose value is a person (or an organisation): a name or a title.
_PERSON = frozenset({"manager", "boss", "employer", "partner", "wife", "husband", "girlfriend",
                     "boyfriend", "dentist", "doctor"})
# Things named by a brand or model: "a Tesla Model 3", "an iPhone 15", "a ThinkPad".
_THING = frozenset({"car", "laptop", "phone"})


def _named(word: str) -> bool:
    """A name's word: a capital anywhere ("Porto", "iPhone") or a digit."""
    return any(c.isupper() or c.isdigit() for c in word)


def _names_a_value(relation: str, value: str) -> bool:
    """Whether ``value`` (as said, case kept) is a new value of ``relation``'s kind: a place
    to live, an employer, a person, a thing. Unsure: no."""
    if _PASSING.search(value):
        return False
    words = value.split()
    if not words:
        return False
    first = words[0].casefold()
    if relation in ("lives_in", "works_at"):
        if first in _NO_NAME_START or _INSIDE.search(value) or first in _STATE_START:
            return False
        if first == "the":      # "the Netherlands", "the BBC"; not "the office"
            return len(words) > 1 and _named(words[1])
        return _named(words[0])
    if relation == "age":
        return True
    what = relation.partition(":")[2]
    if first in _STATE_START and what != "birthday":      # "my birthday is on 5 May"
        return False
    if what in _PERSON:
        return first in _TITLES or _named(words[0])
    if what in _THING:
        if first in ("a", "an", "the"):
            return len(words) > 1 and _named(words[1])
        return _named(words[0])
    return True


# "now Dr. Jones", "currently Globex": the value, not the word saying it is the new one.
_NOW = re.compile(r"^(?:now|currently|actually|still)\s+", re.I)


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
            value = _NOW.sub("", match.group("value").strip())
            if not _names_a_value(relation, value):
                return None     # a state, a qualifier, another kind: no value to replace
            return relation, subject, norm(value)
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
