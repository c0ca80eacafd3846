"""Ask before overriding what the user said (issue 31): an inferred change of a fact the user
stated (or trusts highly) is kept as a question, asked once in the next reply, settled by the
user; a correction said outright supersedes at once."""

from __future__ import annotations

import json
import re

import pytest

from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.errors import NotFound
from hermes.learn.consolidate import consolidate
from hermes.learn.parse import CreateAction, UpdateAction, parse_actions
from hermes.learn.worker import ExtractionWorker
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


# Review 2 #3, through the agent and the extraction worker, the model faked at litellm's edge.

def _extraction(request) -> bool:
    return "Existing facts that may be related" in json.dumps(request.messages)


def _number(request, words: str) -> int:
    """The temporary number the extraction prompt shows for the fact holding ``words``."""
    prompt = "\n".join(str(m.get("content")) for m in request.messages)
    return int(re.search(rf"^(\d+)\. .*{re.escape(words)}", prompt, re.M).group(1))


def _script(fake_model, *learned):
    """Each turn: a reply, then (if the gate lets it run) extraction answers the next of
    ``learned`` (a function of the request giving the actions)."""
    steps = iter(learned)

    def answer(request):
        if not _extraction(request):
            return "Noted."
        return json.dumps(next(steps)(request))

    for _ in range(2 * len(learned)):
        fake_model.respond(answer)


async def _say(env, *messages):
    agent = Agent(env.memory)
    worker = ExtractionWorker(env.memory)
    worker.attach(agent)
    session = env.memory.sessions.create("owner", "terminal")
    for text in messages:
        await agent.turn("owner", session.id, text).run()
        await worker.drain()


async def test_an_inference_asks_before_overriding_words_kept_as_said(env, fake_model):
    """A fast-lane fact in the user's words (``The user said: "..."``, #verbatim) is what the
    user said outright too: an inferred change is a question, and never wears #fastlane."""
    _script(fake_model, lambda r: [],
            lambda r: [{"action": "update", "number": _number(r, "I moved to Porto"),
                        "content": "The user lives in Lisbon", "stated": "inferred"}])
    await _say(env, "Remember that I moved to Porto.",
               "I'm at the Lisbon office every day now and my Porto flat sits empty most of "
               "the week")
    facts = env.memory.facts
    (porto,) = facts.list_facts("owner")
    assert porto.content == 'The user said: "I moved to Porto"' and porto.status == "active"
    (question,) = facts.pending_questions("owner")
    assert (question.fact_id, question.content) == (porto.id, "The user lives in Lisbon")
    assert [f.id for f in facts.list_facts("owner", include_inactive=True)
            if "fastlane" in f.tags] == [porto.id]


async def test_an_explicit_extraction_is_protected_from_an_inference(env, fake_model):
    """A fact extraction learned from the user saying it outright keeps that label (#explicit,
    on its new versions too): an inferred change asks instead of superseding it."""
    _script(fake_model,
            lambda r: [{"action": "create", "content": "The user works at Acme",
                        "stated": "explicit"}],
            lambda r: [{"action": "update", "number": _number(r, "works at Acme"),
                        "content": "The user works at Globex", "stated": "explicit"}],
            lambda r: [{"action": "update", "number": _number(r, "works at Globex"),
                        "content": "The user works at Initech", "stated": "inferred"}])
    await _say(env, "I work at Acme.", "I left Acme, I work at Globex now.",
               "I'm at the Initech office again today, work never ends.")
    facts = env.memory.facts
    (globex,) = facts.list_facts("owner")
    assert globex.content == "The user works at Globex" and "explicit" in globex.tags
    (question,) = facts.pending_questions("owner")
    assert (question.fact_id, question.content) == (globex.id, "The user works at Initech")


@pytest.mark.parametrize("stated", [{}, {"stated": "inferred"}])
async def test_an_inference_never_claims_the_users_words(env, fake_model, stated):
    """The model's own tags cannot say the user stated it: no #fastlane, no #explicit."""
    _script(fake_model, lambda r: [{"action": "create", "content": "The user likes jazz",
                                    "tags": ["fastlane", "explicit", "music"], **stated}])
    await _say(env, "Put on something with a saxophone, the kind of thing I always play.")
    (fact,) = env.memory.facts.list_facts("owner")
    assert fact.tags == ["music"]
