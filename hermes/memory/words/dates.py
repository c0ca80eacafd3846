"""The dates a query names ("in May 2023", "on 13 October", "last month"), as spans of time:
what session search's re-ranking (hermes.memory.sessions.rerank) and fact recall by date
(hermes.memory.facts.vectors) both read. English only (tests/test_timewords_languages.py).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class TimeSpan:
    start: datetime
    end: datetime  # exclusive
    text: str  # the words of the query it came from


# -- query analysis -------------------------------------------------------------------------


_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS.pop("may", None)  # re-added below with a guard: "may" is usually a verb
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True)) + "|may"
# The short forms that are not also a full name ("jan", "mar", "dec", ...; not "may").
_SHORT_ONLY = {name.lower() for name in calendar.month_abbr if name} - {
    name.lower() for name in calendar.month_name if name}
_SHORT_BEFORE = ("in", "during", "since", "early", "late", "mid")
# Full names that are also a word or a name ("a march", "April called", "an august house",
# "June's car"; "may" has its own guard below): a month only with its year, a day (above) or
# after one of these ("in March", "last August", "between August and November 2023").
_WORDLIKE = {"march", "april", "june", "august"}
_WORDLIKE_BEFORE = ("in", "during", "of", "since", "by", "around", "early", "late", "mid",
                    "between", "from", "until", "till", "last", "next", "this")
_DAY_MONTH_YEAR = re.compile(
    rf"\b(?:(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?|({_MONTH_RE})\.?\s+"
    rf"(\d{{1,2}})(?:st|nd|rd|th)?\b)(?:,?\s+(\d{{4}}))?", re.I)
_MONTH_YEAR = re.compile(rf"\b(?:in|during|of|since|by|around|early|late|mid|between|from"
                         rf"|until|till|last|next|this)?\s*"
                         rf"({_MONTH_RE})\.?(?:,?\s+(\d{{4}}))?\b", re.I)
_YEAR = re.compile(r"\b(?:in|during|of|since|around)\s+((?:19|20)\d{2})\b", re.I)
_RELATIVE = re.compile(r"\b(last|this|past)\s+(year|month|week)\b|\byesterday\b|\btoday\b", re.I)


# The years a named date can be read in: datetime's own, less its last (a span and the slack
# after it must fit: "December 31, 9999" would overflow), so that "in January 0000" or "on
# December 30, 9999" are words, not an error.
_YEARS = range(1, 9999)


def _month_span(year: int, month: int) -> tuple[datetime, datetime]:
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def time_spans(query: str, now: datetime | None = None) -> list[TimeSpan]:
    """The dates a query names, as spans of time. A month without a year means that month in
    any year (returned for every year from 1990 to now, cheap to test); "may" counts as the
    month only next to a day or a year, or after "in"."""
    spans: list[TimeSpan] = []
    taken: list[tuple[int, int]] = []
    now = now or datetime.now(UTC)
    years = range(1990, now.year + 2)

    def month_no(word: str) -> int:
        return _MONTHS.get(word.lower().rstrip("."), 5 if word.lower() == "may" else 0)

    for m in _DAY_MONTH_YEAR.finditer(query):
        day = int(m.group(1) or m.group(4))
        month = month_no(m.group(2) or m.group(3))
        if not month or not 1 <= day <= 31:
            continue
        for year in [int(m.group(5))] if m.group(5) else years:
            if year not in _YEARS:
                continue
            try:
                start = datetime(year, month, day, tzinfo=UTC)
            except ValueError:
                continue
            spans.append(TimeSpan(start, start + timedelta(days=1), m.group(0)))
        taken.append(m.span())
    for m in _MONTH_YEAR.finditer(query):
        if any(a <= m.start(1) < b for a, b in taken):
            continue
        word = m.group(1)
        if word.lower() == "may" and not (m.group(2) or m.group(0).lower().strip().startswith(
                ("in", "during", "of", "since", "by", "around", "early", "late", "mid"))):
            continue
        # A short form alone is a name or a word more often than a month ("Did Jan call?",
        # Spanish "mar", the sea): a month only with its year or after "in"/"since"/... .
        if word.lower().rstrip(".") in _SHORT_ONLY and not (
                m.group(2) or m.group(0).lower().strip().startswith(_SHORT_BEFORE)):
            continue
        if word.lower() in _WORDLIKE and not (
                m.group(2) or m.group(0).lower().strip().startswith(_WORDLIKE_BEFORE)):
            continue
        month = month_no(word)
        for year in [int(m.group(2))] if m.group(2) else years:
            if year not in _YEARS:
                continue
            start, end = _month_span(year, month)
            spans.append(TimeSpan(start, end, m.group(0).strip()))
        taken.append(m.span())
    for m in _YEAR.finditer(query):
        if any(a <= m.start(1) < b for a, b in taken):
            continue
        year = int(m.group(1))
        spans.append(TimeSpan(datetime(year, 1, 1, tzinfo=UTC),
                              datetime(year + 1, 1, 1, tzinfo=UTC), m.group(0)))
    for m in _RELATIVE.finditer(query):
        word = m.group(0).lower()
        today = now.replace(hour=0, minute=0, second=0, microsecond=0)
        if word == "yesterday":
            spans.append(TimeSpan(today - timedelta(days=1), today, word))
        elif word == "today":
            spans.append(TimeSpan(today, today + timedelta(days=1), word))
        else:
            unit = m.group(2).lower()
            which = m.group(1).lower()
            if unit == "year":
                year = now.year - (which == "last")
                start, end = datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC)
                if which == "past":
                    start, end = now - timedelta(days=365), now
            elif unit == "month":
                first = today.replace(day=1)
                if which == "last":
                    start = (first - timedelta(days=1)).replace(day=1)
                    end = first
                elif which == "this":
                    start, end = _month_span(now.year, now.month)
                else:
                    start, end = now - timedelta(days=31), now
            else:
                monday = today - timedelta(days=today.weekday())
                start, end = {"last": (monday - timedelta(days=7), monday),
                              "this": (monday, monday + timedelta(days=7)),
                              "past": (now - timedelta(days=7), now)}[which]
            spans.append(TimeSpan(start, end, word))
    return spans
