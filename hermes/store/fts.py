"""The one place where user text becomes an FTS5 MATCH expression.

User text never reaches FTS5 raw. Every term is reduced to the tokens the ``unicode61``
tokenizer would index and wrapped in double quotes, so operators (``- : ^ * ( ) + NEAR AND OR
NOT``) and punctuation are only ever literal. A term with inner punctuation (``v2.3.1``,
``alice@example.com``, ``snake_case``, ``state-of-the-art``) becomes a phrase of its tokens,
which matches the same sequence in the text.

A word typed in compatibility forms (full-width Latin letters and digits from an East Asian
input method, ``ＲＥＤＩＳ``; ligatures, superscripts) is searched as NFKC folds it (``REDIS``,
how the text it looks for is mostly written; unicode61 folds case, never width) or as typed
(text written in those forms too): ``("REDIS" OR "ＲＥＤＩＳ")``. Its tokens are the folded
ones. Text stored in those forms is found by a query typed in them, not by plain letters: the
index holds what was written.

Two expressions are built: ``strict`` (every term must match) and ``loose`` (any non-stopword
term), tried in that order by callers via :func:`search_with_fallback`. CJK runs have no word
breaks for unicode61, so they are returned separately for a LIKE match, with the bigrams of
long runs (so any-run finds a word inside a clause).

The plan is bounded for every language: at most :data:`MAX_TERMS` terms (content words kept
before stopwords), :data:`MAX_PHRASE_TOKENS` tokens per phrase and :data:`MAX_CJK_RUNS` CJK runs,
so pasted pages of text (9,000 characters of Japanese, a log file) never build an expression
SQLite refuses (``Expression tree is too large``) or one that takes seconds. A cut plan says so
in :attr:`MatchPlan.notes`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from hermes.safe_text import cut

# Characters FTS5's unicode61 tokenizer treats as part of a token: letters and digits.
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_CJK = re.compile(
    "[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f]+"
)
_PHRASE = re.compile(r'"([^"]*)"')
_POSSESSIVE = re.compile(r"[^\W_]['\u2019][sS]\W*$")

# Bounds of one query plan. Callers OR or AND the terms and runs into one expression, and
# SQLite's expression depth limit is 1,000: these keep every plan far below it.
MAX_TERMS = 64
MAX_PHRASE_TOKENS = 16
MAX_CJK_RUNS = 32
# A CJK run is a whole clause ("東京タワーに行きたい"): its bigrams join the runs, so the
# any-run round finds the word inside it ("東京タワー"), ranked by how many bigrams match.
# Requiring every fragment changes nothing (a matching run holds all its bigrams).
MAX_CJK_BIGRAMS = 16

STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further had hadn't has hasn't have haven't
    having he he'd he'll he's her here here's hers herself him himself his how how's i i'd i'll
    i'm i've if in into is isn't it it's its itself let's me more most mustn't my myself no nor
    not of off on once only or other ought our ours ourselves out over own same shan't she she'd
    she'll she's should shouldn't so some such than that that's the their theirs them themselves
    then there there's these they they'd they'll they're they've this those through to too under
    until up very was wasn't we we'd we'll we're we've were weren't what what's when when's where
    where's which while who who's whom why why's with won't would wouldn't you you'd you'll
    you're you've your yours yourself yourselves s t d ll m re ve also just did does tell know
    """.split()  # noqa: SIM905 - a word block reads better than a 170-item list literal
)


@dataclass(frozen=True)
class Term:
    """One query term: the tokens of a word or a quoted phrase."""

    tokens: tuple[str, ...]
    quoted: bool = False
    # The tokens as typed, when NFKC folding changed them (full-width letters): either matches
    typed: tuple[str, ...] = ()

    @property
    def fts(self) -> str:
        # Tokens hold only letters and digits, so no escaping is needed inside the quotes.
        folded = '"' + " ".join(self.tokens) + '"'
        if not self.typed:
            return folded
        return "(" + folded + ' OR "' + " ".join(self.typed) + '")'

    @property
    def is_stopword(self) -> bool:
        return not self.quoted and len(self.tokens) == 1 and self.tokens[0].lower() in STOPWORDS


@dataclass(frozen=True)
class MatchPlan:
    """What a free-text query means for FTS5."""

    terms: tuple[Term, ...] = ()
    cjk: tuple[str, ...] = ()  # CJK runs, matched with LIKE
    strict: str | None = None  # all terms
    loose: str | None = None  # any non-stopword term; None when it would equal strict
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.terms and not self.cjk


# Full-width ASCII (U+FF01-U+FF5E) and the ideographic space as ASCII, one character for one:
# where quotes and words are found (a full-width quote quotes), before each word is NFKC folded.
_WIDE = {**{code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)}, 0x3000: 0x20}


def fold_width(text: str) -> str:
    """``text`` with full-width ASCII as ASCII (``ＲＥＤＩＳ　７`` -> ``REDIS 7``), the rest as
    it is: what an English model reads, whose vocabulary has no full-width letters."""
    return text if text.isascii() else text.translate(_WIDE)


def _nfkc(word: str) -> str:
    return word if word.isascii() else unicodedata.normalize("NFKC", word)


def _term(typed: str, quoted: bool = False) -> Term | None:
    """The term of ``typed`` (a word, or a phrase's text): the tokens of its NFKC fold, and
    its tokens as typed when they differ."""
    folded = _nfkc(typed)
    tokens = tuple(_TOKEN.findall(folded))
    # A possessive ("Gina's", "Gina’s") is about Gina: the "s" would only demand that the name
    # be written the same way.
    possessive = (not quoted and len(tokens) > 1 and tokens[-1].lower() == "s"
                  and _POSSESSIVE.search(folded) is not None)
    if possessive:
        tokens = tokens[:-1]
    if not tokens:
        return None
    if folded == typed:
        return Term(tokens, quoted)
    as_typed = tuple(_TOKEN.findall(typed))
    if possessive and len(as_typed) > 1:
        as_typed = as_typed[:-1]
    return Term(tokens, quoted, as_typed if as_typed and as_typed != tokens else ())


def _split_terms(text: str) -> tuple[list[Term], list[str]]:
    terms: list[Term] = []
    cjk: list[str] = []

    def add_chunk(chunk: str, quoted: bool) -> None:
        for run in _CJK.findall(chunk):
            cjk.append(run)
        chunk = _CJK.sub(" ", chunk)
        for typed in [chunk] if quoted else chunk.split():
            term = _term(typed, quoted)
            if term is not None:
                terms.append(term)

    # Balanced "quoted phrases" stay phrases; an unbalanced quote is just punctuation. Found
    # in the text with full-width ASCII as ASCII (the same length: the positions hold).
    text = text or ""
    position = 0
    for match in _PHRASE.finditer(fold_width(text)):
        add_chunk(text[position : match.start()], quoted=False)
        add_chunk(text[match.start(1) : match.end(1)], quoted=True)
        position = match.end()
    add_chunk(text[position:], quoted=False)
    return terms, cjk


def _dedupe(terms: Sequence[Term]) -> list[Term]:
    seen: set[tuple[str, ...]] = set()
    result = []
    for term in terms:
        key = tuple(t.lower() for t in term.tokens)
        if key not in seen:
            seen.add(key)
            result.append(term)
    return result


def _bounded(terms: list[Term], cjk: list[str]) -> tuple[list[Term], list[str], list[str]]:
    """The plan cut to its bounds: content words before stopwords, first ones first."""
    notes = []
    terms = [t if len(t.tokens) <= MAX_PHRASE_TOKENS and len(t.typed) <= MAX_PHRASE_TOKENS
             else Term(t.tokens[:MAX_PHRASE_TOKENS], t.quoted, t.typed[:MAX_PHRASE_TOKENS])
             for t in terms]
    terms = _dedupe(terms)
    if len(terms) > MAX_TERMS:
        notes.append(f"the query was cut to {MAX_TERMS} of its {len(terms)} words")
        content = [i for i, t in enumerate(terms) if not t.is_stopword][:MAX_TERMS]
        if len(content) < MAX_TERMS:
            rest = [i for i, t in enumerate(terms) if t.is_stopword]
            content += rest[: MAX_TERMS - len(content)]
        terms = [terms[i] for i in sorted(content)]
    seen = set(cjk)
    runs = list(dict.fromkeys(cjk))  # each run once, in order
    if len(runs) > MAX_CJK_RUNS:
        notes.append(f"the query was cut to {MAX_CJK_RUNS} of its {len(runs)} CJK runs")
        runs = runs[:MAX_CJK_RUNS]
    grams: list[str] = []
    for run in runs:
        if len(run) > 2:
            grams += [run[i : i + 2] for i in range(len(run) - 1)]
    grams = [g for g in dict.fromkeys(grams) if g not in seen][:MAX_CJK_BIGRAMS]
    return terms, runs + grams, notes


def build_match(text: str) -> MatchPlan:
    """Turn free text into safe, bounded FTS5 expressions. Never raises on any input.

    A plan depends on the text alone, and a turn asks for the same message's several times
    (whether to embed it, its selective words for facts, the past-message gate and search:
    four plans of one message, ~60-120 us each): the last few texts' plans are kept. A plan is
    shared by everyone who asks for that text; nothing changes one once built."""
    if len(text or "") > CACHED_CHARS:
        return _build_match(text)
    return _cached_match(text or "")


# A message longer than this is planned each time (a paste held by the cache would stay).
CACHED_CHARS = 4000


def _build_match(text: str) -> MatchPlan:
    terms, cjk = _split_terms(text or "")
    terms, cjk, notes = _bounded(terms, cjk)
    if not terms:
        return MatchPlan(cjk=tuple(cjk), notes=notes)
    strict = all_of(terms)
    content_terms = [t for t in terms if not t.is_stopword]
    # A quoted phrase the text does not hold must not hide its words: any-word ORs them too.
    words = [Term((token,)) for t in terms if t.quoted and len(t.tokens) > 1
             for token in t.tokens]
    content_terms = _dedupe([*content_terms, *(w for w in words if not w.is_stopword)])
    content_terms = content_terms[:MAX_TERMS]
    loose_expr = " OR ".join(t.fts for t in content_terms) if content_terms else None
    if loose_expr == strict:
        loose_expr = None
    return MatchPlan(terms=tuple(terms), cjk=tuple(cjk), strict=strict, loose=loose_expr,
                     notes=notes)


_cached_match = functools.lru_cache(maxsize=32)(_build_match)


def all_of(terms: Sequence[Term]) -> str:
    """An FTS5 expression matching every term: FTS5 reads phrases side by side as AND, but not
    a parenthesised alternative (a term with its typed form), which needs the keyword."""
    return (" AND " if any(t.typed for t in terms) else " ").join(t.fts for t in terms)


def any_terms(text: str, *, drop_stopwords: bool = True) -> str | None:
    """An OR of the text's terms (stopwords dropped unless nothing else is left)."""
    terms, _ = _split_terms(text or "")
    terms, _, _ = _bounded(terms, [])
    kept = [t for t in terms if not t.is_stopword] if drop_stopwords else terms
    kept = kept or terms
    return " OR ".join(t.fts for t in kept) if kept else None


def brief(text: str, width: int = 80) -> str:
    """A query as echoed in a message: a pasted page is shown by its start."""
    return cut(text, width)


def like_pattern(fragment: str) -> str:
    """A LIKE pattern that matches ``fragment`` literally (use with ``ESCAPE '\\'``)."""
    escaped = fragment.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


T = TypeVar("T")


def search_with_fallback(plan: MatchPlan, run: Callable[[str], list[T]]) -> tuple[list[T], str]:
    """Run ``run(expression)`` strict first, then loose when strict finds nothing.

    Returns the results and which mode produced them ("strict", "loose" or "none"). A MATCH
    error propagates: it is a bug in this module, never "no results".
    """
    if plan.strict is None:
        return [], "none"
    results = run(plan.strict)
    if results:
        return results, "strict"
    if plan.loose:
        results = run(plan.loose)
        if results:
            return results, "loose"
    return [], "none"
