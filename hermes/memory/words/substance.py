"""Whether a text says anything worth recalling memory for: a word that is neither a stopword
nor chatter ("ok!", "thanks"). Read by per-turn recall of past messages
(hermes.memory.sessions.past_messages) and of facts (hermes.memory.facts.recall)."""

from __future__ import annotations

from hermes.store.fts import build_match

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
