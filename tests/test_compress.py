"""Context compression: older turns condensed, memory rebuilt fresh, transcript untouched."""

from __future__ import annotations

import pytest

from hermes.agent.compress import SUMMARY_PREFIX
from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.memory.basic import BasicMemory
from hermes.runtime import Runtime
from tests.fakellm import service_unavailable, set_context_window


@pytest.fixture
def long_session(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    set_context_window(3000)
    store = rt.memory.sessions
    session = store.create("owner", "terminal")
    for i in range(40):
        role = "user" if i % 2 == 0 else "assistant"
        store.append("owner", session.id, role,
                     f"message {i}: we compared several options for the home lab network, "
                     f"including VLAN layouts, switch models and firewall rules, point {i}; "
                     "we also weighed power draw, noise, rack space and the cost of spares")
    BasicMemory(rt.db, clock=clock).add("owner", "Runs a home lab with a Proxmox cluster")
    rt.memory.facts.add("owner", "The firewall is an OPNsense box")
    yield rt, session.id
    rt.close()


async def test_compression_keeps_memory_and_the_stored_transcript(long_session, fake_model):
    rt, session_id = long_session
    store = rt.memory.sessions
    before = [(m.id, m.content) for m in store.messages("owner", session_id)]
    fake_model.reply("The user compared home lab network designs (VLANs, switches, firewall).")
    fake_model.reply("Use VLAN 20 for the cameras.")
    agent = Agent(rt.memory)
    result = await agent.turn("owner", session_id, "which firewall do I have?").run()
    assert result.compressed and result.text == "Use VLAN 20 for the cameras."
    summary_call, reply_call = fake_model.requests
    assert "message 0:" in summary_call.messages[1]["content"]
    sent = reply_call.messages
    assert sent[1]["role"] == "system" and sent[1]["content"].startswith(SUMMARY_PREFIX)
    assert "home lab network designs" in sent[1]["content"]
    # memory in a fresh snapshot (the front) and recalled in the tail
    assert "Runs a home lab with a Proxmox cluster" in sent[0]["content"]
    assert "The firewall is an OPNsense box" in sent[-1]["content"]
    # the recent turns stay verbatim, starting with a user message; the older ones are gone
    assert sent[-1]["content"].endswith("\n\nwhich firewall do I have?")
    assert sent[2]["role"] == "user"
    assert not any("message 0:" in str(m["content"]) for m in sent[2:])
    assert agent.llm.count_tokens(sent) <= int(3000 * rt.settings.agent.compress_at)
    # the stored transcript is unchanged, plus this turn's two messages
    after = [(m.id, m.content) for m in store.messages("owner", session_id)]
    assert after[: len(before)] == before and len(after) == len(before) + 2


async def test_the_summary_is_reused_on_the_next_turn(long_session, fake_model):
    rt, session_id = long_session
    agent = Agent(rt.memory)
    fake_model.reply("Earlier: home lab network comparison.").reply("first")
    await agent.turn("owner", session_id, "q1").run()
    first = fake_model.last
    fake_model.reply("second")  # no second summary call is scripted
    result = await agent.turn("owner", session_id, "q2").run()
    # not compressed again: the request extends the compressed one
    assert result.text == "second" and not result.compressed
    assert fake_model.last.messages[1]["content"].endswith("Earlier: home lab network comparison.")
    assert fake_model.last.messages[: len(first.messages)] == first.messages


async def test_a_failed_summary_falls_back_to_a_digest(long_session, fake_model):
    rt, session_id = long_session
    for _ in range(4):
        fake_model.error(service_unavailable())
    fake_model.reply("answer anyway")
    result = await Agent(rt.memory).turn("owner", session_id, "still works?").run()
    assert result.text == "answer anyway" and result.error is None
    digest = fake_model.last.messages[1]["content"]
    # cut where a turn starts: the kept part opens with a user message
    assert "34 earlier messages were left out" in digest and "message 32:" in digest
    assert fake_model.last.messages[2]["content"].startswith("message 34:")


async def test_a_short_conversation_is_not_compressed(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    session = rt.memory.sessions.create("owner", "terminal")
    fake_model.reply("hi")
    result = await Agent(rt.memory).turn("owner", session.id, "hello").run()
    assert not result.compressed and len(fake_model.requests) == 1
    rt.close()


async def test_the_provider_saying_too_long_compresses_and_retries_once(long_session,
                                                                        fake_model):
    from tests.fakellm import context_window_exceeded

    rt, session_id = long_session
    set_context_window(200_000)  # our count says it fits; the provider disagrees
    fake_model.error(context_window_exceeded())
    fake_model.reply("Earlier: the home lab network.").reply("Answer after compressing.")
    result = await Agent(rt.memory).turn("owner", session_id, "and the firewall?").run()
    assert result.text == "Answer after compressing." and result.compressed
    first, summary, retry = fake_model.requests
    assert len(retry.messages) < len(first.messages)
    assert retry.messages[1]["content"].endswith("Earlier: the home lab network.")


async def test_too_long_twice_is_one_clear_error(long_session, fake_model):
    from tests.fakellm import context_window_exceeded

    rt, session_id = long_session
    set_context_window(200_000)
    fake_model.error(context_window_exceeded()).reply("summary")
    fake_model.error(context_window_exceeded())
    result = await Agent(rt.memory).turn("owner", session_id, "again?").run()
    assert "too long" in result.error and result.assistant_message_id is None


async def test_a_second_compression_keeps_the_first_summary(fake_model, clock):
    """Issue 31: four short turns, one ~2,500-word message, then two short turns in a 4,000
    token window. The history then starts with a summary and holds fewer than keep_recent
    messages, yet is over budget: the summary must be folded into the next one, never
    dropped (before, the 6th and 7th requests carried no summary at all)."""
    from hermes.agent.compress import INSTRUCTIONS

    rt = Runtime(load_settings(), clock=clock)
    set_context_window(4000)
    session = rt.memory.sessions.create("owner", "terminal")
    summaries: list[str] = []

    def answer(request):  # summary calls get a summary; turns get a short reply
        if request.messages[0]["content"] == INSTRUCTIONS:
            summaries.append(request.messages[1]["content"])
            return f"summary {len(summaries)}: zebras are striped, live in Africa, eat grass"
        return "Noted."

    for _ in range(12):
        fake_model.respond(answer)
    agent = Agent(rt.memory)
    turns = ["Zebras are striped.", "Zebras live in Africa.", "Zebras eat grass.",
             "Zebras live in herds.", "the grass on the plain is green and tall " * 250,
             "Tell me more.", "And their foals?"]
    for text in turns:
        await agent.turn("owner", session.id, text).run()
    replies = [r for r in fake_model.requests if r.messages[0]["content"] != INSTRUCTIONS]
    assert len(replies) == 7
    for number, request in enumerate(replies[4:], start=5):
        carried = [m for m in request.messages if m["role"] == "system"
                   and str(m["content"]).startswith(SUMMARY_PREFIX)]
        assert carried and "zebras" in carried[0]["content"], f"request {number}"
        budget = int(4000 * rt.settings.agent.compress_at)
        assert agent.llm.count_tokens(request.messages) <= budget
    # every later summary was written from the one before it
    assert all("(Summary of what came before: summary" in s for s in summaries[1:])
    rt.close()
