"""What a turn's fact recall remembers between turns must not hide a fact
written since. FactRecall remembers a word's count among the user's facts for DF_CACHE_SECONDS
(hermes.memory.facts.recall); a count only orders words by rarity, but a remembered 0 drops the
word from the search altogether, so it must not outlive a fact added with that word."""

from __future__ import annotations

from hermes.config import FactsConfig
from hermes.memory.facts import recall as fact_recall
from hermes.memory.facts.recall import FactRecall
from hermes.memory.facts.store import FactStore


def test_a_fact_added_after_its_word_was_counted_as_none_of_mine_is_recalled(
        db, clock, monkeypatch):
    monkeypatch.setattr(fact_recall, "FRESH_COUNT", 1)  # two facts of anyone: a remembered count
    monkeypatch.setattr(fact_recall, "COMMON_TERM_DOCS", 50)
    facts = FactStore(db, FactsConfig(), clock)
    for i in range(4):  # "heron" is bob's word; none of mine hold it
        facts.add("bob", f"Bob photographed a heron at the lake, picture {i}")
    facts.add("owner", "The garden fence was painted green")
    recall = FactRecall(facts, clock)
    assert recall.ranked("owner", "where is the heron?", limit=8) == []
    mine = facts.add("owner", "The heron lives in the reeds behind the boathouse").fact
    clock.advance(seconds=5)  # the next turn, well inside DF_CACHE_SECONDS
    found = recall.ranked("owner", "where is the heron?", limit=8)
    assert [f.id for f in found] == [mine.id]


def test_a_restored_fact_is_recalled_by_a_word_counted_while_it_was_forgotten(
        db, clock, monkeypatch):
    monkeypatch.setattr(fact_recall, "FRESH_COUNT", 1)
    monkeypatch.setattr(fact_recall, "COMMON_TERM_DOCS", 50)
    facts = FactStore(db, FactsConfig(), clock)
    for i in range(3):
        facts.add("bob", f"Bob's kayak trip number {i}")
    mine = facts.add("owner", "The kayak is stored in the garage loft").fact
    facts.forget("owner", mine.id)
    recall = FactRecall(facts, clock)
    assert recall.ranked("owner", "where is the kayak?", limit=8) == []
    clock.advance(seconds=5)  # the next command, then the next turn
    facts.restore("owner", mine.id)
    clock.advance(seconds=5)
    assert [f.id for f in recall.ranked("owner", "where is the kayak?", limit=8)] == [mine.id]
