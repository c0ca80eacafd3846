"""Ratings of replies: the facts a reply was built from (``shown_facts``, recorded by the turn)
and the rating each person gave it (``reply_ratings``, at most one per reply and rater).

A 👍/👎 reaches the facts that reply relied on (extraction says which, ``shown_facts.relied``).
Until it has (a plain question runs no extraction, so the model never says), the rating reaches
only the facts whose words the reply visibly repeats (``visibly_used``), and none when the
reply repeats none of them: a 👎 never lowers a correct fact the reply did not use. ``reach``
says which facts a rating reaches and why, so that each front-end can say so. Trust moves
through ``FactStore.rate``; taking a rating back goes through ``FactStore.withdraw_rating``, so
both share the clamping, the rounding, the counters and the history row. Every read and write
is scoped to one user: a reply, a fact or a rating of another user is never reached.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import sqlite_utils

from hermes.clock import Clock, to_ts
from hermes.errors import NotFound
from hermes.memory.facts.entities import COMMON_WORDS
from hermes.memory.facts.store import FactStore, RateResult
from hermes.store.db import write_transaction

_WORD = re.compile(r"[^\W_]+")
# Words a reply can share with a fact without having used it: the fact's frame ("The user
# likes ..."), titles, the commonest verbs of facts.
_FRAME_WORDS = COMMON_WORDS | frozenset(
    """
    user users like likes liked love loves loved live lives lived living work works worked
    working named called name prefer prefers preferred want wants wanted usually favourite
    favorite dr mr mrs ms mx prof st sr jr
    today tomorrow yesterday monday tuesday wednesday thursday friday saturday sunday
    january february march april may june july august september october november december
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def _stem(word: str) -> str:
    """A crude stem, enough to match "lives"/"live"/"living" and "moved"/"moves"."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text) if w.casefold() not in _FRAME_WORDS]


def visibly_used(reply: str, fact: str) -> bool:
    """Whether ``reply`` visibly repeats ``fact``: one of its names or numbers ("Biscuit",
    "Dr. Silva", "42"), or its other words (stemmed) making up half of the fact's or half of a
    short reply's ("It is vault."). A cheap textual check for replies whose reliance
    extraction has not judged; a paraphrase with no shared word is missed (the rating then
    reaches less, never a fact the reply did not use)."""
    said_words = _words(reply)
    said = {_stem(w.casefold()) for w in said_words}
    words = _words(fact)
    names = {_stem(w.casefold()) for w in words
             if (not w.islower() and not w.isdigit() and len(w) > 2)
             or (w.isdigit() and len(w) > 1)}
    if names & said:
        return True
    content = {_stem(w.casefold()) for w in words if not w.isdigit()} - names
    shared = content & said
    # One shared word is enough only for a one-word fact or a one-word reply ("It is
    # vault."): "enjoy the trip!" does not use "going on a trip to Japan"
    return (bool(shared) and 2 * len(shared) >= min(len(content), len(said))
            and (len(shared) >= 2 or len(content) == 1 or len(said) == 1))


@dataclass(frozen=True)
class Reach:
    """The facts a rating of one reply reaches (``fact_ids``) among those shown for it, and
    why: ``relied`` (extraction said which the reply relied on), ``visible`` (not judged; the
    ones the reply's words repeat), ``unclear`` (not judged, and the reply repeats none of
    them: the rating reaches nothing), ``none`` (no fact was shown)."""

    fact_ids: list[int]
    shown: list[int]
    basis: Literal["relied", "visible", "unclear", "none"]

    @property
    def left_out(self) -> list[int]:
        """Facts shown for the reply that the rating does not reach."""
        return [f for f in self.shown if f not in self.fact_ids]

    def explain(self, helpful: bool, rate_one: str) -> str:
        """One sentence for the person who rated, when the rating did not reach every fact
        shown ("" when it did, or none was shown). ``rate_one``: how this front-end rates
        one fact ("/rate ID down")."""
        moved = "raised" if helpful else "lowered"
        if self.basis == "unclear":
            ids = ", ".join(f"#{i}" for i in self.shown)
            return (f"No fact's trust was {moved}: it is not clear which of the facts shown "
                    f"({ids}) this reply used. To rate one fact: {rate_one}.")
        if self.basis in ("relied", "visible") and self.left_out:
            ids = ", ".join(f"#{i}" for i in self.left_out)
            why = "relied on" if self.basis == "relied" else "visibly used"
            return (f"Only the facts the reply {why} were {moved}; {ids} stayed as they were. "
                    f"To rate one fact: {rate_one}.")
        return ""


class ReplyRatings:
    def __init__(self, db: sqlite_utils.Database, facts: FactStore, clock: Clock) -> None:
        self.db = db
        self.facts = facts
        self.clock = clock

    def check_message(self, user: str, message_id: int) -> None:
        """NotFound unless ``message_id`` is a message of ``user``."""
        row = self.db.execute("SELECT 1 FROM messages WHERE id = ? AND user = ?",
                              [message_id, user]).fetchone()
        if row is None:
            raise NotFound(f"No message {message_id} for user {user!r}.")

    # -- what a reply was built from ---------------------------------------------------------

    def record_shown(self, user: str, message_id: int, fact_ids: Iterable[int]) -> None:
        """Remember that the reply ``message_id`` was built from ``fact_ids``. Only this
        user's facts, on this user's message: a stray id never links across users."""
        ids = list(dict.fromkeys(int(i) for i in fact_ids))
        if not ids:
            return
        marks = ",".join("?" * len(ids))
        with write_transaction(self.db):
            self.db.execute(
                f"INSERT OR IGNORE INTO shown_facts (message_id, fact_id) "
                f"SELECT ?, id FROM facts WHERE user = ? AND id IN ({marks}) "
                f"AND EXISTS (SELECT 1 FROM messages WHERE id = ? AND user = ?)",
                [message_id, user, *ids, message_id, user],
            )

    def _shown(self, user: str, message_id: int) -> list[tuple[int, bool, str, str]]:
        """Each fact the model was shown for this reply (this user's only): its id, whether
        the reply relied on it, its content and the reply's."""
        rows = self.db.execute(
            "SELECT s.fact_id, s.relied, f.content, m.content FROM shown_facts s "
            "JOIN facts f ON f.id = s.fact_id JOIN messages m ON m.id = s.message_id "
            "WHERE s.message_id = ? AND m.user = ? AND f.user = ? ORDER BY s.fact_id",
            [message_id, user, user],
        ).fetchall()
        return [(int(fact_id), bool(relied), str(fact), str(reply))
                for fact_id, relied, fact, reply in rows]

    def shown_fact_ids(self, user: str, message_id: int) -> list[int]:
        """The facts the model was shown for this reply (this user's only)."""
        return [row[0] for row in self._shown(user, message_id)]

    def reach(self, user: str, message_id: int) -> Reach:
        """The facts a rating of this reply reaches: those it relied on, once its extraction
        has said which (``shown_facts.relied``); until then those whose words it visibly
        repeats; none when it repeats none (not every fact shown: a 👎 must not lower a
        correct fact the reply did not use)."""
        shown = self._shown(user, message_id)
        ids = [row[0] for row in shown]
        if not shown:
            return Reach([], [], "none")
        relied = [fact_id for fact_id, was_relied, _, _ in shown if was_relied]
        if relied:
            return Reach(relied, ids, "relied")
        used = [fact_id for fact_id, _, fact, reply in shown if visibly_used(reply, fact)]
        return Reach(used, ids, "visible" if used else "unclear")

    def rated_fact_ids(self, user: str, message_id: int) -> list[int]:
        """The facts a rating of this reply reaches (``reach``)."""
        return self.reach(user, message_id).fact_ids

    # -- rating ------------------------------------------------------------------------------

    def rate_reply(self, user: str, message_id: int, helpful: bool) -> list[RateResult]:
        """Rate the facts the reply ``message_id`` relied on (``reach``). Empty when it used
        no facts, or it is not clear which."""
        self.check_message(user, message_id)
        return [self.facts.rate(user, fact_id, helpful)
                for fact_id in self.rated_fact_ids(user, message_id)]

    def rating(self, user: str, message_id: int, rater: str) -> bool | None:
        """The rating in effect for a reply by ``rater``: True (👍), False (👎) or None."""
        row = self.db.execute("SELECT helpful FROM reply_ratings WHERE message_id = ? "
                              "AND rater = ? AND user = ?", [message_id, rater, user]).fetchone()
        return None if row is None else bool(row[0])

    def set_rating(self, user: str, message_id: int, rater: str,
                   helpful: bool | None) -> list[RateResult]:
        """Idempotent rating of a reply by one person (``rater``, e.g. ``discord:<id>``).

        At most one rating per (reply, rater) is in effect: the same rating again changes
        nothing; the other rating first withdraws the old one, then rates; ``helpful=None``
        withdraws. Withdrawing takes back the trust change each fact actually got (kept in
        ``reply_ratings``), so 👍 then 👎 ends exactly where a single 👎 would. Returns the
        trust changes made now.
        """
        self.check_message(user, message_id)
        changes: list[RateResult] = []
        with write_transaction(self.db):
            row = self.db.execute(
                "SELECT helpful, applied FROM reply_ratings WHERE message_id = ? AND rater = ? "
                "AND user = ?", [message_id, rater, user]).fetchone()
            if row is not None and helpful is not None and bool(row[0]) == helpful:
                return []
            if row is not None:
                changes += self._withdraw(user, bool(row[0]), json.loads(row[1]))
                self.db.execute("DELETE FROM reply_ratings WHERE message_id = ? AND rater = ? "
                                "AND user = ?", [message_id, rater, user])
            if helpful is not None:
                rated = [self.facts.rate(user, fact_id, helpful)
                         for fact_id in self.rated_fact_ids(user, message_id)]
                changes += rated
                applied = {str(r.id): round(r.new_trust - r.old_trust, 6) for r in rated}
                self.db.execute(
                    "INSERT INTO reply_ratings (message_id, rater, user, helpful, applied, "
                    "rated_at) VALUES (?, ?, ?, ?, ?, ?)",
                    [message_id, rater, user, int(helpful), json.dumps(applied),
                     to_ts(self.clock.now())])
        return changes

    def _withdraw(self, user: str, helpful: bool, applied: dict[str, float]
                  ) -> list[RateResult]:
        """Undo a recorded reply rating: its exact trust changes and its counts."""
        undone = [self.facts.withdraw_rating(user, int(key), helpful, delta)
                  for key, delta in applied.items()]
        return [r for r in undone if r is not None]      # a purged fact has nothing to undo
