"""Fact search trusts a query's words as far as they are specific
(hermes.memory.facts.vectors.word_trust, hermes.memory.words.trust): incidental words leave
the fusion to meaning."""

import pytest

np = pytest.importorskip("numpy")

from hermes.config import FactsConfig  # noqa: E402
from hermes.memory.facts import vectors as fact_vectors  # noqa: E402
from hermes.memory.facts.store import FactStore  # noqa: E402
from hermes.memory.facts.vectors import FactVectors  # noqa: E402
from tests.test_fact_vectors import ToyEmbedder  # noqa: E402

PLACES = ["office", "station", "bakery", "library", "garden", "harbour", "market", "school",
          "clinic", "museum"]


@pytest.fixture
def facts(db, clock):
    return FactStore(db, FactsConfig(), clock, vectors=FactVectors(db, ToyEmbedder()))


def busy_life(facts):
    """Past TRUST_MIN_FACTS facts that say "morning" or "work" (each about another place)."""
    for i in range(fact_vectors.TRUST_MIN_FACTS + 10):
        place = PLACES[i % len(PLACES)]
        facts.add("owner", f"On day {i} the user spent the morning at the {place} for work "
                  f"number {i * 7 + 3}")


def test_incidental_words_leave_the_fusion_to_meaning(facts, monkeypatch):
    busy_life(facts)
    dog = facts.add("owner", "The user adopted a dog from the shelter").fact
    facts.vectors.index("owner")
    message = "the puppy trainer came by this morning before work"
    found = facts.search("owner", message, limit=3, explain=True)
    assert found[0].id == dog.id and found[0].explain["word_trust"] == 0
    # Untrusted words weigh nothing in the fusion: the dog's lead is larger than with the
    # words trusted wholly (TRUST_HIGH <= 0 turns the trust off), where every fact that says
    # "morning" gains bm25's z over it.
    monkeypatch.setattr(fact_vectors, "TRUST_HIGH", -1.0)
    whole = facts.search("owner", message, limit=3, explain=True)
    assert whole[0].explain["word_trust"] == 1
    assert found[0].score - found[1].score > whole[0].score - whole[1].score


def test_specific_words_are_trusted(facts):
    busy_life(facts)
    vet = facts.add("owner", "The dog sees the vet on Tuesdays").fact
    facts.vectors.index("owner")
    found = facts.search("owner", "when does the dog see the vet?", limit=3, explain=True)
    assert found[0].id == vet.id and found[0].explain["word_trust"] == 1


def test_a_small_store_trusts_its_words(facts):
    dog = facts.add("owner", "The user adopted a dog from the shelter").fact
    facts.add("owner", "The user spent the morning at work")
    facts.vectors.index("owner")
    found = facts.search("owner", "the puppy came by this morning", limit=2, explain=True)
    assert found[0].explain["word_trust"] == 1 and dog.id in [f.id for f in found]


def test_the_wordless_nearest_fact_keeps_a_place_among_the_best_five(facts, monkeypatch):
    busy_life(facts)
    dog = facts.add("owner", "The user adopted a dog from the shelter").fact
    facts.vectors.index("owner")
    message = "the puppy trainer came by this morning before work"
    # The words trusted wholly and meaning weighed little: every fact that says "morning" and
    # "work" passes the dog.
    monkeypatch.setattr(fact_vectors, "TRUST_HIGH", -1.0)
    monkeypatch.setattr(fact_vectors, "DENSE_WEIGHT", 0.05)
    monkeypatch.setattr(fact_vectors, "KEEP_NEAREST", 0)
    buried = [f.id for f in facts.search("owner", message, limit=20)]
    assert dog.id not in buried[:5]
    monkeypatch.setattr(fact_vectors, "KEEP_NEAREST", 5)
    kept = facts.search("owner", message, limit=20, explain=True)
    assert [f.id for f in kept].index(dog.id) == 4 and kept[4].explain["nearest_kept"]
    assert kept[3].score >= kept[4].score >= kept[5].score
    # already among the best: left where the fusion put it
    monkeypatch.setattr(fact_vectors, "DENSE_WEIGHT", 1.5)
    first = facts.search("owner", message, limit=20, explain=True)
    assert first[0].id == dog.id and "nearest_kept" not in first[0].explain


def test_meanings_second_is_kept_when_the_words_are_partly_incidental(facts, monkeypatch):
    for i in range(20):  # 'morning' and 'work' in each: all among the word ranking's best
        facts.add("owner", f"On day {i} the user spent the morning at the "
                  f"{PLACES[i % len(PLACES)]} for work")
    adopted = facts.add("owner", "The user adopted a dog from the shelter").fact
    facts.add("owner", "The user walks the dog every morning")  # as near, and holds a word
    facts.vectors.index("owner")
    message = "the puppy trainer came by this morning before work"
    monkeypatch.setattr(fact_vectors, "DENSE_WEIGHT", 0.05)  # the words bury the dog

    def ranked(trust: float) -> list:
        monkeypatch.setattr(fact_vectors, "word_trust", lambda *a, **k: trust)
        return facts.search("owner", message, limit=20, explain=True)

    # Meaning's first holds a word; its second holds none and is kept among the best five
    # while the words are not trusted wholly.
    half = ranked(0.5)
    assert [f.id for f in half].index(adopted.id) == 4 and half[4].explain["nearest_kept"]
    assert adopted.id not in [f.id for f in ranked(1.0)][:5]
    monkeypatch.setattr(fact_vectors, "KEEP_AMONG", 1)
    assert adopted.id not in [f.id for f in ranked(0.5)][:5]


@pytest.fixture
def floor(monkeypatch):
    """The toy model's floor of meaning: a fact of the query's one concept reaches it, a fact
    of that concept and another (cosine ~0.71) is a near miss from half of it, a fact of no
    concept (~0.47) is under half of it."""
    from hermes.memory.embeddings import embedders

    monkeypatch.setitem(embedders.MEANING_FLOOR, "toy", 0.95)
    return 0.95


def test_a_near_miss_by_meaning_takes_an_incidental_word_matchs_place(facts, floor,
                                                                       monkeypatch):
    busy_life(facts)
    dog = facts.add("owner", "The user adopted a dog from the shelter").fact
    wet = facts.add("owner", "The user's dog hates the rain").fact  # no word of the message
    facts.vectors.index("owner")
    message = "the puppy was sick at the clinic"  # 'clinic': 11 facts about another place
    found = facts.search("owner", message, limit=20, explain=True)
    ids = [f.id for f in found]
    assert found[0].explain["word_trust"] == 0
    assert ids[:2] == [dog.id, wet.id] and found[1].fill_in and not found[0].fill_in
    # never a longer list than the matches alone (11 facts with the word, the dog by meaning)
    assert len(found) == 12
    # the words trusted wholly, or no share of the floor: the near miss is no candidate
    monkeypatch.setattr(fact_vectors, "FILL_IN_SHARE", 1.0)
    assert wet.id not in [f.id for f in facts.search("owner", message, limit=20)]


def test_trusted_words_bring_no_near_misses(facts, floor):
    busy_life(facts)
    vet = facts.add("owner", "The dog sees the vet on Tuesdays").fact
    wet = facts.add("owner", "The user's puppy hates the rain").fact  # no word of the question
    facts.vectors.index("owner")
    found = facts.search("owner", "when does the dog see the vet?", limit=20, explain=True)
    assert found[0].id == vet.id and found[0].explain["word_trust"] == 1
    assert wet.id not in [f.id for f in found] and not any(f.fill_in for f in found)


def test_per_turn_recall_shows_nothing_the_words_or_meaning_do_not_vouch_for(facts, floor,
                                                                             clock):
    from hermes.memory.facts.recall import FactRecall

    for i in range(fact_vectors.TRUST_MIN_FACTS + 10):
        facts.add("owner", f"On day {i} the user took money to the bank in the morning "
                  f"at the {PLACES[i % len(PLACES)]}")
    dog = facts.add("owner", "The user adopted a dog from the shelter").fact
    wet = facts.add("owner", "The user's dog hates the rain").fact
    facts.vectors.index("owner")
    message = "my puppy chewed the morning paper"  # 'morning': in every fact about money
    # A search a person reads ranks the near miss and the incidental word matches too ...
    listed = facts.search("owner", message, limit=20, explain=True)
    assert listed[0].id == dog.id and listed[0].explain["word_trust"] == 0
    assert {f.id for f in listed if not f.fill_in} == {dog.id}
    assert wet.id in [f.id for f in listed] and len(listed) == 20
    # ... per turn none of them is returned, nor holds a place
    ranked = facts.search("owner", message, limit=20, any_word=True, explain=True)
    assert [f.id for f in ranked] == [dog.id] and ranked[0].explain["word_trust"] == 0
    recalled = FactRecall(facts, clock).ranked("owner", message, limit=20)
    assert [f.id for f in recalled] == [dog.id]


def test_per_turn_a_word_match_under_the_floor_needs_words_trusted_wholly(facts, floor, clock,
                                                                         monkeypatch):
    from hermes.memory.facts.recall import FactRecall

    dog = facts.add("owner", "The user adopted a dog from the shelter").fact
    paper = facts.add("owner", "The user reads the newspaper at breakfast").fact  # no concept
    facts.vectors.index("owner")
    message = "my puppy chewed the newspaper"  # per turn the words searched: 'newspaper'

    def shown(trust: float) -> list[int]:
        monkeypatch.setattr(fact_vectors, "word_trust", lambda *a, **k: trust)
        return [f.id for f in FactRecall(facts, clock).ranked("owner", message, limit=5)]

    assert shown(1.0) == [dog.id, paper.id]
    assert shown(0.5) == [dog.id]  # the word is half incidental: the paper is a fill-in


def test_common_words_alone_are_weak_evidence_unless_the_query_names_a_time(facts,
                                                                            monkeypatch):
    busy_life(facts)  # 'morning' in every fact
    facts.add("owner", "The user adopted a dog from the shelter")
    facts.vectors.index("owner")
    # Every fact holds the query's one word, and is as near in meaning as any: whole coverage,
    # whole agreement. But the word weighs ~0.02 where a word in no fact weighs ~5.4.
    assert facts.search("owner", "how was the morning?", limit=3,
                        explain=True)[0].explain["word_trust"] == 0
    named = facts.search("owner", "how was the morning last week?", limit=3, explain=True)
    assert named[0].explain["word_trust"] == 1
    # per turn the message is cut to its selective words (the rarest dropped): not weighed
    assert facts.search("owner", "how was the morning?", limit=3, any_word=True,
                        explain=True)[0].explain["word_trust"] == 1
    monkeypatch.setattr(fact_vectors, "TRUST_MIN_WEIGHT", 0.0)
    assert facts.search("owner", "how was the morning?", limit=3,
                        explain=True)[0].explain["word_trust"] == 1


def test_per_turn_the_whole_message_judges_its_selective_words_too(facts, clock):
    from hermes.memory.facts.recall import FactRecall

    busy_life(facts)
    facts.add("owner", "The user adopted a dog from the shelter")
    facts.vectors.index("owner")
    message = "the puppy trainer came by this morning before work"
    recall = FactRecall(facts, clock)
    words = recall.selective_query("owner", message)
    assert words == '"morning" "work"'  # 'puppy' and 'trainer': in no fact, dropped
    # The words searched, alone: every fact holding them is as near as any other (trusted).
    alone = facts.search("owner", words, limit=3, any_word=True, explain=True)
    assert alone[0].explain["word_trust"] == 1
    # The message's own words no fact holds say they are incidental: judged half on it.
    judged = facts.search("owner", words, limit=3, any_word=True, meaning=message,
                          explain=True)
    assert judged[0].explain["word_trust"] == 0.5

