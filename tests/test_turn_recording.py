"""Recording a turn's message: a long one is screened for secrets off the event loop, and a
session's messages are still recorded in the order their turns began (hermes.agent.turn)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from hermes.agent.turn import SCREEN_INLINE_CHARS, Agent
from hermes.config import load_settings
from hermes.errors import NotFound
from hermes.runtime import Runtime

VALUE = "Hx9q!zTr0ub4dor"
SECRET = f"password is {VALUE}"
LONG = ("The tomato seeds came from Omar. " * (SCREEN_INLINE_CHARS // 33 + 10)) + SECRET


@pytest.fixture
def agent(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield Agent(rt.memory)
    rt.close()


class HeldScreening:
    """The session store's screen, held for long texts until ``release`` is set: where it ran
    (the thread) and that it started are noted."""

    def __init__(self, agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
        self.screen = agent.sessions.screen
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls: list[tuple[int, str]] = []  # (thread, text) of each screen
        monkeypatch.setattr(agent.sessions, "screen", self.held)

    def held(self, content, tool_args=None):
        self.calls.append((threading.get_ident(), content))
        if len(content) > SCREEN_INLINE_CHARS:
            self.started.set()
            # (a screen run on the loop would wait here for ever: fail instead)
            assert self.release.wait(timeout=30), "the screen was never released"
        return self.screen(content, tool_args)

    def threads(self, text: str) -> list[int]:
        return [thread for thread, content in self.calls if content == text]

    async def wait_started(self) -> None:
        assert await asyncio.to_thread(self.started.wait, 30)


def contents(agent, user, session_id):
    return [(m.role, m.content) for m in agent.sessions.messages(user, session_id)]


async def test_a_long_message_is_screened_off_the_loop_and_the_turn_sees_it_redacted(
        agent, fake_model, monkeypatch):
    held = HeldScreening(agent, monkeypatch)
    held.release.set()
    session = agent.sessions.create("alice", "terminal").id
    fake_model.reply("noted")
    result = await agent.turn("alice", session, LONG).run()
    assert held.threads(LONG) and threading.get_ident() not in held.threads(LONG)
    recorded = agent.sessions.messages("alice", session)
    assert [m.role for m in recorded] == ["user", "assistant"]
    assert result.user_message_id == recorded[0].id
    # The turn goes on with its own message as recorded: redacted, in the model's request.
    assert VALUE not in recorded[0].content
    assert recorded[0].content.endswith("password is [redacted password]")
    sent = fake_model.last.messages[-1]["content"]
    assert sent.endswith(recorded[0].content) and VALUE not in sent
    assert "removed from memory" in result.text  # the note, worked out beside the screen


async def test_a_short_message_is_screened_on_the_loop(agent, fake_model, monkeypatch):
    held = HeldScreening(agent, monkeypatch)
    session = agent.sessions.create("alice", "terminal").id
    fake_model.reply("hi")
    await agent.turn("alice", session, "hello, " + SECRET).run()
    # no hop to a thread for a short one
    assert held.threads("hello, " + SECRET) == [threading.get_ident()]
    assert VALUE not in contents(agent, "alice", session)[0][1]


async def test_a_session_records_in_turn_order_while_other_users_go_on(
        agent, fake_model, monkeypatch):
    held = HeldScreening(agent, monkeypatch)
    alice = agent.sessions.create("alice", "terminal").id
    bob = agent.sessions.create("bob", "terminal").id
    for _ in range(3):
        fake_model.reply("ok")
    first = asyncio.create_task(agent.turn("alice", alice, LONG).run())
    await held.wait_started()
    second = asyncio.create_task(agent.turn("alice", alice, "and a short one").run())
    # Bob's whole turn while alice's long message is screened (the loop is free) ...
    bobs = await agent.turn("bob", bob, "quick question").run()
    assert bobs.error is None and contents(agent, "bob", bob)[0] == ("user", "quick question")
    # ... and alice's short message, although screened at once, waits for the long one.
    assert not second.done() and contents(agent, "alice", alice) == []
    held.release.set()
    done = await asyncio.gather(first, second)
    recorded = agent.sessions.messages("alice", alice)
    users = [m for m in recorded if m.role == "user"]
    assert [m.content.startswith("The tomato seeds") for m in users] == [True, False]
    assert users[1].content == "and a short one"
    assert [r.user_message_id for r in done] == [m.id for m in users]
    assert len(agent.recording) == 0  # no session's turn is left held


async def test_a_turn_stopped_while_its_message_is_screened_still_records_it(
        agent, fake_model, monkeypatch):
    held = HeldScreening(agent, monkeypatch)
    session = agent.sessions.create("alice", "terminal").id
    turn = asyncio.create_task(agent.turn("alice", session, LONG).run())
    await held.wait_started()
    turn.cancel()
    held.release.set()
    with pytest.raises(asyncio.CancelledError):
        await turn
    recorded = contents(agent, "alice", session)
    assert [role for role, _ in recorded] == ["user"]
    assert VALUE not in recorded[0][1]
    assert fake_model.requests == []  # nothing was sent
    assert len(agent.recording) == 0


async def test_a_long_message_for_another_users_session_is_refused_and_records_nothing(
        agent, fake_model, monkeypatch):
    HeldScreening(agent, monkeypatch).release.set()
    alice = agent.sessions.create("alice", "terminal").id
    fake_model.reply("hello alice")
    await agent.turn("alice", alice, "my seeds").run()
    before = contents(agent, "alice", alice)
    with pytest.raises(NotFound):
        await agent.turn("bob", alice, LONG).run()
    assert contents(agent, "alice", alice) == before
    assert len(agent.recording) == 0


async def test_a_long_messages_turn_gives_freed_memory_back_off_the_loop(agent, fake_model,
                                                                        monkeypatch):
    from hermes.agent import turn as turn_module

    released: list[int] = []
    done = threading.Event()
    monkeypatch.setattr(turn_module, "RELEASE_AFTER_SECONDS", 0)
    monkeypatch.setattr(turn_module, "release_freed_memory",
                        lambda: released.append(threading.get_ident()) or done.set())
    session = agent.sessions.create("alice", "terminal").id
    fake_model.reply("hi").reply("noted")
    await agent.turn("alice", session, "a short one").run()
    await agent.turn("alice", session, LONG).run()
    assert await asyncio.to_thread(done.wait, 30)
    assert len(released) == 1 and threading.get_ident() not in released


def test_freed_memory_goes_back_to_the_system():
    import sys
    from pathlib import Path

    from hermes.freed_memory import release_freed_memory

    if not sys.platform.startswith("linux"):
        pytest.skip("malloc_trim is glibc's")

    def anonymous() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no RssAnon")

    # 48 MiB in 64 KiB pieces (malloc's heap, under its mmap threshold), every 16th kept: the
    # rest is free but held between the kept ones, where malloc does not give it back itself.
    pieces = [bytearray(64 * 1024) for _ in range(768)]
    kept = pieces[::16]
    del pieces
    before = anonymous()
    assert release_freed_memory()
    assert before - anonymous() > 24 * 1024 * 1024
    assert len(kept) == 48
