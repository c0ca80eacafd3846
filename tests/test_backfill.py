"""`hermes learn backfill` over imported sessions, with the scripted model: the plan and its
numbers, a budget that stops it, resuming after an interruption, facts with their sources."""

from __future__ import annotations

import asyncio
import json

import pytest

from hermes.agent.llm import LLM
from hermes.budget import Budget
from hermes.config import load_settings
from hermes.learn import backfill as bf
from hermes.learn.worker import ExtractionWorker
from hermes.memory.sessions.chat_exports import import_export
from hermes.runtime import Runtime


def conversation(uuid, day, *texts):
    return {"uuid": uuid, "name": f"Chat {uuid}", "created_at": f"2025-10-{day:02d}T08:00:00Z",
            "chat_messages": [
                {"uuid": f"{uuid}-{i}", "sender": "human" if i % 2 == 0 else "assistant",
                 "text": text, "created_at": f"2025-10-{day:02d}T08:0{i}:00Z"}
                for i, text in enumerate(texts)]}


EXPORT = [
    # Newest first in the file: the backfill still goes oldest first.
    conversation("c", 20, "I moved to Porto in September and work at Acme now.", "Nice!"),
    conversation("b", 10, "thanks!", "You're welcome."),
    conversation("a", 1, "My sister Ana is a nurse in Lisbon, on nights at the Santa Maria.",
                 "Noted.",
                 "I play the cello on Thursdays.", "Lovely."),
]


def actions(*contents):
    return json.dumps([{"action": "create", "content": c, "type": "semantic",
                        "category": "general", "entities": [], "tags": [],
                        "importance": 0.5} for c in contents])


@pytest.fixture
def env(fake_model, clock):
    runtime = Runtime(load_settings(), clock=clock)
    import_export(runtime.memory.sessions, "owner", EXPORT, "claude")
    yield runtime
    runtime.close()


def session_ids(rt):
    return {s.external_id: s.id for s in rt.memory.sessions.list_sessions("owner")}


def test_dry_run_counts_sessions_messages_calls_and_cost_without_a_call(env, cli, fake_model):
    import litellm

    litellm.register_model({"fake/scripted": {
        "max_input_tokens": 32768, "max_output_tokens": 1024, "litellm_provider": "fake",
        "mode": "chat", "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}})
    data = cli("learn", "backfill", "--dry-run", "--json").json()
    assert (data["sessions"], data["messages"], data["model_calls"], data["gate_skips"]) == (
        3, 8, 2, 1)
    assert data["completion_tokens"] == 2 * bf.EST_COMPLETION_TOKENS
    assert data["prompt_tokens"] > 200
    expected = data["prompt_tokens"] * 1e-6 + data["completion_tokens"] * 2e-6
    assert data["cost"] == pytest.approx(expected)
    text = cli("learn", "backfill", "--dry-run").stdout
    assert "Backfill for owner: 3 session(s), 8 message(s) not learned from yet" in text
    assert "model calls   2 (1 run(s) skipped by the gate without a call)" in text
    assert "cost          ~$0.00" in text and "fake/scripted (litellm's prices)" in text
    assert (f"tokens        ~{data['prompt_tokens']:,} in, ~{data['completion_tokens']:,} out "
            "(estimated)") in text
    assert fake_model.requests == []
    assert cli("learn", "backfill", "--dry-run", "--user", "bob", "--json").json()[
        "sessions"] == 0


def test_backfill_learns_oldest_first_with_source_sessions_and_is_idempotent(env, cli,
                                                                             fake_model):
    fake_model.reply(actions("Ana, the user's sister, is a nurse in Lisbon.",
                             "The user plays the cello on Thursdays."))
    fake_model.reply(actions("The user lives in Porto since September 2025."))
    result = cli("learn", "backfill", "--yes", "--rate", "0")
    assert result.exit_code == 0, result.stderr
    assert "Done 3 run(s) over 3 session(s): 2 model call(s)" in result.stdout
    assert "3 created" in result.stdout
    assert "sister Ana is a nurse" in fake_model.requests[0].messages[-1]["content"]
    assert "Porto" in fake_model.requests[1].messages[-1]["content"]
    ids = session_ids(env)
    facts = {f.content: f for f in env.memory.facts.list_facts("owner")}
    ana = facts["Ana, the user's sister, is a nurse in Lisbon."]
    assert ana.source_session_id == ids["claude:a"] and len(ana.source_message_ids) == 4
    porto = facts["The user lives in Porto since September 2025."]
    assert porto.source_session_id == ids["claude:c"]
    again = cli("learn", "backfill", "--yes")
    assert "Nothing to learn from for owner" in again.stdout
    assert len(fake_model.requests) == 2
    history = cli("facts", "history", str(porto.id)).stdout
    assert history.startswith(f"source: session {ids['claude:c']} (import, started 2025-10-20")


def test_a_budget_of_calls_stops_cleanly_and_the_next_run_continues(env, cli, fake_model):
    fake_model.reply(actions("Ana, the user's sister, is a nurse in Lisbon."))
    first = cli("learn", "backfill", "--yes", "--budget", "1", "--rate", "0")
    assert "Stopped: budget of 1 model call(s) reached." in first.stdout
    assert len(fake_model.requests) == 1
    assert len(env.memory.facts.list_facts("owner")) == 1
    plan = cli("learn", "backfill", "--dry-run", "--json").json()
    assert (plan["sessions"], plan["model_calls"]) == (1, 1)  # the small talk went free
    fake_model.reply(actions("The user lives in Porto since September 2025."))
    second = cli("learn", "backfill", "--yes", "--rate", "0")
    assert "1 model call(s)" in second.stdout
    assert len(env.memory.facts.list_facts("owner")) == 2
    bad = cli("learn", "backfill", "--budget", "lots")
    assert bad.exit_code == 1 and "--budget: expected dollars" in bad.stderr


async def test_an_interrupted_backfill_resumes_with_the_run_it_was_in(env, fake_model, clock):
    llm = LLM.from_settings(env.settings, background=True)
    worker = ExtractionWorker(env.memory, llm=llm)
    release = fake_model.block()
    task = asyncio.create_task(bf.run(env.memory, worker, bf.plan(env.memory, "owner", llm)))
    await fake_model.reached.wait()
    task.cancel()  # what Ctrl-C does to asyncio.run's task
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await worker.drain(1)
    assert env.memory.facts.list_facts("owner") == []
    plan = bf.plan(env.memory, "owner", llm)
    assert (plan.retries, plan.model_calls, len(plan.sessions)) == (1, 2, 3)
    fake_model.reply(actions("Ana, the user's sister, is a nurse in Lisbon."))
    fake_model.reply(actions("The user lives in Porto since September 2025."))
    report = await bf.run(env.memory, ExtractionWorker(env.memory, llm=llm), plan)
    assert (report.model_calls, report.created, report.stopped) == (2, 2, None)
    assert bf.plan(env.memory, "owner", llm).model_calls == 0


async def test_the_pace_limits_calls_per_minute_without_sleeping(env, fake_model, clock):
    from hermes.budget import Pacer

    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds=seconds)

    llm = LLM.from_settings(env.settings, background=True)
    fake_model.reply(actions("Ana is a nurse.")).reply(actions("The user lives in Porto."))
    report = await bf.run(env.memory, ExtractionWorker(env.memory, llm=llm),
                          bf.plan(env.memory, "owner", llm), pacer=Pacer(6, clock.now, sleep))
    assert report.model_calls == 2 and slept == [10.0]


def test_budget_parsing():
    assert Budget.parse("$2") == Budget(dollars=2.0)
    assert Budget.parse("0.5") == Budget(dollars=0.5)
    assert Budget.parse("100calls") == Budget(calls=100)
    assert Budget.parse("7") == Budget(calls=7)
    assert not Budget(dollars=0.01).allows(0, 0.009, 0.002)
    assert Budget(dollars=0.01).allows(0, 0.007, 0.002)


def test_summaries_of_imported_sessions_are_opt_in_planned_and_budgeted(env, cli, fake_model):
    plan = cli("sessions", "summarize", "--dry-run", "--json").json()
    assert (plan["sessions"], plan["model_calls"], plan["without_call"]) == (3, 1, 2)
    assert fake_model.requests == []
    fake_model.reply('{"title": "Family and hobbies", "summary": "Ana; the cello."}')
    first = cli("sessions", "summarize", "--yes", "--budget", "1", "--rate", "0")
    assert "Summarised 3 session(s) with 1 model call(s)." in first.stdout
    store = env.memory.sessions
    titles = {s.external_id: s.title for s in store.list_sessions("owner")}
    assert titles["claude:a"] == "Family and hobbies"
    assert titles["claude:b"] == "thanks"  # small talk: no model call
    assert "No session of owner is waiting" in cli("sessions", "summarize", "--yes").stdout
    assert len(fake_model.requests) == 1


def test_a_summary_budget_stops_before_the_call(env, cli, fake_model):
    result = cli("sessions", "summarize", "--yes", "--budget", "0calls")
    assert "Summarised 0 session(s) with 0 model call(s)." in result.stdout
    assert "Stopped: budget of 0 model call(s) reached." in result.stdout
    assert fake_model.requests == []


def test_the_dry_runs_need_no_model_and_the_runs_still_ask_for_one(cli, clock, monkeypatch):
    """Counting what would be done reads the database alone: no model, no key."""
    monkeypatch.delenv("HERMES_MODEL__NAME", raising=False)
    runtime = Runtime(load_settings(), clock=clock)
    try:
        assert not runtime.settings.model.name
        import_export(runtime.memory.sessions, "owner", EXPORT, "claude")
        import_export(runtime.memory.sessions, "carol", EXPORT[1:2], "claude")  # small talk
    finally:
        runtime.close()
    free = cli("learn", "backfill", "--dry-run", "--user", "carol").stdout
    assert "model calls   0 (1 run(s) skipped" in free and "cost          none (no model call)" \
        in free
    data = cli("learn", "backfill", "--dry-run", "--json").json()
    assert (data["sessions"], data["messages"], data["model_calls"], data["cost"]) == (
        3, 8, 2, None)
    text = cli("learn", "backfill", "--dry-run")
    assert text.exit_code == 0 and text.stderr == ""
    assert "Backfill for owner: 3 session(s), 8 message(s) not learned from yet" in text.stdout
    assert "tokens" not in text.stdout
    assert ("cost          unknown: no model is set (the plan needs none; the run does)"
            in text.stdout)
    summaries = cli("sessions", "summarize", "--dry-run")
    assert summaries.exit_code == 0, summaries.stderr
    assert "Summaries for owner: 3 session(s), 1 model call(s)" in summaries.stdout
    assert "cost          unknown: no model is set" in summaries.stdout
    assert cli("sessions", "summarize", "--dry-run", "--json").json()["model_calls"] == 1
    for command in (("learn", "backfill", "--yes"), ("sessions", "summarize", "--yes")):
        refused = cli(*command)
        assert refused.exit_code != 0 and refused.stderr.startswith(
            "Error: No model is configured."), command
