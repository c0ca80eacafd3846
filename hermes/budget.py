"""Limits for opt-in background work over many sessions (a backfill of imported history, their
summaries): a :class:`Budget` of model calls or dollars, and a :class:`Pacer` of calls per
minute. Both stop or slow the work between calls, never in the middle of one."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from hermes.errors import HermesError


@dataclass
class Budget:
    """A limit on model calls, on dollars, or neither."""

    calls: int | None = None
    dollars: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> Budget:
        """``$2``, ``2.50$``, ``2usd``, ``0.5`` (dollars: a sign or a decimal point) or ``100``,
        ``100calls`` (model calls)."""
        if text is None or not text.strip():
            return cls()
        raw = text.strip().lower().replace(" ", "")
        calls = re.fullmatch(r"(\d+)(?:calls?)?", raw)
        if calls:
            return cls(calls=int(calls.group(1)))
        dollars = re.fullmatch(r"\$?(\d+(?:\.\d*)?|\.\d+)(?:\$|usd)?", raw)
        if dollars and (raw != dollars.group(1) or "." in raw):
            return cls(dollars=float(dollars.group(1)))
        raise HermesError(f"--budget: expected dollars ($2, 0.50) or model calls (100, "
                          f"100calls) (got {text!r}).")

    def allows(self, calls: int, spent: float, next_cost: float | None) -> bool:
        if self.calls is not None and calls + 1 > self.calls:
            return False
        return not (self.dollars is not None and spent + (next_cost or 0.0) > self.dollars)


class Pacer:
    """At most ``per_minute`` model calls a minute: :meth:`wait` before each call sleeps until
    the next slot. The clock and the sleep are injected, so tests never wait."""

    def __init__(self, per_minute: float | None, now: Callable[[], datetime],
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep) -> None:
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self.now = now
        self.sleep = sleep
        self._next: datetime | None = None
        self.waited = 0.0  # seconds slept, in total

    async def wait(self) -> None:
        if not self.interval:
            return
        now = self.now()
        if self._next is not None and now < self._next:
            pause = (self._next - now).total_seconds()
            self.waited += pause
            await self.sleep(pause)
            now = self._next
        self._next = now + timedelta(seconds=self.interval)


@dataclass(kw_only=True)
class PlannedCalls:
    """What a plan of model calls comes to (``hermes learn backfill``, ``hermes sessions
    summarize``): the calls, their tokens and their price by litellm's prices (None: the model
    has no price)."""

    model_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None

    @property
    def cost_per_call(self) -> float | None:
        return None if self.cost is None or not self.model_calls else \
            self.cost / self.model_calls


class Spending:
    """A run of model calls within a :class:`Budget` and at a :class:`Pacer`'s pace: ask
    :meth:`may_call` before each call (False, and :attr:`stopped` says why, when the budget does
    not allow it), and :meth:`spend` after it. Each call is counted at ``per_call`` dollars
    unless its own cost is given."""

    def __init__(self, budget: Budget | None, pacer: Pacer, per_call: float | None) -> None:
        self.budget = budget or Budget()
        self.pacer = pacer
        self.per_call = per_call
        self.calls = 0
        self.cost = 0.0
        self.stopped: str | None = None

    async def may_call(self) -> bool:
        budget = self.budget
        if not budget.allows(self.calls, self.cost, self.per_call):
            if budget.calls is not None and self.calls + 1 > budget.calls:
                self.stopped = f"budget of {budget.calls} model call(s) reached"
            else:
                self.stopped = (f"budget of ${budget.dollars:.2f} reached (spent "
                                f"${self.cost:.4f})")
            return False
        await self.pacer.wait()
        return True

    def spend(self, calls: int, cost: float | None = None) -> None:
        self.calls += calls
        self.cost += cost if cost is not None else (self.per_call or 0.0) * calls
