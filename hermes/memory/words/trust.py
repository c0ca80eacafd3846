"""How far a search may trust the words a query shares with what is stored (messages or facts).

A query shares words with a long history whether or not it is about what those messages say:
"The plumber laughed at how high I stack the boxes in the cellar" matches every message that
says "boxes" or "laughed", and the message it depends on ("Since the flood we keep everything
on the top shelves") holds none of its words. A word ranking scores each match against the best
match, so a weak, incidental match looks as strong as a specific one, and a re-scoring by
meaning could never pass it. This module says, from the query and the candidates' scores alone,
how much the words are worth for this query (session search: hermes.memory.sessions.semantic;
fact search: hermes.memory.facts.vectors):

* **coverage**: the share of the query's content words (stopwords and the words of a date it
  names left out: the date has its own stage) that a row holds, each word weighted by its
  rarity in the index (idf: a word in few rows says more). A word the index never holds
  weighs most, and no row can cover it;
* **agreement**: how close in meaning that row is, as a share of the best cosine among the
  candidates;
* the **word evidence** of the query: the best ``coverage x agreement`` among the word
  ranking's best few rows. Specific words are held by a row that also means what the query
  means (evidence near 1); incidental words are rare in the query's own terms, spread one a
  row, and held by rows about something else (evidence near 0).

:func:`trust` turns the evidence into a weight in [0, 1] for the word ranking's part of the
score. No model call beyond the query embedding the search made already; a few capped counts
of the query's words (one SQL query a word).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sqlite_utils

from hermes.memory.words.dates import TimeSpan
from hermes.store.fts import STOPWORDS, MatchPlan, Term

# A word's messages are counted up to this many (a count is a walk of its doclist): past it the
# word is common, and its weight is that of a word in this many messages.
DF_CAP = 2000
# Under this many messages in the index, how rare a word is says little (in a home of four
# messages every word is in half of them): the words are trusted wholly, as before.
MIN_HISTORY = 200
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class QueryWords:
    """The query's content words and each one's weight (idf over the whole index)."""

    terms: tuple[Term, ...]
    idf: tuple[float, ...]
    # the weight of a word the index holds in no row (the rarest a word can be)
    unseen: float = 0.0

    @property
    def total(self) -> float:
        return sum(self.idf)


NO_WORDS = QueryWords((), ())


def content_terms(plan: MatchPlan, spans: Sequence[TimeSpan] = ()) -> list[Term]:
    """The query's words worth matching: no stopword (nor one written as a contraction, "I'm",
    which the plan keeps as the phrase "i m"), no word of a date the query names (matched by
    the date stages, not by words)."""
    dated = {w.casefold() for span in spans for w in _WORD.findall(span.text)}
    out = []
    for term in plan.terms:
        if term.is_stopword or "'".join(term.tokens).casefold() in STOPWORDS:
            continue
        if all(token.casefold() in dated for token in term.tokens):
            continue
        out.append(term)
    return out


def query_words(db: sqlite_utils.Database, plan: MatchPlan,
                spans: Sequence[TimeSpan] = (), *, index: str = "messages",
                least: int = MIN_HISTORY) -> QueryWords:
    """The query's content words (:func:`content_terms`) with their idf over an index (the
    messages', or ``index="facts"``): ``ln(1 + (N - df + 0.5) / (df + 0.5))``, df counted up
    to DF_CAP. None (NO_WORDS: trust the words wholly) under ``least`` rows."""
    if index not in ("messages", "facts"):
        raise ValueError(f"no index {index!r}")
    terms = content_terms(plan, spans)
    if not terms:
        return NO_WORDS
    total = int(db.execute(f"SELECT coalesce(max(id), 0) FROM {index}").fetchone()[0])
    if total < least:
        return NO_WORDS
    idf = []
    for term in terms:
        df = int(db.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM {index}_fts WHERE {index}_fts MATCH ? "
            f"LIMIT {DF_CAP})", [term.fts]).fetchone()[0])
        n = max(total, df)
        idf.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
    return QueryWords(tuple(terms), tuple(idf), math.log(1 + (total + 0.5) / 0.5))


def indexed_coverage(db: sqlite_utils.Database, words: QueryWords, index: str,
                     ids: Sequence[int]) -> dict[int, float]:
    """:func:`coverage` as the index matches (every column of ``index``'s FTS5 table: a fact's
    text, its entities, tags and the exchange it was learned from), for the rows ``ids``
    (which the caller has read for its user: the ids are the user's own)."""
    rows = list(dict.fromkeys(int(i) for i in ids))
    if not rows or not words.terms or words.total <= 0:
        return {}
    held = dict.fromkeys(rows, 0.0)
    marks = ",".join("?" * len(rows))
    for term, idf in zip(words.terms, words.idf, strict=True):
        for (rowid,) in db.execute(
                f"SELECT rowid FROM {index}_fts WHERE {index}_fts MATCH ? "
                f"AND rowid IN ({marks})", [term.fts, *rows]).fetchall():
            held[int(rowid)] += idf
    return {i: v / words.total for i, v in held.items()}


def evidence(cover: Mapping[int, float], agreement: Mapping[int, float]) -> float:
    """The query's word evidence: the best ``coverage x agreement`` among the messages given."""
    return max((c * agreement.get(mid, 0.0) for mid, c in cover.items()), default=0.0)


def trust(evidence_value: float, low: float, high: float) -> float:
    """The word ranking's weight for this query: 0 at or under ``low`` (the words are
    incidental), 1 at or over ``high``, linear between."""
    if high <= low:
        return 1.0 if evidence_value >= high else 0.0
    return min(1.0, max(0.0, (evidence_value - low) / (high - low)))
