"""Every path into a request read in a shared place, one by one: each tool the model can call,
the prompt's front and tail, a cron job delivered into a channel, and Discord at the edge (a DM
teaches a fact; a mention in a server channel does not see it; the DM does)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from hermes.agent.llm import ToolCall
from hermes.agent.tools import ToolBox
from hermes.agent.turn import Agent
from hermes.memory.place import PRIVATE, Place, Scope
from tests.discord_fakes import FakeDiscordAPI, World

HERE = Place.discord_channel(1, 2)
USER = "alice"


@pytest.fixture
def stored(rt) -> dict[str, Any]:
    """A private fact, entry and conversation, and one of each learned in channel HERE."""
    memory = rt.memory
    secret = memory.facts.add(USER, "Nadia Kovacs lent the user money for the Fernwick flat",
                              entities=["Nadia Kovacs", "Fernwick"]).fact
    public = memory.facts.add(USER, "Nadia Kovacs runs the Fernwick book club",
                              entities=["Nadia Kovacs", "Fernwick"], place=HERE).fact
    memory.basic.add(USER, "Private: the spare key is under the Fernwick gnome")
    memory.basic.add(USER, "Channel: Fernwick book club meets on Mondays", place=HERE)
    dm = memory.sessions.create(USER, "discord", channel_key="discord:dm:9")
    memory.sessions.append(USER, dm.id, "user", "my Fernwick landlord is suing me")
    memory.sessions.close(USER, dm.id)
    memory.sessions.set_summary(USER, dm.id, title="Fernwick lawsuit",
                                summary="A lawsuit with the Fernwick landlord")
    club = memory.sessions.create(USER, "discord", channel_key="c", place=HERE)
    memory.sessions.append(USER, club.id, "user", "the Fernwick book club reads Dune")
    memory.sessions.close(USER, club.id)
    return {"secret": secret, "public": public, "dm": dm, "club": club}


def run(rt, place: Place, name: str, **args: Any) -> dict[str, Any]:
    box = ToolBox(rt.memory, USER, session_id=None, scope=Scope(USER, place))
    outcome = box.run(ToolCall("1", name, json.dumps(args)))
    return json.loads(outcome.content)


# --------------------------------------------------------------------------- the tools
def test_facts_search(rt, stored):
    here = run(rt, HERE, "facts", action="search", query="Fernwick")
    assert [f["id"] for f in here["facts"]] == [stored["public"].id]
    mine = run(rt, PRIVATE, "facts", action="search", query="Fernwick")
    assert {f["id"] for f in mine["facts"]} == {stored["public"].id, stored["secret"].id}


def test_facts_probe(rt, stored):
    here = run(rt, HERE, "facts", action="probe", entity="Nadia Kovacs")
    assert [f["id"] for f in here["facts"]] == [stored["public"].id]
    assert len(run(rt, PRIVATE, "facts", action="probe", entity="Nadia Kovacs")["facts"]) == 2


def test_facts_reason(rt, stored):
    here = run(rt, HERE, "facts", action="reason", entities=["Nadia Kovacs", "Fernwick"])
    assert [f["id"] for f in here["facts"]] == [stored["public"].id]
    mine = run(rt, PRIVATE, "facts", action="reason", entities=["Nadia Kovacs", "Fernwick"])
    assert len(mine["facts"]) == 2


@pytest.mark.parametrize("action", ["update", "forget"])
def test_facts_update_and_forget_name_only_what_the_place_sees(rt, stored, action):
    args = {"action": action, "id": stored["secret"].id, "content": "changed"}
    refused = run(rt, HERE, "facts", **args)
    assert "No fact with id" in refused["error"]
    assert rt.memory.facts.get(USER, stored["secret"].id).active  # untouched
    assert "error" not in run(rt, PRIVATE, "facts", **args)


def test_fact_feedback(rt, stored):
    refused = run(rt, HERE, "fact_feedback", ids=[stored["secret"].id], rating="unhelpful")
    assert refused["error"] == "No fact was rated."
    assert rt.memory.facts.get(USER, stored["secret"].id).trust == 0.5
    rated = run(rt, HERE, "fact_feedback", ids=[stored["public"].id], rating="helpful")
    assert [r["id"] for r in rated["rated"]] == [stored["public"].id]


def test_session_search_search(rt, stored):
    here = run(rt, HERE, "session_search", action="search", query="Fernwick")
    assert [r["session"]["id"] for r in here["results"]] == [stored["club"].id]
    mine = run(rt, PRIVATE, "session_search", action="search", query="Fernwick")
    assert {r["session"]["id"] for r in mine["results"]} == {stored["club"].id,
                                                              stored["dm"].id}


def test_session_search_browse(rt, stored):
    here = run(rt, HERE, "session_search", action="browse")
    assert [s["id"] for s in here["sessions"]] == [stored["club"].id]
    assert len(run(rt, PRIVATE, "session_search", action="browse")["sessions"]) == 2


def test_session_search_show(rt, stored):
    refused = run(rt, HERE, "session_search", action="show", session_id=stored["dm"].id)
    assert "No session" in refused["error"] and "suing" not in json.dumps(refused)
    shown = run(rt, PRIVATE, "session_search", action="show", session_id=stored["dm"].id)
    assert "suing" in json.dumps(shown)


def test_memory_tool(rt, stored):
    refused = run(rt, HERE, "memory", action="remove", target="gnome")
    assert "No basic-memory entry contains" in refused["error"]
    assert any("gnome" in e.text for e in rt.memory.basic.entries(USER))
    over = run(rt, HERE, "memory", action="add", text="x " * 4100)
    assert "gnome" not in json.dumps(over) and "book club" in json.dumps(over)
    added = run(rt, HERE, "memory", action="add", text="Channel: bring snacks")
    assert rt.memory.basic.entries(USER)[-1].place == HERE.key and added["status"] == "added"


def test_a_statement_said_in_a_channel_that_private_memory_holds(rt, stored):
    """Said in the channel word for word: the channel has heard it, the private fact is the
    channel's now (one fact; private places still see it). Said shorter: the private fact
    says more than the channel heard, so the channel gets a fact of its own."""
    secret = stored["secret"]
    short = run(rt, HERE, "facts", action="add", content="Nadia Kovacs lent the user money")
    assert short["status"] == "created" and short["fact"]["id"] != secret.id
    assert "Fernwick flat" not in json.dumps(short)
    assert rt.memory.facts.get(USER, secret.id).place == "private"
    same = run(rt, HERE, "facts", action="add",
               content="Nadia Kovacs lent the user money for the Fernwick flat!")
    assert same["status"] == "merged" and same["fact"]["id"] == secret.id
    assert rt.memory.facts.get(USER, secret.id).place == HERE.key
    found = run(rt, HERE, "facts", action="search", query="Nadia Kovacs money Fernwick flat")
    assert secret.id in [f["id"] for f in found["facts"]]
    assert run(rt, PRIVATE, "facts", action="probe", entity="Nadia Kovacs")["facts"]


def test_what_the_user_marked_private_stays_private_when_said_in_a_channel(rt, stored):
    secret = stored["secret"]
    rt.memory.facts.mark(USER, secret.id, 0)
    merged = run(rt, HERE, "facts", action="add",
                 content="Nadia Kovacs lent the user money for the Fernwick flat")
    assert merged["status"] == "merged" and merged["fact"] is None
    assert rt.memory.facts.get(USER, secret.id).place == "private"
    assert "lent the user money" not in json.dumps(
        run(rt, HERE, "facts", action="search", query="Nadia Kovacs money"))


def test_a_private_statement_never_rewrites_what_a_channel_reads(rt, stored):
    """Said in private, more than the channel's fact says: a private fact of its own (the
    channel's fact keeps its words); the same words: they confirm the channel's fact."""
    public = stored["public"]
    more = run(rt, PRIVATE, "facts", action="add",
               content="Nadia Kovacs runs the Fernwick book club and owes the user rent")
    assert more["status"] == "created" and more["fact"]["id"] != public.id
    assert rt.memory.facts.get(USER, public.id).content == public.content
    seen = json.dumps(run(rt, HERE, "facts", action="probe", entity="Nadia Kovacs"))
    assert "book club" in seen and "owes the user rent" not in seen
    again = run(rt, PRIVATE, "facts", action="add",
                content="Nadia Kovacs runs the Fernwick book club.")
    assert again["status"] == "merged" and again["fact"]["id"] == public.id
    assert rt.memory.facts.get(USER, public.id).place == HERE.key


def test_another_channels_fact_said_here_is_this_channels_too(rt, stored):
    there = Place.discord_channel(1, 3)
    theirs = rt.memory.facts.add(USER, "The Fernwick quiz is on Tuesdays", place=there).fact
    here = run(rt, HERE, "facts", action="add", content="The Fernwick quiz is on Tuesdays")
    assert here["status"] == "created" and here["fact"]["id"] != theirs.id
    assert rt.memory.facts.get(USER, theirs.id).place == there.key
    # said here again: this channel's copy is the duplicate (exact, then near), not theirs
    again = rt.memory.facts.add(USER, "The Fernwick quiz is on Tuesdays.", place=HERE)
    assert (again.id, again.status, again.match) == (here["fact"]["id"], "merged", "exact")
    ours = rt.memory.facts.add(USER, "The Fernwick darts night is on Fridays", place=HERE).fact
    newer = rt.memory.facts.add(USER, "The Fernwick darts night is on Fridays", place=there)
    assert newer.status == "created"
    near = rt.memory.facts.add(USER, "The Fernwick darts night is on Fridays, weekly",
                               place=HERE)
    assert (near.id, near.match) == (ours.id, "near")


# --------------------------------------------------------------------------- the prompt
async def test_the_front_and_tail_of_a_shared_place(fake_model, rt, stored):
    from hermes.memory import context as context_file

    path = context_file.path_for(rt.memory, USER)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Recent\n- the Fernwick lawsuit hearing is on Friday\n")
    agent = Agent(rt.memory)
    channel = rt.memory.sessions.create(USER, "discord", channel_key="k", place=HERE)
    fake_model.reply("ok")
    await agent.turn(USER, channel.id, "what about Fernwick?").run()
    request = fake_model.last.prompt
    assert "book club" in request                         # learned here
    for private in ("gnome", "lent the user money", "suing", "hearing", "recent_context"):
        assert private not in request, private
    # written in a DM while the channel's conversation is open: not announced there
    rt.memory.facts.add(USER, "Fernwick's landlord is called Osgood")
    rt.memory.basic.add(USER, "Private: Fernwick rent is late")
    fake_model.tool_call("facts", {"action": "search", "query": "Fernwick landlord"})
    fake_model.reply("ok")
    await agent.turn(USER, channel.id, "and Fernwick now?").run()
    # the later turn's tail, and its tools (the turn reads its place from the conversation)
    assert "Osgood" not in fake_model.last.prompt and "rent is late" not in fake_model.last.prompt
    assert "lent the user money" not in fake_model.last.prompt
    assert "book club" in fake_model.last.prompt  # the search did run, for the channel


async def test_the_same_front_and_tail_in_a_private_place(fake_model, rt, stored):
    agent = Agent(rt.memory)
    dm = rt.memory.sessions.create(USER, "discord", channel_key="discord:dm:9")
    fake_model.reply("ok").reply("ok")
    await agent.turn(USER, dm.id, "what about the Fernwick money?").run()
    request = fake_model.last.prompt
    assert "gnome" in request and "lent the user money" in request
    rt.memory.facts.add(USER, "Fernwick's landlord is called Osgood")
    await agent.turn(USER, dm.id, "and Fernwick now?").run()
    assert "Osgood" in fake_model.last.tail


async def test_a_pending_question_is_asked_only_where_its_readers_may_see_it(
        fake_model, rt, stored):
    """A question about what the user said (issue 31's pending questions, in the prompt's
    tail): about a private fact, or inferred from a DM, it waits for a private reply; one about
    the channel's own fact, inferred in the channel, is asked there. Listing and settling in
    the channel's scope reach only the latter."""
    from hermes.errors import NotFound
    from hermes.memory.operations import MemoryOperations

    facts = rt.memory.facts
    dm = stored["dm"]
    private_q = facts.ask_before_overriding(USER, stored["secret"].id,
                                            "Nadia Kovacs lent the user money for Quillmoor",
                                            session_id=dm.id)
    # inferred from what was said in the channel, but about the private fact: waits too
    club = stored["club"]
    about_private = facts.ask_before_overriding(USER, stored["secret"].id,
                                                "Nadia Kovacs lent the user Zarrowby shares",
                                                session_id=club.id)
    # the channel's own fact, but inferred from what was said in the DM: waits too
    from_dm = facts.ask_before_overriding(USER, stored["public"].id,
                                          "Nadia Kovacs runs the Brackenholt club",
                                          session_id=dm.id)
    agent = Agent(rt.memory)
    channel = rt.memory.sessions.create(USER, "discord", channel_key="k", place=HERE)
    fake_model.reply("ok")
    await agent.turn(USER, channel.id, "anything new?").run()
    assert "Quillmoor" not in fake_model.last.prompt
    assert "Brackenholt" not in fake_model.last.prompt
    assert "Zarrowby" not in fake_model.last.prompt
    assert "pending_question" not in fake_model.last.prompt
    ops = MemoryOperations(rt.memory)
    assert ops.pending_questions(Scope(USER, HERE)) == []
    for question in (private_q, from_dm, about_private):
        with pytest.raises(NotFound):
            ops.settle_question(Scope(USER, HERE), question.id, accept=True)
    own = facts.ask_before_overriding(USER, stored["public"].id,
                                      "Nadia Kovacs runs the Fernwick film club",
                                      session_id=club.id)
    fake_model.reply("ok")
    await agent.turn(USER, channel.id, "and now?").run()
    assert "Fernwick film club" in fake_model.last.tail
    assert [q.id for q in ops.pending_questions(Scope(USER, HERE))] == [own.id]
    # the DM's reply asks what waited (unasked until a private reply)
    private = rt.memory.sessions.create(USER, "discord", channel_key="discord:dm:9")
    fake_model.reply("ok")
    await agent.turn(USER, private.id, "hello").run()
    assert "Quillmoor" in fake_model.last.tail
    assert ops.settle_question(Scope(USER, PRIVATE), private_q.id, accept=False).id == \
        stored["secret"].id


# --------------------------------------------------------------------------- cron
@pytest.mark.parametrize(("deliver", "shared"), [("discord:2", True), ("terminal", False),
                                                 ("discord:77", True)])
async def test_a_cron_job_delivered_into_a_channel_sees_only_that_channel(
        fake_model, rt, stored, deliver, shared):
    from hermes.cron.runner import agent_prompt_runner
    from hermes.cron.store import CronJob

    async def placer(target: str) -> Place:
        if target == "77":
            raise LookupError("no such channel")  # cannot be looked up: a place of its own
        return HERE

    runner = agent_prompt_runner(rt.memory.sessions, Agent(rt.memory), {"discord": placer})
    job = CronJob(1, "digest", USER, "every 6h", "summarise Fernwick news", deliver, True,
                  "cli", "")
    fake_model.reply("digest")
    outcome = await runner(job)
    request = fake_model.last.prompt
    assert ("gnome" in request) is not shared and ("lent the user" in request) is not shared
    assert ("book club" in request) is (deliver != "discord:77")
    session = rt.memory.sessions.get(USER, outcome.session_id)
    assert session.place == {"discord:2": HERE.key, "terminal": "private",
                             "discord:77": "discord:?:77"}[deliver]


async def test_cron_without_discord_running_is_a_channel_of_its_own(fake_model, rt, stored):
    from hermes.cron.runner import delivery_place

    assert await delivery_place("discord:55", {}) == Place("discord:?:55")
    assert await delivery_place("file:notes.md", {}) == PRIVATE
    assert await delivery_place("telegram:5", {}) == Place("telegram:5")


# --------------------------------------------------------------------------- Discord
@pytest.fixture
async def discord_world(fake_model, rt, monkeypatch):
    from hermes.frontends.discord_bot import HermesBot

    bot = HermesBot(rt.memory, Agent(rt.memory))
    api = FakeDiscordAPI()
    api.install(bot, monkeypatch)
    async with bot:
        await bot.login("fake-token")
        world = World(bot, api)
        rt.settings.discord.allowed_users = [world.id_of("alice")]
        yield bot, world


async def test_a_fact_taught_in_a_dm_is_not_in_a_channel_request(fake_model, rt, discord_world):
    bot, world = discord_world
    fake_model.tool_call("facts", {"action": "add",
                                   "content": "The user's dentist is Dr Ravenglass"})
    fake_model.reply("Noted.")
    await bot.on_message(world.dm("alice", "my dentist is Dr Ravenglass"))
    user = rt.settings.resolve_user(f"discord:{world.id_of('alice')}")
    learned = rt.memory.facts.list_facts(user)
    assert [f.place for f in learned] == ["private"]

    fake_model.reply("I can't say here.")
    await bot.on_message(world.in_guild("alice", "who is my dentist?"))
    assert "Ravenglass" not in fake_model.last.prompt
    fake_model.reply("I can't say here either.")
    await bot.on_message(world.in_guild("alice", "who is my dentist?", thread=True))
    assert "Ravenglass" not in fake_model.last.prompt

    fake_model.reply("Dr Ravenglass.")
    await bot.on_message(world.dm("alice", "who is my dentist again?"))
    assert "Ravenglass" in fake_model.last.tail  # recalled for the DM


async def test_a_fact_taught_in_a_channel_belongs_to_the_channel(fake_model, rt, discord_world):
    bot, world = discord_world
    fake_model.tool_call("facts", {"action": "add",
                                   "content": "The user's team ships on Fridays"})
    fake_model.reply("Noted.")
    await bot.on_message(world.in_guild("alice", "we ship on Fridays", thread=True))
    user = rt.settings.resolve_user(f"discord:{world.id_of('alice')}")
    here = Place.discord_channel(world.guild_id, world.channel_id)
    # a thread's fact is its parent channel's: the channel sees it, the DM too
    assert [f.place for f in rt.memory.facts.list_facts(user)] == [here.key]
    sessions = rt.memory.sessions.list_sessions(user)
    assert [s.place for s in sessions] == [here.key]
    fake_model.reply("Fridays.")
    await bot.on_message(world.in_guild("alice", "when does the team ship?"))
    assert "ships on Fridays" in fake_model.last.tail


async def test_a_channel_adopts_what_was_placed_before_its_server_was_known(
        fake_model, rt, discord_world):
    bot, world = discord_world
    user = rt.settings.resolve_user(f"discord:{world.id_of('alice')}")
    old = rt.memory.sessions.create(user, "discord",
                                    channel_key=f"discord:channel:{world.channel_id}:user:1")
    assert old.place == f"discord:?:{world.channel_id}"
    rt.memory.facts.add(user, "The user's standup is at nine", source_session_id=old.id)
    fake_model.reply("At nine.")
    await bot.on_message(world.in_guild("alice", "when is my standup?"))
    assert "standup is at nine" in fake_model.last.tail
    here = Place.discord_channel(world.guild_id, world.channel_id)
    assert rt.memory.facts.list_facts(user)[0].place == here.key


# --------------------------------------------------------------------------- learning
async def test_what_a_speaker_says_in_a_channel_is_learned_for_the_speaker_there(
        fake_model, rt, discord_world):
    """Bob says something about Alice in the channel: extraction stores it for Bob, placed in
    the channel; Alice's memory gets nothing, in any place."""
    from hermes.learn.worker import ExtractionWorker

    bot, world = discord_world
    rt.settings.discord.allowed_users = [world.id_of("alice"), world.id_of("bob")]
    alice = rt.settings.resolve_user(f"discord:{world.id_of('alice')}")
    bob = rt.settings.resolve_user(f"discord:{world.id_of('bob')}")
    fake_model.reply("Good luck to her!")
    await bot.on_message(world.in_guild("bob", "Alice is moving to Porto next month"))
    session = rt.memory.sessions.list_sessions(bob)[0]
    fake_model.reply(json.dumps([{
        "action": "create", "content": "Alice (a member of the user's server) is moving to "
        "Porto next month.", "type": "episodic", "category": "person", "entities": ["Alice"],
        "tags": [], "importance": 0.5}]))
    run = await ExtractionWorker(rt.memory).run_session(bob, session.id)
    assert run is not None and run.created == 1
    here = Place.discord_channel(world.guild_id, world.channel_id)
    learned = rt.memory.facts.list_facts(bob)
    assert [(f.place, f.source) for f in learned] == [(here.key, "said")]
    assert rt.memory.facts.list_facts(alice) == []
    assert rt.memory.facts.search(alice, "Porto") == []


async def test_a_channel_has_a_stable_front_of_its_own(fake_model, rt, stored):
    """Prompt caching: each request of a channel's conversation extends the one before (its
    front taken once, for the channel), and that front is not the DM's."""
    agent = Agent(rt.memory)
    channel = rt.memory.sessions.create(USER, "discord", channel_key="k", place=HERE)
    dm = rt.memory.sessions.create(USER, "discord", channel_key="discord:dm:9")
    fake_model.reply("one").reply("two").reply("three")
    await agent.turn(USER, channel.id, "first about Fernwick").run()
    first = fake_model.last.messages
    rt.memory.basic.add(USER, "Private: written in a DM meanwhile")
    await agent.turn(USER, channel.id, "second about Fernwick").run()
    second = fake_model.last.messages
    assert second[:len(first)] == first  # extends the previous request: the cached prefix
    await agent.turn(USER, dm.id, "and in private?").run()
    assert fake_model.last.messages[0] != first[0]  # the DM's front holds its private entries
    assert "gnome" in fake_model.last.messages[0]["content"]
    assert "gnome" not in first[0]["content"]


async def test_an_uncached_threads_parent_is_looked_up(fake_model, rt, discord_world):
    import discord

    from tests.discord_fakes import message_payload

    bot, world = discord_world
    world.api.channels[world.thread_id] = {
        "id": str(world.thread_id), "type": 11, "guild_id": str(world.guild_id),
        "parent_id": str(world.channel_id), "owner_id": "1", "name": "plans",
        "last_message_id": None, "rate_limit_per_user": 0, "message_count": 0,
        "member_count": 1,
        "thread_metadata": {"archived": False, "auto_archive_duration": 1440,
                            "archive_timestamp": "2026-11-29T12:00:00+00:00", "locked": False}}
    channel = discord.PartialMessageable(state=world.state, id=world.thread_id,
                                         guild_id=world.guild_id,
                                         type=discord.ChannelType.public_thread)
    bot_user = world.state.user
    data = message_payload(channel_id=world.thread_id, guild_id=world.guild_id,
                           author=world.people["alice"], content=f"<@{bot_user.id}> hello",
                           mentions=[{"id": str(bot_user.id), "username": bot_user.name,
                                      "discriminator": "0", "bot": True}])
    fake_model.reply("hi")
    await bot.on_message(discord.Message(state=world.state, channel=channel, data=data))
    user = rt.settings.resolve_user(f"discord:{world.id_of('alice')}")
    here = Place.discord_channel(world.guild_id, world.channel_id)
    assert [s.place for s in rt.memory.sessions.list_sessions(user)] == [here.key]
