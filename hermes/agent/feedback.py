"""Rating a reply: a 👍/👎 on Discord or /rate in the terminal reaches exactly the facts that
reply was built from (the ``shown_facts`` recorded by the turn). Front-ends keep their own handle
on a reply (a Discord message id) in ``message_refs``.

The front-ends' entry points; the records and their rules are the memory layer's
(hermes.memory.facts.ratings, hermes.memory.sessions.refs).
"""

from __future__ import annotations

from hermes.memory.facts.ratings import ReplyRatings
from hermes.memory.facts.store import RateResult
from hermes.runtime import Runtime


def _ratings(rt: Runtime) -> ReplyRatings:
    return rt.memory.ratings


def shown_fact_ids(rt: Runtime, user: str, message_id: int) -> list[int]:
    """The facts the model was shown for this reply (this user's only)."""
    return _ratings(rt).shown_fact_ids(user, message_id)


def rate_reply(rt: Runtime, user: str, message_id: int, helpful: bool) -> list[RateResult]:
    """Rate every fact shown for the reply ``message_id``. Empty when it used no facts."""
    return _ratings(rt).rate_reply(user, message_id, helpful)


def set_reply_rating(rt: Runtime, user: str, message_id: int, rater: str,
                     helpful: bool | None) -> list[RateResult]:
    """Idempotent rating of a reply by one person (``rater``, e.g. ``discord:<id>``); see
    ``ReplyRatings.set_rating``. Returns the trust changes made now."""
    return _ratings(rt).set_rating(user, message_id, rater, helpful)


def reply_rating(rt: Runtime, user: str, message_id: int, rater: str) -> bool | None:
    """The rating in effect for a reply by ``rater``: True (👍), False (👎) or None."""
    return _ratings(rt).rating(user, message_id, rater)


def link_ref(rt: Runtime, user: str, ref: str, message_id: int) -> None:
    """Remember that a front-end's ``ref`` (e.g. ``discord:<id>``) shows ``message_id``."""
    rt.memory.refs.link(user, ref, message_id)


def message_for_ref(rt: Runtime, user: str, ref: str) -> int | None:
    """The message behind a front-end's ``ref``, or None (also for another user's ref)."""
    return rt.memory.refs.message_for(user, ref)
