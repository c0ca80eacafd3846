"""Near-duplicate detection: respellings merge, other names never do."""

from __future__ import annotations

import pytest

from hermes.config import FactsConfig
from hermes.memory.facts.store import FactStore


@pytest.fixture
def facts(db, clock) -> FactStore:
    return FactStore(db, FactsConfig(), clock)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Alice moved to Berlin", "Alice moved to Bern"),
        ("Bob edits code in Vim", "Bob edits code in Vi"),
        ("Karen leads the platform team", "Karin leads the platform team"),
        ("The platform team is led by Karen", "The platform team is led by Karin"),
    ],
)
@pytest.mark.parametrize("with_entities", [False, True])
def test_a_different_name_is_a_different_fact(facts, first, second, with_entities):
    names = (lambda text: [text.split()[0]]) if with_entities else (lambda text: None)
    one = facts.add("owner", first, entities=names(first))
    two = facts.add("owner", second, entities=names(second))
    assert (one.status, two.status) == ("created", "created")
    assert two.id != one.id
    assert facts.get("owner", one.id).content == first
    assert facts.get("owner", two.id).content == second
    assert {f.content for f in facts.list_facts("owner")} == {first, second}


def test_a_respelt_common_word_still_merges(facts):
    first = facts.add("owner", "Alice deployed the monitoring stack", entities=["Alice"])
    again = facts.add("owner", "Alice deployed the monitorng stack", entities=["Alice"])
    assert (again.id, again.status, again.match) == (first.id, "merged", "near")
