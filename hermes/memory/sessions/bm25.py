"""Bounded BM25 ranking for large FTS5 tables, and the snippets shown with a hit.

FTS5's own ``bm25()`` first counts, for every phrase of the query, every row that contains it
(its IDF), through a per-row callback: on a million messages a common word costs hundreds of
milliseconds before a single row is scored, however few rows are wanted. So search asks FTS5 only
for what it does fast (streaming matches in rowid order, counting matches) and scores a bounded
set of candidate rows here with the same BM25 formula:

* document frequencies come from capped ``count(*)`` queries (a phrase in more than ``DF_CAP``
  rows is treated as appearing in ``DF_CAP``: its weight is near zero either way);
* term frequencies are counted in the candidate's text with a pattern that mirrors the index
  (case and diacritics folded, a crude suffix strip standing in for Porter stemming). The row is
  known to match already; the pattern only decides how well.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from hermes.safe_text import one_line
from hermes.store.fts import MatchPlan, Term

if TYPE_CHECKING:  # HIGHLIGHT is read by a search the daemon answered (no store there)
    import sqlite_utils

K1 = 1.2
B = 0.75
DF_CAP = 10_000
# How matched words are marked in snippets (the CLI turns them bold, the web panel <mark>s
# them). A line's own asterisks and backslashes are escaped there ("\\*", "\\\\", as markdown
# does), so that "**" marks the query's words only: an assistant's "**Kyoto**" in a line found
# by meaning is no match (it was lit as one, and said "words" for a hit lifted by a fact).
# snippet_parts() reads a snippet back.
HIGHLIGHT = ("**", "**")
# What FTS5's snippet() marks with, turned into HIGHLIGHT once the line's own asterisks are
# escaped (marked_snippet): characters of Unicode's private use, in no line a person writes.
FTS_MARKS = ("\ue000", "\ue001")
_SUFFIXES = ("ations", "ation", "ingly", "ings", "ing", "edly", "ed", "ies", "es", "ly", "s", "e")


def crude_stem(token: str) -> str:
    """A prefix that the Porter stem of ``token``'s relatives starts with (good enough to count
    occurrences; the index already decided that the row matches)."""
    token = token.lower()
    for suffix in _SUFFIXES:
        if token.endswith(suffix) and len(token) - len(suffix) >= 4:
            return token[: -len(suffix)]
    return token


def fold(text: str) -> str:
    """Lower case without diacritics, as the ``remove_diacritics 2`` tokenizer sees it."""
    text = text.lower()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def term_pattern(term: Term) -> tuple[str, re.Pattern[str] | None]:
    """A literal every occurrence contains, and the pattern that counts occurrences (None when
    counting the literal is enough: one long token, matched by prefix like a stem)."""
    stems = [crude_stem(fold(token)) for token in term.tokens]
    if len(stems) == 1 and len(stems[0]) >= 4:
        return stems[0], None
    parts = []
    for stem in stems:
        # Long stems match by prefix; short words take the usual endings ("fix" finds "fixed")
        # and short codes ("c" of C++, "v2") only themselves.
        if len(stem) >= 4:
            parts.append(re.escape(stem) + r"[^\W_]*")
        elif len(stem) == 3 and stem.isalpha():
            parts.append(re.escape(stem) + r"(?:e|es|ed|er|ing|s)?(?![^\W_])")
        else:
            parts.append(re.escape(stem) + r"(?![^\W_])")
    return stems[0], re.compile(r"(?<![^\W_])" + r"[\W_]+".join(parts))


def _length(text: str) -> int:
    """Words in ``text``, near enough for length normalisation (spaces are cheap to count)."""
    return text.count(" ") + 1 if text else 0


@dataclass
class Bm25:
    """BM25 for a fixed list of terms over one FTS5 table."""

    patterns: list[tuple[str, re.Pattern[str] | None]]
    idf: list[float]
    df: list[int]  # capped at DF_CAP

    @classmethod
    def for_terms(
        cls, db: sqlite_utils.Database, fts_table: str, terms: Sequence[Term], total: int
    ) -> Bm25:
        idf, dfs = [], []
        for term in terms:
            if term.is_stopword:  # common by definition: not worth counting
                n = max(total, DF_CAP)
                idf.append(math.log(1 + (n - DF_CAP + 0.5) / (DF_CAP + 0.5)))
                dfs.append(DF_CAP)
                continue
            df = db.execute(
                f"SELECT count(*) FROM (SELECT rowid FROM {fts_table} "
                f"WHERE {fts_table} MATCH ? LIMIT {DF_CAP})",
                [term.fts],
            ).fetchone()[0]
            n = max(total, df)
            idf.append(math.log(1 + (n - df + 0.5) / (df + 0.5)))
            dfs.append(df)
        return cls([term_pattern(t) for t in terms], idf, dfs)

    def score(self, text: str | None, avg_words: float) -> float:
        if not text:
            return 0.0
        folded = fold(text)
        return self._score(folded, _length(folded), avg_words)

    def _score(self, folded: str, length: int, avg_words: float) -> float:
        norm = K1 * (1 - B + B * max(length, 1) / max(avg_words, 1.0))
        total = 0.0
        for (literal, pattern), idf in zip(self.patterns, self.idf, strict=True):
            if literal not in folded:
                continue
            tf = folded.count(literal) if pattern is None else len(pattern.findall(folded))
            if tf:
                total += idf * tf * (K1 + 1) / (tf + norm)
        return total

    def score_all(self, texts: Sequence[str | None]) -> list[float]:
        """Scores for several texts, their average length standing in for the table's."""
        folded = [fold(t) if t else "" for t in texts]
        lengths = [_length(t) for t in folded]
        present = [n for n in lengths if n]
        avg = sum(present) / len(present) if present else 1.0
        return [self._score(t, n, avg) if t else 0.0 for t, n in zip(folded, lengths, strict=True)]


# The user's best matches by FTS5's bm25 (:func:`best_scored`) are first looked for among the
# best this-many times as many matches of the whole index, whoever's they are: the user's rows
# are then read for those few only, not for every match (at 1M messages, a word in 500-1,800
# messages: 3.5 -> 2.4 ms, the same rows; scripts/bench_turn.py's home).
WIDER = 4
# ... when the expression matches at least this many times as many messages as that first step
# reads: reading a row by id costs about what joining a match does, so with fewer matches the
# two steps cost more than the join. bench_turn's home, mean ms, joined vs two steps, by
# matches / first-step rows: limit 100: under 1x 1.67 / 2.29, 1-2x 3.31 / 3.82, 2-4x 5.15 /
# 4.92; limit 20: 2-4x 1.37 / 1.19, 4-8x 2.77 / 2.12, over 8x 5.01 / 3.41 (/tmp/i14s9/curve.py).
# LoCoMo's full search (100 of a few hundred matches) took 10.4 -> 11.2 ms p50 with two steps
# always, the same hits.
TWO_STEP_MATCHES = 3
# When the user's rows were too few there (a home shared by many users), the joined query
# serves that user for this long before the two steps are tried again.
JOINED_SECONDS = 600
# The lines of a conversation, the only messages a search finds (on ``m``, the messages table):
# a tool result (the JSON of facts and conversations a memory tool found, echoing them) or a
# system note is never a hit, never a word "said before".
SAID = "m.role IN ('user', 'assistant')"

_joined_until: WeakKeyDictionary[sqlite_utils.Database, dict[str, float]] = WeakKeyDictionary()


def best_scored(db: sqlite_utils.Database, expr: str, user: str, source: str | None,
                limit: int, weights: Sequence[float], now: float, matches: int | None = None
                ) -> list[tuple[int, int, float]]:
    """``user``'s best ``limit`` messages matching ``expr`` by FTS5's own bm25 (column
    ``weights``; of sessions from ``source`` only, when given): (id, session id, score), higher
    is better, ties oldest first (by id).

    FTS5 scores every match either way; what the two steps save is reading each match's row
    to see whose it is. The best ``WIDER * limit`` matches of the index come first, then the
    user's among them: when they are ``limit`` or more (or that was every match), they are the
    user's best, as the joined query would find them. When they are fewer, the joined query
    runs, and serves this user directly for JOINED_SECONDS after ``now`` (seconds). With
    ``matches`` (the expression's matches in the index, counted) under TWO_STEP_MATCHES times
    the first step's rows, the joined query at once."""
    joined = _joined_until.setdefault(db, {})
    wide = WIDER * limit
    if joined.get(user, 0.0) <= now and (matches is None or matches >= TWO_STEP_MATCHES * wide):
        rows = db.execute(
            "SELECT rowid, -bm25(messages_fts, ?, ?) AS score FROM messages_fts "
            "WHERE messages_fts MATCH ? ORDER BY score DESC, rowid LIMIT ?",
            [*weights, expr, wide]).fetchall()
        if not rows:
            return []
        mine = dict(db.execute(
            f"SELECT m.id, m.session_id FROM messages m WHERE m.user = ? AND {SAID} "
            "AND (? IS NULL OR (SELECT source FROM sessions WHERE id = m.session_id) = ?) "
            f"AND m.id IN ({','.join('?' * len(rows))})",
            [user, source, source, *(r[0] for r in rows)]).fetchall())
        found = [(mid, mine[mid], score) for mid, score in rows if mid in mine]
        if len(found) >= limit or len(rows) < wide:
            return found[:limit]
        if len(joined) > 10_000:
            joined.clear()
        joined[user] = now + JOINED_SECONDS
    return db.execute(
        "SELECT m.id, m.session_id, -bm25(messages_fts, ?, ?) AS score FROM messages_fts "
        "CROSS JOIN messages m ON m.id = messages_fts.rowid "
        f"WHERE messages_fts MATCH ? AND m.user = ? AND {SAID} "
        "AND (? IS NULL OR (SELECT source FROM sessions WHERE id = m.session_id) = ?) "
        "ORDER BY score DESC, m.id LIMIT ?",
        [*weights, expr, user, source, source, limit]).fetchall()


def terms_for(plan: MatchPlan, mode: str) -> list[Term]:
    """The terms the expression of ``mode`` holds: all of them, or the non-stopwords."""
    if mode == "strict":
        return list(plan.terms)
    return [t for t in plan.terms if not t.is_stopword] or list(plan.terms)


def manual_snippet(content: str, plan: MatchPlan, width: int = 160) -> str:
    """A snippet for text FTS5 did not highlight (CJK runs, LIKE; a message found by meaning
    or by a fact, which may share no word): the first occurrence of any query fragment,
    highlighted, with some text either side. Outside a CJK query (matched by LIKE, inside
    words) a fragment is a whole word and no stopword: "What car do I drive?" highlights
    nothing in "Finally picked up the keys" (it used to mark the "i" of "Finally")."""
    positions = []
    # ASCII text holds an ASCII fragment, in any case, only where its lower case holds it: a
    # fragment not there is not looked for (most hits cut by hand match by meaning, holding no
    # word of the query; each pattern's scan costs ~10 us). Outside ASCII, case folds further
    # ("ſun" matches "sun"): every pattern is run.
    lowered = content.lower() if content.isascii() else None
    for literal, pattern in _snippet_patterns(plan.terms, plan.cjk):
        if lowered is not None and literal is not None and literal not in lowered:
            continue
        found = pattern.search(content)
        if found:
            positions.append((found.start(), found.end()))
    if not positions:
        return _escaped(one_line(content, width))
    start, end = min(positions)
    left = max(0, start - width // 2)
    right = min(len(content), end + width // 2)
    text = (
        ("…" if left else "")
        + _escaped(content[left:start])
        + HIGHLIGHT[0] + _escaped(content[start:end]) + HIGHLIGHT[1]
        + _escaped(content[end:right])
        + ("…" if right < len(content) else "")
    )
    return " ".join(text.split())


def marked_snippet(raw: str) -> str:
    """A snippet FTS5 cut with FTS_MARKS, as a hit shows it: the line's own asterisks escaped,
    the query's words between HIGHLIGHT."""
    return _escaped(raw).replace(FTS_MARKS[0], HIGHLIGHT[0]).replace(FTS_MARKS[1], HIGHLIGHT[1])


def snippet_parts(snippet: str) -> list[tuple[str, bool]]:
    """A snippet's pieces as its line wrote them, each with whether it is marked (a word of
    the query)."""
    parts: list[tuple[str, bool]] = []
    text, marked = "", False
    for found in _PIECE.finditer(snippet):
        if found.group() == HIGHLIGHT[0]:
            parts.append((text, marked))
            text, marked = "", not marked
        else:
            text += found.group(1) if found.group(1) is not None else found.group()
    parts.append((text, marked))
    return [(text, marked) for text, marked in parts if text]


_PIECE = re.compile(r"\\(.)|\*\*|[^\\*]+|.", re.DOTALL)


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("*", "\\*")


@lru_cache(maxsize=64)
def _snippet_patterns(terms: tuple[Term, ...], cjk: tuple[str, ...]
                      ) -> tuple[tuple[str | None, re.Pattern[str]], ...]:
    """The fragments :func:`manual_snippet` looks for, compiled once a query (a search cuts
    a snippet by hand for each hit found by meaning: ten or more a search), each with its
    lower case when it is ASCII (else None)."""
    # a word in both its forms: as NFKC folds it and as typed (full-width letters, fts.Term)
    forms = [(t, " ".join(tokens)) for t in terms for tokens in (t.tokens, t.typed) if tokens]
    if cjk:
        fragments = [(f, re.escape(f)) for f in [*cjk, *(form for _, form in forms)]]
    else:
        fragments = [(form, rf"(?<!\w){re.escape(form)}(?!\w)") for t, form in forms
                     if not t.is_stopword]
    return tuple((fragment.lower() if fragment.isascii() else None,
                  re.compile(pattern, re.IGNORECASE)) for fragment, pattern in fragments)
