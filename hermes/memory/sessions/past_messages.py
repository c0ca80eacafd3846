"""Past conversations for the turn: the few past messages that best match the new message.

The model is shown them in the turn's volatile part, beside the recalled facts, so that it has
what was said before without calling ``session_search`` (which stays for deeper digging). Each
excerpt is a matched message from *another* session with its neighbours (the turn before and
the two after: an answer is read with its question), its date and the session's title, ranked
by session search (``SessionStore.search_messages``: bm25 re-ranked in context, hybrid when
embeddings are on), and fitted into a character budget. Zero model calls; every read is scoped
by the user.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

from hermes.errors import QueryError
from hermes.memory.place import PRIVATE, Place
from hermes.memory.sessions.records import Message, MessageHit, Session, speaker_name
from hermes.memory.sessions.search import SearchProfile
from hermes.memory.sessions.store import SessionStore
from hermes.memory.words.substance import CHATTER
from hermes.safe_text import one_line, scrub
from hermes.safety.secrets import redact_text
from hermes.store.fts import MatchPlan, Term, build_match

log = logging.getLogger(__name__)

# A message line is cut here: an excerpt is a pointer into the past, not a transcript. Most
# turns are shorter (LoCoMo: p50 132, p90 269 characters), and a line cut short may lose the
# answer: bench_locomo --mode prompt's "full" counts a turn only if shown whole, and cutting
# neighbours to 100 characters raised "shown" (0.826) while "full" fell to 0.730.
LINE_CHARS = 400
# Neighbours shown before and after the matched message: what it answers, and what answered
# it and came next (tuning half, "full": ±1 0.814, 1 before + 2 after 0.823).
BEFORE, AFTER = 1, 2
# Matches asked of session search per excerpt wanted (some fall in the current session, some
# overlap an excerpt already taken).
SEARCH_FACTOR = 4
# A word in this many messages or more says little and makes the search cost what a common
# word costs (hermes.memory.sessions.search's bounded path): left out of the turn's search.
COMMON_MESSAGES = 1000
SELECTIVE_TERMS = 4
# A word found in COMMON_MESSAGES messages or more stays common this long without a recount
# (messages are rarely deleted; counting to the cap cost the gate ~0.9 ms a turn at 1M
# messages, scripts/bench_turn.py --stages), remembered per store.
COMMON_SECONDS = 600
_common_words: WeakKeyDictionary[SessionStore, dict[str, float]] = WeakKeyDictionary()
# A user's messages holding a word are counted up to this many: each is a row read (~2.5 µs at
# 1M messages; a word in 900 of them cost the gate 2.3 ms), and the count only orders the words
# by rarity and tells whether the user wrote it at all.
MINE_CAP = 50
# The share of a message's words worth looking for that must occur in the user's past messages
# for any to be recalled (the gate: a message about something never said costs nothing).
# LoCoMo, bm25, tuning half: 0.5 keeps recall for 99 % of the questions (shown -0.002) and
# drops it for 46 % of another conversation's questions and 55 % of everyday requests that
# recalled something before ("summarise the plot of Hamlet" matched "three"); 0.6 costs 0.006.
# With embeddings on, only words-only search is gated (see recall_past_messages).
PAST_SHARE = 0.5
# Any word at once (bm25 ranks those holding most of them first) rather than all words first.
ANY_WORD = True
# The prompt shows a few matches (8 at most, in 2,000 characters), not the 100 the CLI's search
# ranks: session search reads the best 20 bm25 matches in context (not 100) and re-scores the
# best 20 of the word ranking by meaning (not 100), with the same 20 nearest messages and
# windows. bench_locomo --mode prompt, MiniLM, shown (tuning / held-out): full search 0.877 /
# 0.899; 50: 0.880 / 0.897; 30: 0.877 / 0.899; 20: 0.883 / 0.894 (chosen on the tuning half;
# 0.888 overall, as the full search); 10: 0.881 / 0.892; 20 with 10 nearest 0.880 / 0.896.
# Past-message recall at 1M messages (scripts/bench_turn.py's home, A/B): 17.7 -> 14.3 ms CPU.
# A turn under the floor is never shown here in an incidental word match's stead (a list a
# person reads may show it: SemanticParams.in_place_of_words): with it, 9 of 175 implicit
# probes' prompts and 3 of LoCoMo's 1,536 took another excerpt, none of them evidence.
# Meaning beyond words is measured against the best 5 word matches here, as before (the full
# search: the 20 the trust read, SemanticParams.beyond_pool): with 20, shown 0.878 / 0.899 ->
# 0.877 / 0.901 on LoCoMo, and one probe fewer on the tuning half of each probe set.
PROMPT_PROFILE = SearchProfile(candidates=20, pool=20, extra=20, in_place_of_words=0,
                               beyond_pool=5)


@dataclass
class PastExcerpt:
    """A matched past message with its neighbours, as shown to the model."""

    session: Session
    match_id: int
    messages: list[Message]
    score: float
    text: str = field(default="", repr=False)

    @property
    def message_ids(self) -> list[int]:
        return [m.id for m in self.messages]


def _said(message: Message) -> str:
    """A message as an excerpt line shows it, without the mark: who, then the text, redacted
    and cut at LINE_CHARS."""
    # A speaker is stored as given (an importer's author field): redacted like the text.
    name = speaker_name(message.speaker)
    who = (redact_text(" ".join(name.split())) if name else
           "the user" if message.role == "user" else "Hermes")
    # Redacted before the cut: a secret cut in two is no longer found by its pattern.
    return f"{who}: {one_line(redact_text(message.content), LINE_CHARS)}"


def _title(session: Session) -> str:
    # Redacted before the cut, as a line is (an importer stores a title as it came).
    return redact_text(" ".join((session.title or "untitled conversation").split()))[:80]


def render(session: Session, messages: Sequence[Message], match_id: int,
           said: Callable[[Message], str] = _said,
           title: Callable[[Session], str] = _title) -> str:
    """An excerpt as shown: date and title, then its lines, the matched one marked ``>``.
    Everything in it is redacted (``said``: a message's line, ``title``: a session's title,
    e.g. remembered per message and per session)."""
    day = (messages[0].created_at if messages else session.started_at)[:10]
    head = f"[{day} · {title(session)}]"
    return "\n".join([head, *(f"{'>' if m.id == match_id else ' '} {said(m)}"
                              for m in messages)])


def counted_terms(store: SessionStore, user: str, plan: MatchPlan,
                  exclude_session: int | None = None
                  ) -> tuple[list[tuple[int, int, int, Term]], int]:
    """The message's words worth looking for that ``user`` wrote before, each as (how many of
    their messages hold it, up to MINE_CAP; how many messages of the index hold it; position;
    term); and how many such words they never wrote. Not counted either way: stopwords,
    chatter, and words in COMMON_MESSAGES messages or more of the index (anyone's: the cost of
    the search follows how many messages match), remembered as common for COMMON_SECONDS.
    Messages of ``exclude_session`` are not "before": a turn records the message it answers
    before the prompt is built, and the search leaves that conversation out anyway."""
    counted, missing = [], 0
    now = store.clock.now().timestamp()
    common = _common_words.setdefault(store, {})
    for index, term in enumerate(plan.terms):
        if term.is_stopword or " ".join(term.tokens).lower() in CHATTER:
            continue
        key = term.fts.lower()
        if common.get(key, 0.0) > now:
            continue
        mine, matches = store.term_count(user, term.fts, cap=COMMON_MESSAGES,
                                         mine_cap=MINE_CAP, exclude_session=exclude_session)
        if matches >= COMMON_MESSAGES:
            if len(common) > 20_000:
                common.clear()
            common[key] = now + COMMON_SECONDS
        elif mine:
            counted.append((mine, matches, index, term))
        else:
            missing += 1
    return counted, missing


def _rarest(counted: list[tuple[int, int, int, Term]]) -> str:
    # Rarest in the user's messages first, then in order. Past MINE_CAP (a count that stopped
    # there), by the index's count: for a home with one user, the user's own count.
    ordered = sorted(counted, key=lambda c: (c[0], c[1] if c[0] >= MINE_CAP else 0, c[2]))
    return " ".join(term.fts for *_, term in ordered[:SELECTIVE_TERMS])


def selective_query(store: SessionStore, user: str, plan: MatchPlan) -> str:
    """The message's words worth looking for, rarest in ``user``'s messages first: no
    stopwords, no chatter, none found in none of their messages, none in COMMON_MESSAGES
    messages or more of the index, at most SELECTIVE_TERMS. Quoted, so phrases stay phrases;
    "" when nothing is left."""
    return _rarest(counted_terms(store, user, plan)[0])


def about_the_past(counted: Sequence[object], missing: int) -> bool:
    """Whether a message is about something said before: at least PAST_SHARE of its words
    worth looking for were written before. "give me a recipe for pancakes" to a user who once
    said "give it a try" is not."""
    return bool(counted) and len(counted) >= PAST_SHARE * (len(counted) + missing)


def recall_past_messages(
    store: SessionStore,
    user: str,
    query: str,
    *,
    budget: int,
    limit: int = 3,
    before: int = BEFORE,
    after: int = AFTER,
    exclude_session: int | None = None,
    shown: Collection[int] = (),
    words_only: bool = False,
    place: Place = PRIVATE,
) -> list[PastExcerpt]:
    """The best ``limit`` past messages of ``user`` matching ``query``, outside
    ``exclude_session`` (the conversation in progress), each with ``before`` messages before it
    and ``after`` after it (of the same session), whose rendered text fits ``budget`` characters
    in all. Best first. Messages in ``shown`` (already in the prompt: shown earlier in the
    conversation, or the source of a fact recalled for this turn) are not shown again, neither
    as a match nor as a neighbour.

    A message with nothing to look for (an emoji, "ok!", "thanks") recalls nothing. A search
    that fails (a damaged index) recalls nothing too, and says so in one log line, once.
    ``words_only``: search by words even when message vectors are on (the turn's query
    embedding failed, and said so); a model that fails here does the same, in one log line.
    ``place``: where the excerpts will be read (a shared place: only conversations its readers
    may see, hermes.memory.audience).
    """
    if budget <= 0 or limit <= 0 or not query.strip():
        return []
    try:
        hits = _search(store, user, query, limit * SEARCH_FACTOR, exclude_session, words_only,
                       place)
    except (QueryError, sqlite3.Error) as exc:
        # Recall is an aid: the turn goes on without it. Never silent: one line in the log,
        # once per kind of failure (a broken index fails the same way every turn).
        _say_once(f"past messages not recalled: {type(exc).__name__}: {exc}")
        return []
    lines: dict[int, str] = {}

    def said(message: Message) -> str:  # each message redacted once per call
        line = lines.get(message.id)
        if line is None:
            line = lines[message.id] = _said(message)
        return line

    titles: dict[int, str] = {}

    def title(session: Session) -> str:  # each title too (a session's hits share it)
        text = titles.get(session.id)
        if text is None:
            text = titles[session.id] = _title(session)
        return text

    chosen: list[PastExcerpt] = []
    covered: set[int] = set(shown)
    used = 0
    for hit in hits:
        if len(chosen) >= limit:
            break
        match = hit.message
        if hit.session.id == exclude_session or match.id in covered:
            continue
        if not hit.matched:
            continue  # a fill-in of neither words nor meaning: nothing rather than noise
        if match.role not in ("user", "assistant") or not match.content.strip():
            continue  # the match itself is not a conversation line (a tool row)
        # The matched line alone first: an excerpt that cannot fit even that is passed over
        # before its neighbours are read (late hits, once the budget is nearly spent).
        alone = render(hit.session, [match], match.id, said, title)
        if used + len(alone) + 1 > budget:
            continue
        window = store.window(user, hit.session.id, match.id, max(before, after))
        window = [m for m in window if m.role in ("user", "assistant") and m.content.strip()]
        at = next((i for i, m in enumerate(window) if m.id == match.id), None)
        if at is None:
            continue  # deleted since it was found
        window = window[max(0, at - before): at + after + 1]
        fresh = [m for m in window if m.id not in covered]
        text = render(hit.session, fresh, match.id, said, title)
        if used + len(text) + 1 > budget:
            fresh, text = [m for m in fresh if m.id == match.id], alone
        covered.update(m.id for m in fresh)
        chosen.append(PastExcerpt(hit.session, match.id, fresh, hit.score, text))
        used += len(text) + 1
    return chosen


def _search(store: SessionStore, user: str, query: str, limit: int,
            exclude_session: int | None, words_only: bool = False,
            place: Place = PRIVATE) -> list[MessageHit]:
    """Session search's best ``limit`` matches for ``query`` (the gate first: [] when the
    message is not about something said before); by words alone when ``words_only`` or when
    the model cannot embed the message."""
    original = query
    plan = build_match(query)
    by_meaning = store.vectors is not None and not words_only
    if not plan.cjk:
        counted, missing = counted_terms(store, user, plan, exclude_session)
        # By meaning, words never said may still name what was said in other words ("car" /
        # "automobile"): with embeddings, one word said before is enough, as before the gate.
        if not about_the_past(counted, 0 if by_meaning else missing):
            return []
        if by_meaning and not _embeds(store, original):
            by_meaning = False
            if not about_the_past(counted, missing):
                return []
        query = _rarest(counted)
    if place.shared:
        # the store keeps the conversations a reply read there may hold (by meaning too)
        return store.search_messages(user, query, limit=limit, exclude_session=exclude_session,
                                     any_word=ANY_WORD, meaning=original, profile=PROMPT_PROFILE,
                                     place=place, words_only=not by_meaning)
    search = store.search_messages if by_meaning else store.words_only.search_messages
    return search(user, query, limit=limit, exclude_session=exclude_session, any_word=ANY_WORD,
                  meaning=original, profile=PROMPT_PROFILE)


def past_query_text(query: str) -> str:
    """The text past-message search embeds for ``query`` (a turn embeds it ahead)."""
    return scrub(query)


def _embeds(store: SessionStore, text: str) -> bool:
    """Whether the model embeds ``text`` (kept in its recent queries: the search's own
    embedding of it is then not computed again); a failure is one log line, and the turn's
    past messages are found by their words."""
    assert store.vectors is not None
    try:
        store.vectors.embedder.embed_query(past_query_text(text))
    except Exception as exc:  # noqa: BLE001 - any model failure: logged, recall by words
        log.warning("query embedding failed (%s: %s): past messages recalled by their words",
                    type(exc).__name__, exc)
        return False
    return True


_reported: set[str] = set()


def _say_once(problem: str) -> None:
    if problem in _reported:
        return
    if len(_reported) < 100:
        _reported.add(problem)
    log.warning("%s", problem)
