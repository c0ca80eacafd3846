"""Ask before overriding what the user said (issue 31): an inferred change of a fact the user
stated (or trusts highly) is kept as a question, asked once in the next reply, settled by the
user; a correction said outright supersedes at once."""

from __future__ import annotations

import json

import pytest

from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.errors import NotFound
from hermes.learn.consolidate import consolidate
from hermes.learn.parse import CreateAction, UpdateAction, parse_actions
from hermes.runtime import Runtime


@pytest.fixture
def env(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield rt
    rt.close()


def told(rt, text="The user lives in Lisbon"):
    """A fact the user stated outright (the fast lane)."""
    return rt.memory.facts.add("owner", text, tags=["fastlane"]).fact


def test_an_inferred_update_of_a_stated_fact_is_asked_not_applied(env):
    facts = env.memory.facts
    lisbon = told(env)
    changes = consolidate(facts, "owner", [UpdateAction(1, "The user lives in Porto",
                                                        stated="inferred")],
                          {1: lisbon}, session_id=None, message_ids=[])
    assert changes.asked == 1 and changes.superseded == 0
    assert facts.get("owner", lisbon.id).status == "active"
    (question,) = facts.pending_questions("owner")
    assert (question.fact_id, question.content) == (lisbon.id, "The user lives in Porto")


def test_a_change_said_outright_supersedes_at_once(env):
    facts = env.memory.facts
    lisbon = told(env)
    changes = consolidate(facts, "owner", [UpdateAction(1, "The user lives in Porto",
                                                        stated="explicit")],
                          {1: lisbon}, session_id=None, message_ids=[])
    assert changes.superseded == 1 and facts.pending_questions("owner") == []
    assert facts.get("owner", lisbon.id).status == "superseded"


def test_a_contradicting_create_of_a_learned_fact_still_supersedes(env):
    """Only what the user stated (or trusts highly) is protected: a fact extraction learned
    changes as before."""
    facts = env.memory.facts
    sessions = env.memory.sessions
    session = sessions.create("owner", "terminal")
    learned = facts.add("owner", "The user lives in Lisbon", source_session_id=session.id).fact
    changes = consolidate(facts, "owner", [CreateAction("The user lives in Porto",
                                                        stated="inferred")], {},
                          session_id=session.id, message_ids=[])
    assert changes.superseded == 1 and facts.get("owner", learned.id).status == "superseded"


def test_a_contradicting_create_of_a_stated_fact_is_asked(env):
    facts = env.memory.facts
    lisbon = told(env)
    changes = consolidate(facts, "owner", [CreateAction("The user lives in Porto",
                                                        stated="inferred")], {},
                          session_id=None, message_ids=[])
    assert changes.asked == 1 and facts.get("owner", lisbon.id).status == "active"


def test_the_model_says_whether_a_change_was_stated():
    raw = json.dumps([{"action": "update", "number": 1, "content": "x", "stated": "inferred"},
                      {"action": "update", "number": 1, "content": "y", "explicit": True},
                      {"action": "update", "number": 1, "content": "z"}])
    actions = parse_actions(raw, known_numbers=[1]).actions
    assert [a.stated for a in actions] == ["inferred", "explicit", None]


async def test_the_next_reply_asks_once(env, fake_model):
    facts = env.memory.facts
    lisbon = told(env)
    facts.ask_before_overriding("owner", lisbon.id, "The user lives in Porto")
    agent = Agent(env.memory)
    session = env.memory.sessions.create("owner", "terminal")
    fake_model.reply("Sure. By the way, in November you said you live in Lisbon; is it Porto now?")
    await agent.turn("owner", session.id, "What's the weather like?").run()
    tail = fake_model.last.tail
    assert "<pending_question>" in tail and "The user lives in Porto" in tail
    assert f"fact #{lisbon.id}" in tail
    fake_model.reply("Yes.")
    await agent.turn("owner", session.id, "And tomorrow?").run()
    assert "pending_question" not in fake_model.last.tail      # asked once
    assert len(facts.pending_questions("owner")) == 1          # still open until settled


def test_settling_accepts_or_rejects_and_is_scoped(env):
    facts = env.memory.facts
    lisbon = told(env)
    question = facts.ask_before_overriding("owner", lisbon.id, "The user lives in Porto")
    with pytest.raises(NotFound):
        facts.settle_question("bob", question.id, accept=True)
    assert facts.pending_questions("bob") == []
    new = facts.settle_question("owner", question.id, accept=True)
    assert new.content == "The user lives in Porto"
    assert facts.get("owner", lisbon.id).superseded_by == new.id
    assert facts.pending_questions("owner") == []
    other = facts.ask_before_overriding("owner", new.id, "The user lives in Braga")
    assert facts.settle_question("owner", other.id, accept=False).content == new.content


def test_a_question_whose_fact_changed_is_answered(env):
    facts = env.memory.facts
    lisbon = told(env)
    facts.ask_before_overriding("owner", lisbon.id, "The user lives in Porto")
    facts.update("owner", lisbon.id, "The user lives in Porto")   # the user said it outright
    assert facts.pending_questions("owner") == []
    row = env.db.execute("SELECT resolution FROM fact_questions").fetchone()
    assert row[0] == "answered"


def test_the_cli_lists_and_settles_them(env, cli):
    user = env.settings.users.default
    facts = env.memory.facts
    lisbon = facts.add(user, "The user lives in Lisbon", tags=["fastlane"]).fact
    question = facts.ask_before_overriding(user, lisbon.id, "The user lives in Porto")
    out = cli("facts", "pending").stdout
    assert f"[{question.id}] fact {lisbon.id}: The user lives in Lisbon" in out
    assert "now perhaps: The user lives in Porto (not asked yet)" in out
    assert cli("facts", "pending", "--user", "bob").stdout.startswith("No pending questions")
    refused = cli("facts", "pending", "--accept", str(question.id), "--user", "bob")
    assert refused.exit_code == 1 and "No pending question" in refused.stderr
    done = cli("facts", "pending", "--accept", str(question.id))
    assert done.exit_code == 0 and "The user lives in Porto" in done.stdout
    assert cli("facts", "pending").stdout.startswith("No pending questions")
