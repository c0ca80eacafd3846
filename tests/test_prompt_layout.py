"""The prompt as a cache key: a stable front, the conversation as sent, a volatile tail; every
request a valid shape for strict providers."""

from __future__ import annotations

from typing import Any

import pytest

from hermes.agent.conversation import NO_REPLY, shape
from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.memory.basic import BasicMemory
from hermes.runtime import Runtime
from tests.fakellm import service_unavailable, set_context_window


@pytest.fixture
def rt(fake_model, clock):
    runtime = Runtime(load_settings(), clock=clock)
    yield runtime
    runtime.close()


@pytest.fixture
def agent(rt):
    return Agent(rt.memory)


def new_session(rt, user="owner") -> int:
    return rt.memory.sessions.create(user, "terminal").id


def assert_valid_shape(messages: list[dict[str, Any]]) -> None:
    """What the strictest common providers accept: system messages first, then the user's,
    roles alternating, each tool result answering a call of the assistant message before it."""
    roles = [m["role"] for m in messages]
    body = messages[next(i for i, r in enumerate(roles) if r != "system"):]
    assert body[0]["role"] == "user", roles
    calls: set[str] = set()
    previous = None
    for message in body:
        role = message["role"]
        assert role != "system", roles
        if role == "tool":
            assert message["tool_call_id"] in calls, roles
            calls.discard(message["tool_call_id"])
        else:
            assert not calls, f"unanswered tool calls before {role}: {roles}"
            if role == "user":
                assert previous in (None, "assistant"), roles
            else:
                assert previous in ("user", "tool"), roles
                assert message.get("content") or message.get("tool_calls"), roles
                calls = {c["id"] for c in message.get("tool_calls") or []}
        previous = role
    assert body[-1]["role"] in ("user", "tool"), roles


def assert_extends(earlier, later) -> None:
    assert later.messages[: len(earlier.messages)] == earlier.messages


# -- prefix stability -------------------------------------------------------------------------

async def test_each_request_extends_the_previous_one(agent, rt, fake_model):
    BasicMemory(rt.db, clock=rt.clock).add("owner", "Prefers short answers")
    session_id = new_session(rt)
    for text in ("one", "two", "three", "four"):
        fake_model.reply(f"reply to {text}")
        await agent.turn("owner", session_id, text).run()
        rt.clock.advance(minutes=7)
    requests = fake_model.requests
    for earlier, later in zip(requests, requests[1:], strict=False):
        assert_extends(earlier, later)
        assert_valid_shape(later.messages)
    # the time moves only in the tail
    assert "12:00 UTC" in requests[0].tail and "12:21 UTC" in requests[3].tail
    assert requests[3].system == requests[0].system


async def test_tool_calls_and_results_stay_in_the_conversation(agent, rt, fake_model):
    rt.memory.facts.add("owner", "The NAS runs TrueNAS")
    session_id = new_session(rt)
    fake_model.tool_call("facts", {"action": "search", "query": "NAS"}, text="Looking.")
    fake_model.reply("It runs TrueNAS.")
    await agent.turn("owner", session_id, "what does the NAS run?").run()
    within = fake_model.last   # the turn's second request: call and result appended
    assert [m["role"] for m in within.messages[-3:]] == ["user", "assistant", "tool"]
    fake_model.reply("You're welcome.")
    await agent.turn("owner", session_id, "thanks").run()
    after = fake_model.last
    assert_extends(within, after)
    assert after.messages[len(within.messages)] == {"role": "assistant",
                                                     "content": "It runs TrueNAS."}
    assert_valid_shape(after.messages)


async def test_a_new_session_takes_a_fresh_snapshot(agent, rt, fake_model):
    basic = BasicMemory(rt.db, clock=rt.clock)
    first_session = new_session(rt)
    fake_model.reply("a").reply("b")
    await agent.turn("owner", first_session, "hello").run()
    basic.add("owner", "Has a cat named Miso")
    await agent.turn("owner", new_session(rt), "hello again").run()
    assert "Has a cat named Miso" not in fake_model.requests[0].system
    assert "Has a cat named Miso" in fake_model.last.system


# -- read after write -------------------------------------------------------------------------

async def test_a_memory_tool_write_is_seen_next_turn_without_touching_the_front(
        agent, rt, fake_model):
    session_id = new_session(rt)
    fake_model.tool_call("memory", {"action": "add", "text": "Uses fish shell"})
    fake_model.reply("Noted.").reply("fish.")
    await agent.turn("owner", session_id, "I use fish").run()
    tool_result = fake_model.last.messages[-1]
    assert tool_result["role"] == "tool" and "Uses fish shell" in tool_result["content"]
    first = fake_model.last
    await agent.turn("owner", session_id, "which shell do I use?").run()
    second = fake_model.last
    assert_extends(first, second)
    assert "Uses fish shell" not in second.system
    assert "changed" not in first.tail
    assert "Memory written since this session started" in second.tail
    assert "basic memory: added [1] Uses fish shell" in second.tail
    # shown once: a later turn does not repeat it (it is in the conversation already)
    fake_model.reply("ok")
    await agent.turn("owner", session_id, "ok").run()
    assert "Uses fish shell" not in fake_model.last.tail


async def test_a_facts_tool_write_is_seen_next_turn(agent, rt, fake_model):
    session_id = new_session(rt)
    fake_model.tool_call("facts", {"action": "add", "content": "The router is a Fritzbox 7590"})
    fake_model.reply("Stored.").reply("A Fritzbox.")
    await agent.turn("owner", session_id, "my router is a Fritzbox 7590").run()
    assert "Fritzbox 7590" in fake_model.last.messages[-1]["content"]   # the tool result
    await agent.turn("owner", session_id, "hmm").run()
    assert "trust 0.50] The router is a Fritzbox 7590" in fake_model.last.tail


async def test_a_fact_forgotten_mid_session_is_announced(agent, rt, fake_model):
    facts = rt.memory.facts
    fact = facts.add("owner", "The car is a red Fiat").fact
    session_id = new_session(rt)
    fake_model.reply("ok").reply("ok")
    await agent.turn("owner", session_id, "hi").run()
    facts.forget("owner", fact.id, "sold it")
    await agent.turn("owner", session_id, "hi again").run()
    assert f"fact #{fact.id} forgotten" in fake_model.last.tail


async def test_the_fast_lane_mid_session_reaches_the_same_turn(agent, rt, fake_model):
    from hermes.learn.fastlane import FastLane

    agent.before_reply.append(FastLane(rt.memory, agent.facts))
    session_id = new_session(rt)
    fake_model.reply("hi").reply("Noted.")
    await agent.turn("owner", session_id, "hello").run()
    await agent.turn("owner", session_id, "Remember that my locker code is in the blue app.").run()
    assert "The user's locker code is in the blue app" in fake_model.last.tail
    assert fake_model.last.system == fake_model.requests[0].system


async def test_another_users_writes_never_reach_the_tail(agent, rt, fake_model):
    session_id = new_session(rt)
    fake_model.reply("ok").reply("ok")
    await agent.turn("owner", session_id, "hi").run()
    rt.memory.facts.add("bob", "Bob's secret project is Falcon")
    BasicMemory(rt.db, clock=rt.clock).add("bob", "Bob likes tea")
    await agent.turn("owner", session_id, "falcon project tea?").run()
    assert "Falcon" not in fake_model.last.tail and "Bob likes tea" not in fake_model.last.tail
    assert rt.memory.facts.changed_since("owner", 0) == []


# -- request shapes ---------------------------------------------------------------------------

async def test_after_a_failed_turn_roles_still_alternate(agent, rt, fake_model):
    session_id = new_session(rt)
    fake_model.reply("one")
    await agent.turn("owner", session_id, "first").run()
    for _ in range(4):
        fake_model.error(service_unavailable())
    failed = await agent.turn("owner", session_id, "second").run()
    assert failed.error
    fake_model.reply("three")
    await agent.turn("owner", session_id, "third").run()
    sent = fake_model.last.messages
    assert_valid_shape(sent)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "assistant",
                                         "user"]
    assert sent[4]["content"] == NO_REPLY and sent[3]["content"].endswith("second")
    # the failed request is still a prefix of the next one
    assert_extends(fake_model.requests[1], fake_model.last)


async def test_a_conversation_rebuilt_from_the_store_is_valid(rt, fake_model):
    store = rt.memory.sessions
    session_id = new_session(rt)
    store.append("owner", session_id, "assistant", "Good morning! (a cron greeting)")
    store.append("owner", session_id, "user", "a question that failed")
    store.append("owner", session_id, "user", "asked again")
    store.append("owner", session_id, "tool", '{"ok":true}', tool_name="facts",
                 tool_args="{}", tool_call_id="call_1")
    store.append("owner", session_id, "assistant", "An answer.")
    store.append("owner", session_id, "assistant", "And more.")
    fake_model.reply("fine")
    await Agent(rt.memory).turn("owner", session_id, "next").run()   # a new process: nothing held
    assert_valid_shape(fake_model.last.messages)


async def test_after_compression_the_kept_part_starts_with_the_user(rt, fake_model):
    set_context_window(3000)
    store = rt.memory.sessions
    session_id = new_session(rt)
    for i in range(41):   # an odd count: a plain cut would keep an assistant message first
        role = "user" if i % 2 == 0 else "assistant"
        store.append("owner", session_id, role, f"message {i}: " + "words about networks " * 12)
    fake_model.reply("Earlier: networks.").reply("ok")
    agent = Agent(rt.memory)
    result = await agent.turn("owner", session_id, "and now?").run()
    assert result.compressed
    assert_valid_shape(fake_model.last.messages)
    compressed = fake_model.last
    fake_model.reply("fine")
    result = await agent.turn("owner", session_id, "more?").run()
    assert not result.compressed
    assert_extends(compressed, fake_model.last)
    assert agent.compressor.compressions == 1


def test_shape_is_a_prefix_of_the_shape_of_a_longer_conversation():
    conversation = [
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function",
                         "function": {"name": "facts", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        {"role": "tool", "tool_call_id": "c9", "content": "{}"},   # an orphan result
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "d"},
    ]
    full = shape(conversation)
    assert_valid_shape(full)
    assert shape(full) == full
    for end in range(1, len(conversation) + 1):
        if conversation[end - 1]["role"] in ("user", "tool"):
            assert full[: len(shape(conversation[:end]))] == shape(conversation[:end])
