"""One recall budget for a turn (hermes.agent.prompt.PromptBuilder.recalled): recalled facts and
past messages share it, and nothing is paid for twice."""

from __future__ import annotations

import pytest

from hermes.agent.conversation import Conversation
from hermes.config import load_settings
from hermes.memory.sessions import past_messages
from hermes.runtime import Runtime


@pytest.fixture
def rt(clock):
    rt = Runtime(load_settings(), clock=clock)
    yield rt
    rt.close()


@pytest.fixture
def builder(rt):
    from hermes.agent.prompt import PromptBuilder

    return PromptBuilder(rt.memory)


def chat(rt, clock, user, title, *pairs):
    store = rt.memory.sessions
    session = store.create(user, "discord", title=title)
    ids = []
    for asked, answered in pairs:
        clock.advance(minutes=1)
        ids.append(store.append(user, session.id, "user", asked).id)
        clock.advance(minutes=1)
        ids.append(store.append(user, session.id, "assistant", answered).id)
    return session, ids


def shares(rt, facts: int, messages: int, *, max_facts: int = 20, max_messages: int = 8):
    agent = rt.memory.settings.agent
    agent.recall_char_budget, agent.recall_messages_char_budget = facts, messages
    agent.recall_max_facts, agent.recall_max_messages = max_facts, max_messages


def recall(builder, user, query):
    conversation = Conversation(builder.snapshot(user))
    now = builder.sessions.create(user, "terminal")
    return builder.recalled(user, query, conversation, now.id)


def spent(facts, excerpts) -> int:
    from hermes.agent.prompt import fact_line

    return sum(len(fact_line(f)) + 1 for f in facts) + sum(len(e.text) + 1 for e in excerpts)


def test_facts_that_leave_room_give_it_to_past_messages(rt, builder, clock):
    rt.memory.facts.add("owner", "The greenhouse is heated by a kestrel-brand boiler")
    for n in range(4):
        chat(rt, clock, "owner", f"Greenhouse {n}",
             (f"greenhouse visit {n}: " + "the tomatoes are ripening nicely " * 3, "Lovely."))
    shares(rt, 400, 300)
    facts, excerpts = recall(builder, "owner", "how is the greenhouse?")
    assert len(facts) == 1
    # more past messages than their own 300-character share holds: the facts left room
    assert sum(len(e.text) + 1 for e in excerpts) > 300
    assert spent(facts, excerpts) <= 700


def test_past_messages_that_leave_room_give_it_to_more_facts(rt, builder, clock):
    for n in range(10):
        rt.memory.facts.add("owner", f"Kubernetes cluster {n} runs in zone {n} " + "x" * 50)
    chat(rt, clock, "owner", "Cooking", ("the sourdough starter", "Feed it daily."))
    shares(rt, 300, 700)
    facts, excerpts = recall(builder, "owner", "kubernetes cluster")
    assert excerpts == []  # nothing in the past conversations matches
    assert spent(facts, []) > 300  # more than the facts' share: the messages' was free
    assert len(facts) > 3 and spent(facts, excerpts) <= 1000  # 2 fit in 300


def test_the_whole_budget_holds_both_and_a_share_of_zero_turns_a_side_off(rt, builder, clock):
    for n in range(12):
        rt.memory.facts.add("owner", f"Kestrel fact {n}: " + "the kestrel hunts voles " * 3)
        chat(rt, clock, "owner", f"Birds {n}", (f"kestrel sighting {n} " + "over the field " * 8,
                                                 "Nice."))
    shares(rt, 500, 500)
    facts, excerpts = recall(builder, "owner", "the kestrel?")
    assert facts and excerpts and spent(facts, excerpts) <= 1000
    shares(rt, 0, 500)
    facts, excerpts = recall(builder, "owner", "the kestrel?")
    assert facts == [] and excerpts and spent([], excerpts) <= 500
    shares(rt, 500, 0)
    facts, excerpts = recall(builder, "owner", "the kestrel?")
    assert excerpts == [] and facts and spent(facts, []) <= 500


def test_a_past_message_that_a_recalled_fact_came_from_is_not_shown_again(rt, builder, clock):
    _, ids = chat(rt, clock, "owner", "Car", ("I finally sold the old Volvo estate", "Congrats!"),
                  ("the buyer paid cash for it", "Nice."))
    fact = rt.memory.facts.add("owner", "The user sold their old Volvo estate",
                               source_message_ids=[ids[0]]).fact
    facts, excerpts = recall(builder, "owner", "what happened to the Volvo?")
    assert [f.id for f in facts] == [fact.id]
    shown = {i for e in excerpts for i in e.message_ids}
    assert ids[0] not in shown  # the fact says it already


def test_a_fact_whose_sources_are_all_in_an_excerpt_is_left_out(rt, builder, clock):
    """The top-up: facts taken after the past messages skip the turns an excerpt shows."""
    _, ids = chat(rt, clock, "owner", "Boiler", ("the boiler code is E119", "Call the plumber."))
    rt.memory.facts.add("owner", "Boiler code E119 means low pressure",
                        source_message_ids=[ids[0]])
    other = rt.memory.facts.add("owner", "The boiler was installed in 2019").fact
    shares(rt, 0, 600)
    assert recall(builder, "owner", "the boiler code?")[0] == []  # no fact share: no facts
    # A fact share too small for either fact: both can come only from the top-up
    shares(rt, 20, 600)
    facts, excerpts = recall(builder, "owner", "the boiler code?")
    assert ids[0] in {i for e in excerpts for i in e.message_ids}
    assert [f.id for f in facts] == [other.id]


def test_a_fact_already_shown_in_the_conversation_costs_nothing(rt, builder, clock):
    first = rt.memory.facts.add("owner", "The staging server is called athena " + "x" * 80).fact
    second = rt.memory.facts.add("owner", "The staging server runs Debian " + "y" * 80).fact
    shares(rt, 140, 0)
    conversation = Conversation(builder.snapshot("owner"))
    conversation.shown_facts.add(first.id)
    facts, _ = builder.recalled("owner", "staging server", conversation)
    # the budget holds one line: the one not shown yet; the shown one is recorded, not paid for
    assert {f.id for f in facts} == {first.id, second.id}


def test_an_excerpt_is_the_turn_before_and_the_two_after_each_line_cut_at_the_cap(rt, clock):
    chat(rt, clock, "owner", "Trip", ("we talked about the weather", "Sunny."),
         ("the Lisbon trip in April " + "a" * 500, "Sounds great."),
         ("and the hotel?", "Booked near the river."))
    found = past_messages.recall_past_messages(rt.memory.sessions, "owner", "Lisbon trip",
                                               budget=2000)
    lines = found[0].text.splitlines()[1:]
    assert [line[:12] for line in lines] == ["  Hermes: Su", "> the user: ", "  Hermes: So",
                                             "  the user: "]
    assert len(lines[1]) == len("> the user: ") + past_messages.LINE_CHARS
    assert lines[1].endswith("…") and "Booked" not in found[0].text


def test_another_users_facts_and_messages_never_share_my_budget(rt, builder, clock):
    rt.memory.facts.add("bob", "Bob's kestrel password hint is falcon")
    chat(rt, clock, "bob", "Bob", ("my kestrel PIN is 4321", "Noted."))
    rt.memory.facts.add("owner", "The kestrel nests in the barn")
    chat(rt, clock, "owner", "Birds", ("a kestrel on the fence", "Lovely."))
    facts, excerpts = recall(builder, "owner", "the kestrel?")
    assert facts and excerpts
    assert all(f.user == "owner" for f in facts)
    assert all("PIN" not in e.text and e.session.user == "owner" for e in excerpts)
    assert all("falcon" not in f.content for f in facts)


def test_a_message_mostly_about_something_never_said_recalls_no_past_messages(rt, clock):
    """The gate: at least half of the message's words worth looking for were said before."""
    chat(rt, clock, "owner", "Chat", ("you should give it a try", "I will."),
         ("my grandmother's pancakes recipe uses buttermilk", "Sounds delicious."))
    store = rt.memory.sessions

    def recalled(text):
        return past_messages.recall_past_messages(store, "owner", text, budget=2000)

    # "give" was said, "summarise", "plot", "hamlet" never: nothing, though "give" matches
    assert recalled("give me a summary of the plot of Hamlet") == []
    found = recalled("give me the pancakes recipe again")  # 3 of 3 words said before
    assert found and "buttermilk" in found[0].text
    assert recalled("the pancakes recipe for a vegan crowd")  # 2 of 4: half is enough
    assert past_messages.about_the_past([1, 2], 2) and not past_messages.about_the_past([1], 2)
    assert not past_messages.about_the_past([], 0)
