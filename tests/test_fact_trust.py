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
