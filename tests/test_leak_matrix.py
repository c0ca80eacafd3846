"""The leak matrix (tests/leak_matrix.py): 22 private items x every path into a request read in
a Discord channel -> 0 leaks; the same items through the same paths in a private place -> all
reached. Everything runs through the agent with the scripted model at litellm's edge, and
Discord through the bot with discord.py objects."""

from __future__ import annotations

from typing import Any

import pytest

from hermes.agent.turn import Agent
from hermes.cron.runner import agent_prompt_runner
from hermes.cron.store import CronJob
from hermes.frontends.discord_bot import HermesBot
from hermes.memory.place import Place
from tests import leak_matrix as lm
from tests.discord_fakes import FakeDiscordAPI, World

THERE_CHANNEL = 4_242_424_242


@pytest.fixture
def hybrid(monkeypatch):
    """Recall by meaning on, as by default (the test home turns it off; the toy model of
    tests/conftest.py stands in for MiniLM): the fused searches are paths too."""
    monkeypatch.setenv("HERMES_SESSIONS__EMBEDDINGS", "true")


@pytest.fixture
async def world(hybrid, fake_model, rt, monkeypatch):
    bot = HermesBot(rt.memory, Agent(rt.memory))
    api = FakeDiscordAPI()
    api.install(bot, monkeypatch)
    async with bot:
        await bot.login("fake-token")
        world = World(bot, api)
        rt.settings.discord.allowed_users = [world.id_of("alice")]
        yield bot, world


def _paths(rt: Any, fake: Any, bot: HermesBot, world: World,
           seeded: lm.Seeded) -> dict[str, lm.Path]:
    agent = bot.agent
    assert agent is not None
    user = seeded.user
    sessions = rt.memory.sessions

    async def one_turn(place: Place, text: str) -> list[Any]:
        session = sessions.create(user, "discord", channel_key="test:turn", place=place)
        fake.reply("ok")
        before = len(fake.requests)
        await agent.turn(user, session.id, text).run()
        return fake.requests[before:]

    async def turn(place: Place, item: lm.Item | None) -> list[Any]:
        assert item is not None
        return await one_turn(place, item.query)

    async def tools(place: Place, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        session = sessions.create(user, "discord", channel_key="test:tools", place=place)
        fake.tool_calls(*calls)
        fake.reply("done")
        before = len(fake.requests)
        await agent.turn(user, session.id, "look it up").run()
        return fake.requests[before:]

    items = [*lm.ITEMS, *lm.CONTROLS]
    entities = [i.entity for i in items if i.entity]

    def tool_path(calls: list[tuple[str, dict[str, Any]]]) -> lm.Path:
        async def run(place: Place, item: lm.Item | None) -> list[Any]:
            return await tools(place, calls)

        run.per_item = False  # type: ignore[attr-defined]
        return run

    async def cron(place: Place, item: lm.Item | None) -> list[Any]:
        assert item is not None
        deliver = f"discord:{world.channel_id}" if place.shared else "terminal"

        async def placer(target: str) -> Place:
            return await bot.place_for(target)

        runner = agent_prompt_runner(sessions, agent, {"discord": placer})
        job = CronJob(id=1, name=f"ask-{item.name}", user=user, schedule="every 6h",
                      prompt=item.query, deliver=deliver, enabled=True, origin="cli",
                      created_at="2026-11-29T12:00:00Z")
        fake.reply("ok")
        before = len(fake.requests)
        await runner(job)
        return fake.requests[before:]

    async def discord(place: Place, item: lm.Item | None, *, thread: bool) -> list[Any]:
        assert item is not None
        for key in list(_open_keys(rt, user)):
            sessions.close_open(user, "discord", key)
        message = (world.in_guild("alice", item.query, thread=thread) if place.shared
                   else world.dm("alice", item.query))
        fake.reply("ok")
        before = len(fake.requests)
        await bot.on_message(message)
        return fake.requests[before:]

    async def channel(place: Place, item: lm.Item | None) -> list[Any]:
        return await discord(place, item, thread=False)

    async def thread(place: Place, item: lm.Item | None) -> list[Any]:
        return await discord(place, item, thread=True)

    for path in (cron, channel, thread):
        path.private_too = False  # type: ignore[attr-defined]
    return {
        "turn": turn,
        "facts.search": tool_path([("facts", {"action": "search", "query": i.query})
                                   for i in items]),
        "facts.probe": tool_path([("facts", {"action": "probe", "entity": e})
                                  for e in entities]),
        "facts.reason": tool_path([("facts", {"action": "reason", "entities": [i.entity, a]})
                                   for i in items for a in i.also if i.entity]),
        "sessions.search": tool_path([("session_search", {"action": "search", "query": i.query})
                                      for i in items]),
        "sessions.browse": tool_path([("session_search", {"action": "browse", "limit": 50})]),
        "sessions.show": tool_path([("session_search", {"action": "show", "session_id": s})
                                    for s in seeded.session_ids.values()]),
        "memory.refused": tool_path([("memory", {"action": "add", "text": "x " * 4200})]),
        "feedback": tool_path([("fact_feedback", {"ids": list(seeded.fact_ids.values()),
                                                  "rating": "helpful"})]),
        "cron": cron,
        "discord.channel": channel,
        "discord.thread": thread,
    }


def _open_keys(rt: Any, user: str) -> list[str]:
    return [r[0] for r in rt.db.execute(
        "SELECT channel_key FROM sessions WHERE user = ? AND source = 'discord' "
        "AND ended_at IS NULL", [user])]


async def test_private_items_leak_into_no_path_of_a_shared_place(world, rt, fake_model):
    bot, world_ = world
    user = rt.settings.resolve_user(f"discord:{world_.id_of('alice')}")
    here = Place.discord_channel(world_.guild_id, world_.channel_id)
    there = Place.discord_channel(world_.guild_id, THERE_CHANNEL)
    seeded = lm.seed(rt.memory, rt.settings, user, here, there)
    assert rt.memory.fact_vectors is not None and rt.memory.message_vectors is not None
    rt.memory.fact_vectors.index(user)  # the daemon's vector pass (messages: before a search)
    matrix = await lm.run_matrix(_paths(rt, fake_model, bot, world_, seeded), here)
    print(matrix.table())
    assert len(lm.ITEMS) >= 20 and len(matrix.shared) >= 10
    assert matrix.leaks == 0, matrix.table()
    # nothing lost for the owner: every item reaches a private place through some path
    assert matrix.unreachable() == set(), matrix.table()
    # and the shared place is not simply shown nothing: what was learned there, and what was
    # marked shareable, reach it (through the turn's recall, the tools, Discord)
    for path in ("turn", "facts.search", "discord.channel", "discord.thread", "cron"):
        assert matrix.controls[path] == {"team-fact", "shareable"}, (path, matrix.controls)
