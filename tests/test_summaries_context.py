"""Session summaries, the cross-thread context file and rating replies."""

from __future__ import annotations

import pytest

from hermes.agent.llm import LLM
from hermes.agent.summarize import (
    MAX_ATTEMPTS,
    close_idle,
    parse_summary,
    summarize_session,
)
from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.errors import NotFound
from hermes.memory import context as context_file
from hermes.memory.operations import MemoryOperations, Scope
from hermes.runtime import Runtime
from tests.fakellm import service_unavailable


@pytest.fixture
def model_rt(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield rt
    rt.close()


def llm_for(rt) -> LLM:
    return LLM.from_settings(rt.settings, background=True)


def conversation(rt, user="owner", source="terminal", n=6, text="the nginx config breaks"):
    store = rt.memory.sessions
    session = store.create(user, source)
    for i in range(n):
        store.append(user, session.id, "user" if i % 2 == 0 else "assistant",
                     f"{text}: detail number {i} about the reverse proxy and TLS certificates")
    return session


# -- summaries --------------------------------------------------------------------------------

async def test_summary_from_the_model_is_stored(model_rt, fake_model):
    session = conversation(model_rt)
    fake_model.reply('```json\n{"title": "Fixing the nginx proxy", '
                     '"summary": "Debugged TLS."}\n```')
    outcome = await summarize_session(model_rt.memory, llm_for(model_rt), "owner", session.id)
    assert outcome.status == "done"
    stored = model_rt.memory.sessions.get("owner", session.id)
    assert (stored.title, stored.summary) == ("Fixing the nginx proxy", "Debugged TLS.")
    assert "nginx config breaks" in fake_model.last.messages[1]["content"]


async def test_small_talk_is_titled_without_a_model_call(model_rt, fake_model):
    store = model_rt.memory.sessions
    session = store.create("owner", "discord")
    store.append("owner", session.id, "user", "hi there!")
    store.append("owner", session.id, "assistant", "Hello! How can I help?")
    outcome = await summarize_session(model_rt.memory, llm_for(model_rt), "owner", session.id)
    assert outcome.status == "small_talk" and outcome.title == "hi there"
    assert fake_model.requests == []


async def test_without_a_model_a_plain_title_and_digest(clock):
    rt = Runtime(load_settings(), clock=clock)
    session = conversation(rt)
    outcome = await summarize_session(rt.memory, LLM.from_settings(rt.settings), "owner",
                                      session.id)
    assert outcome.status == "fallback"
    stored = rt.memory.sessions.get("owner", session.id)
    assert stored.title.startswith("the nginx config breaks") and "6 messages" in stored.summary
    rt.close()


async def test_a_failed_summary_is_recorded_and_retried_by_close_idle(model_rt, fake_model, clock):
    session = conversation(model_rt)
    for _ in range(4):
        fake_model.error(service_unavailable())
    clock.advance(minutes=model_rt.settings.sessions.idle_minutes + 1)
    [first] = await close_idle(model_rt.memory, llm_for(model_rt))
    assert first.status == "failed" and "unavailable" in first.error
    store = model_rt.memory.sessions
    assert store.get("owner", session.id).ended_at is not None
    row = model_rt.db.execute("SELECT summary_status, summary_attempts FROM sessions WHERE id = ?",
                              [session.id]).fetchone()
    assert row == ("failed", 1)
    fake_model.reply('{"title": "Proxy debugging", "summary": "Fixed it."}')
    [second] = await close_idle(model_rt.memory, llm_for(model_rt))
    assert second.status == "done" and store.get("owner", session.id).title == "Proxy debugging"
    assert await close_idle(model_rt.memory, llm_for(model_rt)) == []


async def test_retries_stop_after_max_attempts(model_rt, fake_model):
    session = conversation(model_rt)
    model_rt.memory.sessions.close("owner", session.id)
    model_rt.settings.model.retries = 0
    for _ in range(MAX_ATTEMPTS):
        fake_model.error(service_unavailable())
        await close_idle(model_rt.memory, llm_for(model_rt))
    assert await close_idle(model_rt.memory, llm_for(model_rt)) == []


async def test_the_first_context_file_is_written_when_the_first_session_ends(model_rt, clock):
    assert await close_idle(model_rt.memory, None) == []
    assert context_file.read(model_rt, "owner") is None             # nothing to say yet
    session = conversation(model_rt)
    model_rt.memory.sessions.close("owner", session.id)
    await close_idle(model_rt.memory, None)
    first = context_file.read(model_rt, "owner")
    assert first is not None and "the nginx config breaks" in first
    # Later ones wait for the daemon's refresh (context.refresh_hours).
    later = conversation(model_rt, text="the backup cron job failed")
    model_rt.memory.sessions.close("owner", later.id)
    await close_idle(model_rt.memory, None)
    assert context_file.read(model_rt, "owner") == first


async def test_close_idle_leaves_active_sessions_open(model_rt, clock):
    session = conversation(model_rt, n=1)
    clock.advance(minutes=5)
    assert await close_idle(model_rt.memory, None) == []
    assert model_rt.memory.sessions.get("owner", session.id).ended_at is None


@pytest.mark.parametrize("raw, expected", [
    ('{"title": "A", "summary": "B"}', ("A", "B")),
    ('Sure! Here it is:\n{"title": "Deploy fix", "summary": "Done."} Hope it helps',
     ("Deploy fix", "Done.")),
    ('{"title": "Truncated", "summ', ('{"title": "Truncated", "summ', None)),
    ("Title: Moving house\nSummary: Boxes and vans.", ("Moving house", "Boxes and vans.")),
    ('{"Title": "Wrong case keys", "Summary": "ok"}', ("Wrong case keys", "ok")),
    ("", (None, None)),
])
def test_parse_summary_is_defensive(raw, expected):
    assert parse_summary(raw) == expected


# -- context file -----------------------------------------------------------------------------

def seed_activity(rt):
    store = rt.memory.sessions
    done = conversation(rt, source="discord")
    store.set_summary("owner", done.id, title="Nginx TLS fix", summary="Renewed the certs.")
    store.close("owner", done.id)
    open_one = conversation(rt, source="terminal", text="planning the garden shed")
    store.set_summary("owner", open_one.id, title="Garden shed plans", summary="Wood chosen.")
    rt.memory.facts.add("owner", "The shed will be 3 by 2 metres")
    conversation(rt, user="mallory", text="mallory secret plans")


async def test_context_file_without_a_model_is_built_from_stored_material(model_rt):
    seed_activity(model_rt)
    text = await context_file.refresh(model_rt.memory, "owner", None)
    assert "## discord" in text and "Nginx TLS fix: Renewed the certs." in text
    assert "## terminal" in text and "## Still open" in text and "Garden shed plans" in text
    assert "The shed will be 3 by 2 metres" in text and "mallory" not in text
    assert context_file.read(model_rt, "owner") == text


async def test_context_file_with_a_model_and_its_cap(model_rt, fake_model):
    seed_activity(model_rt)
    model_rt.settings.context.max_chars = 200
    fake_model.reply("## Recent activity\n" + "- did many things\n" * 40)
    text = await context_file.refresh(model_rt.memory, "owner", llm_for(model_rt))
    assert len(text) <= 200 and text.startswith("## Recent activity")
    material = fake_model.last.messages[1]["content"]
    assert "Nginx TLS fix" in material and "mallory" not in material
    assert "at most 200" in fake_model.last.messages[0]["content"]


async def test_context_file_falls_back_when_the_model_fails(model_rt, fake_model):
    seed_activity(model_rt)
    for _ in range(4):
        fake_model.error(service_unavailable())
    text = await context_file.refresh(model_rt.memory, "owner", llm_for(model_rt))
    assert "Nginx TLS fix" in text and "## Still open" in text


async def test_context_file_plain_version_respects_the_cap(model_rt):
    for n in range(30):
        session = conversation(model_rt, text=f"topic {n}")
        model_rt.memory.sessions.set_summary("owner", session.id, title=f"Topic {n}",
                                                        summary="s" * 150)
    model_rt.settings.context.max_chars = 1000
    text = await context_file.refresh(model_rt.memory, "owner", None)
    assert len(text) <= 1000 and "Topic" in text


def test_context_paths_are_per_user_and_safe(model_rt):
    a = context_file.path_for(model_rt, "discord:123")
    b = context_file.path_for(model_rt, "discord_123")
    assert a != b and a.parent == b.parent == model_rt.settings.home_path / "context"
    assert context_file.path_for(model_rt, "../etc/passwd").parent == a.parent


# -- rating a reply ---------------------------------------------------------------------------

async def test_rate_reply_reaches_exactly_the_facts_shown(model_rt, fake_model):
    facts = model_rt.memory.facts
    shown = facts.add("owner", "The backup server is named vault").fact
    other = facts.add("owner", "Coffee is best black").fact
    fake_model.reply("It is vault.")
    session = model_rt.memory.sessions.create("owner", "discord")
    result = await Agent(model_rt.memory).turn("owner", session.id, "backup server name?").run()
    ops, owner = MemoryOperations(model_rt.memory), Scope("owner")
    ops.link_ref(owner, "discord:999", result.assistant_message_id)
    message_id = ops.message_for_ref(owner, "discord:999")
    rated = ops.rate_reply(owner, message_id, helpful=False)
    assert [r.id for r in rated] == [shown.id] and rated[0].new_trust < rated[0].old_trust
    assert facts.get("owner", other.id).trust == other.trust
    assert ops.message_for_ref(Scope("bob"), "discord:999") is None
    with pytest.raises(NotFound):
        ops.rate_reply(Scope("bob"), message_id, helpful=True)
