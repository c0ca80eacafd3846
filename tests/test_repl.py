"""The terminal REPL, driven with prompt-toolkit's pipe input and a dummy output."""

from __future__ import annotations

import asyncio

import pytest
from prompt_toolkit.application import create_app_session
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from hermes.frontends.repl import Repl, SlashCompleter

ENTER, ALT_ENTER, CTRL_C, CTRL_D, TAB = "\r", "\x1b\r", "\x03", "\x04", "\t"


@pytest.fixture
def pipe():
    with create_pipe_input() as inp, create_app_session(input=inp, output=DummyOutput()):
        yield inp


async def until(condition, ticks: int = 5000) -> None:
    """Yield to the loop until ``condition()`` holds (bounded; no wall-clock sleeping)."""
    for _ in range(ticks):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


class Session:
    def __init__(self, repl: Repl, events: list, pipe) -> None:
        self.repl, self.events, self.pipe = repl, events, pipe
        self.task = asyncio.create_task(repl.run())

    def said(self, kind: str | None = None) -> list[str]:
        return [text for k, text in self.events if kind is None or k == kind]

    def reply_text(self) -> str:
        return "".join(self.said("chunk"))

    async def send(self, text: str) -> None:
        self.pipe.send_text(text)
        await until(lambda: self.repl.prompt.app.is_running or self.task.done())

    async def reply_done(self) -> None:
        await until(lambda: self.repl._reply is not None)
        await self.repl.wait_reply()

    async def command(self, text: str) -> str:
        before = len(self.events)
        self.pipe.send_text(text + ENTER)
        await until(lambda: len(self.events) > before)
        return self.events[-1][1]

    async def leave(self) -> None:
        self.pipe.send_text(CTRL_D)
        await asyncio.wait_for(self.task, 10)


@pytest.fixture
async def repl(fake_model, rt, pipe, tmp_path):
    from hermes.agent.turn import Agent

    events: list[tuple[str, str]] = []
    shell = Repl(rt.memory, Agent(rt.memory), emit=lambda kind, text: events.append((kind, text)),
                 history=FileHistory(str(tmp_path / "history")))
    session = Session(shell, events, pipe)
    yield session
    if not session.task.done():
        session.task.cancel()
        await asyncio.gather(session.task, return_exceptions=True)


async def test_pending_lists_and_settles_the_users_own_questions(repl, fake_model, rt):
    """Where a pending question shows in the terminal besides the next reply: /pending."""
    user = repl.repl.user
    facts = rt.memory.facts
    assert (await repl.command("/remember My home city is Lisbon")).startswith("Remembered [")
    (lisbon,) = facts.list_facts(user)
    question = facts.ask_before_overriding(user, lisbon.id, "The user's home city is Porto")
    theirs = facts.add("bob", "Bob's home city is Faro").fact
    facts.ask_before_overriding("bob", theirs.id, "Bob's home city is Braga")
    listed = await repl.command("/pending")
    assert f"[{question.id}] fact {lisbon.id}: The user's home city is Lisbon" in listed
    assert "now perhaps: The user's home city is Porto" in listed and "Braga" not in listed
    assert "Usage: /pending" in await repl.command("/pending maybe 1")
    settled = await repl.command(f"/pending accept {question.id}")
    assert settled.startswith(f"Settled question {question.id}: now [")
    assert [f.content for f in facts.list_facts(user)] == ["The user's home city is Porto"]
    assert await repl.command("/pending") == "No pending questions."
    await repl.leave()


async def test_a_message_streams_a_reply_into_a_terminal_session(repl, fake_model, rt, tmp_path):
    fake_model.reply("Hello from Hermes.")
    repl.pipe.send_text("hi there" + ENTER)
    await repl.reply_done()
    assert repl.reply_text() == "Hello from Hermes."
    assert len(repl.said("chunk")) > 1                           # it arrived in pieces
    row = rt.db.execute("SELECT user, source, channel_key FROM sessions").fetchone()
    assert row[0] == rt.settings.users.default and row[1] == "terminal"
    assert row[2].startswith("terminal:")
    await repl.leave()
    assert repl.said("info")[-1] == "Bye."
    assert "+hi there" in (tmp_path / "history").read_text()


async def test_multi_line_input_is_one_message(repl, fake_model, rt):
    fake_model.reply("Two lines received.")
    repl.pipe.send_text("line one" + ALT_ENTER + "line two" + ENTER)
    await repl.reply_done()
    assert fake_model.requests[0].messages[-1]["content"].endswith("line one\nline two")
    await repl.leave()


async def test_ctrl_c_stops_the_reply_and_the_repl_carries_on(repl, fake_model):
    release = fake_model.block()
    repl.pipe.send_text("tell me a long story" + ENTER)
    await asyncio.wait_for(fake_model.reached.wait(), 10)
    assert repl.repl.replying()
    repl.pipe.send_text(CTRL_C)
    await until(lambda: "[stopped]" in repl.said("info"))
    assert not repl.task.done()
    release.set()
    fake_model.reply("Still here.")
    repl.pipe.send_text("are you there?" + ENTER)
    await until(lambda: repl.repl._reply is not None and "Still" in repl.reply_text())
    await repl.repl.wait_reply()
    assert repl.reply_text().endswith("Still here.")
    await repl.leave()


async def test_a_reply_cut_off_by_a_model_error_says_so(repl, fake_model):
    from tests.fakellm import internal_server

    fake_model.error(internal_server("connection reset"), partial_text="The answer is forty")
    repl.pipe.send_text("what is the answer?" + ENTER)
    await repl.reply_done()
    assert repl.reply_text() == "The answer is forty"
    assert any(e.startswith("(reply cut off:") and "connection reset" in e
               for e in repl.said("error"))
    await repl.leave()


async def test_ctrl_c_at_an_idle_prompt_drops_the_line(repl, fake_model):
    repl.pipe.send_text("half typed" + CTRL_C)
    assert (await repl.command("/help")).startswith("Enter sends")
    await repl.leave()
    assert fake_model.requests == []


async def test_the_prompt_leaves_the_daemons_sigint_handler_alone(repl):
    import signal

    loop = asyncio.get_running_loop()
    stops: list[str] = []
    loop.add_signal_handler(signal.SIGINT, stops.append, "SIGINT")
    try:
        assert (await repl.command("/help")).startswith("Enter sends")   # prompted at least once
        await until(lambda: repl.repl.prompt.app.is_running)
        handle = loop._signal_handlers.get(signal.SIGINT)  # type: ignore[attr-defined]
        assert handle is not None and handle._callback == stops.append
        await repl.leave()
        handle = loop._signal_handlers.get(signal.SIGINT)  # type: ignore[attr-defined]
        assert handle is not None and handle._callback == stops.append
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def test_memory_commands(repl, fake_model, rt):
    assert (await repl.command("/remember The deploy script lives in ops/deploy.sh")
            ).startswith("Remembered [")
    assert "ops/deploy.sh" in await repl.command("/facts deploy script")
    assert "BASIC MEMORY" in await repl.command("/memory")
    assert "trust 0.50 -> 0.55" in await repl.command("/rate 1 up")
    assert (await repl.command("/forget 1")).startswith("Forgot [1]")
    assert (await repl.command("/facts deploy script")).startswith("No facts match")
    assert "Usage: /rate" in await repl.command("/rate sideways")
    assert "Unknown command /frobnicate" in await repl.command("/frobnicate")
    assert "999" in await repl.command("/forget 999")              # one line, REPL stays
    assert repl.events[-1][0] == "error"
    assert not repl.task.done()
    await repl.leave()


async def test_mark_decides_where_a_fact_or_an_entry_may_be_repeated(repl, fake_model, rt):
    from hermes.memory.place import Place

    channel = Place.discord_channel(1, 2)
    user = repl.repl.user
    fact = rt.memory.facts.add(user, "The user's team ships on Fridays").fact
    rt.memory.basic.add(user, "Standup at nine")
    said = await repl.command(f"/mark {fact.id} shareable")
    assert said.startswith(f"[{fact.id}] The user's team ships on Fridays: shareable")
    assert [f.id for f in rt.memory.facts.search(user, "ships", place=channel)] == [fact.id]
    assert "Standup at nine: shareable" in await repl.command("/mark memory standup shareable")
    assert [e.text for e in rt.memory.basic.entries(user, place=channel)] == ["Standup at nine"]
    assert "private" in await repl.command(f"/mark {fact.id} private")
    assert rt.memory.facts.search(user, "ships", place=channel) == []
    # another user's fact is not there to mark; bad input is one line and the REPL goes on
    other = rt.memory.facts.add("bob", "Bob's secret is safe").fact
    assert f"No fact with id {other.id}" in await repl.command(f"/mark {other.id} shareable")
    assert rt.memory.facts.get("bob", other.id).shared is None
    assert "Unknown mark 'loud'" in await repl.command(f"/mark {fact.id} loud")
    assert "Usage: /mark" in await repl.command("/mark 1")
    assert repl.events[-1][0] == "error" and not repl.task.done()
    await repl.leave()


async def test_sessions_search_and_new(repl, fake_model, rt):
    fake_model.reply("Tomatoes want full sun.")
    repl.pipe.send_text("how do I grow tomatoes?" + ENTER)
    await repl.reply_done()
    assert "terminal" in await repl.command("/sessions")
    assert "tomatoes" in (await repl.command("/search tomatoes")).lower()
    assert await repl.command("/new") == "Started a new conversation."
    fake_model.reply("Fresh start.")
    repl.pipe.send_text("hello again" + ENTER)
    await until(lambda: "Fresh" in repl.reply_text())
    await repl.repl.wait_reply()
    rows = rt.db.execute("SELECT ended_at IS NOT NULL FROM sessions ORDER BY id").fetchall()
    assert [r[0] for r in rows] == [1, 0]
    assert "context file" in (await repl.command("/context")).lower()
    assert repl.events[-1][0] == "info"
    await repl.leave()


async def test_rate_up_or_down_rates_the_facts_behind_the_last_reply(repl, fake_model, rt):
    facts = rt.memory.facts
    user = repl.repl.user
    ids = [facts.add(user, "Miso is the cat of the owner", entities=["Miso"]).id,
           facts.add(user, "The owner cycles to work", entities=["bicycle"]).id]
    assert "No reply to rate yet" in await repl.command("/rate down")
    fake_model.reply("Miso is your cat.")
    repl.pipe.send_text("what is Miso?" + ENTER)
    await repl.reply_done()
    assistant = rt.db.execute("SELECT max(id) FROM messages WHERE role = 'assistant'").fetchone()
    shown = {r[0] for r in rt.db.execute(
        "SELECT fact_id FROM shown_facts WHERE message_id = ?", assistant)}
    assert shown and shown < set(ids)
    before = {i: facts.get(user, i).trust for i in ids}
    said = await repl.command("/rate down")
    for fact_id in ids:
        changed = facts.get(user, fact_id).trust != before[fact_id]
        assert changed == (fact_id in shown)
        assert (f"[{fact_id}]" in said) == (fact_id in shown)
    # Rating the same reply again does not pile up; the other way replaces the first rating.
    once = {i: facts.get(user, i).trust for i in ids}
    assert "already" in await repl.command("/rate down")
    assert {i: facts.get(user, i).trust for i in ids} == once
    await repl.command("/rate up")
    delta = rt.settings.facts.helpful_delta
    assert {i: facts.get(user, i).trust for i in shown} == {
        i: round(before[i] + delta, 6) for i in shown}
    await repl.leave()


async def test_rate_down_on_a_reply_that_used_no_fact_shown_changes_nothing_and_says_so(
        repl, fake_model, rt):
    facts = rt.memory.facts
    user = repl.repl.user
    miso = facts.add(user, "Miso is the cat of the owner", entities=["Miso"]).id
    fake_model.reply("I am not sure what you mean.")
    repl.pipe.send_text("what is Miso?" + ENTER)
    await repl.reply_done()
    said = await repl.command("/rate down")
    assert said.startswith("No fact's trust was lowered") and f"#{miso}" in said
    assert "/rate ID down" in said
    assert facts.get(user, miso).trust == 0.5
    await repl.leave()


async def test_tab_completes_slash_commands(repl):
    buffer = repl.repl.prompt.default_buffer
    repl.pipe.send_text("/rem")
    await until(lambda: buffer.complete_state is not None and buffer.complete_state.completions)
    repl.pipe.send_text(TAB)
    await until(lambda: buffer.text == "/remember")
    repl.pipe.send_text(" " + CTRL_C)
    await repl.command("/quit")
    await asyncio.wait_for(repl.task, 10)


def test_completer_only_completes_a_leading_command():
    completer = SlashCompleter()
    found = [c.text for c in completer.get_completions(Document("/s"), CompleteEvent())]
    assert found == ["/sessions", "/search"]
    assert list(completer.get_completions(Document("hello /s"), CompleteEvent())) == []


async def test_quit_leaves(repl):
    repl.pipe.send_text("/quit" + ENTER)
    await asyncio.wait_for(repl.task, 10)
    assert repl.said("info")[-1] == "Bye."


async def test_the_terminal_sink_prints_whole_lines_above_the_prompt():
    import io

    from prompt_toolkit.data_structures import Size
    from prompt_toolkit.output.vt100 import Vt100_Output

    from hermes.frontends.repl import TerminalSink

    screen = io.StringIO()
    output = Vt100_Output(screen, lambda: Size(rows=24, columns=80), term="xterm")
    with create_pipe_input() as inp, create_app_session(input=inp, output=output):
        sink = TerminalSink()
        for chunk in ("Hel", "lo there,\nsecond ", "line"):
            sink("chunk", chunk)
        assert "Hello there," in screen.getvalue() and "second" not in screen.getvalue()
        sink("end", "")
        sink("error", "something broke")
    assert "second line" in screen.getvalue() and "something broke" in screen.getvalue()



def whole_repl(rt, pipe, tmp_path) -> Session:
    """A REPL on the agent every entry point builds (fast lane and extraction attached)."""
    from hermes.assembly import build_agent

    events: list[tuple[str, str]] = []
    shell = Repl(rt.memory, build_agent(rt)[0], emit=lambda kind, text: events.append((kind, text)),
                 history=FileHistory(str(tmp_path / "history")))
    return Session(shell, events, pipe)


async def test_the_terminal_identity_is_plumbing_never_a_name(fake_model, rt, pipe, tmp_path):
    repl = whole_repl(rt, pipe, tmp_path)
    fake_model.reply("Noted.")
    pipe.send_text("Remember that my flight to Oslo is at 9 on Friday" + ENTER)
    await repl.reply_done()
    await repl.leave()
    await asyncio.gather(*repl.repl.background)

    (fact,) = rt.memory.facts.list_facts("owner")
    assert fact.content == "The user's flight to Oslo is at 9 on Friday"
    assert "Terminal" not in fact.entities
    sent = fake_model.requests[0].messages
    assert "terminal:" not in str(sent).lower()
    from hermes.agent.prompt import without_tail

    # the person's own text, after the volatile tail, carries no identity prefix
    assert without_tail(sent[-1]["content"]).startswith("Remember that my flight")


async def test_the_user_is_called_by_the_name_set_in_config(fake_model, pipe, clock, tmp_path,
                                                            monkeypatch):
    from hermes.config import load_settings
    from hermes.runtime import Runtime

    monkeypatch.setenv("HERMES_USERS__OWNER__NAME", "Alice")
    rt = Runtime(load_settings(), clock=clock)
    repl = whole_repl(rt, pipe, tmp_path)
    fake_model.reply("Hi Alice.")
    pipe.send_text("hello" + ENTER)
    await repl.reply_done()
    await repl.leave()
    await asyncio.gather(*repl.repl.background)
    rt.close()
    assert fake_model.requests[0].messages[-1]["content"].endswith("\n\nAlice: hello")


@pytest.mark.parametrize("leave", [CTRL_D, "/exit" + ENTER, "/quit" + ENTER])
async def test_leaving_ends_the_session_and_summarises_it_in_the_background(
        fake_model, rt, pipe, tmp_path, leave):

    repl = whole_repl(rt, pipe, tmp_path)
    fake_model.reply("Hello from Hermes.")
    pipe.send_text("hi there" + ENTER)
    await repl.reply_done()
    pipe.send_text(leave)
    await asyncio.wait_for(repl.task, 10)
    (session,) = rt.memory.sessions.list_sessions("owner")
    assert session.ended_at is not None
    await asyncio.gather(*repl.repl.background)
    assert rt.memory.sessions.get("owner", session.id).title == "hi there"
    # The next start begins a new session (which gets the context file on its first turn).
    again = whole_repl(rt, pipe, tmp_path)
    fake_model.reply("Welcome back.")
    pipe.send_text("back again" + ENTER)
    await again.reply_done()
    await again.leave()
    await asyncio.gather(*again.repl.background)
    assert len(rt.memory.sessions.list_sessions("owner")) == 2


async def test_a_reply_is_followed_by_its_receipt_used_then_learned(fake_model, rt, pipe,
                                                                    tmp_path):
    import json

    from hermes.assembly import build_agent

    rt.settings.extraction.enabled = True
    user = rt.settings.users.default
    miso = rt.memory.facts.add(user, "Miso is the cat of the owner", entities=["Miso"]).id
    rt.memory.facts.add("alice", "Alice's cat is called Miso too", entities=["Miso"])
    agent, worker = build_agent(rt)
    events: list[tuple[str, str]] = []
    shell = Repl(rt.memory, agent, emit=lambda kind, text: events.append((kind, text)),
                 history=FileHistory(str(tmp_path / "history")))
    shell.learn_from(worker)
    repl = Session(shell, events, pipe)
    fake_model.reply("Miso is your cat.")
    fake_model.reply(json.dumps([{"action": "create", "content": "Miso is a grey tabby",
                                  "type": "semantic", "category": "general",
                                  "entities": ["Miso"], "tags": []}]))
    pipe.send_text("what is Miso? She is a grey tabby." + ENTER)
    await repl.reply_done()
    assert repl.said("info")[-1] == (f"(used 1 fact: #{miso} · /rate up|down rates them, "
                                     "/forget ID drops one)")
    await worker.drain(10)
    (tabby,) = [f for f in rt.memory.facts.list_facts(user) if "tabby" in f.content]
    assert repl.said("info")[-1] == (f"(learned #{tabby.id}: Miso is a grey tabby · "
                                     f"/forget {tabby.id} undoes it)")
    await repl.leave()
