"""Per-turn fact recall (hermes.memory.facts.recall): which facts a turn shows the model."""

from __future__ import annotations

import pytest

from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.memory.facts import recall as fact_recall
from hermes.runtime import Runtime


@pytest.fixture
def agent(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield Agent(rt.memory)
    rt.close()


@pytest.fixture
def facts(agent):
    return agent.memory.facts


async def shown(agent, fake_model, text, user="owner") -> list[int]:
    session_id = agent.memory.sessions.create(user, "terminal").id
    fake_model.reply("ok")
    result = await agent.turn(user, session_id, text).run()
    return result.shown_fact_ids


async def test_the_best_partial_match_is_recalled_beside_an_all_words_match(agent, fake_model,
                                                                           facts):
    # One fact happens to hold every word of the message; recall used to stop there (all words
    # first) and never show the fact that answers it.
    everything = facts.add("owner", "Trip diary: in Zanzibar we saw a kestrel perched on an old "
                                    "oil pipeline by the harbour, then went for lunch").fact
    answer = facts.add("owner", "Alice maintains the Kestrel pipeline").fact
    found = await shown(agent, fake_model, "who looks after the Kestrel pipeline in Zanzibar?")
    assert answer.id in found and everything.id in found
    # bm25 over any word: the short fact with two of the words ranks first
    assert found[0] == answer.id


async def test_other_users_facts_do_not_decide_which_of_my_words_are_searched(
        agent, fake_model, facts, monkeypatch):
    monkeypatch.setattr(fact_recall, "COMMON_TERM_DOCS", 3)
    for n in range(5):  # "codename" is common, but only among bob's facts
        facts.add("bob", f"Bob's codename number {n} is Falcon{n}")
    wanted = facts.add("owner", "The codename of the allotment project is Bluebird").fact
    facts.add("owner", "The garden fence was painted green")
    found = await shown(agent, fake_model, "what codename did we pick for the garden?")
    assert wanted.id in found
    assert all(facts.get("owner", fid).user == "owner" for fid in found)


def test_a_word_is_counted_in_the_users_active_facts_only(agent, facts):
    recall = agent.prompts.fact_recall
    from hermes.store.fts import build_match

    term = build_match("kestrel").terms[0]
    facts.add("bob", "Bob watches a kestrel")
    gone = facts.add("owner", "A kestrel nests on the roof").fact
    facts.forget("owner", gone.id)
    assert recall.doc_count("owner", term) == 0
    assert recall.doc_count("bob", term) == 1


async def test_a_message_of_only_common_words_recalls_the_newest_facts_holding_them(
        agent, fake_model, facts, monkeypatch):
    # Every word of the message is in COMMON_TERM_DOCS or more of the user's facts: bm25 would
    # score all of them (100 ms at 100k facts); the newest holding both words are shown.
    monkeypatch.setattr(fact_recall, "COMMON_TERM_DOCS", 3)
    old = facts.add("owner", "Garden tomato").fact  # the best bm25 match: short, both words
    newer = [facts.add("owner", f"Garden tomato batch {n} was sown in the north bed").fact
             for n in range(4)]
    facts.add("owner", "Garden shed roof leaks")  # one word only
    facts.add("bob", "Garden tomato for bob")  # newest of all, another user's
    recall = agent.prompts.fact_recall
    ranked = recall.ranked("owner", "the garden tomato?", limit=2)
    assert [f.id for f in ranked] == [newer[3].id, newer[2].id]
    assert old.id not in [f.id for f in recall.ranked("owner", "the garden tomato?", limit=4)]
    assert [f.id for f in recall.ranked("bob", "garden tomato", limit=5)] == [
        f.id for f in facts.search("bob", "garden tomato")]  # bob's one fact: not common
    found = await shown(agent, fake_model, "what about the garden tomato?")
    assert found and all(facts.get("owner", fid).user == "owner" for fid in found)
    assert set(found) <= {f.id for f in newer} | {old.id}


def test_common_words_with_no_fact_holding_both_recall_the_newest_holding_either(agent, facts,
                                                                                monkeypatch):
    monkeypatch.setattr(fact_recall, "COMMON_TERM_DOCS", 2)
    for n in range(3):
        facts.add("owner", f"Garden note {n}")
        facts.add("owner", f"Tomato note {n}")
    ranked = agent.prompts.fact_recall.ranked("owner", "garden tomato", limit=3)
    assert [f.content for f in ranked] == ["Tomato note 2", "Garden note 2", "Tomato note 1"]


def test_a_words_count_outlives_the_turn_that_counted_it(agent, facts, clock, monkeypatch):
    """The home's fact store keeps one recall (issue 34: it was built again for each turn,
    and its word counts with it): a frequent word counted for one turn is not counted again
    by the next within DF_CACHE_SECONDS, whoever asks the store for its recall."""
    from hermes.store.fts import build_match

    monkeypatch.setattr(fact_recall, "FRESH_COUNT", 1)
    term = build_match("kestrel").terms[0]
    for n in range(2):
        facts.add("owner", f"A kestrel sighting number {n}")
    assert agent.prompts.fact_recall is facts.recall
    assert facts.recall.doc_count("owner", term) == 2
    facts.add("owner", "A kestrel nests on the roof")
    assert facts.recall.doc_count("owner", term) == 2          # remembered, not recounted
    clock.advance(seconds=fact_recall.DF_CACHE_SECONDS)
    assert facts.recall.doc_count("owner", term) == 3
