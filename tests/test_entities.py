import pytest

from hermes.config import FactsConfig
from hermes.errors import RefusedWrite
from hermes.memory.facts.entities import EntityStore, extract_candidates, name_key
from hermes.memory.facts.store import FactStore
from hermes.store.db import write_transaction


@pytest.fixture
def config() -> FactsConfig:
    return FactsConfig(aliases={"PostgreSQL": ["Postgres", "postgres db"]})


@pytest.fixture
def entities(db, clock, config) -> EntityStore:
    return EntityStore(db, config, clock)


def ensure(store: EntityStore, user: str, name: str) -> int:
    with write_transaction(store.db):
        return store.ensure(user, name)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Alice Johnson met Bob at Acme.", ["Alice Johnson", "Bob", "Acme"]),
        ("Alice likes tea.", ["Alice"]),  # a single, sentence-initial name is still a name
        ("Yesterday Alice Johnson shipped it.", ["Alice Johnson"]),
        ("The server runs PostgreSQL 16.", ["PostgreSQL"]),
        ("We use \"FastAPI\" and 'pytest' daily.", ["FastAPI", "pytest"]),
        ("Set max_retries in config.settings.toml", ["max_retries", "config.settings.toml"]),
        ("I think Bob's car is red.", ["Bob"]),
        ("Today we ship. Then we rest.", []),
        ("the cat sleeps on the mat", []),
        # a title's period is not a name's end (issue 31: "about Dr, Smith, St, Mary")
        ("The user's doctor is Dr. Smith at St. Mary's hospital", ["Dr. Smith", "St. Mary"]),
        ("Mr. Tanaka is the user's landlord", ["Mr. Tanaka"]),
        # words kept as said are read inside their quotes, not taken whole as a name
        ('The user said: "I moved to Porto."', ["Porto"]),
    ],
)
def test_candidates_from_text(text, expected):
    assert extract_candidates(text) == expected


# A title stays with the name after it, and is never an entity on its own ("Dr. Who" was "Dr").
TITLES = [
    ("The user watches Dr. Who", ["Dr. Who"]),
    ("Dr. Who is the user's favourite show", ["Dr. Who"]),
    ("The user likes Dr. Who.", ["Dr. Who"]),
    ("The user: Dr. Who, season 3", ["Dr. Who"]),
    ("Dr. No is a Bond film", ["Dr. No", "Bond"]),
    ("The user's doctor is Dr. Smith", ["Dr. Smith"]),
    ("The user's daughter goes to St. Mary's", ["St. Mary"]),
    ("Mrs. Doubtfire is a film", ["Mrs. Doubtfire"]),
    ("The user likes Ms. Marvel", ["Ms. Marvel"]),
    ("Prof. Xavier teaches at St. Andrews", ["Prof. Xavier", "St. Andrews"]),
    ("The user met Sr. Gomez and Jr. Smith", ["Sr. Gomez", "Jr. Smith"]),
    ('The user said: "mi dentista es la Dra. López"', ["Dra. López"]),
    ("The user's dentist is Dra. Álvarez", ["Dra. Álvarez"]),
    ("Mme. Dubois teaches the user French", ["Mme. Dubois", "French"]),
    ("The user's mentor is Prof. Dr. Müller", ["Prof. Dr. Müller"]),
    ("The user lives on St. James St. in London", ["St. James", "London"]),
    ("the user met Mr. and Mrs. Smith", ["Mrs. Smith"]),
    ("The user likes Dr.", []),
    ("The user watches Dr. who", []),
    ("Ask the Dr", []),
]


@pytest.mark.parametrize(("text", "expected"), TITLES)
def test_a_title_stays_with_its_name(text, expected):
    assert extract_candidates(text) == expected


def test_a_title_is_no_entity_of_a_stored_fact(db, clock):
    """Through the store: "Dr. Who" is the fact's entity, and no "Dr" entity exists."""
    facts = FactStore(db, FactsConfig(), clock)
    fact = facts.add("owner", "The user's favourite show is Dr. Who").fact
    assert fact.entities == ["Dr. Who"]
    assert [e.name for e in facts.entity_store.list_entities("owner")] == ["Dr. Who"]


def test_sentence_initial_common_words_are_not_names():
    found = extract_candidates("The release went out. Yesterday it broke. However Carol fixed it.")
    assert found == ["Carol"]


def test_resolution_is_case_insensitive_and_alias_aware(entities):
    pg = ensure(entities, "owner", "postgres db")  # configured alias of PostgreSQL
    assert entities.get("owner", pg).name == "PostgreSQL"
    assert set(entities.get("owner", pg).aliases) == {"Postgres", "postgres db"}
    for name in ["PostgreSQL", "postgresql", "POSTGRES", "  Postgres  ", "Postgres DB"]:
        assert entities.resolve_id("owner", name) == pg
    alice = ensure(entities, "owner", "Alice Johnson")
    assert ensure(entities, "owner", "alice   johnson") == alice


def test_fuzzy_resolution_for_near_spellings_only(entities):
    alice = ensure(entities, "owner", "Alice Johnson")
    assert entities.resolve_id("owner", "Alice Jonson") == alice  # one letter off
    assert entities.resolve_id("owner", "Alice Jackson") is None
    sprint = ensure(entities, "owner", "Sprint 12 review")
    assert entities.resolve_id("owner", "Sprint 13 review") is None  # numbers must agree
    assert entities.resolve_id("owner", "Sprint 12 reviews") == sprint
    ensure(entities, "owner", "Bob")
    assert entities.resolve_id("owner", "Rob") is None  # short names never fuzzy-match
    # one letter apart, but two people: the differing word is short or not a respelling
    ensure(entities, "owner", "Yara Fontaine")
    assert entities.resolve_id("owner", "Zara Fontaine") is None
    ensure(entities, "owner", "Umar Kim")
    assert entities.resolve_id("owner", "Uma Kim") is None


def test_threshold_comes_from_config(db, clock):
    strict = EntityStore(db, FactsConfig(entity_match_threshold=100), clock)
    ensure(strict, "owner", "Alice Johnson")
    assert strict.resolve_id("owner", "Alice Jonson") is None


def test_add_alias_and_conflicts(entities):
    entity = entities.add_alias("owner", "Kubernetes", "k8s")
    assert entity.aliases == ["k8s"]
    assert entities.resolve_id("owner", "K8S") == entity.id
    ensure(entities, "owner", "Docker")
    with pytest.raises(RefusedWrite, match="another entity"):
        entities.add_alias("owner", "Kubernetes", "docker")


def test_known_names_are_found_in_text(entities):
    redis = ensure(entities, "owner", "redis")
    atlas = ensure(entities, "owner", "Project Atlas")
    found = entities.known_in("owner", "we moved redis to the box for project atlas, finally")
    assert [i for i, _ in found] == [redis, atlas]
    assert entities.known_in("bob", "we moved redis") == []


def test_entities_are_per_user(entities):
    alice_owner = ensure(entities, "owner", "Alice")
    alice_bob = ensure(entities, "bob", "Alice")
    assert alice_owner != alice_bob
    assert entities.resolve_id("carol", "Alice") is None
    assert [e.name for e in entities.list_entities("carol")] == []
    assert [e.id for e in entities.list_entities("bob")] == [alice_bob]


def test_list_counts_active_facts_only(db, clock, config):
    facts = FactStore(db, config, clock)
    first = facts.add("owner", "Alice likes tea", entities=["Alice"])
    facts.add("owner", "Alice plays chess on Sundays", entities=["Alice"])
    facts.forget("owner", first.id)
    listed = {e.name: e.fact_count for e in facts.entities("owner")}
    assert listed == {"Alice": 1}


def test_names_are_validated(entities):
    with pytest.raises(RefusedWrite):
        ensure(entities, "owner", "  ...  ")
    with pytest.raises(RefusedWrite):
        ensure(entities, "owner", "x" * 200)
    assert name_key("  Alice\tJohnson. ") == "alice johnson"


def test_names_of_reads_only_the_users_own_entities(entities):
    alice = ensure(entities, "owner", "Alice")
    bob = ensure(entities, "bob", "Bob")
    assert entities.names_of("owner", [alice, bob]) == {alice: "Alice"}
    assert entities.names_of("bob", [alice, bob]) == {bob: "Bob"}
    assert entities.names_of("carol", [alice, bob]) == {}
