"""Per-turn fact recall: the facts shown to the model for a new message, within a budget.

The message is reduced to its most selective words, counted *within the user's own active
facts* (another user's facts never decide which of my words are searched), and the facts are
ranked by bm25 over any of those words: a fact holding two of three words is found, and one
holding all three ranks above it by bm25's own sum, without an all-words round first that
would return a single weak match and stop. Trust multiplies; facts below the trust threshold
stay hidden (``FactStore.search``). A message whose every word is common among the user's facts
is not ranked by bm25 (see :meth:`FactRecall._by_common_words`). The chosen facts are then
fitted into a character budget.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING

from hermes.clock import Clock
from hermes.errors import QueryError
from hermes.memory.audience import and_condition
from hermes.memory.facts import provenance
from hermes.memory.facts.records import ACTIVE, COLUMNS, Fact, row_to_fact
from hermes.memory.place import PRIVATE, Place
from hermes.memory.words.substance import has_substance
from hermes.safe_text import scrub
from hermes.store.fts import Term, build_match

if TYPE_CHECKING:
    from hermes.memory.facts.query_ahead import QueryAhead
    from hermes.memory.facts.store import FactStore

# A word found in this many of the user's facts or more is "common": an OR over it would make
# FTS5 score a large share of the user's facts on every turn. FTS5's bm25 costs ~2 us a match
# (CPU, warm: the match's document length is read and its positions walked), so this bounds a
# searched word's bm25 at about 1 ms, and counting a word to find it common at 500 index reads
# (~0.45 us each). 1,000 until pass 10 of issue 13: on scripts/bench_turn.py's home (100k facts)
# the turns without past messages spent 1-4.4 ms in bm25 over words in 500-1,900 facts and
# ~0.9 ms counting each new common word; 150 later turns, one process, passes A B B A (load
# 5.3): CPU p50 23.5 -> 21.6 ms, without past messages p50 / p90 16.3 / 22.9 -> 14.4 / 19.2.
# LoCoMo cannot see it: no word is in more than 278 of a conversation's facts.
COMMON_TERM_DOCS = 500
RECALL_TERMS = 6
DF_CACHE_SECONDS = 600
# Remembered for a word found in some of the user's facts, fewer than COMMON_TERM_DOCS, whose
# count was not needed (FactRecall.rarity).
UNCOUNTED = -1
# A word in at most this many facts (of all users) is counted in the user's facts every time.
FRESH_COUNT = 50
# A word's matches are counted among the user's active facts through the narrowest index that
# says whose a fact is (migration m026: the active facts' (id, user), small enough to stay in
# SQLite's page cache): 0.3-0.5 us a match instead of m024's 1.1-1.7 (whose rows hold the
# trust and dates the ranking needs). SQLite looks a rowid up in the table unless told.
COUNT_INDEX = "INDEXED BY idx_facts_active_user"


class FactRecall:
    """What a turn recalls from one user's facts (the read side of the fact store per turn)."""

    def __init__(self, facts: FactStore, clock: Clock, place: Place = PRIVATE) -> None:
        """``place``: where what it recalls is read, unless a call says (a shared place: only
        what its readers may see, hermes.memory.audience)."""
        self.facts = facts
        self.place = place
        self.db = facts.db
        self.clock = clock
        self._df_cache: dict[tuple[str, str], tuple[int, float, tuple | None]] = {}

    def at(self, place: Place) -> FactRecall:
        """This recall reading for ``place`` by default, sharing its word counts (a private
        place: this one)."""
        if place == self.place:
            return self
        view = copy.copy(self)
        view.place = place
        return view

    def doc_count(self, user: str, term: Term) -> int:
        """How many of ``user``'s active facts contain ``term``, counted up to
        COMMON_TERM_DOCS (bounded).

        The index knows no users, so the count first asks it alone how many facts of anyone
        hold the word (fast): none means none of mine. A word in few facts is then counted in
        mine every time (cheap, and must be fresh: a fact with it may have just been added);
        a more frequent one is counted in mine once per DF_CACHE_SECONDS (reading each match's
        row costs about a microsecond, and its exact count only orders words by rarity), and
        meanwhile not asked of the index at all (0.1 ms a word, five or more words a turn)."""
        key = (user, term.fts)
        cached = self._remembered(key)
        if cached is not None and cached != UNCOUNTED:
            return cached
        anyone = self._anyone(term, FRESH_COUNT + 1)
        if anyone == 0:
            return 0
        count = self._count_mine(user, term, COMMON_TERM_DOCS)
        if anyone > FRESH_COUNT:
            self._remember(key, count)
        return count

    def rarity(self, user: str, term: Term) -> int | None:
        """:meth:`doc_count` where it is cheap, else None: some of ``user``'s active facts
        hold ``term``, fewer than COMMON_TERM_DOCS, not counted.

        Fewer than COMMON_TERM_DOCS facts of anyone holding the word (the index alone, ~0.15
        us a match) means fewer of mine: one of mine holding it says the word is searchable.
        Counting mine reads each match's row (~0.5 us, 0.4-1.4 ms for a word in hundreds of
        facts) and only orders the words by rarity, which matters only when more than
        RECALL_TERMS are left to choose from (then :meth:`doc_count` counts them). Remembered
        as doc_count's counts are (a word in more than FRESH_COUNT facts)."""
        key = (user, term.fts)
        cached = self._remembered(key)
        if cached is not None:
            return None if cached == UNCOUNTED else cached
        anyone = self._anyone(term, COMMON_TERM_DOCS)
        if anyone == 0:
            return 0
        if anyone <= FRESH_COUNT or anyone >= COMMON_TERM_DOCS:
            count = self._count_mine(user, term, COMMON_TERM_DOCS)
            if anyone > FRESH_COUNT:
                self._remember(key, count)
            return count
        mine = self._count_mine(user, term, 1)
        if mine:
            self._remember(key, UNCOUNTED)
            return None
        self._remember(key, 0)
        return 0

    def _anyone(self, term: Term, limit: int) -> int:
        """How many facts of anyone (every state) hold ``term``, up to ``limit``."""
        return int(self.db.execute(
            "SELECT count(*) FROM (SELECT 1 FROM facts_fts WHERE facts_fts MATCH ? LIMIT ?)",
            [term.fts, limit]).fetchone()[0])

    def _count_mine(self, user: str, term: Term, limit: int) -> int:
        """How many of ``user``'s active facts hold ``term``, up to ``limit``."""
        return int(self.db.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM facts_fts CROSS JOIN facts f {COUNT_INDEX} "
            f"ON f.id = facts_fts.rowid WHERE facts_fts MATCH ? AND f.user = ? AND {ACTIVE} "
            "LIMIT ?)",
            [term.fts, user, int(limit)],
        ).fetchone()[0])

    def _remembered(self, key: tuple[str, str]) -> int | None:
        cached = self._df_cache.get(key)  # only words in more than FRESH_COUNT facts
        if cached is None or self.clock.now().timestamp() - cached[1] >= DF_CACHE_SECONDS:
            return None
        # A count only orders words; a 0 drops the word from the search, so it holds only
        # while none of the user's facts changed (added, edited, merged, restored) since.
        if cached[0] == 0 and cached[2] != self._last_change(key[0]):
            return None
        return cached[0]

    def _remember(self, key: tuple[str, str], count: int) -> None:
        if len(self._df_cache) > 20_000:
            self._df_cache.clear()
        changed = self._last_change(key[0]) if count == 0 else None
        self._df_cache[key] = (count, self.clock.now().timestamp(), changed)

    def _last_change(self, user: str) -> tuple[int | None, str | None]:
        """The newest fact of anyone and when ``user``'s facts last changed (an edit, a
        merge, a restore), by any process: two index seeks, a few microseconds."""
        row = self.db.execute("SELECT (SELECT max(id) FROM facts), (SELECT max(updated_at) "
                              "FROM facts WHERE user = ?)", [user]).fetchone()
        return row[0], row[1]

    def selective_query(self, user: str, query: str) -> str:
        """The message reduced to its most selective words, for a search that stays fast.

        Words that occur in none of the user's facts are dropped, then the rarest are kept;
        common words are only used when nothing rarer is left. Quoted, so phrases stay phrases.
        """
        return self._selective(user, query)[0]

    def _selective(self, user: str, query: str) -> tuple[str, bool]:
        """:meth:`selective_query`, and whether only common words were left (each in
        COMMON_TERM_DOCS or more of the user's facts)."""
        plan = build_match(query)
        if plan.cjk or not plan.terms:
            return query, False
        counted = []
        for index, term in enumerate(t for t in plan.terms if not t.is_stopword):
            count = self.rarity(user, term)
            if count != 0:
                counted.append((count, index, term))
        searchable = [item for item in counted if item[0] is None or item[0] < COMMON_TERM_DOCS]
        if len(searchable) > RECALL_TERMS:
            # The rarest RECALL_TERMS: the words left uncounted are counted now; a tie in the
            # message's order. (Fewer are all searched, in the message's order.)
            searchable = sorted(
                ((self.doc_count(user, term) if count is None else count, index, term)
                 for count, index, term in searchable), key=lambda item: (item[0], item[1]))
        chosen = [t for _, _, t in searchable][:RECALL_TERMS]
        common = not chosen and bool(counted)
        chosen = chosen or [t for _, _, t in sorted(counted, key=lambda item: item[:2])][:2]
        # As typed: the search plans this text again (a full-width word then stands for both of
        # its forms, hermes.store.fts)
        return " ".join('"' + " ".join(t.typed or t.tokens) + '"' for t in chosen), common

    def meaning(self, query: str) -> str:
        """The text a message is embedded as for fact recall (what :meth:`ranked` embeds)."""
        return scrub(query)

    def will_embed(self, user: str, query: str) -> bool:
        """Whether :meth:`ranked` may embed ``query`` (so that a turn can start the
        embedding early): fact vectors on, the user has some, the text is not CJK (matched
        by LIKE, never by meaning) and holds a word."""
        vectors = self.facts.vectors
        return (vectors is not None and bool(query.strip()) and has_substance(query)
                and not build_match(query).cjk and vectors.holds_any(user))

    def ranked(self, user: str, query: str, *, limit: int,
               ahead: QueryAhead | None = None, meaning: str | None = None,
               place: Place | None = None) -> list[Fact]:
        """The user's best ``limit`` facts for ``query``: bm25 over any selective word, x trust
        (fused with meaning when fact vectors are on). When every word is common, the nearest
        facts by meaning, or without vectors the newest facts holding those words. ``ahead``:
        the message's embedding already computing on the worker (:meth:`meaning`'s text);
        ``meaning``: the text to embed instead (session search's, whose vector is made).
        ``place``: where the facts will be read (a shared place: only what its readers may
        see; the words are still chosen by the user's facts: counts only, never shown)."""
        place = self.place if place is None else place
        selective, common = self._selective(user, query)
        if not selective.strip() and (self.facts.vectors is None or not has_substance(query)):
            return []  # by meaning alone, "thanks!" would recall the nearest facts anyway
        # Words: the selective ones; meaning: the message as written, its "?" too (MiniLM
        # reads a question as one: bench_locomo --mode prompt shown 0.882 -> 0.888, both halves
        # and every name perturbation better than its words alone). Past-message search embeds
        # the same text (without the names of its candidates' speakers, when it holds any),
        # so one embedding serves both.
        meaning = scrub(meaning) if meaning else self.meaning(query)
        try:
            if common:
                found = self._by_common_words(user, selective, limit, meaning, ahead, place)
            else:
                found = self.facts.search(user, selective, limit=limit, any_word=True,
                                          meaning=meaning, ahead=ahead, place=place)
        except QueryError:
            # Nothing searchable in the message (only emoji or punctuation): nothing to recall.
            return []
        # What neither meaning (at the model's floor) nor a word the message's words are
        # trusted wholly for found is not shown: nothing rather than noise (the per-turn
        # search returns none such already, hermes.memory.facts.search).
        return [fact for fact in found if not fact.fill_in]

    def nearest(self, user: str, query: str, *, limit: int, floor: float,
                meaning: str | None = None, place: Place | None = None) -> list[Fact] | None:
        """The user's ``limit`` facts nearest to ``meaning`` (default: :meth:`meaning` of
        ``query``) by the fact vectors' similarity, those at ``floor`` or above only, best
        first, each with its ``cosine`` (score: cosine x trust); the trust threshold and
        forgotten or superseded facts hide as in :meth:`ranked`. No bm25, no selective words.
        None when meaning cannot rank here (no fact vectors, none of the user's facts embedded
        yet, CJK text, a message of chatter only): the caller asks :meth:`ranked` then.

        For session search's fact evidence by meaning (hermes.memory.sessions.fact_evidence),
        where a hit's strength is its cosine alone and a fact under the ramp's first cosine
        lifts nothing: the fused search's words side (selective words, bm25, rows and fusion)
        cost ~3-4 ms CPU a question at LoCoMo's ~270 facts a user for the same recall
        (bench_locomo --with-facts, sess notes pass 10)."""
        place = self.place if place is None else place
        vectors = self.facts.vectors
        if vectors is None or limit <= 0 or build_match(query).cjk or not has_substance(query):
            return None
        similarity = vectors.similarity(user, scrub(meaning) if meaning else self.meaning(query))
        if similarity is None:
            return None
        # twice as many as asked: a near fact under the trust threshold leaves room for the next
        near = {i: c for i, c in similarity.nearest(2 * limit).items() if c >= floor}
        if not near:
            return []
        marks = ",".join("?" * len(near))
        visible, visible_params = self.facts.audience.items(place, "f")
        rows = self.db.execute(
            f"SELECT {COLUMNS} FROM facts f WHERE f.user = ? AND {ACTIVE} AND f.trust >= ? "
            f"AND f.id IN ({marks}){and_condition(visible)}",
            [user, self.facts.config.search_min_trust, *near, *visible_params]).fetchall()
        found = []
        # the nearest first (a tie: the newer), made Facts only up to ``limit``
        for row in sorted(rows, key=lambda r: (near[r[0]], r[0]), reverse=True)[:limit]:
            fact = row_to_fact(row)
            fact.cosine = near[fact.id]
            fact.score = fact.cosine * fact.trust
            found.append(fact)
        return provenance.own_first(found)

    def _by_common_words(self, user: str, words: str, limit: int, meaning: str,
                         ahead: QueryAhead | None = None,
                         place: Place | None = None) -> list[Fact]:
        """Facts for a message whose every word is in COMMON_TERM_DOCS or more of the user's
        facts: not ranked by bm25, which would score every fact holding any of them (and FTS5
        reads each word's whole list to weigh it): ~1 µs a match, 110-160 ms a turn at 100k
        facts (scripts/bench_turn.py), to rank facts that share only a common word. By meaning
        when fact vectors are on (then no word decides); else, or when no fact has a vector
        yet, the newest facts holding both of the two least common words, or either."""
        place = self.place if place is None else place
        if self.facts.vectors is not None:
            found = self.facts.search(user, "", limit=limit, any_word=True, meaning=meaning,
                                      ahead=ahead, place=place)
            if found:
                return found
        return provenance.own_first(self.facts.searcher.newest(
            user, words, limit=limit, floor=self.facts.config.search_min_trust,
            visible=self.facts.audience.items(place, "f")))

    def recall(self, user: str, query: str, *, limit: int, budget: int,
               line: Callable[[Fact], str], place: Place | None = None) -> list[Fact]:
        """The most relevant facts for ``query`` whose ``line`` (as shown) fits ``budget``
        characters, best first (in a shared ``place``, those its readers may see)."""
        place = self.place if place is None else place
        if not query.strip() or limit <= 0 or budget <= 0:
            return []
        chosen: list[Fact] = []
        used = 0
        for fact in self.ranked(user, query, limit=limit, place=place):
            size = len(line(fact)) + 1
            if used + size > budget:
                continue  # a shorter, lower-ranked fact may still fit
            chosen.append(fact)
            used += size
        return chosen
