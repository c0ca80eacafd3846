"""An explicit statement of change supersedes the fact it changes (issue 31, review item 8).

"Remember that I'm now at Globex" with "The user works at Acme" stored left both active: the
contradiction rules read no relation in "is now at", and the related-fact lookup found no fact
sharing a word with it. The table below is the family of ways people say that something changed
(a change adverb, "new", a move or a switch, an end) and, beside it, what only adds to a fact or
is a passing state. Every surface stores a "remember" through FactStore.add(supersede=True): the
table runs through the pure rule, the chat's fast lane and ``hermes facts add``."""

from __future__ import annotations

import pytest
from mcp import Client
from mcp_types import Implementation

from hermes.agent.turn import Agent
from hermes.frontends import mcp_server
from hermes.frontends.commands import MemoryCommands
from hermes.learn.worker import ExtractionWorker
from hermes.memory.facts.contradiction import contradicts, replaced
from hermes.memory.facts.statement import normalise_statement
from hermes.memory.place import Scope

# (stored fact, the user's later statement): the statement replaces the fact.
SUPERSEDES = [
    # the review's sentence, and the other ways of saying a new employer
    ("I work at Acme", "I'm now at Globex"),
    ("I work at Acme", "I'm at Globex now"),
    ("The user works at Acme Corp as a backend engineer.", "I'm now at Globex"),
    ("I work at Acme", "I now work for Globex"),
    ("I work at Acme", "I switched to Globex"),
    ("I work at Acme", "I left Acme and joined Globex"),
    ("I work at Acme", "I left Acme for Globex"),
    ("I work at Acme", "I got a new job at Globex"),
    ("I work at Acme", "I started at Globex"),
    ("I work at Acme", "I've started working at Globex"),
    ("I work at Acme", "my new employer is Globex"),
    ("The user works at Acme.", "my new job is at Globex"),
    ("I'm at Acme", "I'm now at Globex"),
    # an end names what it ends
    ("I work at Acme", "I no longer work at Acme"),
    ("I work at Acme", "I don't work at Acme anymore"),
    ("I work at Acme", "I'm not at Acme any more"),
    ("I work at Acme", "I quit Acme"),
    ("I work at Acme", "I was laid off from Acme"),
    ("I work at Acme", "I left Acme in March"),
    ("I work at Acme", "I quit Acme last month"),
    # where they live
    ("I live in Lisbon", "I moved to Porto"),
    ("I live in Lisbon with two other students", "I moved to Porto"),
    ("I live in Lisbon", "I'm now living in Porto"),
    ("I live in Lisbon", "I now live in Porto"),
    ("I live in Lisbon", "I moved from Lisbon to Porto"),
    ("The user lives in Lisbon.", "I've relocated to Porto"),
    ("I live in Lisbon", "I no longer live in Lisbon"),
    ("I live in Lisbon", "I moved out of Lisbon"),
    # "my new X is ...", and the other ways of naming a new one
    ("My doctor is Dr. Smith", "my new doctor is Dr. Jones"),
    ("My doctor is Dr. Smith", "Dr. Jones is my new doctor"),
    ("My doctor is Dr. Smith", "I have a new doctor, Dr. Jones"),
    ("My doctor is Dr. Smith", "Dr. Smith is no longer my doctor"),
    ("My doctor is Dr. Smith", "I switched to Dr. Jones"),
    ("My dentist is Dr. Silva", "I've got a new dentist called Dr. Costa"),
    ("My manager is Tom", "my new manager is Priya"),
    ("My doctor is Dr. Smith", "I changed doctors to Dr. Kim"),
    ("My bank is Barclays", "I switched banks to Monzo"),
    ("My editor is Vim", "I switched to Neovim"),
    ("My editor is Vim", "I switched from Vim to Neovim"),
    ("My editor is Vim", "my new editor is Neovim"),
    # an open switch to a well-known name of the stored fact's kind
    ("My bank is Barclays", "I switched to Monzo"),
    ("My phone is an iPhone", "I switched to a Pixel"),
    # a tool's name in lower case is a value too, when the words say which relation
    ("My shell is fish", "my shell is zsh now"),
    ("My editor is Vim", "I now use Neovim"),
    ("My phone is an iPhone 12", "I got a new phone: a Pixel 8"),
    ("My car is a Tesla Model 3", "I bought a new car, a Volvo XC40"),
    ("My favourite colour is blue", "my favorite colour is now green"),
    ("I'm 34 years old", "I turned 35"),
    ("I'm 34 years old", "I'm now 35"),
    ("My girlfriend is Ana", "I broke up with Ana"),
    # "no longer" said of anything else: the fact it negates, word for word
    ("I eat meat", "I don't eat meat anymore"),
    ("I'm vegan", "I'm not vegan anymore"),
    ("I smoke", "I no longer smoke"),
    ("I play tennis on Sundays", "I no longer play tennis"),
]
# (stored fact, the user's later statement): both stay (an addition, a passing state, another
# subject, another kind of value).
KEEPS_BOTH = [
    ("I work at Acme", "I also work at Globex"),
    ("I work at Acme", "I work at Globex too"),
    ("I work at Acme", "I have a second job at Globex"),
    ("I work at Acme", "I started a side job at Globex"),
    ("I work at Acme", "I'm joining Globex next month"),
    ("I work at Acme", "I'm at the gym now"),
    ("I work at Acme", "I'm at home today"),
    ("I work at Acme", "I'm at the office now"),
    ("I work at Acme", "I'm at my mum's this weekend"),
    ("I work at Acme", "I no longer work on Fridays"),
    ("I work at Acme", "I left my keys at Globex"),
    ("I live in Lisbon", "I'm in Porto this week"),
    ("I live in Lisbon", "I moved to a new desk"),
    ("I live in Lisbon", "I also have a flat in Porto"),
    ("My sister lives in Porto", "I moved to Lisbon"),
    ("My doctor is Dr. Smith", "my doctor is on holiday until March"),
    ("My doctor is Dr. Smith", "I also see Dr. Jones"),
    ("My doctor is Dr. Smith", "my other doctor is Dr. Jones"),
    ("My editor is Vim", "I switched to decaf"),
    ("My editor is Vim", "I use VS Code at work sometimes"),
    ("My editor is Vim", "I also use Emacs"),
    ("My car is a Tesla Model 3", "my car is in the garage until Friday"),
    ("I eat meat", "I don't eat fish"),
    ("My sister is vegan", "I'm not vegan anymore"),
    ("I'm vegan", "I'm not hungry anymore"),
    ("I'm 34 years old", "I'm 5 minutes late"),
    ("I play tennis on Sundays", "I no longer play squash"),
    ("I live in Lisbon", "I'm in Porto for two weeks"),
    ("I work at Acme", "I'm at Globex for a meeting today"),
    ("My doctor is Dr. Smith", "Dr. Kim is my dentist"),
    # an end on a trip, an outing, a time, or a thing of the name's: no end of it
    ("I live in Lisbon", "I left Lisbon this morning"),
    ("I live in Lisbon", "I left Lisbon at 6am"),
    ("I live in Lisbon", "I left Lisbon for two weeks"),
    ("I live in London", "I left London for a weekend in Paris"),
    ("I live in Porto", "I left Porto to visit my parents"),
    ("I live in Lisbon", "I moved out of Lisbon for the summer"),
    ("I live in Lisbon", "I don't live in Lisbon during the summer anymore"),
    ("I work at Acme", "I left Acme early"),
    ("I work at Acme", "I left Acme's party early"),
    ("I work at Acme", "I quit Acme's gym"),
    ("I work at Google", "I left Google Docs for Notion"),
    ("I work at Acme", "I don't work at Acme on Fridays anymore"),
    ("I work at Acme", "I'm at the Marriott, room 412"),
    ("I work at Acme", "I'm at Costa"),
    ("I live in Lisbon", "I moved to Berlin for six months"),
    ("I live in Lisbon", "I'm living in Berlin for a couple of weeks"),
    # a person described, not named: no other person
    ("My partner is Ana", "My partner is Spanish"),
    ("My doctor is Dr. Smith", "my doctor is Portuguese"),
    ("My boyfriend is Ben", "My boyfriend is Catholic"),
    # a thing described, not another one named
    ("My car is a Tesla Model 3", "my car is an EV"),
    ("My gym is PureGym", "my gym is 24/7"),
    ("My shell is zsh", "my shell is slow"),
    ("My browser is Firefox", "my browser is outdated"),
    ("My laptop is a MacBook Pro", "my laptop is a 2019 model"),
    ("My bank is Monzo", "my bank is UK-based"),
    # an open switch to a well-known name of another kind: a new user's one fact stays
    ("My phone is an iPhone", "I switched to Spotify"),
    ("I work at Acme", "I switched to Spotify"),
    ("My editor is Vim", "I switched to Python 3"),
    ("I work at Acme", "I switched to Monzo"),
    # a "no longer" of a verb alone is no opposite of a fact that says much more with it
    ("I run a bakery in Porto", "I don't run anymore"),
    ("I drink coffee every morning", "I don't drink anymore"),
    ("I play tennis on Sundays", "I don't play anymore"),
]
TABLE = [(old, new, True) for old, new in SUPERSEDES] + \
        [(old, new, False) for old, new in KEEPS_BOTH]


@pytest.mark.parametrize(("old", "new", "replaces"), TABLE)
def test_the_rule(old, new, replaces):
    stored = normalise_statement(old).content
    said = normalise_statement(new, sentence=True).content
    assert replaced(said, [stored]) == ([0] if replaces else [])


@pytest.fixture
def env(fake_model, rt):
    """conftest's runtime, with the model faked at litellm's boundary."""
    return rt


@pytest.fixture
def agent(env):
    agent = Agent(env.memory)
    ExtractionWorker(env.memory).attach(agent)
    return agent


@pytest.mark.parametrize(("old", "new", "replaces"), TABLE)
async def test_the_fast_lane(agent, env, fake_model, old, new, replaces):
    facts = env.memory.facts
    MemoryCommands(env.memory).remember(Scope("owner"), old)
    (stored,) = facts.list_facts("owner")
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Got it.")
    result = await agent.turn("owner", session.id, f"Remember that {new}.").run()
    assert facts.get("owner", stored.id).status == ("superseded" if replaces else "active")
    assert len(facts.list_facts("owner")) == (1 if replaces else 2)
    # the reply says which fact it replaced
    assert (f"fact {stored.id} ({stored.content}) is replaced" in result.text) is replaces


@pytest.mark.parametrize(("old", "new", "replaces"), TABLE)
def test_facts_add(cli, rt, old, new, replaces):
    assert cli("facts", "add", old).exit_code == 0
    said = cli("facts", "add", new)
    assert said.exit_code == 0
    assert ("It replaces fact 1." in said.stdout) is replaces
    old_fact = rt.memory.facts.get(rt.settings.users.default, 1)
    assert old_fact.status == ("superseded" if replaces else "active")


def test_the_fact_is_found_among_many_and_only_the_users(env):
    """"I'm now at Globex" shares no word with "The user works at Acme": the related facts of a
    user with many facts do not hold it; the relation's words find it. Another user's fact with
    the same words is never reached."""
    facts = env.memory.facts
    for n in range(40):
        facts.add("alice", f"The user's project number {n} is called Zephyr{n}")
    facts.add("bob", "The user works at Acme")
    acme = facts.add("alice", "The user works at Acme").fact
    for n in range(40):
        facts.add("alice", f"The user now owns plant number {n}, a fern named Fern{n}")
    added = facts.add("alice", "The user is now at Globex", supersede=True)
    assert added.superseded == [acme.id]
    old = facts.get("alice", acme.id)
    assert old.superseded_by == added.id and old.valid_to is not None
    assert [h["action"] for h in facts.history("alice", acme.id)][-1] == "supersede"
    assert [f.content for f in facts.list_facts("bob")] == ["The user works at Acme"]


def test_an_open_switch_replaces_only_when_one_relation_could_be_meant(env):
    """"I switched to Lapce" says not of what: with an editor and an employer stored, the rules
    are unsure and both stay; with the editor alone, it is the editor. A well-known name says
    what it is: "I switched to Neovim" is the editor whatever else is stored."""
    facts = env.memory.facts
    facts.add("alice", "The user's editor is Vim")
    facts.add("alice", "The user works at Acme")
    said = normalise_statement("I switched to Lapce").content
    assert facts.add("alice", said, supersede=True).superseded == []
    vim, acme = (next(f for f in facts.list_facts("alice") if f.content == content)
                 for content in ("The user's editor is Vim", "The user works at Acme"))
    known = normalise_statement("I switched to Neovim").content
    assert facts.add("alice", known, supersede=True).superseded == [vim.id]
    assert facts.get("alice", acme.id).status == "active"
    facts.add("bob", "The user's editor is Vim")
    vim = facts.list_facts("bob")[0]
    assert facts.add("bob", said, supersede=True).superseded == [vim.id]


def test_learning_reads_definite_changes_only():
    """Consolidation's pairwise check (the model's own statements) takes the definite changes,
    never an open switch, a loose "is at" ("Caroline is at Harvard" may be a visit) nor a "no
    longer" outside the single-valued relations."""
    assert contradicts("The user no longer works at Acme.", "The user works at Acme.")
    assert contradicts("The user now works at Globex.", "The user works at Acme.")
    assert contradicts("The user's shell is zsh.", "The user's shell is fish.")   # bench
    assert not contradicts("The user is now at Globex.", "The user works at Acme.")
    assert not contradicts("Caroline is at Harvard.", "Caroline works at Google.")
    assert not contradicts("The user switched to Neovim.", "The user's editor is Vim.")
    # a place of the same employer, a thing described: no other value
    assert not contradicts("The user works at the Acme warehouse.", "The user works at Acme.")
    assert not contradicts("The user's car is an EV.", "The user's car is a Tesla Model 3.")
    assert not contradicts("The user's gym is open 24/7.", "The user's gym is PureGym.")
    assert not contradicts("The user does not eat meat anymore.", "The user eats meat.")
    # the model's account of a trip or an outing ends no home nor employer
    assert not contradicts("The user left Lisbon this morning.", "The user lives in Lisbon.")
    assert not contradicts("The user left Berlin by train.", "The user lives in Berlin.")
    assert not contradicts("The user left Acme early today.", "The user works at Acme.")
    assert not contradicts("The user is not working at Acme this week.",
                           "The user works at Acme.")
    assert contradicts("The user left Acme in March.", "The user works at Acme.")
    assert not contradicts("The user's partner is Spanish.", "The user's partner is Ana.")
    assert not contradicts("The user relocated to Berlin for six months.",
                           "The user lives in Lisbon.")


async def test_slash_remember_and_mcp_replace_it_too(env):
    """The review's sentence on the other surfaces that store a "remember" (the same
    FactStore.add): /remember says "(replaces [N])", MCP's facts_add returns "supersedes"."""
    facts = env.memory.facts
    commands = MemoryCommands(env.memory)
    first = facts.add("alice", "The user works at Acme").fact
    said = commands.remember(Scope("alice"), "Remember that I'm now at Globex")
    assert said.endswith(f"(replaces [{first.id}])")
    second = facts.list_facts("alice")[0]
    server = mcp_server.build_server(env.memory, "alice", write=True)
    async with Client(server, client_info=Implementation(name="t", version="1")) as mcp:
        result = await mcp.call_tool("facts_add", {"content": "I left Globex and joined Initech"})
        assert result.structured_content["supersedes"] == [second.id]
    assert [f.content for f in facts.list_facts("alice")] == [
        'The user said: "I left Globex and joined Initech"']


async def test_a_channel_statement_replaces_only_what_the_channel_sees(agent, env, fake_model):
    """"Remember that my new therapist is Dr. Lee" said in a Discord channel neither retires
    a fact the channel may not see nor names it in the reply's note (the note is posted
    there); the channel's own fact it replaces, and in a DM the private one too."""
    from hermes.memory.place import Place

    here = Place.discord_channel(1, 2)
    facts = env.memory.facts
    private = facts.add("alice", "The user's therapist is Dr. Okafor").fact
    ours = facts.add("alice", "The user's bank is Barclays", place=here).fact
    channel = env.memory.sessions.create("alice", "discord", channel_key="k", place=here)
    fake_model.reply("Got it.").reply("Got it.")
    said = await agent.turn("alice", channel.id,
                            "Remember that my new therapist is Dr. Lee.").run()
    assert "Okafor" not in said.text
    assert facts.get("alice", private.id).status == "active"
    said = await agent.turn("alice", channel.id, "Remember that I switched banks to Monzo.").run()
    assert facts.get("alice", ours.id).status == "superseded"
    assert f"fact {ours.id} (The user's bank is Barclays) is replaced" in said.text
    dm = env.memory.sessions.create("alice", "discord", channel_key="discord:dm:9")
    fake_model.reply("Got it.")
    said = await agent.turn("alice", dm.id, "Remember that my new therapist is Dr. Park.").run()
    assert facts.get("alice", private.id).status == "superseded"
    assert "Okafor" in said.text
