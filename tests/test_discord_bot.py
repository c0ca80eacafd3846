"""The Discord bot, driven with real discord.py objects at the edge and the scripted model."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from hermes.frontends.discord_bot import APOLOGY, THUMBS_DOWN, THUMBS_UP, HermesBot
from tests.discord_fakes import FakeDiscordAPI, World, drain_event_tasks


@dataclass
class Env:
    bot: HermesBot
    api: FakeDiscordAPI
    world: World
    rt: object

    def user_of(self, name: str) -> str:
        return self.rt.settings.resolve_user(f"discord:{self.world.id_of(name)}")


class Ticks:
    """A monotonic clock that moves only when told (streaming edit rate)."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
async def env(fake_model, rt, monkeypatch, ticks):
    from hermes.agent.turn import Agent

    bot = HermesBot(rt.memory, Agent(rt.memory), monotonic=ticks)
    api = FakeDiscordAPI()
    api.install(bot, monkeypatch)
    async with bot:
        await bot.login("fake-token")
        world = World(bot, api)
        rt.settings.discord.allowed_users = [world.id_of("alice"), world.id_of("bob")]
        yield Env(bot, api, world, rt)


def count(rt, table: str) -> int:
    return rt.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def sessions_of(rt) -> list[tuple[str, str, str]]:
    return [tuple(r) for r in rt.db.execute(
        "SELECT user, source, channel_key FROM sessions ORDER BY id").fetchall()]


def user_texts(rt) -> list[str]:
    return [r[0] for r in rt.db.execute(
        "SELECT content FROM messages WHERE role = 'user' ORDER BY id").fetchall()]


# --------------------------------------------------------------------------- start-up
async def test_login_registers_the_slash_commands_once(env, rt, monkeypatch):
    synced = env.api.sent("PUT", "/applications/{application_id}/commands")
    assert len(synced) == 1
    names = {c["name"] for c in synced[0].json}
    assert names == {"remember", "forget", "rate", "pending", "new", "facts", "memory",
                     "sessions"}
    facts = next(c for c in synced[0].json if c["name"] == "facts")
    assert {o["name"] for o in facts["options"]} == {"search", "probe", "reason", "mark"}
    # Unchanged commands are not synced again on the next start (syncing is rate-limited).
    again = HermesBot(rt.memory, env.bot.agent)
    api = FakeDiscordAPI()
    api.app_id = env.api.app_id
    api.install(again, monkeypatch)
    async with again:
        await again.login("fake-token")
    assert api.sent("PUT", "/applications/{application_id}/commands") == []


async def test_a_failed_command_sync_is_logged_and_the_bot_still_starts(rt, monkeypatch,
                                                                         caplog):
    from types import SimpleNamespace

    import discord

    bot = HermesBot(rt.memory, agent=None)
    api = FakeDiscordAPI()

    def refuse(call):
        raise discord.HTTPException(SimpleNamespace(status=429, reason="Too Many Requests"),
                                    "rate limited")

    api.routes[("PUT", "/applications/{application_id}/commands")] = refuse
    api.install(bot, monkeypatch)
    async with bot:
        await bot.login("fake-token")                   # no exception: setup_hook carried on
    assert "syncing the slash commands failed" in caplog.text
    assert not (rt.settings.home_path / "discord-commands.sha256").exists()


async def test_background_work_starts_in_setup_hook_and_stops_on_close(rt, monkeypatch):
    import asyncio

    started, stopped = asyncio.Event(), asyncio.Event()

    async def heartbeat() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    bot = HermesBot(rt.memory, agent=None, background=[heartbeat])
    FakeDiscordAPI().install(bot, monkeypatch)
    async with bot:
        await asyncio.sleep(0)
        assert not started.is_set()                 # nothing before login runs setup_hook
        await bot.login("fake-token")
        await asyncio.wait_for(started.wait(), 5)
    await asyncio.wait_for(stopped.wait(), 5)


# --------------------------------------------------------------------------- who is served
async def test_dm_from_an_allowed_user_is_answered_and_recorded(env, fake_model, rt):
    fake_model.reply("Hello Alice!")
    message = env.world.dm("alice", "hi there")
    await env.bot.on_message(message)
    (reply,) = env.api.messages_in(message.channel.id)
    assert reply.json["content"] == "Hello Alice!"
    assert reply.json["message_reference"]["message_id"] == message.id
    assert env.api.sent("POST", "/channels/{channel_id}/typing")
    assert sessions_of(rt) == [(env.user_of("alice"), "discord",
                                f"discord:dm:{message.channel.id}")]
    assert user_texts(rt) == ["hi there"]


async def test_someone_not_on_the_allowlist_gets_nothing_and_nothing_is_stored(env, rt):
    calls = len(env.api.calls)
    await env.bot.on_message(env.world.dm("mallory", "remember my card number 4111"))
    await env.bot.on_message(env.world.in_guild("mallory", "hello bot"))
    assert len(env.api.calls) == calls
    assert count(rt, "sessions") == 0 and count(rt, "messages") == 0


async def test_with_no_allowlist_nobody_is_served(env, rt):
    rt.settings.discord.allowed_users = []
    calls = len(env.api.calls)
    await env.bot.on_message(env.world.dm("alice", "hi"))
    assert len(env.api.calls) == calls and count(rt, "sessions") == 0


async def test_roles_and_channels_can_allow(env, fake_model, rt):
    rt.settings.discord.allowed_users = []
    rt.settings.discord.allowed_roles = [env.world.role_id]
    fake_model.reply("ok role").reply("ok channel")
    await env.bot.on_message(env.world.in_guild("mallory", "no role"))
    assert env.api.sent() == []
    await env.bot.on_message(env.world.in_guild("mallory", "via role", roles=[env.world.role_id]))
    assert env.api.sent()[-1].json["content"] == "ok role"
    rt.settings.discord.allowed_roles = []
    rt.settings.discord.allowed_channels = [env.world.channel_id]
    await env.bot.on_message(env.world.in_guild("mallory", "in the thread", thread=True))
    assert env.api.sent()[-1].json["content"] == "ok channel"
    calls = len(env.api.calls)
    await env.bot.on_message(env.world.dm("mallory", "but not in DMs"))
    assert len(env.api.calls) == calls


async def test_bots_are_ignored(env, rt):
    other_bot = {"id": "123", "username": "otherbot", "discriminator": "0", "avatar": None,
                 "bot": True}
    rt.settings.discord.allowed_users.append(123)
    calls = len(env.api.calls)
    await env.bot.on_message(env.world.dm("alice", "beep", author=other_bot))
    own = env.world.dm("alice", "my own reply", author=env.api.bot_user)
    await env.bot.on_message(own)
    assert len(env.api.calls) == calls and count(rt, "messages") == 0


async def test_guild_messages_need_a_mention_unless_configured(env, fake_model, rt):
    calls = len(env.api.calls)
    await env.bot.on_message(env.world.in_guild("alice", "just chatting", mention=False))
    assert len(env.api.calls) == calls and count(rt, "messages") == 0
    fake_model.reply("You rang?").reply("Always listening.")
    await env.bot.on_message(env.world.in_guild("alice", "what's up?"))
    assert env.api.sent()[-1].json["content"] == "You rang?"
    assert user_texts(rt) == ["what's up?"]                      # the mention is stripped
    rt.settings.discord.require_mention_in_guilds = False
    await env.bot.on_message(env.world.in_guild("alice", "no mention", mention=False))
    assert env.api.sent()[-1].json["content"] == "Always listening."


async def test_gateway_path_reaches_the_handler(env, fake_model, rt):
    fake_model.reply("via gateway")
    message = env.world.in_guild("bob", "hello")
    env.world.state.parse_message_create({
        "id": str(message.id), "channel_id": str(env.world.channel_id),
        "guild_id": str(env.world.guild_id), "author": env.world.people["bob"],
        "member": {"roles": [], "joined_at": "2026-11-29T12:00:00+00:00", "deaf": False,
                   "mute": False, "flags": 0},
        "content": message.content, "timestamp": "2026-11-29T12:00:00+00:00",
        "edited_timestamp": None, "tts": False, "mention_everyone": False,
        "mentions": [env.api.bot_user], "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": False, "type": 0, "flags": 0})
    await drain_event_tasks()
    assert env.api.sent()[-1].json["content"] == "via gateway"


# --------------------------------------------------------------------------- sessions and users
async def test_each_dm_thread_and_channel_user_pair_is_its_own_session(env, fake_model, rt):
    for _ in range(6):
        fake_model.reply("ok")
    w = env.world
    await env.bot.on_message(w.dm("alice", "one"))
    await env.bot.on_message(w.dm("alice", "two"))                 # same DM: same session
    await env.bot.on_message(w.in_guild("alice", "three"))
    await env.bot.on_message(w.in_guild("bob", "four"))             # same channel, other user
    await env.bot.on_message(w.in_guild("alice", "five", thread=True))
    await env.bot.on_message(w.in_guild("bob", "six", thread=True))  # a thread is shared
    alice, bob = env.user_of("alice"), env.user_of("bob")
    assert sessions_of(rt) == [
        (alice, "discord", f"discord:dm:{w.dms['alice'].id}"),
        (alice, "discord", f"discord:channel:{w.channel_id}:user:{w.id_of('alice')}"),
        (bob, "discord", f"discord:channel:{w.channel_id}:user:{w.id_of('bob')}"),
        (alice, "discord", f"discord:thread:{w.thread_id}"),
        (bob, "discord", f"discord:thread:{w.thread_id}"),
    ]
    assert alice != bob


async def test_the_identity_map_decides_whose_memory_it_is(env, fake_model, rt):
    rt.settings.users.identities[f"discord:{env.world.id_of('alice')}"] = "owner"
    fake_model.reply("hi owner")
    await env.bot.on_message(env.world.dm("alice", "hello"))
    assert sessions_of(rt)[0][0] == "owner"


# --------------------------------------------------------------------------- replies
async def test_a_long_reply_is_sent_in_pieces_with_code_blocks_intact(env, fake_model):
    code = "\n".join(f"step_{i}()" for i in range(400))
    fake_model.reply("Here:\n```python\n" + code + "\n```\nDone.", chunk_size=500)
    message = env.world.dm("alice", "write the script")
    await env.bot.on_message(message)
    pieces = [c.json["content"] for c in env.api.messages_in(message.channel.id)]
    assert len(pieces) >= 3 and all(len(p) <= 2000 for p in pieces)
    assert all(p.count("```") % 2 == 0 for p in pieces)
    assert [ln for p in pieces for ln in p.splitlines() if ln.startswith("step_")] == \
        code.splitlines()


async def test_a_streaming_reply_is_edited_in_place(env, fake_model, ticks):
    ticks.step = 5.0                              # every chunk is past the edit interval
    fake_model.reply("one two three four five six", chunk_size=4)
    message = env.world.dm("alice", "count")
    await env.bot.on_message(message)
    (first,) = env.api.messages_in(message.channel.id)
    edits = env.api.sent("PATCH", "/channels/{channel_id}/messages/{message_id}")
    assert len(edits) >= 2
    assert edits[-1].json["content"] == "one two three four five six"
    assert first.json["content"].endswith("…")


async def test_a_failing_turn_is_answered_with_an_apology_and_the_bot_carries_on(
        env, fake_model, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("engine on fire")

    message = env.world.dm("alice", "hello?")
    with monkeypatch.context() as patch:
        patch.setattr(env.bot.agent, "turn", broken)
        await env.bot.on_message(message)
    assert env.api.messages_in(message.channel.id)[-1].json["content"] == APOLOGY
    fake_model.reply("Back again.")
    await env.bot.on_message(env.world.dm("alice", "and now?"))
    assert env.api.sent()[-1].json["content"] == "Back again."


async def test_a_reply_cut_off_by_a_model_error_says_so(env, fake_model):
    from tests.fakellm import internal_server

    fake_model.error(internal_server("connection reset"), partial_text="The answer is forty")
    message = env.world.dm("alice", "what is the answer?")
    await env.bot.on_message(message)
    text = env.api.messages_in(message.channel.id)[-1].json["content"]
    edits = env.api.sent("PATCH", "/channels/{channel_id}/messages/{message_id}")
    final = edits[-1].json["content"] if edits else text
    assert final.startswith("The answer is forty")
    assert "(reply cut off:" in final and "connection reset" in final


# --------------------------------------------------------------------------- reactions
async def _reply_with_facts(env, fake_model, rt):
    facts = rt.memory.facts
    alice = env.user_of("alice")
    ids = [facts.add(alice, text, entities=entities).id for text, entities in [
        ("Alice's cat is called Miso", ["Miso"]),
        ("Miso the cat likes tuna", ["Miso"]),
        ("Alice drives a blue bicycle to work", ["bicycle"]),
    ]]
    fake_model.reply("Miso is your cat, and Miso likes tuna.")
    message = env.world.dm("alice", "What do you know about my cat Miso?")
    await env.bot.on_message(message)
    (reply,) = env.api.messages_in(message.channel.id)
    assistant_id = rt.db.execute(
        "SELECT max(id) FROM messages WHERE role = 'assistant'").fetchone()[0]
    shown = {r[0] for r in rt.db.execute(
        "SELECT fact_id FROM shown_facts WHERE message_id = ?", (assistant_id,))}
    return facts, alice, ids, shown, reply, message


def _trust(facts, user, ids):
    return {i: facts.get(user, i).trust for i in ids}


async def test_thumbs_down_rates_exactly_the_facts_shown_for_that_reply(env, fake_model, rt):
    facts, alice, ids, shown, reply, message = await _reply_with_facts(env, fake_model, rt)
    assert shown and shown < set(ids)          # some facts shown, at least one not
    before = _trust(facts, alice, ids)
    sent_id = int(reply.response["id"])
    await env.bot.on_raw_reaction_add(env.world.reaction(
        name="alice", message_id=sent_id, channel_id=message.channel.id, emoji=THUMBS_DOWN))
    after = _trust(facts, alice, ids)
    for fact_id in ids:
        if fact_id in shown:
            assert after[fact_id] < before[fact_id]
        else:
            assert after[fact_id] == before[fact_id]
    # Switching to 👍 replaces the 👎: the 👎's change is undone, then 👍 applies once.
    await env.bot.on_raw_reaction_add(env.world.reaction(
        name="alice", message_id=sent_id, channel_id=message.channel.id, emoji=THUMBS_UP))
    delta = rt.settings.facts.helpful_delta
    assert _trust(facts, alice, shown) == {i: round(before[i] + delta, 6) for i in shown}


async def _react(env, message, sent_id, emoji, *, removed=False, name="alice"):
    event = env.world.reaction(name=name, message_id=sent_id, channel_id=message.channel.id,
                               emoji=emoji, removed=removed)
    if removed:
        await env.bot.on_raw_reaction_remove(event)
    else:
        await env.bot.on_raw_reaction_add(event)


async def test_a_reaction_rates_once_per_person_and_removing_it_undoes_it(env, fake_model, rt):
    facts, alice, ids, shown, reply, message = await _reply_with_facts(env, fake_model, rt)
    before = _trust(facts, alice, ids)
    sent_id = int(reply.response["id"])
    await _react(env, message, sent_id, THUMBS_DOWN)
    once = _trust(facts, alice, ids)
    assert all(once[i] < before[i] for i in shown)
    for _ in range(2):                                   # Discord re-delivers, people re-click
        await _react(env, message, sent_id, THUMBS_DOWN)
    assert _trust(facts, alice, ids) == once
    assert all(facts.get(alice, i).unhelpful_count == 1 for i in shown)
    # 👍 then 👎 ends exactly where a single 👎 does.
    await _react(env, message, sent_id, THUMBS_UP)
    await _react(env, message, sent_id, THUMBS_DOWN)
    assert _trust(facts, alice, ids) == once
    # Removing a reaction that is not in effect changes nothing; removing the one that is undoes.
    await _react(env, message, sent_id, THUMBS_UP, removed=True)
    assert _trust(facts, alice, ids) == once
    await _react(env, message, sent_id, THUMBS_DOWN, removed=True)
    assert _trust(facts, alice, ids) == before
    assert all(facts.get(alice, i).unhelpful_count == 0 for i in shown)


async def test_a_reaction_on_any_piece_of_a_long_reply_rates_its_facts_once(env, fake_model, rt):
    facts = rt.memory.facts
    alice = env.user_of("alice")
    fact_id = facts.add(alice, "Alice's cat is called Miso", entities=["Miso"]).id
    fake_model.reply("Miso is your cat. " + "Purr. " * 700, chunk_size=500)
    message = env.world.dm("alice", "Tell me about my cat Miso")
    await env.bot.on_message(message)
    pieces = env.api.messages_in(message.channel.id)
    assert len(pieces) >= 2
    before = facts.get(alice, fact_id).trust
    await _react(env, message, int(pieces[1].response["id"]), THUMBS_DOWN)
    after = facts.get(alice, fact_id).trust
    assert after == round(before - rt.settings.facts.unhelpful_delta, 6)
    await _react(env, message, int(pieces[0].response["id"]), THUMBS_DOWN)
    assert facts.get(alice, fact_id).trust == after


async def test_a_thumbs_down_on_a_reply_that_used_no_fact_shown_lowers_nothing_and_says_so(
        env, fake_model, rt):
    facts = rt.memory.facts
    alice = env.user_of("alice")
    fact_id = facts.add(alice, "Alice's cat is called Miso", entities=["Miso"]).id
    fake_model.reply("Sorry, I did not catch that.")
    message = env.world.dm("alice", "What about my cat Miso?")
    await env.bot.on_message(message)
    (reply,) = env.api.messages_in(message.channel.id)
    sent_id = int(reply.response["id"])
    for _ in range(2):                       # Discord re-delivers: it is said once
        await _react(env, message, sent_id, THUMBS_DOWN)
    assert facts.get(alice, fact_id).trust == 0.5
    notes = env.api.messages_in(message.channel.id)[1:]
    assert len(notes) == 1
    said = notes[0].json["content"]
    assert "No fact's trust was lowered" in said and f"#{fact_id}" in said
    assert "/rate fact_id:ID rating:down" in said


async def test_another_users_reaction_and_other_emoji_change_nothing(env, fake_model, rt):
    facts, alice, ids, shown, reply, message = await _reply_with_facts(env, fake_model, rt)
    before = _trust(facts, alice, ids)
    sent_id = int(reply.response["id"])
    for name, emoji in [("bob", THUMBS_DOWN), ("mallory", THUMBS_DOWN), ("alice", "🎉")]:
        await env.bot.on_raw_reaction_add(env.world.reaction(
            name=name, message_id=sent_id, channel_id=message.channel.id, emoji=emoji))
    # Bob mapped to the same Hermes user still may not rate a reply that was for Alice.
    rt.settings.users.identities[f"discord:{env.world.id_of('bob')}"] = alice
    await env.bot.on_raw_reaction_add(env.world.reaction(
        name="bob", message_id=sent_id, channel_id=message.channel.id, emoji=THUMBS_DOWN))
    assert _trust(facts, alice, ids) == before


# --------------------------------------------------------------------------- slash commands
DEFERRED = 5     # interaction callback type: "thinking...", the answer follows


async def _slash(env: Env, *args, **kwargs) -> list[str]:
    """What the command said (its deferral, when there is one, is not a message)."""
    env.api.webhook_calls.clear()
    env.world.state.parse_interaction_create(env.world.interaction_payload(*args, **kwargs))
    await drain_event_tasks()
    return [(c.json.get("data") or c.json).get("content") for c in env.api.webhook_calls
            if c.json.get("type") != DEFERRED]


async def test_slash_commands_defer_before_working_and_answer_privately(env, monkeypatch):
    order: list[str] = []
    real = env.bot.commands.search

    def slow_search(user, query, **kw):
        order.append(f"work after {len(env.api.webhook_calls)} call(s)")
        return real(user, query, **kw)

    monkeypatch.setattr(env.bot.commands, "search", slow_search)
    (said,) = await _slash(env, "alice", "facts", {"query": "anything"}, sub="search")
    assert said.startswith("No facts match")
    first, answer = env.api.webhook_calls
    assert first.json["type"] == DEFERRED and first.json["data"]["flags"] & 64   # ephemeral
    assert order == ["work after 1 call(s)"]                   # deferred before the work
    assert answer.json["flags"] & 64


async def test_slash_commands_during_shutdown_do_nothing(env, rt):
    env.bot.accepting = False
    (said,) = await _slash(env, "alice", "remember", {"fact": "Alice likes figs"})
    assert "shutting down" in said
    assert count(rt, "facts") == 0


async def test_slash_commands_act_on_the_callers_memory(env, rt):
    (said,) = await _slash(env, "alice", "remember", {"fact": "Alice's sister lives in Porto"})
    assert said.startswith("Remembered [")
    assert "Porto" in (await _slash(env, "alice", "facts", {"query": "sister"}, sub="search"))[0]
    assert "Porto" in (await _slash(env, "alice", "facts", {"entity": "Porto"}, sub="probe"))[0]
    assert (await _slash(env, "bob", "facts", {"query": "sister"}, sub="search"))[0].startswith(
        "No facts match")
    assert "BASIC MEMORY" in (await _slash(env, "alice", "memory", sub="show"))[0]
    fact_id = int(said.split("[")[1].split("]")[0])
    assert "unhelpful" in (await _slash(env, "alice", "rate", {"fact_id": fact_id,
                                                               "rating": "down"}))[0]
    refused = (await _slash(env, "bob", "forget", {"fact_id": fact_id}))[0]
    assert not refused.startswith("Forgot")                         # not bob's fact
    assert (await _slash(env, "alice", "forget", {"fact_id": fact_id}))[0].startswith("Forgot")


async def test_pending_lists_and_settles_the_callers_questions(env, rt):
    """Where a pending question shows in Discord besides the next reply: /pending."""
    facts = rt.memory.facts
    (said,) = await _slash(env, "alice", "remember", {"fact": "My home city is Lisbon"})
    fact_id = int(said.split("[")[1].split("]")[0])
    owner = rt.db.execute("SELECT user FROM facts WHERE id = ?", [fact_id]).fetchone()[0]
    question = facts.ask_before_overriding(owner, fact_id, "The user's home city is Porto")
    (listed,) = await _slash(env, "alice", "pending")
    assert f"[{question.id}] fact {fact_id}" in listed and "now perhaps: The user's home city " \
        "is Porto" in listed
    assert (await _slash(env, "bob", "pending"))[0] == "No pending questions."
    (refused,) = await _slash(env, "bob", "pending", {"settle": "accept",
                                                      "question_id": question.id})
    assert refused.startswith("No pending question")                  # not bob's
    (settled,) = await _slash(env, "alice", "pending", {"settle": "reject",
                                                        "question_id": question.id})
    assert settled == f"Settled question {question.id}: still [{fact_id}] The user's home " \
        "city is Lisbon"
    assert (await _slash(env, "alice", "pending"))[0] == "No pending questions."


async def test_slash_commands_refuse_people_not_allowed_and_store_nothing(env, rt):
    (said,) = await _slash(env, "mallory", "remember", {"fact": "I own this bot"}, dm=True)
    assert said == "Hermes is not available to you."
    assert count(rt, "facts") == 0


async def test_new_starts_a_fresh_session_for_that_channel(env, fake_model, rt):
    fake_model.reply("first").reply("second")
    await env.bot.on_message(env.world.in_guild("alice", "hello"))
    assert (await _slash(env, "alice", "new"))[0].startswith("Started a new conversation")
    await env.bot.on_message(env.world.in_guild("alice", "again"))
    rows = rt.db.execute("SELECT channel_key, ended_at IS NOT NULL FROM sessions "
                         "ORDER BY id").fetchall()
    assert [r[1] for r in rows] == [1, 0] and rows[0][0] == rows[1][0]


async def test_new_in_a_thread_ends_only_that_threads_session(env, fake_model, rt):
    fake_model.reply("in thread").reply("in channel")
    await env.bot.on_message(env.world.in_guild("alice", "thread talk", thread=True))
    await env.bot.on_message(env.world.in_guild("alice", "channel talk"))
    await _slash(env, "alice", "new", thread=True)
    ended = dict(rt.db.execute("SELECT channel_key, ended_at IS NOT NULL FROM sessions"))
    assert ended == {f"discord:thread:{env.world.thread_id}": 1,
                     f"discord:channel:{env.world.channel_id}:user:{env.world.id_of('alice')}": 0}


async def test_sessions_commands(env, fake_model, rt):
    fake_model.reply("Tomatoes need sun.")
    await env.bot.on_message(env.world.dm("alice", "how do I grow tomatoes"))
    listed = (await _slash(env, "alice", "sessions", sub="list"))[0]
    assert "discord" in listed
    found = (await _slash(env, "alice", "sessions", {"query": "tomatoes"}, sub="search"))[0]
    assert "tomatoes" in found.lower()
    assert (await _slash(env, "bob", "sessions", sub="list"))[0] == "No sessions yet."


async def test_replies_and_cron_posts_never_ping_anyone(env, fake_model, rt):
    fake_model.reply("Hey @everyone and <@&123> and <@456>, look!")
    message = env.world.in_guild("alice", "ping them")
    await env.bot.on_message(message)
    await env.bot.deliver(None, str(env.world.channel_id), "digest for @here")
    posted = env.api.messages_in(env.world.channel_id)
    assert len(posted) == 2
    for call in posted:
        assert call.json["allowed_mentions"]["parse"] == []
        assert not call.json["allowed_mentions"].get("roles")
        assert not call.json["allowed_mentions"].get("users")


# --------------------------------------------------------------------------- cron delivery
async def test_cron_delivery_posts_to_the_channel_in_pieces(env):
    await env.bot.deliver(None, str(env.world.channel_id), "digest " * 500)
    posted = env.api.messages_in(env.world.channel_id)
    assert len(posted) == 2 and all(len(c.json["content"]) <= 2000 for c in posted)


async def test_a_reply_that_used_facts_carries_a_one_line_receipt(env, fake_model, rt):
    facts, alice, ids, shown, reply, message = await _reply_with_facts(env, fake_model, rt)
    listed = ", ".join(f"#{i}" for i in sorted(shown))
    assert reply.json["content"].endswith(
        f"\n-# used {len(shown)} facts ({listed}) · react 👍/👎 to rate them · /forget ID drops "
        "one")
    stored = rt.db.execute("SELECT content FROM messages WHERE role = 'assistant'").fetchone()[0]
    assert stored == "Miso is your cat, and Miso likes tuna."        # not part of the reply
    fake_model.reply("Hello again.")
    plain = env.world.dm("alice", "hello")
    await env.bot.on_message(plain)
    assert env.api.messages_in(plain.channel.id)[-1].json["content"] == "Hello again."


async def test_what_a_reply_taught_is_added_to_its_receipt_when_extraction_commits(
        env, fake_model, rt):
    import asyncio
    from types import SimpleNamespace

    from hermes.learn.consolidate import Consolidation, FactChange

    facts, alice, ids, shown, reply, message = await _reply_with_facts(env, fake_model, rt)
    assistant_id = rt.db.execute(
        "SELECT max(id) FROM messages WHERE role = 'assistant'").fetchone()[0]
    new = facts.add(alice, "Miso is a grey tabby").id
    env.bot.learned(SimpleNamespace(user=alice, session_id=1, last_message_id=assistant_id,
                                    changes=Consolidation(changes=[FactChange("created", new)])))
    env.bot.learned(SimpleNamespace(user=alice, session_id=1, last_message_id=assistant_id + 99,
                                    changes=Consolidation(changes=[FactChange("created", new)])))
    await asyncio.gather(*env.bot._tasks)
    (edit,) = env.api.sent("PATCH", "/channels/{channel_id}/messages/{message_id}")
    assert edit.json["content"].endswith(
        f"· react 👍/👎 to rate them · /forget ID drops one · learned #{new} "
        f"(/forget {new} undoes it)")
    assert int(edit.route.url.rsplit("/", 1)[-1]) == int(reply.response["id"])


async def test_the_slash_command_marker_is_private_whatever_the_umask(rt, monkeypatch):
    """The marker of the synced commands is in the home: 0600 like every file there, when the
    front-end runs outside the CLI's umask too (review item 12), and a marker an older version
    left readable is made private when it is written again."""
    import os
    import stat

    marker = rt.settings.home_path / "discord-commands.sha256"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("an older digest\n", encoding="utf-8")
    marker.chmod(0o644)
    bot = HermesBot(rt.memory, agent=None)
    FakeDiscordAPI().install(bot, monkeypatch)
    old = os.umask(0o022)
    try:
        async with bot:
            await bot.login("fake-token")
    finally:
        os.umask(old)
    assert marker.read_text(encoding="utf-8") != "an older digest\n"  # synced, written again
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600
