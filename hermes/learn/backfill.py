"""``hermes learn backfill``: fact extraction over sessions nobody learned from yet (an import of
ChatGPT or Claude history, a transcript file), only when asked.

The runs are the live pipeline's own (:class:`hermes.learn.worker.ExtractionWorker`: gate,
one model call, defensive parsing, consolidation), session by session, oldest first, each run
over the next :data:`~hermes.learn.worker.MAX_MESSAGES_PER_RUN` messages past the session's
watermark. So it is idempotent by message range and resumable: the watermark and the run
records are the progress, and a run cut short by Ctrl-C is recorded for retry and taken first
next time.

:func:`plan` works out, without a model call, what a backfill would do: the sessions and
messages, the runs the gate lets through (the model calls) and those it skips, the tokens of
each call's prompt and the cost by litellm's prices. :func:`run` does it within a budget
(model calls or dollars) and a pace (calls per minute), and stops cleanly when either says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hermes.budget import Budget, Pacer, PlannedCalls, Spending
from hermes.learn import gate
from hermes.learn import runs as run_records
from hermes.learn.extract import MAX_RELATED_FACTS, build_prompt, related_query
from hermes.learn.worker import (
    MAX_MESSAGES_PER_RUN,
    ExtractionWorker,
    RunRecord,
)
from hermes.memory import Memory
from hermes.memory.facts.store import FactStore
from hermes.memory.sessions.store import Message, Session

# What one extraction reply is assumed to take, for the estimate (a JSON list of a few facts).
EST_COMPLETION_TOKENS = 200


@dataclass
class Plan(PlannedCalls):
    """``model_calls``: the runs the gate lets through, the interrupted ones included."""

    user: str
    model: str | None
    sessions: list[Session] = field(default_factory=list)
    messages: int = 0
    gate_skips: int = 0      # runs the gate skips without a call
    retries: int = 0         # runs interrupted before (Ctrl-C), taken first

    def to_json(self) -> dict[str, Any]:
        return {"user": self.user, "model": self.model, "sessions": len(self.sessions),
                "messages": self.messages, "model_calls": self.model_calls,
                "gate_skips": self.gate_skips, "retries": self.retries,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost": self.cost}


@dataclass
class Report:
    runs: int = 0
    model_calls: int = 0
    cost: float = 0.0
    created: int = 0
    merged: int = 0
    superseded: int = 0
    failed: int = 0
    sessions_done: int = 0
    stopped: str | None = None   # why it stopped before the end (budget), None when complete
    waited_seconds: float = 0.0

    def add(self, record: RunRecord, cost: float | None) -> None:
        self.runs += 1
        self.model_calls += record.model_calls
        self.cost += cost or 0.0
        self.created += record.created
        self.merged += record.merged
        self.superseded += record.superseded
        self.failed += int(record.status in ("retry", "failed"))

    def to_json(self) -> dict[str, Any]:
        return {"runs": self.runs, "model_calls": self.model_calls, "cost": round(self.cost, 6),
                "created": self.created, "merged": self.merged,
                "superseded": self.superseded, "failed": self.failed,
                "sessions_done": self.sessions_done, "stopped": self.stopped,
                "waited_seconds": round(self.waited_seconds, 1)}


def backlog(memory: Memory, user: str, *, since: str | None = None,
            source: str | None = None) -> list[Session]:
    """``user``'s sessions with user messages past their extraction watermark, or with a run
    waiting for its retry, oldest first (``since``: active at or after it)."""
    retrying = {r.session_id for r in run_records.waiting_retry(memory.db, user)}
    return memory.sessions.learning_backlog(
        user, since=since, source=source, also=retrying)


def _chunks(memory: Memory, session: Session, messages: list[Message], watermark: int
            ) -> list[tuple[list[Message], gate.GateDecision]]:
    """The runs the worker will make over the messages past ``watermark``, with the gate's
    decision for each (the same inputs the worker gives it)."""
    config = memory.settings.extraction
    # As the run would decide: unset is on with a model, and a run has one (a plan needs none).
    enabled = config.enabled is not False
    runs = []
    pending = [m for m in messages if m.id > watermark]
    for start in range(0, len(pending), MAX_MESSAGES_PER_RUN):
        chunk = pending[start:start + MAX_MESSAGES_PER_RUN]
        prior = next((m.content for m in reversed(messages)
                      if m.id < chunk[0].id and m.role == "assistant"), None)
        decision = gate.decide(chunk, enabled=enabled, source=session.source,
                               include_cron=config.include_cron, memory_written=False,
                               min_chars=config.min_chars, prior_assistant=prior)
        runs.append((chunk, decision))
    return runs


def plan(memory: Memory, user: str, llm: Any, *, since: str | None = None,
         source: str | None = None) -> Plan:
    """What a backfill would do, without calling the model. ``llm`` counts tokens and prices
    them (hermes.agent.llm.LLM)."""
    sessions = memory.sessions
    facts = memory.facts
    result = Plan(user=user, model=getattr(llm, "name", None))
    prompts: list[list[dict[str, Any]]] = []
    for session in backlog(memory, user, since=since, source=source):
        result.sessions.append(session)
        messages = sessions.messages(user, session.id)
        for retry in _retry_ranges(memory, user, session.id):
            chunk = [m for m in messages if retry[0] <= m.id <= retry[1]]
            if chunk:
                result.retries += 1
                result.model_calls += 1
                prompts.append(_prompt(memory, facts, user, chunk))
        watermark = sessions.extracted_through(user, session.id)
        result.messages += sum(1 for m in messages if m.id > watermark)
        for chunk, decision in _chunks(memory, session, messages, watermark):
            if decision.run:
                result.model_calls += 1
                prompts.append(_prompt(memory, facts, user, chunk))
            else:
                result.gate_skips += 1
    if prompts and llm is not None and getattr(llm, "name", None):
        result.prompt_tokens = sum(llm.count_tokens(p) for p in prompts)
        result.completion_tokens = EST_COMPLETION_TOKENS * len(prompts)
        result.cost = llm.price(result.prompt_tokens, result.completion_tokens)
    elif not prompts:
        result.cost = 0.0
    return result


def _prompt(memory: Memory, facts: FactStore, user: str, chunk: list[Message]
            ) -> list[dict[str, Any]]:
    related = facts.related(user, related_query(chunk), limit=MAX_RELATED_FACTS)
    speakers = [m.speaker for m in chunk if m.role == "user" and m.speaker]
    return build_prompt(chunk, related, user_name=speakers[-1] if speakers else "the user",
                        now=memory.clock.now(),
                        categories=memory.settings.facts.categories).messages


def _retry_ranges(memory: Memory, user: str, session_id: int) -> list[tuple[int, int]]:
    return [(r.first_message_id, r.last_message_id)
            for r in run_records.waiting_retry(memory.db, user) if r.session_id == session_id]


def _run_cost(memory: Memory, user: str, run_id: int) -> float | None:
    return run_records.cost(memory.db, user, run_id)


async def run(memory: Memory, worker: ExtractionWorker, the_plan: Plan, *,
              budget: Budget | None = None, pacer: Pacer | None = None,
              on_run: Callable[[Report], None] | None = None) -> Report:
    """Carry out ``the_plan``: the interrupted runs first, then each session's runs, oldest
    session first, through the live pipeline. Stops before a model call the budget does not
    allow (``report.stopped`` says why); a re-run continues where this one stopped."""
    pacer = pacer or Pacer(None, memory.clock.now)
    spending = Spending(budget, pacer, the_plan.cost_per_call)
    report = Report()
    user = the_plan.user

    async def may_call() -> bool:
        allowed = await spending.may_call()
        report.stopped = spending.stopped
        return allowed

    def add(record: RunRecord) -> None:
        cost = _run_cost(memory, user, record.id)
        report.add(record, cost)
        spending.spend(record.model_calls, cost or 0.0)

    async def before_retry(record: RunRecord) -> bool:
        return await may_call()

    ids = {s.id for s in the_plan.sessions}
    for record in await worker.retry_failed(user, sessions=ids, before_each=before_retry):
        add(record)
        if on_run:
            on_run(report)
    sessions = memory.sessions
    for session in the_plan.sessions:
        if report.stopped:
            break
        while True:
            messages = sessions.messages(user, session.id)
            upcoming = _chunks(memory, session, messages,
                               sessions.extracted_through(user, session.id))
            if not upcoming:
                report.sessions_done += 1
                break
            if upcoming[0][1].run and not await may_call():
                break
            ran = await worker.run_session(user, session.id)
            if ran is None:
                report.sessions_done += 1
                break
            add(ran)
            if on_run:
                on_run(report)
            await asyncio.sleep(0)  # let a Ctrl-C in between runs land here
    report.waited_seconds = pacer.waited
    return report

