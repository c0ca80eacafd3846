"""One way from "remember X" to a fact on every surface (issue 31): the chat's fast lane,
``/remember``, MCP's ``facts_add`` and ``hermes facts add`` all store what
``normalise_statement`` makes of the words; a fast-lane fact's conversation is its own
exchange; words kept as said are rewritten by extraction; a secret is never a fact."""

from __future__ import annotations

import json

import pytest
from mcp import Client
from mcp_types import Implementation

from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.frontends import mcp_server
from hermes.frontends.commands import MemoryCommands
from hermes.learn.worker import ExtractionWorker
from hermes.memory.place import Scope
from hermes.runtime import Runtime


@pytest.fixture
def env(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield rt
    rt.close()


@pytest.fixture
def agent(env):
    agent = Agent(env.memory)
    ExtractionWorker(env.memory).attach(agent)
    return agent


def test_slash_remember_says_the_user(env):
    said = MemoryCommands(env.memory).remember(Scope("alice"), "My sister Ana lives in Porto")
    assert said.endswith("The user's sister Ana lives in Porto")
    (fact,) = env.memory.facts.list_facts("alice")
    assert fact.content == "The user's sister Ana lives in Porto"
    assert env.memory.facts.list_facts("bob") == []


def test_slash_remember_keeps_a_past_tense_as_said(env):
    MemoryCommands(env.memory).remember(Scope("alice"), "I moved to Porto")
    (fact,) = env.memory.facts.list_facts("alice")
    assert fact.content == 'The user said: "I moved to Porto"'
    assert fact.tags == ["verbatim"]


def test_cli_facts_add_says_the_user(cli, rt):
    assert cli("facts", "add", "My dentist is Dr. Silva at St. Luke's").exit_code == 0
    (fact,) = rt.memory.facts.list_facts(rt.settings.users.default)
    assert fact.content == "The user's dentist is Dr. Silva at St. Luke's"


def test_cli_facts_add_takes_a_remember_request_as_typed(cli, rt):
    """A new user types the sentence they would say in chat: the request is not the fact, and
    titles stay with their names (issue 31: "about Dr, Smith, St, Mary")."""
    result = cli("facts", "add", "Remember that my doctor is Dr. Smith at St. Mary's hospital")
    assert result.exit_code == 0 and "about Dr. Smith, St. Mary." in result.stdout
    (fact,) = rt.memory.facts.list_facts(rt.settings.users.default)
    assert fact.content == "The user's doctor is Dr. Smith at St. Mary's hospital"
    assert fact.entities == ["Dr. Smith", "St. Mary"]


def test_cli_facts_add_refuses_a_secret_in_one_line(cli, rt):
    result = cli("facts", "add", "My password is [redacted password]")
    assert result.exit_code != 0 and "does not keep secrets" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert rt.memory.facts.list_facts(rt.settings.users.default) == []


async def test_mcp_facts_add_says_the_user(rt):
    server = mcp_server.build_server(rt.memory, "alice", write=True)
    async with Client(server, client_info=Implementation(name="t", version="1")) as mcp:
        result = await mcp.call_tool("facts_add", {"content": "I'm allergic to penicillin"})
        assert not result.is_error
        assert result.structured_content["fact"]["content"] == "The user is allergic to penicillin"
    assert [f.content for f in rt.memory.facts.list_facts("alice")] == [
        "The user is allergic to penicillin"]
    assert rt.memory.facts.list_facts("bob") == []


async def test_a_fast_lane_fact_is_indexed_with_its_own_exchange(agent, env, fake_model):
    """After an unrelated long reply, "Remember that my dentist is Dr. Silva" was found by
    `facts search beagle` (the reply before it was its conversation). Now its conversation is
    the message and its reply."""
    sessions, facts = env.memory.sessions, env.memory.facts
    session = sessions.create("owner", "terminal")
    fake_model.reply("Once upon a time a beagle named Biscuit chased a kite.")
    await agent.turn("owner", session.id, "Tell me a long story").run()
    fake_model.reply("Noted: your dentist is Dr. Silva, in the clinic on Rua Augusta.")
    result = await agent.turn("owner", session.id, "Remember that my dentist is Dr. Silva").run()
    (fact,) = facts.list_facts("owner")
    assert fact.content == "The user's dentist is Dr. Silva"
    assert fact.source_message_ids == [result.user_message_id, result.assistant_message_id]
    assert facts.search("owner", "beagle") == []
    assert [f.id for f in facts.search("owner", "Augusta")] == [fact.id]   # from its reply
    exchange = env.db.execute("SELECT text FROM fact_exchanges WHERE fact_id = ?",
                              [fact.id]).fetchone()[0]
    assert "beagle" not in exchange and "Remember that my dentist" in exchange


def test_add_sources_cites_only_the_users_own_messages(env):
    sessions, facts = env.memory.sessions, env.memory.facts
    mine = sessions.create("alice", "terminal")
    said = sessions.append("alice", mine.id, "user", "Remember that my cat is Miso")
    theirs = sessions.create("bob", "terminal")
    other = sessions.append("bob", theirs.id, "user", "Bob's secret plans for the bakery")
    fact = facts.add("alice", "The user's cat is Miso", source_message_ids=[said.id]).fact
    facts.add_sources("alice", fact.id, [other.id])
    assert facts.get("alice", fact.id).source_message_ids == [said.id]
    assert facts.search("alice", "bakery") == []
    with pytest.raises(Exception, match="No fact"):
        facts.add_sources("bob", fact.id, [other.id])


async def test_a_secret_to_remember_stores_nothing_and_is_said_once(agent, env, fake_model):
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Understood.")
    result = await agent.turn("owner", session.id, "Remember that my password is hunter2").run()
    assert env.memory.facts.list_facts("owner", include_inactive=True) == []
    assert result.text.count("removed from memory") == 1
    assert "hunter2" not in json.dumps([r.messages for r in fake_model.requests])


async def test_a_second_remember_supersedes_the_first_it_contradicts(agent, env, fake_model):
    """Two explicit remembers that contradict each other: the later replaces the earlier
    (kept in the history, superseded, with a tombstone), not both active."""
    facts = env.memory.facts
    facts.add("bob", "The user's doctor is Dr. Smith")
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Noted.").reply("Noted, Dr. Jones now.")
    await agent.turn("owner", session.id, "Remember that my doctor is Dr. Smith.").run()
    (smith,) = facts.list_facts("owner")
    await agent.turn("owner", session.id, "Remember that my doctor is Dr. Jones.").run()
    (jones,) = facts.list_facts("owner")
    assert jones.content == "The user's doctor is Dr. Jones"
    old = facts.get("owner", smith.id)
    assert old.superseded_by == jones.id and old.valid_to is not None
    assert [h["action"] for h in facts.history("owner", smith.id)][-1] == "supersede"
    assert [t.content for t in facts.tombstones.of_fact("owner", smith.id)] == [smith.content]
    assert [f.content for f in facts.list_facts("bob")] == ["The user's doctor is Dr. Smith"]


def test_remember_and_facts_add_supersede_what_they_contradict(cli, rt, env):
    said = MemoryCommands(env.memory).remember(Scope("alice"), "I live in Lisbon")
    lisbon = int(said.split("[")[1].split("]")[0])
    said = MemoryCommands(env.memory).remember(Scope("alice"), "I live in Porto")
    assert said.endswith(f"(replaces [{lisbon}])")
    assert [f.content for f in env.memory.facts.list_facts("alice")] == [
        'The user said: "I live in Porto"']
    assert cli("facts", "add", "I'm 34 years old").exit_code == 0
    again = cli("facts", "add", "I am 35 years old")
    assert again.stdout.strip().endswith("It replaces fact 3.")
    assert cli("facts", "add", "I am 36 years old", "--json").json()["supersedes"] == [4]
    # not single-valued: both stay
    assert cli("facts", "add", "my sister is a nurse").exit_code == 0
    assert "replaces" not in cli("facts", "add", "my sister is Ana").stdout


async def test_a_passport_expiry_is_remembered_not_redacted(agent, env, fake_model):
    """i30's national-id rule read "passport expires in 2029" as an id: the message was
    recorded redacted and the fact refused."""
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Noted.")
    await agent.turn("owner", session.id, "Remember that my passport expires in 2029.").run()
    (fact,) = env.memory.facts.list_facts("owner")
    assert fact.content == "The user's passport expires in 2029"
    (said, _) = env.memory.sessions.messages("owner", session.id)
    assert said.content == "Remember that my passport expires in 2029."


async def test_words_kept_as_said_are_rewritten_by_extraction(env, fake_model):
    agent = Agent(env.memory)
    worker = ExtractionWorker(env.memory)
    worker.attach(agent)
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Got it.")

    def rewrite(request):
        prompt = request.messages[0]["content"]
        assert '1. The user said: "I moved to Porto"' in prompt
        return json.dumps([{"action": "update", "number": 1,
                            "content": "The user moved to Porto in November 2026."}])

    fake_model.respond(rewrite)
    await agent.turn("owner", session.id, "Remember that I moved to Porto.").run()
    await worker.drain()
    (run,) = worker.runs("owner")
    assert run.reason != "fast_lane"
    (fact,) = env.memory.facts.list_facts("owner")
    assert fact.content == "The user moved to Porto in November 2026."
    assert fact.tags == ["fastlane"]          # no longer "verbatim"
    history = env.memory.facts.history("owner", fact.id)
    assert history[-1]["action"] == "update"


async def test_a_certain_rewrite_costs_no_extraction_call(agent, env, fake_model):
    worker = ExtractionWorker(env.memory)
    agent.after_reply.clear()
    agent.before_reply.clear()
    worker.attach(agent)
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Got it.")
    await agent.turn("owner", session.id, "Remember that my doctor is Dr. Smith.").run()
    await worker.drain()
    assert len(fake_model.requests) == 1
    assert [r.reason for r in worker.runs("owner")] == ["fast_lane"]


# Review 2 #1: a statement that names no new value of the relation's kind (a passing state, a
# part-time qualifier, a place within a job or a home) keeps the old fact; a new value replaces.
PASSING_OR_NEW = [
    ("My doctor is Dr. Smith", "my doctor is on holiday until March", False),
    ("My car is a Tesla Model 3", "my car is in the garage until Friday", False),
    ("I live in Lisbon", "I moved to a desk near the window at work", False),
    ("I work at Acme", "I work at home on Fridays", False),
    ("I live in Lisbon", "I moved to Porto", True),
    ("My doctor is Dr. Smith", "my doctor is now Dr. Jones", True),
    ("I work at Acme", "I work at Globex now", True),
    ("My car is a Tesla Model 3", "my car is a Volvo XC40", True),
]


@pytest.mark.parametrize(("before", "said", "replaces"), PASSING_OR_NEW)
async def test_the_fast_lane_replaces_only_a_new_value(agent, env, fake_model, before, said,
                                                       replaces):
    facts = env.memory.facts
    MemoryCommands(env.memory).remember(Scope("owner"), before)
    (old,) = facts.list_facts("owner")
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Got it.")
    await agent.turn("owner", session.id, f"Remember that {said}.").run()
    expected = "superseded" if replaces else "active"
    assert facts.get("owner", old.id).status == expected
    assert len(facts.list_facts("owner")) == (1 if replaces else 2)


@pytest.mark.parametrize(("before", "said", "replaces"), PASSING_OR_NEW)
def test_facts_add_replaces_only_a_new_value(cli, rt, before, said, replaces):
    assert cli("facts", "add", before).exit_code == 0
    answer = cli("facts", "add", said, "--json").json()
    assert answer.get("supersedes", []) == ([1] if replaces else [])
    old = rt.memory.facts.get(rt.settings.users.default, 1)
    assert old.status == ("superseded" if replaces else "active")


def test_facts_add_takes_a_request_in_another_language_as_said(cli, rt):
    """Review item 11: "Recuerda que ..." typed into facts add stores the words after the
    request as said; Spanish "me" is no English "me" to rewrite as "the user"."""
    assert cli("facts", "add", "Recuerda que me gusta el café solo").exit_code == 0
    assert cli("facts", "add", "Lembra-te que o meu médico é o Dr. Silva").exit_code == 0
    assert sorted(f.content for f in rt.memory.facts.list_facts(rt.settings.users.default)) == [
        'The user said: "me gusta el café solo"',
        'The user said: "o meu médico é o Dr. Silva"']
