"""Questions that ask *when*, and messages that say when something happened.

"When did I go to the dentist?" is answered by the message that places the visit in time ("I
went to the dentist yesterday", "my appointment is next Tuesday", "back in May"), not by the
one that only names the dentist: a message holding an expression of time, which the words of
the question cannot ask for (bm25 has no word in common with "yesterday"). Session search by
meaning gives such a message a part of its score when the question asks when
(hermes.memory.sessions.semantic, ``SemanticParams.temporal``). A question that asks how long
("how long have you had the turtles?") is answered the same way, by a length of time ("for 3
years"): it asks when, and a length of time names one.

English only, like the stopword list; a question in another language simply gets no such part.
"""

from __future__ import annotations

import re

# A month's full name places a time on its own, but for the five that are also a word or a
# name ("I may be late", "a march", "April called", "an august house", "June's car"): those
# only as a date, after "in", "since", "last", ... ("in May", "back in March"), beside a day
# ("May 3rd", "5 of June") or a year ("August 2023"); the short forms only beside a day ("Jan
# 5", "5 Oct"), since "jan", "mar" and "dec" are also a name, a verb and a word.
_WORDLIKE_MONTHS = "may|march|april|june|august"
_MONTHS = ("january|february|july|september|october|november|december"
           rf"|(in|of|early|late|mid|since|until|till|by|from|last|next|this|between)\s+"
           rf"({_WORDLIKE_MONTHS})"
           rf"|({_WORDLIKE_MONTHS})\s+(\d{{1,2}}(st|nd|rd|th)?|(19|20)\d\d)"
           rf"|\d{{1,2}}(st|nd|rd|th)?\s+(of\s+)?({_WORDLIKE_MONTHS})")
_SHORT_MONTHS = "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend"
# A length of time: a count ("3", "two", "a", "several", "a couple of") and a span.
_COUNT = (r"\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|few|several"
          r"|couple( of)?")
_LENGTHS = r"years?|months?|weeks?|days?|hours?|decades?"
_SPANS = ("day|days|week|weeks|month|months|year|years|night|morning|evening|afternoon|"
          "summer|winter|spring|fall|autumn|weekend")

# A question about the time of something: "when" as it asks ("When did ...", "so when is
# ..."), "what date/day/year/month/time", "since when", "which year/month/day"; or about how
# long: "how long (ago)", "how many years/months/weeks/days/hours" ("For how long has Nate had
# his turtles?" is answered by "I've had them for 3 years now", which shares no word with it
# but "had"). "When" that joins two clauses asks nothing ("the barista looked heartbroken when
# I ordered a chamomile", "what does Dave do when he feels stuck?"): only a "when" that opens
# the text or comes before a verb that asks ("when did", "when is") asks when. The text may be
# a query's words without punctuation (hermes.memory.sessions.rerank.plan_text).
_ASKING_VERBS = ("am|is|are|was|were|do|does|did|have|has|had|will|would|can|could|shall"
                 "|should|may|might|must")
_ASKS_WHEN = re.compile(
    rf"^\W*when\b|\bwhen\s+({_ASKING_VERBS})\b|\bwhen\W*$"
    r"|\b(what (date|day|year|month|time)|how long|since when|which (year|month|day)"
    r"|how many (years|months|weeks|days|hours))\b",
    re.IGNORECASE)

# An expression that places something in time: a relative day ("yesterday", "tonight"), a
# named span ("last week", "next summer", "this Friday"), "ago", a month (above) or weekday, a year
# (1900-2099), a short date (5/12), "recently", "the other day", "a few days"; or a length of
# time: a count of spans ("3 years", "two weeks", "a couple of months"), "since", "for ages",
# "for a while", "for so long", "for a long time", "for years/months".
# Matched against the lowered text: IGNORECASE makes this pattern ~3x slower.
_NAMES_A_TIME = re.compile(
    rf"\b(yesterday|today|tonight|tomorrow|recently|lately|ago|the other day"
    rf"|(last|next|this|past|previous|coming)\s+({_SPANS}|{_DAYS})"
    rf"|({_MONTHS})|({_SHORT_MONTHS})\.?\s+\d{{1,2}}|\d{{1,2}}\s+({_SHORT_MONTHS})"
    rf"|({_DAYS})|(19|20)\d\d|\d{{1,2}}/\d{{1,2}}|few ({_SPANS})"
    rf"|({_COUNT})\s+({_LENGTHS})|since|for (ages|years|months|a while|so long|a long time))\b")
# Where a message says when, it says so near its start ("yesterday I ...", "back in May, ..."):
# only its first this-many characters are looked at. Each of a search's ~100 candidates is
# looked at, on the reply path; whole, a history of pasted logs (100 messages of 50,000
# characters) cost ~0.9 s of CPU per when-question instead of ~10 ms. LoCoMo's longest turn
# has 454 characters.
TIME_SCAN_CHARS = 1000


def asks_when(text: str) -> bool:
    """Whether ``text`` asks about the time of something ("When did we ...?", "How long have
    you ...?")."""
    return bool(_ASKS_WHEN.search(text))


def names_a_time(text: str) -> bool:
    """Whether ``text`` places something in time ("yesterday", "last week", "in May"), in its
    first TIME_SCAN_CHARS characters."""
    return bool(_NAMES_A_TIME.search(text[:TIME_SCAN_CHARS].lower()))
