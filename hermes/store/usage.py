"""What model calls used and cost: one ``model_calls`` row per call, and the totals for
``hermes stats``.

Who a call is for and why is set by the caller around it (:func:`scope`: a context variable, so
a summary made inside a turn is still that user's, under its own source); the model layer
(``hermes.agent.llm``) reports each completion here. Sources: ``chat`` (a turn),
``compression`` (a summary that shortens a conversation), ``extraction``, ``summary`` (session
titles and summaries), ``context`` (the context file), ``other``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import sqlite_utils

from hermes.store.db import write_transaction

SOURCES = ("chat", "compression", "extraction", "summary", "context", "other")


@dataclass(frozen=True)
class Scope:
    user: str | None = None
    source: str = "other"
    session_id: int | None = None
    # Set: the calls are collected here for the caller to record itself (on its own
    # connection, e.g. the extraction worker's thread), instead of recorded at once.
    collect: list[Any] | None = field(default=None, compare=False)


NOWHERE = Scope()
_scope: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("hermes_usage_scope",
                                                                      default=None)


def current() -> Scope:
    return _scope.get() or NOWHERE


@contextmanager
def scope(user: str | None = None, source: str | None = None,
          session_id: int | None = None, collect: list[Any] | None = None) -> Iterator[Scope]:
    """Model calls inside are counted for ``user`` under ``source``; what is not given is kept
    from the enclosing scope (a compression inside a turn is the turn's user's)."""
    outer = current()
    inner = replace(outer,
                    user=outer.user if user is None else user,
                    source=outer.source if source is None else source,
                    session_id=outer.session_id if session_id is None else session_id,
                    collect=outer.collect if collect is None else collect)
    token = _scope.set(inner)
    try:
        yield inner
    finally:
        _scope.reset(token)


@dataclass(frozen=True)
class Call:
    model: str
    prompt_tokens: int | None
    cached_tokens: int | None
    cache_write_tokens: int | None
    completion_tokens: int | None
    cost: float | None


def record(db: sqlite_utils.Database, call: Call, at: str, where: Scope | None = None) -> None:
    where = where or current()
    with write_transaction(db):
        db.execute(
            "INSERT INTO model_calls (user, source, session_id, model, at, prompt_tokens, "
            "cached_tokens, cache_write_tokens, completion_tokens, cost) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [where.user, where.source, where.session_id, call.model, at, call.prompt_tokens,
             call.cached_tokens, call.cache_write_tokens, call.completion_tokens, call.cost])


@dataclass
class SourceTotals:
    source: str
    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    calls_without_usage: int = 0
    calls_without_cost: int = 0

    @property
    def cached_share(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else None

    def to_json(self) -> dict[str, Any]:
        data = {key: getattr(self, key) for key in self.__dataclass_fields__}
        share = self.cached_share
        data["cached_share"] = round(share, 4) if share is not None else None
        if self.cost is not None:
            data["cost"] = round(self.cost, 6)
        return data


@dataclass
class UsageTotals:
    user: str
    since: str | None
    sources: list[SourceTotals] = field(default_factory=list)

    @property
    def total(self) -> SourceTotals:
        total = SourceTotals("all")
        for s in self.sources:
            total.calls += s.calls
            total.prompt_tokens += s.prompt_tokens
            total.cached_tokens += s.cached_tokens
            total.cache_write_tokens += s.cache_write_tokens
            total.completion_tokens += s.completion_tokens
            total.calls_without_usage += s.calls_without_usage
            total.calls_without_cost += s.calls_without_cost
            if s.cost is not None:
                total.cost = (total.cost or 0.0) + s.cost
        return total

    def to_json(self) -> dict[str, Any]:
        return {"user": self.user, "since": self.since,
                "sources": {s.source: s.to_json() for s in self.sources},
                "total": self.total.to_json()}


def _source_totals(row: tuple[Any, ...]) -> SourceTotals:
    source, calls, prompt, cached, cache_write, completion, cost, no_usage, no_cost = row
    return SourceTotals(source, int(calls), int(prompt), int(cached), int(cache_write),
                        int(completion), cost, int(no_usage or 0), int(no_cost or 0))


def totals(db: sqlite_utils.Database, user: str, since: str | None = None) -> UsageTotals:
    """This user's model calls by source, at or after ``since`` (a stored timestamp)."""
    rows = db.execute(
        "SELECT source, count(*), coalesce(sum(prompt_tokens), 0), "
        "coalesce(sum(cached_tokens), 0), coalesce(sum(cache_write_tokens), 0), "
        "coalesce(sum(completion_tokens), 0), sum(cost), "
        "sum(prompt_tokens IS NULL), sum(cost IS NULL) "
        "FROM model_calls WHERE user = ? AND at >= ? GROUP BY source", [user, since or ""]
    ).fetchall()
    found = {row[0]: _source_totals(row) for row in rows}
    order = [s for s in SOURCES if s in found] + sorted(set(found) - set(SOURCES))
    return UsageTotals(user, since, [found[s] for s in order])
