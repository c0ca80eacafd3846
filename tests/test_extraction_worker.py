"""The extraction worker end to end on a real store, with the model faked at litellm's boundary."""

from __future__ import annotations

import asyncio
import json

import pytest

from hermes.config import load_settings
from hermes.learn.worker import ExtractionWorker
from hermes.runtime import Runtime
from tests.fakellm import bad_request


@pytest.fixture
def env(fake_model, clock):
    runtime = Runtime(load_settings(), clock=clock)
    yield runtime
    runtime.close()


@pytest.fixture
def worker(env):
    return ExtractionWorker(env.memory)


@pytest.fixture
def store(env):
    return env.memory.sessions


@pytest.fixture
def facts(env):
    return env.memory.facts


def turn(store, session_id, text, reply="Noted!", user="owner"):
    store.append(user, session_id, "user", text)
    store.append(user, session_id, "assistant", reply)


def actions(*items):
    return json.dumps(list(items))


def create(content, **extra):
    return {"action": "create", "content": content, "type": "semantic", "category": "general",
            "entities": [], "tags": [], "importance": 0.5, **extra}


async def test_small_talk_is_skipped_without_a_model_call(worker, store, fake_model):
    session = store.create("owner", "terminal")
    turn(store, session.id, "thanks, that's great!")
    run = await worker.run_session("owner", session.id)
    assert (run.status, run.reason, run.model_calls) == ("skipped", "small_talk", 0)
    assert fake_model.requests == []
    assert await worker.run_session("owner", session.id) is None  # watermark moved past it


async def test_a_statement_becomes_facts_with_their_source(worker, store, facts, fake_model):
    session = store.create("owner", "terminal")
    turn(store, session.id, "My sister Ana Costa just moved to Lisbon.", "How exciting!")
    fake_model.reply(actions(create("Ana Costa is the user's sister.", entities=["Ana Costa"]),
                             create("Ana Costa moved to Lisbon in November 2026.",
                                    type="episodic", entities=["Ana Costa", "Lisbon"])))
    run = await worker.run_session("owner", session.id)
    assert (run.status, run.created, run.model_calls) == ("done", 2, 1)
    learned = facts.list_facts("owner")
    assert sorted(f.content for f in learned) == [
        "Ana Costa is the user's sister.", "Ana Costa moved to Lisbon in November 2026."]
    message_ids = [m.id for m in store.messages("owner", session.id)]
    assert all(f.source_session_id == session.id and f.source_message_ids == message_ids
               for f in learned)
    # the prompt carried the message with its time and speaker
    conversation = fake_model.last.messages[-1]["content"]
    assert "2026-11-29 12:00 UTC (Sunday)] user (the user): My sister Ana Costa" in conversation


async def test_related_facts_are_numbered_and_an_update_by_number_supersedes(
        worker, store, facts, fake_model):
    old = facts.add("owner", "The user works at Initech.", entities=["Initech"]).fact
    session = store.create("owner", "terminal")
    turn(store, session.id, "I left Initech last month, I work at Acme Corp now.")
    fake_model.reply(actions({"action": "update", "number": 1,
                              "content": "The user works at Acme Corp (since October 2026)."},
                             {"action": "update", "number": 99, "content": "made up"}))
    run = await worker.run_session("owner", session.id)
    assert (run.status, run.superseded) == ("done", 1)
    assert "unknown fact number 99" in run.reason
    system = fake_model.last.system
    assert "1. The user works at Initech." in system and f"#{old.id}" not in system
    assert [f.content for f in facts.list_facts("owner")] == [
        "The user works at Acme Corp (since October 2026)."]
    new_id = facts.get("owner", old.id).superseded_by
    assert [f.id for f in facts.probe("owner", "Acme Corp")] == [new_id]
    assert facts.probe("owner", "Initech") == []


async def test_extraction_does_its_database_work_off_the_event_loop(
        worker, env, store, facts, fake_model, monkeypatch):
    import threading

    import hermes.learn.worker as worker_module

    session = store.create("owner", "terminal")
    turn(store, session.id, "I moved to Lisbon in March.")
    fake_model.reply(actions(create("The user lives in Lisbon since March 2026.")))
    threads = []
    real = worker_module.consolidate

    def consolidate(*args, **kwargs):
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(worker_module, "consolidate", consolidate)
    on_loop: list[str] = []                 # every statement on the loop's own connection
    env.db.conn.set_trace_callback(on_loop.append)
    try:
        run = await worker.run_session("owner", session.id)
    finally:
        env.db.conn.set_trace_callback(None)
    assert run.status == "done" and run.created == 1
    assert on_loop == []
    assert threads and threading.get_ident() not in threads
    assert [f.content for f in facts.list_facts("owner")] == [
        "The user lives in Lisbon since March 2026."]
    await worker.drain()                    # closes the thread's connection; work goes on after
    turn(store, session.id, "My sister Ana is a nurse in Porto.")
    fake_model.reply(actions(create("The user's sister Ana is a nurse in Porto.")))
    assert (await worker.run_session("owner", session.id)).status == "done"
    assert len(facts.list_facts("owner")) == 2


async def test_rerun_of_the_same_range_changes_nothing(worker, env, store, facts, fake_model):
    session = store.create("owner", "terminal")
    turn(store, session.id, "I'm allergic to penicillin.")
    fake_model.reply(actions(create("The user is allergic to penicillin.")))
    first = await worker.run_session("owner", session.id)
    before = [(f.id, f.updated_at) for f in facts.list_facts("owner", include_inactive=True)]
    env.db.execute("UPDATE sessions SET extracted_through = 0")  # forget the watermark
    again = await worker.run_session("owner", session.id)
    assert again.id == first.id and len(fake_model.requests) == 1
    after = facts.list_facts("owner", include_inactive=True)
    assert [(f.id, f.updated_at) for f in after] == before
    assert len(worker.runs("owner")) == 1


async def test_failing_model_leaves_the_store_unchanged_and_a_retry_recorded(
        worker, store, facts, fake_model):
    session = store.create("owner", "terminal")
    turn(store, session.id, "We adopted a cat named Miso.")
    fake_model.error(bad_request("the provider is confused"))
    run = await worker.run_session("owner", session.id)
    assert run.status == "retry" and "confused" in run.reason
    assert facts.list_facts("owner", include_inactive=True) == []
    # the daemon's retry succeeds
    fake_model.reply(actions(create("The user has a cat named Miso.", entities=["Miso"])))
    (retried,) = await worker.retry_failed()
    assert (retried.id, retried.status, retried.created, retried.attempts) == (run.id, "done", 1, 2)
    assert await worker.retry_failed() == []


async def test_unusable_output_keeps_the_raw_text_and_fails_after_one_retry(
        worker, env, store, facts, fake_model):
    session = store.create("owner", "terminal")
    turn(store, session.id, "Our wifi router lives in the attic.")
    garbage = '[{"action": "create", "content": "The user\'s wifi router is in the att'
    fake_model.reply(garbage)
    run = await worker.run_session("owner", session.id)
    raw = env.db.execute("SELECT raw_output FROM extraction_runs WHERE id = ?",
                         [run.id]).fetchone()[0]
    assert run.status == "retry" and "truncated" in run.reason and raw == garbage
    fake_model.reply("Sorry, I can't help with that.")
    (retried,) = await worker.retry_failed()
    assert (retried.status, retried.attempts, retried.model_calls) == ("failed", 2, 2)
    assert await worker.retry_failed() == []
    assert facts.list_facts("owner") == []


async def test_shutdown_with_a_pending_extraction_loses_nothing(worker, store, facts, fake_model):
    session = store.create("owner", "terminal")
    turn(store, session.id, "I'm running the Berlin marathon in September 2027.")
    release = fake_model.block()
    task = worker.schedule("owner", session.id)
    await fake_model.reached.wait()
    assert worker.pending == 1
    assert await worker.drain(timeout=0) == 1
    assert task.cancelled()
    (run,) = worker.runs("owner")
    assert (run.status, run.reason) == ("retry", "interrupted by shutdown")
    release.set()
    # next start: the recorded range is retried and learned
    fake_model.reply(actions(create("The user runs the Berlin marathon in September 2027.")))
    (retried,) = await worker.retry_failed()
    assert retried.status == "done"
    assert [f.content for f in facts.list_facts("owner")] == [
        "The user runs the Berlin marathon in September 2027."]


async def test_drain_waits_for_work_in_flight(worker, store, facts, fake_model):
    session = store.create("owner", "terminal")
    turn(store, session.id, "My dentist is Dr. Okafor on Elm Street.")
    fake_model.reply(actions(create("The user's dentist is Dr. Okafor on Elm Street.")))
    worker.schedule("owner", session.id)
    assert await worker.drain() == 0
    assert len(facts.list_facts("owner")) == 1


async def test_catch_up_finds_sessions_never_extracted(worker, store, facts, fake_model):
    session = store.create("owner", "discord")
    turn(store, session.id, "I play the cello in a community orchestra.")
    fake_model.reply(actions(create("The user plays the cello in a community orchestra.")))
    tasks = worker.catch_up()
    assert len(tasks) == 1
    await asyncio.gather(*tasks)
    assert worker.catch_up() == []
    assert len(facts.list_facts("owner")) == 1


async def test_cron_sessions_are_skipped(worker, store, fake_model):
    session = store.create("owner", "cron")
    turn(store, session.id, "Daily digest: the deploy of v2.3 finished at 04:00.")
    run = await worker.run_session("owner", session.id)
    assert (run.status, run.reason) == ("skipped", "cron")


async def test_one_session_is_extracted_one_run_at_a_time(worker, store, fake_model):
    session = store.create("owner", "terminal")
    turn(store, session.id, "I switched my editor to Helix last week.")
    fake_model.reply(actions(create("The user switched their editor to Helix.")))
    first = worker.schedule("owner", session.id)
    second = worker.schedule("owner", session.id)
    results = await asyncio.gather(first, second)
    assert results[1] is None and len(fake_model.requests) == 1


async def test_hermes_stats_reports_runs_skips_calls_and_changes(worker, store, fake_model, cli):
    session = store.create("owner", "terminal")
    turn(store, session.id, "hello!")
    await worker.run_session("owner", session.id)
    turn(store, session.id, "What's the capital of Peru?")
    await worker.run_session("owner", session.id)
    turn(store, session.id, "I live in Porto.")
    fake_model.reply(actions(create("The user lives in Porto.")))
    await worker.run_session("owner", session.id)
    turn(store, session.id, "Actually I moved to Berlin in October.")
    fake_model.reply(actions(create("The user lives in Berlin since October 2026.")))
    await worker.run_session("owner", session.id)
    turn(store, session.id, "I'm vegan.")
    fake_model.error(bad_request("boom"))
    await worker.run_session("owner", session.id)

    data = cli("stats", "--json").json()
    assert data["runs"] == 5 and data["by_status"] == {"done": 2, "skipped": 2, "retry": 1}
    assert data["skips"] == {"no_statement": 1, "small_talk": 1}
    assert (data["model_calls"], data["created"], data["superseded"]) == (2, 1, 1)
    assert data["failures"] == 1 and "boom" in data["last_failure"]
    assert data["active_facts"] == 1
    text = cli("stats").stdout
    assert "skipped       no_statement 1, small_talk 1" in text
    assert "1 created, 0 merged, 1 superseded" in text
    assert cli("stats", "--user", "bob", "--json").json()["runs"] == 0


async def test_a_long_backlog_is_taken_in_several_runs(worker, store, fake_model):
    session = store.create("owner", "terminal")
    for _ in range(25):                    # 50 messages: more than one run takes
        turn(store, session.id, "haha ok")
    (task,) = worker.catch_up()
    last = await task
    runs = worker.runs("owner")
    assert [r.reason for r in runs] == ["small_talk", "small_talk"]
    assert last.last_message_id == max(m.id for m in store.messages("owner", session.id))
    assert worker.catch_up() == [] and fake_model.requests == []


@pytest.mark.parametrize(("name", "expected"), [(None, "the user"), ("Alice", "Alice")])
async def test_the_extraction_prompt_names_the_person_never_the_identity(
        fake_model, clock, monkeypatch, name, expected):
    if name:
        monkeypatch.setenv("HERMES_USERS__OWNER__NAME", name)
    rt = Runtime(load_settings(), clock=clock)
    store = rt.memory.sessions
    session = store.create("owner", "terminal")
    # Older terminal messages stored the identity as their speaker.
    store.append("owner", session.id, "user", "I moved to Lisbon in March.",
                 speaker="terminal:root")
    store.append("owner", session.id, "assistant", "Noted!")
    fake_model.reply(actions())
    await ExtractionWorker(rt.memory).run_session("owner", session.id)
    rt.close()
    request = fake_model.last
    assert "terminal:root" not in request.system + str(request.messages)
    assert f"for its user, {expected}." in request.system
    assert f"user ({expected}): I moved to Lisbon" in request.messages[-1]["content"]


def test_run_records_and_their_sums_are_this_users_only(env, store):
    from hermes.learn import runs
    from hermes.learn.consolidate import Consolidation

    now = "2026-11-29T12:00:00.000000Z"
    ids = {}
    for user, status, reason, cost in (("owner", "done", None, 0.25),
                                       ("owner", "skipped", "small talk", None),
                                       ("owner", "retry", "provider down", None),
                                       ("bob", "failed", "bob's reason", 9.0),
                                       ("bob", "skipped", "bob's skip", None)):
        session = store.create(user, "terminal")
        ids[user, status] = runs.insert(env.db, user, session.id, 1, 2, status, now=now,
                                        reason=reason, cost=cost, model_calls=int(bool(cost)),
                                        changes=Consolidation(created=1))
    assert runs.count_by_status(env.db, "owner") == {"done": 1, "retry": 1, "skipped": 1}
    assert runs.skip_reasons(env.db, "owner") == {"small talk": 1}
    assert runs.totals(env.db, "owner") == (1, 3, 0, 0, 0, 0.25, 0)
    assert runs.last_failure(env.db, "owner") == "provider down"
    assert runs.unanswered(env.db, "owner") == 1
    assert runs.cost(env.db, "owner", ids["owner", "done"]) == 0.25
    assert runs.cost(env.db, "owner", ids["bob", "failed"]) is None
    assert runs.last_failure(env.db, "bob") == "bob's reason"
    assert runs.count_by_status(env.db, "carol") == {} and runs.unanswered(env.db, "carol") == 0


async def test_a_run_goes_to_the_worker_thread_three_times(worker, store, fake_model):
    """Each trip to the worker thread costs the event loop a task step and callbacks (on the
    loop a reply streams on): the gate, the prompt, then the calls counted, the run applied and
    its facts embedded together."""
    session = store.create("owner", "terminal")
    turn(store, session.id, "I moved to Lisbon in March.")
    fake_model.reply(actions(create("The user lives in Lisbon since March 2026.")))
    trips: list[str] = []
    real = worker._db

    async def counted(fn, *args):
        trips.append(fn.__name__)
        return await real(fn, *args)

    worker._db = counted
    run = await worker.run_session("owner", session.id)
    assert run.status == "done" and run.created == 1
    assert trips == ["_open_run", "_prompt", "_commit_run"]
    assert worker.memory.db.execute(
        "SELECT count(*) FROM model_calls WHERE source = 'extraction'").fetchone()[0] == 1
