"""``hermes sessions summarize``: titles and summaries for sessions without one (an import of
ChatGPT or Claude history, old transcripts), only when asked.

The daemon summarises the sessions it closes; imported sessions it leaves alone, so that a
large import never turns into thousands of model calls at the next start. This is the opt-in
way: :func:`plan` counts the sessions and model calls (small talk and empty sessions take none)
and prices them with litellm; :func:`run` summarises them, oldest first, through
:func:`hermes.agent.summarize.summarize_session`, within a budget and a pace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermes.agent.summarize import (
    MAX_ATTEMPTS,
    PROMPT_FILE,
    SummaryOutcome,
    _spoken,
    is_small_talk,
    summarize_session,
    transcript,
)
from hermes.budget import Budget, Pacer, PlannedCalls, Spending
from hermes.memory import Memory

# What one summary reply is assumed to take, for the estimate (a title and a few sentences).
EST_COMPLETION_TOKENS = 120


@dataclass
class SummaryPlan(PlannedCalls):
    user: str
    model: str | None
    session_ids: list[int] = field(default_factory=list)
    without_call: int = 0    # empty or small talk: titled without the model

    def to_json(self) -> dict[str, Any]:
        return {"user": self.user, "model": self.model, "sessions": len(self.session_ids),
                "model_calls": self.model_calls, "without_call": self.without_call,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost": self.cost}


@dataclass
class SummaryReport:
    done: int = 0
    model_calls: int = 0
    estimated_cost: float = 0.0
    failed: int = 0
    stopped: str | None = None
    outcomes: list[SummaryOutcome] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"done": self.done, "model_calls": self.model_calls,
                "estimated_cost": round(self.estimated_cost, 6), "failed": self.failed,
                "stopped": self.stopped}


def backlog(memory: Memory, user: str, *, since: str | None = None,
            source: str | None = None) -> list[int]:
    """``user``'s sessions without a summary that are finished or imported, oldest first
    (``since``: active at or after it)."""
    return memory.sessions.summary_backlog(
        user, max_attempts=MAX_ATTEMPTS, since=since, source=source)


def plan(memory: Memory, user: str, llm: Any, *, since: str | None = None,
         source: str | None = None) -> SummaryPlan:
    """What summarising the backlog would take, without calling the model."""
    store = memory.sessions
    result = SummaryPlan(user=user, model=getattr(llm, "name", None))
    system = PROMPT_FILE.read_text(encoding="utf-8")
    for session_id in backlog(memory, user, since=since, source=source):
        result.session_ids.append(session_id)
        messages = store.messages(user, session_id)
        if not _spoken(messages) or is_small_talk(messages):
            result.without_call += 1
            continue
        result.model_calls += 1
        if llm is not None and getattr(llm, "name", None):
            result.prompt_tokens += llm.count_tokens([
                {"role": "system", "content": system},
                {"role": "user", "content": transcript(messages)}])
    result.completion_tokens = EST_COMPLETION_TOKENS * result.model_calls
    if not result.model_calls:
        result.cost = 0.0
    elif llm is not None and getattr(llm, "name", None):
        result.cost = llm.price(result.prompt_tokens, result.completion_tokens)
    return result


async def run(memory: Memory, llm: Any, the_plan: SummaryPlan, *, budget: Budget | None = None,
              pacer: Pacer | None = None,
              on_done: Callable[[SummaryReport], None] | None = None) -> SummaryReport:
    """Summarise the planned sessions, oldest first; stop before a model call the budget does
    not allow (dollars are counted at the planned cost per call)."""
    spending = Spending(budget, pacer or Pacer(None, memory.clock.now), the_plan.cost_per_call)
    store = memory.sessions
    report = SummaryReport()
    for session_id in the_plan.session_ids:
        messages = store.messages(the_plan.user, session_id)
        needs_model = bool(_spoken(messages)) and not is_small_talk(messages)
        if needs_model and not await spending.may_call():
            report.stopped = spending.stopped
            break
        outcome = await summarize_session(memory, llm, the_plan.user, session_id)
        report.outcomes.append(outcome)
        report.done += 1
        if needs_model:    # counted at the planned cost per call
            spending.spend(1)
            report.model_calls, report.estimated_cost = spending.calls, spending.cost
        report.failed += int(outcome.status == "failed")
        if on_done:
            on_done(report)
    return report
