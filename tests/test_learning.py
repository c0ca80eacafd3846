"""Learning through the real turn engine: the fast lane before the reply, extraction after it."""

from __future__ import annotations

import asyncio
import json

import pytest

from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.learn.worker import ExtractionWorker
from hermes.runtime import Runtime


@pytest.fixture
def env(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield rt
    rt.close()


@pytest.fixture
def agent(env):
    return Agent(env.memory)


@pytest.fixture
def worker(env, agent):
    worker = ExtractionWorker(env.memory)
    worker.attach(agent)
    return worker


@pytest.fixture
def session_id(agent):
    return agent.memory.sessions.create("owner", "terminal").id


@pytest.fixture
def facts(agent):
    return agent.memory.facts


def extraction(*contents):
    return json.dumps([{"action": "create", "content": c, "type": "semantic",
                        "category": "general", "entities": [], "tags": []} for c in contents])


async def test_fast_lane_fact_is_visible_to_the_very_next_turn(
        agent, worker, session_id, facts, fake_model):
    fake_model.reply("Got it, I'll remember that.")
    await agent.turn("owner", session_id, "Remember that my sister Ana lives in Porto.").run()
    # stored before the reply: the model saw it in the same turn's prompt already
    assert "The user's sister Ana lives in Porto" in fake_model.requests[0].tail
    (fact,) = facts.list_facts("owner")
    assert fact.tags == ["fastlane"] and fact.source_session_id == session_id
    fake_model.reply("Ana lives in Porto.")
    await agent.turn("owner", session_id, "Where does Ana live again?").run()
    # still in front of the model: in the conversation as sent (the first turn's tail)
    assert "The user's sister Ana lives in Porto" in fake_model.last.prompt
    await worker.drain()
    # the remember-request cost no extraction call; the question none either
    assert len(fake_model.requests) == 2
    assert [r.reason for r in worker.runs("owner")] == ["fast_lane", "no_statement"]


async def test_reply_is_delivered_before_extraction_starts(
        agent, worker, session_id, facts, fake_model):
    fake_model.reply("Congratulations on the new job!")
    release = fake_model.block()            # the extraction call waits here
    fake_model.reply(extraction("The user works at Acme Corp as a staff engineer."))
    chunks = []
    turn = agent.turn("owner", session_id, "I just started at Acme Corp as a staff engineer.")
    async for chunk in turn:
        chunks.append(chunk)
    assert "".join(chunks) == "Congratulations on the new job!"
    await fake_model.reached.wait()         # extraction has started, after the reply
    assert worker.pending == 1 and facts.list_facts("owner") == []
    replies = [m for m in agent.memory.sessions.messages("owner", session_id)
               if m.role == "assistant"]
    assert replies[0].content == "Congratulations on the new job!"
    release.set()
    await worker.drain()
    assert [f.content for f in facts.list_facts("owner")] == [
        "The user works at Acme Corp as a staff engineer."]
    # the extraction prompt held the user's words and the reply, after the reply was complete
    assert "I just started at Acme Corp" in fake_model.last.messages[-1]["content"]


async def test_turn_that_wrote_memory_with_tools_is_not_extracted_again(
        agent, worker, session_id, facts, fake_model):
    fake_model.tool_call("facts", {"action": "add", "content": "The user's dog is called Rex.",
                                   "entities": ["Rex"]})
    fake_model.reply("Saved.")
    await agent.turn("owner", session_id, "Please save that my dog is called Rex.").run()
    await worker.drain()
    (run,) = worker.runs("owner")
    assert (run.status, run.reason) == ("skipped", "memory_written")
    assert len(fake_model.requests) == 2 and len(facts.list_facts("owner")) == 1


async def test_extraction_failure_never_reaches_the_user(
        agent, worker, session_id, facts, fake_model):
    fake_model.reply("Lovely!")
    fake_model.reply("I'm not able to produce JSON today.")
    result = await agent.turn("owner", session_id, "We're moving to Utrecht in January.").run()
    await worker.drain()
    assert result.error is None and result.text == "Lovely!"
    (run,) = worker.runs("owner")
    assert run.status == "retry" and facts.list_facts("owner") == []


async def test_facts_history_shows_where_a_learned_fact_came_from(
        agent, worker, session_id, facts, fake_model, cli):
    fake_model.reply("Noted!")
    fake_model.reply(extraction("The user's daughter Maya plays the violin."))
    await agent.turn("owner", session_id, "My daughter Maya has started playing the violin.").run()
    await worker.drain()
    (fact,) = facts.list_facts("owner")
    out = cli("facts", "history", str(fact.id)).stdout
    assert f"source: session {session_id} (terminal, started 2026-11-29 12:00)" in out
    assert "said: My daughter Maya has started playing the violin." in out
    manual = facts.add("owner", "The user's violin teacher is Ms. Ito.").fact
    assert "added directly" in cli("facts", "history", str(manual.id)).stdout


async def test_extraction_waits_while_another_reply_is_streaming(
        agent, worker, session_id, facts, fake_model):
    worker.yield_to_replies = 3600          # only a finished reply can let it through
    sessions = agent.memory.sessions
    sessions.append("owner", session_id, "user", "We adopted a cat named Miso.")
    sessions.append("owner", session_id, "assistant", "How nice!")
    release = fake_model.block()            # a reply in another channel is held mid-turn
    fake_model.reply("4.")
    fake_model.reply(extraction("The user has a cat named Miso."))
    other = sessions.create("owner", "discord").id
    streaming = asyncio.ensure_future(agent.turn("owner", other, "what's 2+2?").run())
    await fake_model.reached.wait()
    worker.schedule("owner", session_id)
    for _ in range(50):
        await asyncio.sleep(0)
    # extraction does no database work (no call prepared, no run, no fact) while it streams
    assert len(fake_model.requests) == 1 and worker.pending == 1
    assert worker.runs("owner", session_id) == [] and facts.list_facts("owner") == []
    release.set()
    assert (await streaming).text == "4."
    await worker.drain()
    assert [f.content for f in facts.list_facts("owner")] == ["The user has a cat named Miso."]


async def test_a_long_message_is_read_for_remember_requests_off_the_event_loop(
        agent, worker, session_id, facts, fake_model, monkeypatch):
    """Issue 30: a message over DETECT_INLINE_CHARS is read by the fast lane on a worker thread
    (another user's turn goes on meanwhile); its fact is still stored before the reply, and seen
    by the same turn's prompt, as for a short one."""
    import threading

    from hermes.learn import fastlane

    threads: list[str] = []
    original = fastlane.detect

    def noting(text):
        threads.append(threading.current_thread().name)
        return original(text)

    monkeypatch.setattr(fastlane, "detect", noting)
    filler = " ".join(f"The tomatoes in bed {i} grew well this week." for i in range(200))
    assert len(filler) > fastlane.DETECT_INLINE_CHARS
    fake_model.reply("Noted.")
    await agent.turn("owner", session_id, "Remember that my sister Ana lives in Porto. "
                     + filler).run()
    loop_thread = threading.current_thread().name
    assert threads and loop_thread not in threads
    assert "The user's sister Ana lives in Porto" in fake_model.requests[0].tail
    assert [f.content for f in facts.list_facts("owner")] == [
        "The user's sister Ana lives in Porto"]
    fake_model.reply("Hi.")
    await agent.turn("owner", session_id, "Remember that my cat is called Miso.").run()
    assert threads[-1] == loop_thread  # a short one: read at once
