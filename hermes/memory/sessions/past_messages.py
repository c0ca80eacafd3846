"""Past conversations for the turn: the few past messages that best match the new message.

The model is shown them in the turn's volatile part, beside the recalled facts, so that it has
what was said before without calling ``session_search`` (which stays for deeper digging). Each
excerpt is a matched message from *another* session with its neighbours (the turn before and
after: an answer is read with its question), its date and the session's title, ranked by session
search (``SessionStore.search_messages``: bm25 re-ranked in context, hybrid when embeddings are
on), and fitted into a character budget. Zero model calls; every read is scoped by the user.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from hermes.errors import QueryError
from hermes.memory.secrets import redact_text
from hermes.memory.sessions.records import Message, Session, speaker_name
from hermes.memory.sessions.store import SessionStore
from hermes.store.fts import MatchPlan, build_match

# A message line is cut here: an excerpt is a pointer into the past, not a transcript. The
# matched line keeps more than its neighbours, which are there to say what it answers or what
# answered it (measured on LoCoMo's tuning half, bench_locomo --mode prompt: the shorter
# neighbours leave room for more excerpts, from more sessions, in the same budget).
LINE_CHARS = 200
NEIGHBOUR_CHARS = 100
# Matches asked of session search per excerpt wanted (some fall in the current session, some
# overlap an excerpt already taken).
SEARCH_FACTOR = 4
# Words that say nothing about the past ("ok!", "thanks", "good morning"): a message made only
# of these and stopwords recalls nothing.
CHATTER = frozenset("""
    ok okay k kk thanks thank thx ty cheers yes yeah yep yup no nope nah hi hello hey bye
    goodbye cool great nice good fine sure lol haha wow morning evening night please sorry
    awesome perfect right alright done np welcome
    """.split())  # noqa: SIM905 - a word block reads better than a list literal
# A word in this many messages or more says little and makes the search cost what a common
# word costs (hermes.memory.sessions.search's bounded path): left out of the turn's search.
COMMON_MESSAGES = 1000
SELECTIVE_TERMS = 4
# Any word at once (bm25 ranks those holding most of them first) rather than all words first.
ANY_WORD = True


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


def _line(message: Message, matched: bool) -> str:
    who = speaker_name(message.speaker) or ("the user" if message.role == "user" else "Hermes")
    # Redacted before the cut: a secret cut in two is no longer found by its pattern.
    text = " ".join(redact_text(message.content).split())
    cap = LINE_CHARS if matched else NEIGHBOUR_CHARS
    if len(text) > cap:
        text = text[: cap - 1] + "…"
    return f"{'>' if matched else ' '} {who}: {text}"


def render(session: Session, messages: Sequence[Message], match_id: int) -> str:
    """An excerpt as shown: date and title, then its lines, the matched one marked ``>``."""
    day = (messages[0].created_at if messages else session.started_at)[:10]
    title = " ".join((session.title or "untitled conversation").split())[:80]
    head = f"[{day} · {title}]"
    return "\n".join([head, *(_line(m, m.id == match_id) for m in messages)])


def has_substance(text: str) -> bool:
    """Whether ``text`` holds a word worth recalling anything for (not only stopwords and
    chatter like "ok!", "thanks"); CJK text always does."""
    plan = build_match(text)
    return bool(plan.cjk) or any(
        not t.is_stopword and " ".join(t.tokens).lower() not in CHATTER for t in plan.terms)


def selective_query(store: SessionStore, user: str, plan: MatchPlan) -> str:
    """The message's words worth looking for, rarest in ``user``'s messages first: no
    stopwords, no chatter, none found in none of their messages, none in COMMON_MESSAGES
    messages or more of the index (anyone's: the cost of the search follows how many messages
    match), at most SELECTIVE_TERMS. Quoted, so phrases stay phrases; "" when nothing is left."""
    counted = []
    for index, term in enumerate(plan.terms):
        if term.is_stopword or " ".join(term.tokens).lower() in CHATTER:
            continue
        mine, matches = store.term_count(user, term.fts, cap=COMMON_MESSAGES)
        if mine and matches < COMMON_MESSAGES:
            counted.append((mine, index, term))
    counted.sort(key=lambda c: (c[0], c[1]))
    return " ".join(term.fts for _, _, term in counted[:SELECTIVE_TERMS])


def recall_past_messages(
    store: SessionStore,
    user: str,
    query: str,
    *,
    budget: int,
    limit: int = 3,
    context: int = 1,
    exclude_session: int | None = None,
    shown: Collection[int] = (),
) -> list[PastExcerpt]:
    """The best ``limit`` past messages of ``user`` matching ``query``, outside
    ``exclude_session`` (the conversation in progress), each with ``context`` neighbours either
    side, whose rendered text fits ``budget`` characters in all. Best first. Messages in
    ``shown`` (already in the prompt: shown earlier in the conversation, or the source of a
    fact recalled for this turn) are not shown again, neither as a match nor as a neighbour.

    A message with nothing to look for (an emoji, "ok!", "thanks") recalls nothing.
    """
    if budget <= 0 or limit <= 0 or not query.strip():
        return []
    original = query
    plan = build_match(query)
    if not plan.cjk:
        query = selective_query(store, user, plan)
        if not query:
            return []
    try:
        hits = store.search_messages(user, query, limit=limit * SEARCH_FACTOR,
                                     exclude_session=exclude_session, any_word=ANY_WORD,
                                     meaning=original)
    except QueryError:
        return []
    chosen: list[PastExcerpt] = []
    covered: set[int] = set(shown)
    used = 0
    for hit in hits:
        if len(chosen) >= limit:
            break
        if hit.session.id == exclude_session or hit.message.id in covered:
            continue
        window = store.window(user, hit.session.id, hit.message.id, context)
        window = [m for m in window if m.role in ("user", "assistant") and m.content.strip()]
        fresh = [m for m in window if m.id not in covered]
        if not fresh:
            continue
        text = render(hit.session, fresh, hit.message.id)
        if used + len(text) + 1 > budget:
            # The matched line alone may still fit.
            alone = [m for m in fresh if m.id == hit.message.id]
            text = render(hit.session, alone, hit.message.id)
            if not alone or used + len(text) + 1 > budget:
                continue
            fresh = alone
        covered.update(m.id for m in fresh)
        chosen.append(PastExcerpt(hit.session, hit.message.id, fresh, hit.score, text))
        used += len(text) + 1
    return chosen
