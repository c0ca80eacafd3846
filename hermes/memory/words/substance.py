"""Whether a text says anything worth recalling memory for: a word that is neither a stopword
nor chatter ("ok!", "thanks"). Read by per-turn recall of past messages
(hermes.memory.sessions.past_messages) and of facts (hermes.memory.facts.recall)."""

from __future__ import annotations

import re

from hermes.store.fts import STOPWORDS, build_match

# Words that say nothing about the past ("ok!", "thanks", "good morning"): a message made only
# of these and stopwords recalls nothing.
CHATTER = frozenset("""
    ok okay k kk thanks thank thx ty cheers yes yeah yep yup no nope nah hi hello hey bye
    goodbye cool great nice good fine sure lol haha wow morning evening night please sorry
    awesome perfect right alright done np welcome
    """.split())  # noqa: SIM905 - a word block reads better than a list literal


def has_substance(text: str) -> bool:
    """Whether ``text`` holds a word worth recalling anything for (not only stopwords and
    chatter like "ok!", "thanks"); CJK text always does."""
    plan = build_match(text)
    return bool(plan.cjk) or any(
        not t.is_stopword and " ".join(t.tokens).lower() not in CHATTER for t in plan.terms)


_WORD = re.compile(r"[^\W_]+")
# An assistant's side of small talk ("Hi! How can I help today?", "Let me know if you need
# anything else."): chatter too when asked whether a message can be a match by meaning, never
# in has_substance (a person's "I need help today" recalls what it can).
PLEASANTRIES = frozenset("""
    help helping helped assist assistance anything else today let know need glad happy feel
    free ask hope again lot re ll ve questions question more
    nothing really saying hear day just
    """.split())  # noqa: SIM905 - a word block reads better than a list literal


def is_chatter(text: str) -> bool:
    """Whether ``text`` is only chatter and stopwords ("hello there", "ok, thanks!"), read by
    its words alone (no match plan: session search asks it of every candidate found by
    meaning). A small embedding model finds a short greeting close to any short query
    ("my car" and "hello there": 0.29 with MiniLM, over its floor of 0.2), and so is an
    assistant's "How can I help today?": such a message is never a match by meaning. A
    text with a word of any other kind, or none at all (CJK), is not chatter."""
    words = _WORD.findall(text.casefold())
    return bool(words) and all(w in STOPWORDS or w in CHATTER or w in PLEASANTRIES
                               for w in words) \
        and not build_match(text).cjk
