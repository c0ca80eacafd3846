"""Trust that learns from use (issue 31): the extraction call says which facts shown for a
reply it relied on (a small rise, capped per day) and which the user contradicted (a fall and a
pending correction); a 👎 then lowers only the relied-on facts; hermes stats tells implicit from
explicit changes."""

from __future__ import annotations

import json
import re

import pytest

from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.learn.worker import ExtractionWorker
from hermes.memory.facts.ratings import visibly_used
from hermes.runtime import Runtime


@pytest.fixture
def env(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield rt
    rt.close()


@pytest.fixture
def chat(env):
    agent = Agent(env.memory)
    worker = ExtractionWorker(env.memory)
    worker.attach(agent)
    session = env.memory.sessions.create("owner", "terminal")
    return agent, worker, session.id


def numbers_of(request) -> dict[str, int]:
    """content -> temporary number, as the extraction prompt lists the facts."""
    prompt = request.messages[0]["content"]
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"^(\d+)\. (.+?) \[", prompt, re.M)}


def shown_numbers(request) -> list[int]:
    found = re.search(r"^Numbers (.+?) of the list above", request.messages[0]["content"], re.M)
    return [int(n) for n in re.findall(r"\d+", found.group(1))] if found else []


async def a_turn(chat, fake_model, text, reply, extraction):
    agent, worker, session_id = chat
    fake_model.reply(reply)
    fake_model.respond(extraction)
    result = await agent.turn("owner", session_id, text).run()
    await worker.drain()
    return result


async def test_a_fact_the_reply_relied_on_gains_a_little_once_a_day(env, chat, fake_model,
                                                                    clock):
    facts = env.memory.facts
    dentist = facts.add("owner", "The user's dentist is Dr. Silva on Rua Augusta").fact
    cello = facts.add("owner", "The user plays the cello on Thursdays").fact
    seen: list[list[int]] = []

    def relied(request):
        numbers = numbers_of(request)
        seen.append(shown_numbers(request))
        return json.dumps([{"action": "relied_on", "numbers": [numbers[dentist.content]]},
                           {"action": "create", "content": "The user has a toothache."}])

    await a_turn(chat, fake_model, "My tooth hurts, who is my dentist again?",
                 "Your dentist is Dr. Silva on Rua Augusta.", relied)
    assert seen and seen[0]          # the facts shown for the reply were listed
    assert facts.get("owner", dentist.id).trust == pytest.approx(0.52)
    assert facts.get("owner", cello.id).trust == 0.5
    last = facts.history("owner", dentist.id)[-1]
    assert last["action"] == "rate" and last["note"].startswith("implicit")
    assert last["origin"] == "learned from use"
    assert facts.get("owner", dentist.id).helpful_count == 0   # the buttons' count only
    # the same day: no second rise
    await a_turn(chat, fake_model, "My tooth still hurts, remind me of my dentist's street?",
                 "Rua Augusta.", relied)
    assert facts.get("owner", dentist.id).trust == pytest.approx(0.52)
    clock.advance(days=1, minutes=1)
    await a_turn(chat, fake_model, "Booked my dentist Dr. Silva for Monday, the tooth is worse.",
                 "Good luck at Rua Augusta.", relied)
    assert facts.get("owner", dentist.id).trust == pytest.approx(0.54)


async def test_a_contradicted_fact_falls_and_a_correction_waits(env, chat, fake_model):
    facts = env.memory.facts
    dentist = facts.add("owner", "The user's dentist is Dr. Silva on Rua Augusta").fact

    def contradicted(request):
        number = numbers_of(request)[dentist.content]
        return json.dumps([{"action": "contradicted", "number": number,
                            "content": "The user's dentist is Dr. Costa"}])

    await a_turn(chat, fake_model, "Actually Dr. Silva is not my dentist anymore, who was it?",
                 "Dr. Silva on Rua Augusta, according to my notes.", contradicted)
    assert facts.get("owner", dentist.id).trust == pytest.approx(0.45)
    (question,) = facts.pending_questions("owner")
    assert question.content == "The user's dentist is Dr. Costa"


async def test_thumbs_down_lowers_only_what_the_reply_relied_on(env, chat, fake_model):
    facts, ratings = env.memory.facts, env.memory.ratings
    dentist = facts.add("owner", "The user's dentist is Dr. Silva on Rua Augusta").fact
    street = facts.add("owner", "The user's bakery is on Rua Augusta").fact

    def relied(request):
        return json.dumps([{"action": "relied_on",
                            "numbers": [numbers_of(request)[dentist.content]]}])

    result = await a_turn(chat, fake_model, "I am going to Rua Augusta today, what is there?",
                          "Your dentist, Dr. Silva.", relied)
    reply = result.assistant_message_id
    assert set(ratings.shown_fact_ids("owner", reply)) == {dentist.id, street.id}
    changes = ratings.set_rating("owner", reply, "terminal:owner", False)
    assert [c.id for c in changes] == [dentist.id]
    assert facts.get("owner", street.id).trust == 0.5


def _reply_shown(env, user, reply_text, *contents):
    facts, ratings, sessions = env.memory.facts, env.memory.ratings, env.memory.sessions
    ids = [facts.add(user, text).fact.id for text in contents]
    session = sessions.create(user, "terminal")
    sessions.append(user, session.id, "user", "a plain question")
    reply = sessions.append(user, session.id, "assistant", reply_text)
    ratings.record_shown(user, reply.id, ids)
    return reply.id, ids


def test_without_word_from_extraction_a_thumbs_down_lowers_only_what_the_reply_visibly_used(env):
    """No extraction judged the reply (a plain question runs none): a 👎 reaches the facts
    whose words the reply repeats, never a correct fact it did not use."""
    facts, ratings = env.memory.facts, env.memory.ratings
    reply, (dentist, bakery) = _reply_shown(
        env, "owner", "Your dentist is Dr. Silva, I think.",
        "The user's dentist is Dr. Silva", "The user's bakery is on Rua Augusta")
    reach = ratings.reach("owner", reply)
    assert (reach.basis, reach.fact_ids, reach.left_out) == ("visible", [dentist], [bakery])
    assert [c.id for c in ratings.set_rating("owner", reply, "terminal:owner", False)] == [
        dentist]
    assert facts.get("owner", bakery).trust == 0.5
    assert facts.get("owner", bakery).unhelpful_count == 0
    assert "#" + str(bakery) in reach.explain(False, "/rate ID down")


def test_a_reply_that_repeats_no_fact_shown_lowers_nothing_and_says_so(env):
    facts, ratings = env.memory.facts, env.memory.ratings
    reply, ids = _reply_shown(env, "owner", "Sorry, I cannot help with that.",
                              "The user's dentist is Dr. Silva",
                              "The user's bakery is on Rua Augusta")
    assert ratings.set_rating("owner", reply, "terminal:owner", False) == []
    assert [facts.get("owner", i).trust for i in ids] == [0.5, 0.5]
    reach = ratings.reach("owner", reply)
    assert (reach.basis, reach.fact_ids) == ("unclear", [])
    said = reach.explain(False, "/rate ID down")
    assert said.startswith("No fact's trust was lowered") and "/rate ID down" in said
    assert all(f"#{i}" in said for i in ids)
    # The rating is still the one in effect: again is a no-op, withdrawing undoes nothing.
    assert ratings.rating("owner", reply, "terminal:owner") is False
    assert ratings.set_rating("owner", reply, "terminal:owner", None) == []


@pytest.mark.parametrize(("reply", "fact", "used"), [
    ("How is Biscuit doing?", "The user has a beagle named Biscuit", True),
    ("Your beagle must miss you.", "The user has a beagle named Biscuit", True),
    ("Since you live in Lisbon, take the tram.", "The user lives in Lisbon", True),
    ("Here is a vegetarian lasagne.", "The user is vegetarian", True),
    ("Flat 42 is on the second floor.", "The user lives in flat 42", True),
    ("It is vault.", "The backup server is named vault", True),
    ("Vault has no backup of your photos yet, and the server is off.",
     "The backup server is named vault", True),
    ("The server room is cold; a jumper would help with the draught.",
     "The backup server is named vault", False),
    ("Paris is the capital of France.", "The user lives in Lisbon", False),
    ("I'd like to help with that.", "The user likes coffee", False),
    ("Good morning! How can I help?", "The user drinks coffee every morning", False),
    ("Dr. Costa is on call today.", "The user's dentist is Dr. Silva", False),
    # a weekday, a month or one word of several in common is no use (review rev3 F5)
    ("Today is Monday.", "The user plays tennis on Monday", False),
    ("April is a good month to visit.", "The user's daughter is April", False),
    ("That sounds great, enjoy the trip!", "The user is going on a trip to Japan", False),
    ("Here's a recipe with tomatoes.", "The user grows tomatoes in the garden", False),
    ("Your tomatoes need water in this heat.", "The user grows tomatoes in the garden", False),
    ("Your garden tomatoes need water.", "The user grows tomatoes in the garden", True),
])
def test_visibly_used_is_the_facts_names_or_half_its_words(reply, fact, used):
    assert visibly_used(reply, fact) is used


def test_relied_marks_stay_within_the_user(env):
    facts, ratings, sessions = env.memory.facts, env.memory.ratings, env.memory.sessions
    mine = facts.add("alice", "Alice's dentist is Dr. Silva").fact
    other = facts.add("alice", "Alice's bakery is on Rua Augusta").fact
    session = sessions.create("alice", "terminal")
    reply = sessions.append("alice", session.id, "assistant", "hello")
    ratings.record_shown("alice", reply.id, [mine.id, other.id])
    facts.mark_relied("bob", [reply.id], [mine.id])          # bob's call reaches nothing
    assert ratings.reach("alice", reply.id).basis == "unclear"
    facts.mark_relied("alice", [reply.id], [mine.id])
    assert ratings.rated_fact_ids("alice", reply.id) == [mine.id]
    assert facts.learn_trust("alice", mine.id, True) is not None
    with pytest.raises(Exception, match="No fact"):
        facts.learn_trust("bob", mine.id, True)


def test_stats_tell_implicit_from_explicit(env, cli):
    facts = env.memory.facts
    user = env.settings.users.default
    fact = facts.add(user, "The user's dentist is Dr. Silva").fact
    facts.learn_trust(user, fact.id, True)
    facts.learn_trust(user, fact.id, False)
    facts.rate(user, fact.id, True)
    out = cli("stats").stdout
    assert "1 up / 1 down learned from use, 1 by ratings" in out
    data = cli("stats", "--json").json()
    learning = data.get("learning") or data.get("extraction") or data
    assert learning["trust_implicit_up"] == 1 and learning["trust_explicit"] == 1
