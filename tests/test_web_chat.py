"""The web panel's chat: the same turn engine (source ``web``), streaming, ratings through the
Discord path, and the Learned Facts sidebar's live events when extraction commits."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from hermes.assembly import build_agent
from hermes.config import load_settings
from hermes.frontends.web.app import WebContext
from hermes.frontends.web.events import EventHub
from hermes.frontends.web.server import WebFrontend
from hermes.memory.operations import MemoryOperations, Scope
from hermes.runtime import Runtime
from tests.web_client import Panel


def extraction(*actions):
    return json.dumps([{"type": "semantic", "category": "general", "entities": [], "tags": [],
                        **a} for a in actions])


def create(content):
    return {"action": "create", "content": content}


@pytest.fixture
def web_rt(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    rt.settings.extraction.enabled = True
    yield rt
    rt.close()


@pytest.fixture
async def chat(web_rt):
    agent, worker = build_agent(web_rt)
    panel = await Panel(WebContext(web_rt.memory, agent=agent, worker=worker)).login()
    yield panel
    await panel.close()
    if worker is not None:
        await worker.drain(10)


def events_of(text: str) -> list[tuple[str, dict]]:
    found = []
    for block in text.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found


async def test_a_message_without_javascript_runs_a_web_turn(chat, web_rt, fake_model):
    fake_model.reply("Hello! How can I help?")
    fake_model.reply("[]")                                  # extraction: nothing to learn
    response = await chat.post("/chat/send", {"text": "Hi there, I am setting up my NAS."})
    assert response.status_code == 303
    session_id = int(response.headers["location"].split("session=")[1].split("#")[0])
    session = web_rt.memory.sessions.get("owner", session_id)
    assert session.source == "web"
    page = await chat.get(f"/chat?session={session_id}")
    assert "Hello! How can I help?" in page.text and "setting up my NAS" in page.text
    assert "Hi there, I am setting up my NAS." in page.text


async def test_a_reply_streams_and_shows_the_facts_the_model_was_shown(chat, web_rt,
                                                                       fake_model):
    facts = web_rt.memory.facts
    fact_id = facts.add("owner", "The user's favourite editor is Helix").id
    fake_model.reply("Your favourite editor is Helix.", chunk_size=5)
    fake_model.reply("[]")
    response = await chat.client.post(
        "/chat/send", data={"text": "Which editor is my favourite?"},
        headers={"Accept": "text/event-stream", "X-CSRF-Token": chat.csrf})
    assert response.headers["content-type"].startswith("text/event-stream")
    events = events_of(response.text)
    names = [name for name, _ in events]
    assert names[0] == "start" and names[-1] == "done" and names.count("chunk") >= 3
    assert "".join(d["text"] for n, d in events if n == "chunk") == \
        "Your favourite editor is Helix."
    done = events[-1][1]
    assert done["error"] is None and f'data-fact-id="{fact_id}"' in done["html"]
    assert "used <span class=\"used-count\">1</span> fact · learned" in done["html"]
    # 👎: exactly the facts shown for this reply, recorded as the web user's one rating
    rated = await chat.client.post(f"/chat/rate/{done['message_id']}", data={"rating": "down"},
                                   headers={"Accept": "application/json",
                                            "X-CSRF-Token": chat.csrf})
    assert rated.json() == {"rating": "down", "changed": 1, "note": "",
                            "trust": {str(fact_id): 0.4}}
    ops = MemoryOperations(web_rt.memory)
    assert ops.reply_rating(Scope("owner"), done["message_id"], "web:owner") is False
    # the same rating again withdraws it, as removing a Discord reaction does
    again = await chat.post(f"/chat/rate/{done['message_id']}", {"rating": "down"},
                            headers={"Accept": "application/json"})
    assert again.json()["rating"] is None and facts.get("owner", fact_id).trust == 0.5
    # without JavaScript: the form posts and the page comes back
    up = await chat.post(f"/chat/rate/{done['message_id']}", {"rating": "up"})
    assert up.status_code == 303 and facts.get("owner", fact_id).trust == 0.55


async def test_a_thumbs_down_on_a_reply_that_used_no_fact_shown_lowers_nothing_and_says_so(
        chat, web_rt, fake_model):
    facts = web_rt.memory.facts
    fact_id = facts.add("owner", "The user's favourite editor is Helix").id
    fake_model.reply("I cannot open files, sorry.")
    fake_model.reply("[]")
    response = await chat.client.post(
        "/chat/send", data={"text": "Which editor should open this file?"},
        headers={"Accept": "text/event-stream", "X-CSRF-Token": chat.csrf})
    done = events_of(response.text)[-1][1]
    assert f'data-fact-id="{fact_id}"' in done["html"] and "rate-note" in done["html"]
    rated = await chat.post(f"/chat/rate/{done['message_id']}", {"rating": "down"},
                            headers={"Accept": "application/json"})
    body = rated.json()
    assert (body["rating"], body["changed"]) == ("down", 0)
    assert body["note"].startswith("No fact's trust was lowered") and f"#{fact_id}" in body["note"]
    assert facts.get("owner", fact_id).trust == 0.5
    # without JavaScript the notice says it
    await chat.post(f"/chat/rate/{done['message_id']}", {"rating": "down"})    # withdraw
    page = await chat.post(f"/chat/rate/{done['message_id']}", {"rating": "down"})
    shown = await chat.get(page.headers["location"])
    assert "No fact&#39;s trust was lowered" in shown.text or "No fact's trust was lowered" in \
        shown.text


async def test_a_model_failure_is_one_line_and_the_message_is_kept(chat, web_rt, fake_model):
    from tests.fakellm import bad_request

    fake_model.error(bad_request("the key was rejected"))
    response = await chat.client.post(
        "/chat/send", data={"text": "Are you there?"},
        headers={"Accept": "text/event-stream", "X-CSRF-Token": chat.csrf})
    done = events_of(response.text)[-1][1]
    assert done["error"] and "Traceback" not in done["error"]
    sessions = web_rt.memory.sessions
    (session,) = sessions.list_sessions("owner", source="web")
    assert [m.content for m in sessions.messages("owner", session.id)] == ["Are you there?"]


async def test_sending_into_a_non_web_session_is_refused(chat, web_rt):
    discord = web_rt.memory.sessions.create("owner", "discord").id
    response = await chat.post("/chat/send", {"session": str(discord), "text": "hello"})
    assert response.status_code == 400 and "discord conversation" in response.text
    page = await chat.get(f"/chat?session={discord}")
    assert 'id="send"' not in page.text and "continue it there" in page.text
    empty = await chat.post("/chat/send", {"text": "   "})
    assert empty.status_code == 400 and "type a message" in empty.text


async def test_a_message_over_the_limit_is_one_line_with_or_without_javascript(chat, web_rt):
    """Without JS the form post redirected to a new, empty conversation and the refusal was
    nowhere on the page (review rev4). It is one line before a chat is made, both ways."""
    from hermes.agent.turn import MAX_MESSAGE_CHARS

    text = "y" * (MAX_MESSAGE_CHARS + 1)
    line = (f"Refused: the message is {MAX_MESSAGE_CHARS + 1:,} characters, over the limit of "
            f"{MAX_MESSAGE_CHARS:,}; nothing was recorded.")
    form = await chat.post("/chat/send", {"text": text})
    assert form.status_code == 400 and line in form.text
    script = await chat.client.post(
        "/chat/send", data={"text": text},
        headers={"Accept": "text/event-stream", "X-CSRF-Token": chat.csrf})
    assert script.status_code == 400 and script.json()["error"].startswith(line)
    assert web_rt.memory.sessions.list_sessions("owner") == []


async def test_sessions_on_the_left_browse_and_search(chat, web_rt):
    sessions = web_rt.memory.sessions
    first = sessions.create("owner", "web", title="Postgres upgrade plan").id
    sessions.append("owner", first, "user", "pg_upgrade --link on Saturday")
    sessions.create("owner", "web", title="Holiday packing list")
    sessions.create("owner", "discord", title="A discord thread")
    page = await chat.get("/chat")
    assert "Postgres upgrade plan" in page.text and "Holiday packing" in page.text
    assert "A discord thread" not in page.text
    found = await chat.get("/chat", params={"q": "pg_upgrade"})
    assert "Postgres upgrade plan" in found.text and "Holiday packing" not in found.text
    new = await chat.post("/chat/new")           # stored at its first message, not before
    assert new.status_code == 303 and new.headers["location"] == "/chat?new=1"
    assert len(sessions.list_sessions("owner", source="web")) == 2
    empty = await chat.get("/chat?new=1")
    assert 'name="session" value=""' in empty.text and "pg_upgrade --link" not in empty.text
    bad = await chat.get("/chat", params={"q": "?!"})
    assert bad.status_code == 200 and 'role="alert"' in bad.text


def test_events_reach_only_their_own_user():
    hub = EventHub()

    async def scenario():
        owner, alice = hub.stream("owner"), hub.stream("alice")
        assert (await owner.__anext__()).startswith(b": connected")
        assert (await alice.__anext__()).startswith(b": connected")
        assert hub.publish("owner", "fact", {"fact_id": 1}) == 1
        got = await owner.__anext__()
        assert got.startswith(b"event: fact\ndata: {\"fact_id\": 1}")
        hub.close()
        with pytest.raises(StopAsyncIteration):
            await alice.__anext__()        # alice got nothing but the end of her stream

    asyncio.run(scenario())


async def read_event(lines, name: str) -> dict:
    event = None
    async for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == name:
            return json.loads(line[6:])
    raise AssertionError(f"the stream ended before a {name!r} event")


async def test_extraction_commits_reach_the_sidebar_as_server_sent_events(web_rt, fake_model):
    agent, worker = build_agent(web_rt)
    frontend = WebFrontend(web_rt.memory, agent, worker=worker, port=0)
    assert await frontend.start()
    client = httpx.AsyncClient(base_url=frontend.url, timeout=10)
    try:
        token = frontend.ctx.tokens.create("owner")
        assert (await client.get(f"/login?token={token}")).status_code == 303
        page = await client.get("/chat")
        csrf = page.text.split('name="csrf" content="', 1)[1].split('"', 1)[0]
        async with client.stream("GET", "/events") as stream:
            lines = stream.aiter_lines()
            assert await lines.__anext__() == ": connected"
            fake_model.reply("Congratulations on the new job!")
            fake_model.reply(extraction(create("The user works at Initech as an engineer.")))
            sent = await client.post("/chat/send", data={
                "text": "I started at Initech this week as an engineer.", "csrf": csrf})
            session_id = int(sent.headers["location"].split("session=")[1].split("#")[0])
            created = await asyncio.wait_for(read_event(lines, "fact"), 10)
            assert created["kind"] == "created" and created["session_id"] == session_id
            assert created["content"] == "The user works at Initech as an engineer."
            assert "learned from this reply" in created["html"] and created["old_id"] is None
            reply = web_rt.memory.sessions.messages("owner", session_id)[-1]
            assert created["reply_id"] == reply.id and reply.role == "assistant"
            # A new value for a single-valued relation: shown as an update of the old fact.
            fake_model.reply("Oh, a quick change!")
            fake_model.reply(extraction(create("The user works at Acme Corp as an engineer.")))
            await client.post("/chat/send", data={
                "text": "Actually I left Initech, I work at Acme Corp now.", "csrf": csrf,
                "session": str(session_id)})
            updated = await asyncio.wait_for(read_event(lines, "fact"), 10)
            assert updated["kind"] == "superseded" and updated["old_id"] == created["fact_id"]
            assert "superseded by" in updated["old_html"] and "updated" in updated["html"]
    finally:
        await client.aclose()
        await frontend.stop()
        await worker.drain(10)


async def test_a_port_in_use_leaves_the_panel_off_with_one_line(web_rt, caplog):
    first = WebFrontend(web_rt.memory, None, port=0)
    assert await first.start()
    try:
        caplog.set_level(logging.ERROR)
        second = WebFrontend(web_rt.memory, None, port=first.port)
        assert await second.start() is False
        assert "cannot listen" in caplog.text and "web.port" in caplog.text
    finally:
        await first.stop()


async def test_a_non_loopback_host_warns(web_rt, caplog):
    caplog.set_level(logging.WARNING)
    frontend = WebFrontend(web_rt.memory, None, host="0.0.0.0", port=0)
    assert await frontend.start()
    await frontend.stop()
    assert "not only this machine" in caplog.text
    quiet = WebFrontend(web_rt.memory, None, port=0)
    caplog.clear()
    assert await quiet.start()
    await quiet.stop()
    assert "not only this machine" not in caplog.text


async def test_the_daemon_serves_the_panel_and_prints_the_first_login_once(web_rt, capsys,
                                                                          monkeypatch):
    from hermes.agent import llm
    from hermes.daemon import Daemon

    monkeypatch.setattr(llm, "load_litellm", lambda: None)
    web_rt.settings.web.port = 0
    daemon = Daemon(web_rt)                            # web.enabled is on by default
    running = asyncio.create_task(daemon.run())
    for _ in range(20000):
        if "web" in daemon.frontends or running.done():
            break
        await asyncio.sleep(0)
    web = daemon.frontends["web"].panel
    async with httpx.AsyncClient(base_url=web.url) as client:
        link = capsys.readouterr().err.split("log in at ", 1)[1].split()[0]
        assert (await client.get(link.replace(web.url, ""))).status_code == 303
        assert (await client.get("/memory")).status_code == 200
    daemon.request_stop("test")
    await asyncio.wait_for(running, 30)
    assert web.first_login() is None            # a token exists now: not printed again


async def test_a_fast_lane_fact_reaches_the_sidebar_with_its_reply(chat, web_rt, fake_model):
    stream = chat.ctx.hub.stream("owner")
    assert (await stream.__anext__()).startswith(b": connected")
    fake_model.reply("Noted: the NAS is in the hallway closet.")
    response = await chat.post("/chat/send",
                               {"text": "Remember that the NAS is in the hallway closet."})
    assert response.status_code == 303
    event = (await asyncio.wait_for(stream.__anext__(), 10)).decode()
    assert event.startswith("event: fact\n")
    data = json.loads(event.split("data: ", 1)[1])
    assert data["kind"] == "created" and "hallway closet" in data["content"]
    assert "learned from this reply" in data["html"]
    await stream.aclose()


async def test_a_fact_the_model_updates_with_its_tools_shows_as_an_update(chat, web_rt,
                                                                          fake_model, clock):
    old = web_rt.memory.facts.add("owner", "The user lives in Porto").id
    clock.advance(minutes=5)
    stream = chat.ctx.hub.stream("owner")
    assert (await stream.__anext__()).startswith(b": connected")
    fake_model.tool_call("facts", {"action": "update", "id": old,
                                   "content": "The user lives in Lisbon"})
    fake_model.reply("Updated: you live in Lisbon now.")
    await chat.post("/chat/send", {"text": "I moved to Lisbon, please update that."})
    data = json.loads((await asyncio.wait_for(stream.__anext__(), 10)).decode()
                      .split("data: ", 1)[1])
    assert data["kind"] == "superseded" and data["old_id"] == old
    assert data["content"] == "The user lives in Lisbon" and "superseded by" in data["old_html"]
    chat.ctx.hub.publish("owner", "marker", {})
    assert (await stream.__anext__()).startswith(b"event: marker")   # one event, not two
    await stream.aclose()


async def test_cron_run_now_runs_the_job_through_the_daemons_runner(web_rt, fake_model):
    from hermes.assembly import cron_runner, cron_store

    agent, worker = build_agent(web_rt)
    runner = cron_runner(web_rt.memory, agent)
    cron_store(web_rt.memory).add("digest", "owner", "every 1d", "Summarise my day",
                                       "file:digests/today.md")
    cron_store(web_rt.memory).add("alices", "alice", "every 1d", "Hers", "terminal")
    panel = await Panel(WebContext(web_rt.memory, agent=agent, worker=worker,
                                   runner=runner)).login()
    try:
        fake_model.reply("Digest: a quiet day.")
        page = await panel.post("/cron/digest/run", follow_redirects=True)
        assert page.status_code == 200 and "Ran digest: ok" in page.text
        assert "Digest: a quiet day." in page.text                 # the run, with its output
        assert (web_rt.settings.home_path / "outbox" / "digests" / "today.md").read_text().strip() \
            .endswith("Digest: a quiet day.")
        assert (await panel.post("/cron/alices/run")).status_code == 404
    finally:
        await panel.close()
        if worker is not None:
            await worker.drain(10)


def test_hermes_web_runs_the_panel_alone_and_stops_on_sigterm(tmp_path):
    from tests.web_client import HermesProcess, hermes_env

    (tmp_path / "config.yaml").write_text("", encoding="utf-8")
    proc = HermesProcess(["web"], hermes_env(tmp_path / "home", tmp_path / "config.yaml"))
    try:
        link = proc.wait_for(r"Web panel: log in at (\S+)").group(1)
        with httpx.Client() as client:
            assert client.get(link).status_code == 303
            assert "Learned Facts" in client.get(link.split("/login")[0] + "/chat").text
    finally:
        code = proc.stop()
    assert code == 0 and "Traceback" not in "\n".join(proc.seen)


async def test_a_temporary_chat_is_neither_kept_nor_learned_from(chat, web_rt, fake_model):
    """Its turns read memory (a fact is used and shown), but no message, session, shown fact,
    fast-lane fact, extraction run or memory write is left behind; another user cannot reach
    it."""
    facts = web_rt.memory.facts
    helix = facts.add("owner", "The user's favourite editor is Helix").id
    before = {t: web_rt.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("sessions", "messages", "shown_facts", "facts", "extraction_runs")}
    fake_model.tool_call("memory", {"action": "add", "text": "Likes Helix"})
    fake_model.reply("Helix, your favourite editor.")
    first = await chat.client.post(
        "/chat/send", data={"text": "Remember that I use Helix. Which editor do I like?",
                            "temporary": "1"},
        headers={"Accept": "text/event-stream", "X-CSRF-Token": chat.csrf})
    events = dict(events_of(first.text))
    chat_id = events["start"]["session_id"]
    assert chat_id < 0 and "item_html" not in events["start"]        # not in the list
    assert "used <span class=\"used-count\">1</span> fact" in events["done"]["html"]
    assert f'data-fact-id="{helix}"' in events["done"]["html"]
    assert "/chat/rate/" not in events["done"]["html"]
    tool_result = fake_model.requests[1].messages[-1]["content"]
    assert "temporary chat" in tool_result                           # the write was refused
    fake_model.reply("Still Helix.")
    again = await chat.post("/chat/send", {"text": "And again?", "session": str(chat_id)})
    assert again.status_code == 303 and again.headers["location"] == f"/chat?session={chat_id}#end"
    assert "Remember that I use Helix." in fake_model.last.prompt     # the chat goes on
    page = await chat.get(f"/chat?session={chat_id}")
    assert "Still Helix." in page.text and "Temporary chat: neither kept" in page.text
    if chat.ctx.worker is not None:
        await chat.ctx.worker.drain(10)
    after = {t: web_rt.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in before}
    assert after == before
    assert web_rt.memory.basic.entries("owner") == []
    alice = await Panel(chat.ctx).login("alice")
    try:
        assert (await alice.get(f"/chat?session={chat_id}")).status_code == 404
        assert (await alice.post("/chat/send", {"text": "hi", "session": str(chat_id)})
                ).status_code == 404
    finally:
        await alice.close()


async def until(condition, ticks: int = 20000) -> None:
    for _ in range(ticks):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


STREAMED = {"Accept": "text/event-stream"}


async def test_a_new_chat_is_titled_from_its_first_exchange_off_the_reply_path(chat, web_rt,
                                                                              fake_model):
    """Issue 33: a new conversation's line in the list was its first message cut at 80
    characters until the session was summarised. The background model titles it from its
    first exchange in a task of its own: the reply never waits for it; open pages get the
    title as an event."""
    from tests.fakellm import Block

    sessions = web_rt.memory.sessions
    release = asyncio.Event()
    fake_model.title = Block(release)                        # the title call waits ...
    fake_model.reply("Put them on a user-defined bridge network: Docker's DNS resolves names.")
    fake_model.reply("[]")
    events = chat.ctx.hub.stream("owner")
    try:
        assert (await events.__anext__()).startswith(b": connected")
        response = await asyncio.wait_for(chat.client.post(
            "/chat/send", data={"text": "My two containers can't reach each other by name"},
            headers={**STREAMED, "X-CSRF-Token": chat.csrf}), 30)
        done = dict(events_of(response.text))["done"]        # ... the reply did not
        assert done["error"] is None
        session_id = done["session_id"]
        await until(lambda: fake_model.title_requests)
        assert sessions.get("owner", session_id).title is None
        asked = fake_model.title_requests[0]
        assert "reach each other by name" in asked.prompt and "bridge network" in asked.prompt
        fake_model.title = 'Title: "Docker containers resolving each other."'
        release.set()
        event = await asyncio.wait_for(events.__anext__(), 10)
    finally:
        await events.aclose()
    assert events_of(event.decode()) == [
        ("title", {"session_id": session_id, "title": "Docker containers resolving each other"})]
    assert sessions.get("owner", session_id).title == "Docker containers resolving each other"
    page = await chat.get("/chat")
    assert (f'<li data-session-id="{session_id}"><a href="/chat?session={session_id}#end"'
            ' aria-current="true">Docker containers resolving each other</a>') in page.text
    # Its next exchange asks for no title again
    fake_model.reply("Glad it works.")
    fake_model.reply("[]")
    await chat.post("/chat/send", {"text": "Thanks, that did it", "session": str(session_id)})
    assert len(fake_model.title_requests) == 1


async def test_without_a_title_the_list_keeps_the_first_message(chat, web_rt, fake_model):
    """No title when the model fails or says nothing, and none asked for a temporary chat:
    the list shows the first message, as before."""
    from tests.fakellm import internal_server

    sessions = web_rt.memory.sessions
    for number, title in (("one", internal_server("down")), ("two", "  ")):
        fake_model.title = title
        fake_model.reply("Hello!")
        fake_model.reply("[]")
        sent = await chat.post("/chat/send", {"text": f"Hi, first message {number}"})
        session_id = int(sent.headers["location"].split("session=")[1].split("#")[0])
        await until(lambda: not chat.ctx.titles)
        assert sessions.get("owner", session_id).title is None
        assert f">Hi, first message {number}</a>" in (await chat.get("/chat")).text
    asked = len(fake_model.title_requests)
    fake_model.reply("Hello, briefly.")
    await chat.post("/chat/send", {"text": "A temporary hello", "temporary": "1"})
    assert len(fake_model.title_requests) == asked


def test_a_title_is_given_only_to_the_users_own_untitled_session(rt):
    from hermes.errors import NotFound

    sessions = rt.memory.sessions
    session_id = sessions.create("owner", "web").id
    with pytest.raises(NotFound):
        sessions.set_title("alice", session_id, "Not hers")
    assert sessions.set_title("owner", session_id, "Docker networking") is True
    assert sessions.set_title("owner", session_id, "Something else") is False
    assert sessions.get("owner", session_id).title == "Docker networking"
