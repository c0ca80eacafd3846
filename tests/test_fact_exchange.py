"""A fact is found by the words of the exchange it was learned from (m018: facts_fts's exchange
column, the text of its source messages), kept in step with every write of the fact and of its
messages, and only ever made of the same user's messages."""

from __future__ import annotations

import sqlite_utils
from sqlite_utils.migrations import Migrations

from hermes.config import FactsConfig
from hermes.memory.facts.records import EXCHANGE_WEIGHT
from hermes.memory.facts.store import FactStore
from hermes.memory.sessions.store import SessionStore
from hermes.memory.transfer import export_user, import_user
from hermes.store.db import connect, migrate
from hermes.store.migrations import migrations


def stores(db, clock):
    return FactStore(db, FactsConfig(), clock), SessionStore(db, clock=clock,
                                                             redact_secrets=False)


def found(facts: FactStore, user: str, query: str) -> list[int]:
    return [f.id for f in facts.search(user, query, min_trust=0.0)]


def exchange(db, fact_id: int) -> str:
    row = db.execute("SELECT text FROM fact_exchanges WHERE fact_id = ?", [fact_id]).fetchone()
    return row[0] if row else ""


def check_index(db) -> None:
    """FTS5's integrity-check against its content (rank 1): raises when they disagree."""
    db.execute("INSERT INTO facts_fts(facts_fts, rank) VALUES ('integrity-check', 1)")


def test_a_fact_is_found_by_the_words_of_its_exchange(db, clock):
    facts, sessions = stores(db, clock)
    talk = sessions.create("owner", "terminal")
    said = sessions.append("owner", talk.id, "user", "I finally got my Tesla yesterday")
    car = facts.add("owner", "The user bought a new car", source_session_id=talk.id,
                    source_message_ids=[said.id]).fact
    plain = facts.add("owner", "The user likes Tesla coils").fact
    # All words in the fact itself first (a fact holding "tesla" only in its exchange holds
    # none of the query's words), then any word, its exchange's too.
    assert found(facts, "owner", "tesla") == [plain.id]
    assert found(facts, "owner", "tesla yesterday") == [car.id, plain.id]
    assert EXCHANGE_WEIGHT > 0
    assert exchange(db, car.id) == "I finally got my Tesla yesterday"
    check_index(db)


def test_another_users_message_never_becomes_my_facts_exchange(db, clock):
    facts, sessions = stores(db, clock)
    bobs = sessions.append("bob", sessions.create("bob", "terminal").id, "user",
                           "my zebra costume is ready")
    mine = sessions.append("owner", sessions.create("owner", "terminal").id, "user",
                           "the quokka ate my lunch")
    # A fact of mine that names bob's message id (a forged or damaged source list).
    fact = facts.add("owner", "The user had lunch", source_message_ids=[bobs.id, mine.id]).fact
    assert exchange(db, fact.id) == "the quokka ate my lunch"
    assert found(facts, "owner", "zebra") == []
    assert found(facts, "owner", "quokka") == [fact.id]
    # Bob editing (or deleting) his message never reaches my fact either.
    db.execute("UPDATE messages SET content = 'my zebra ate a quokka' WHERE id = ?", [bobs.id])
    db.execute("DELETE FROM messages WHERE id = ?", [bobs.id])
    assert exchange(db, fact.id) == "the quokka ate my lunch"
    assert found(facts, "bob", "quokka") == []
    check_index(db)


def test_merge_and_update_bring_their_new_sources_into_the_exchange(db, clock):
    facts, sessions = stores(db, clock)
    talk = sessions.create("owner", "terminal")
    first = sessions.append("owner", talk.id, "user", "we adopted a greyhound")
    again = sessions.append("owner", talk.id, "user", "the rescue shelter called")
    fact = facts.add("owner", "The user has a dog", source_message_ids=[first.id]).fact
    merged = facts.add("owner", "The user has a dog.", source_message_ids=[again.id])
    assert merged.status == "merged" and merged.id == fact.id
    assert found(facts, "owner", "shelter") == [fact.id]
    later = sessions.append("owner", sessions.create("owner", "terminal").id, "user",
                            "she is called Biscuit")
    new = facts.update("owner", fact.id, "The user has a dog named Biscuit",
                       source_message_ids=[later.id])
    assert found(facts, "owner", "called") == [new.id]  # the new exchange's word
    assert found(facts, "owner", "shelter") == []  # only the superseded version had it
    assert exchange(db, new.id) == "she is called Biscuit"
    check_index(db)


def test_the_exchange_holds_the_end_of_the_message_its_first_source_answered(db, clock):
    facts, sessions = stores(db, clock)
    talk = sessions.create("owner", "terminal")
    sessions.append("owner", talk.id, "user", "an opening about marmalade")
    asked = sessions.append("owner", talk.id, "assistant",
                            "x " * 400 + "which car did you go for in the end?")
    sessions.append("owner", talk.id, "tool", "a tool result about kumquats")
    said = sessions.append("owner", talk.id, "user", "A Tesla, finally.")
    fact = facts.add("owner", "The user bought one", source_message_ids=[said.id]).fact
    # The question it answered finds it; the tool output between does not count.
    assert found(facts, "owner", "car") == [fact.id]
    assert found(facts, "owner", "kumquats") == []
    # Only the end of a long message answered, after the sources.
    text = exchange(db, fact.id)
    assert text.startswith("A Tesla, finally.\n") and text.endswith("in the end?")
    assert len(text) < len("A Tesla, finally.") + 602
    # Editing the message answered reaches the fact; deleting it brings in the one before.
    db.execute("UPDATE messages SET content = 'which bicycle?' WHERE id = ?", [asked.id])
    assert found(facts, "owner", "car") == [] and found(facts, "owner", "bicycle") == [fact.id]
    db.execute("DELETE FROM messages WHERE id = ?", [asked.id])
    assert found(facts, "owner", "bicycle") == []
    assert found(facts, "owner", "marmalade") == [fact.id]
    check_index(db)


def test_the_message_answered_is_the_users_own(db, clock):
    facts, sessions = stores(db, clock)
    bob_talk = sessions.create("bob", "terminal")
    sessions.append("bob", bob_talk.id, "user", "bob asks about the zeppelin")
    bobs = sessions.append("bob", bob_talk.id, "user", "bob answers")
    # My fact names only bob's message: no exchange at all, and nothing before it.
    fact = facts.add("owner", "The user answered", source_message_ids=[bobs.id]).fact
    assert exchange(db, fact.id) == "" and found(facts, "owner", "zeppelin") == []
    assert db.execute("SELECT count(*) FROM fact_sources").fetchone()[0] == 0
    # A row of bob's inside my session (damage) is never the message my fact answered.
    talk = sessions.create("owner", "terminal")
    db.execute("INSERT INTO messages (session_id, user, role, content, created_at) "
               "VALUES (?, 'bob', 'user', 'bob mentions a zeppelin', 't')", [talk.id])
    said = sessions.append("owner", talk.id, "user", "mine")
    fact = facts.add("owner", "The user said mine", source_message_ids=[said.id]).fact
    assert exchange(db, fact.id) == "mine" and found(facts, "owner", "zeppelin") == []
    assert db.execute("SELECT message_id FROM fact_sources WHERE fact_id = ?",
                      [fact.id]).fetchall() == [(said.id,)]


def test_forget_restore_and_purge_keep_the_exchange_in_step(db, clock):
    facts, sessions = stores(db, clock)
    said = sessions.append("owner", sessions.create("owner", "terminal").id, "user",
                           "my flight to Reykjavik leaves Monday")
    fact = facts.add("owner", "The user travels soon", source_message_ids=[said.id]).fact
    facts.forget("owner", fact.id)
    assert found(facts, "owner", "reykjavik") == []
    facts.restore("owner", fact.id)
    assert found(facts, "owner", "reykjavik") == [fact.id]
    facts.purge("owner", fact.id)
    assert db.execute("SELECT count(*) FROM fact_exchanges").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM fact_sources").fetchone()[0] == 0
    # A row of bob's inside my session (damage) is never the message my fact answered.
    talk = sessions.create("owner", "terminal")
    db.execute("INSERT INTO messages (session_id, user, role, content, created_at) "
               "VALUES (?, 'bob', 'user', 'bob mentions a zeppelin', 't')", [talk.id])
    said = sessions.append("owner", talk.id, "user", "mine")
    fact = facts.add("owner", "The user said mine", source_message_ids=[said.id]).fact
    assert exchange(db, fact.id) == "mine" and found(facts, "owner", "zeppelin") == []
    assert db.execute("SELECT message_id FROM fact_sources WHERE fact_id = ?",
                      [fact.id]).fetchall() == [(said.id,)]
    check_index(db)


def test_an_edited_or_deleted_source_message_reindexes_its_facts(db, clock):
    facts, sessions = stores(db, clock)
    talk = sessions.create("owner", "terminal")
    said = sessions.append("owner", talk.id, "user", "my password is hunter2 for the router")
    kept = sessions.append("owner", talk.id, "assistant", "noted, the router is in the attic")
    fact = facts.add("owner", "The user has a router",
                     source_message_ids=[said.id, kept.id]).fact
    assert found(facts, "owner", "hunter2") == [fact.id]
    # Redaction rewrites stored messages: the secret leaves the fact index as well.
    db.execute("UPDATE messages SET content = 'my password is [REDACTED] for the router' "
               "WHERE id = ?", [said.id])
    assert found(facts, "owner", "hunter2") == []
    assert "hunter2" not in exchange(db, fact.id)
    db.execute("DELETE FROM messages WHERE id = ?", [kept.id])
    assert found(facts, "owner", "attic") == []
    assert exchange(db, fact.id) == "my password is [REDACTED] for the router"
    check_index(db)


def test_an_imported_fact_is_found_by_its_imported_exchange(rt, clock, tmp_path):
    facts, sessions = stores(rt.db, clock)
    said = sessions.append("owner", sessions.create("owner", "terminal").id, "user",
                           "we moved to Lisbon in March")
    facts.add("owner", "The user moved house", source_message_ids=[said.id])
    lines = list(export_user(rt.db, "owner"))
    home = connect(tmp_path / "other.db")
    # The other home already has messages, so the imported ids are remapped.
    other_facts, other_sessions = stores(home, clock)
    other_sessions.append("carol", other_sessions.create("carol", "terminal").id, "user",
                          "a Lisbon tram ride")
    import_user(home, lines, user="dave")
    (fact,) = other_facts.list_facts("dave")
    assert found(other_facts, "dave", "lisbon") == [fact.id]
    assert exchange(home, fact.id) == "we moved to Lisbon in March"
    assert found(other_facts, "carol", "lisbon") == []
    check_index(home)


def test_the_migration_indexes_the_exchange_of_existing_facts(tmp_path):
    db = sqlite_utils.Database(tmp_path / "old.db")
    db.execute("PRAGMA foreign_keys=ON")
    before = Migrations("hermes")
    names = [m.name for m in migrations._migrations]
    before._migrations = migrations._migrations[:names.index("m018_facts_fts_exchange")]
    before.apply(db)
    for user in ("owner", "bob"):
        db.execute("INSERT INTO sessions (user, source, started_at, last_active_at) "
                   "VALUES (?, 'terminal', 't', 't')", [user])
    db.execute("INSERT INTO messages (id, session_id, user, role, speaker, content, created_at) "
               "VALUES (5, 1, 'owner', 'user', 'Ann', 'the sourdough starter died', 't'), "
               "(6, 2, 'bob', 'user', NULL, 'bob bakes baguettes', 't')")
    db.execute("INSERT INTO facts (user, content, content_key, created_at, updated_at, "
               "source_message_ids) VALUES ('owner', 'The user bakes bread', 'k', 't', 't', "
               "'[5, 6]'), ('owner', 'The user reads', 'r', 't', 't', 'not json')")
    db.conn.commit()
    migrate(db)
    facts = FactStore(db, FactsConfig())
    assert found(facts, "owner", "sourdough") == [1]
    assert found(facts, "owner", "baguettes") == []
    # A damaged source list counts as no sources (the migration does not fail on it).
    assert db.execute("SELECT rowid FROM facts_fts WHERE facts_fts MATCH 'reads'").fetchall() \
        == [(2,)]
    assert exchange(db, 1) == "Ann: the sourdough starter died"
    check_index(db)


def test_a_duplicate_is_decided_by_the_facts_own_words_not_its_exchange(db, clock):
    facts, sessions = stores(db, clock)
    talk = sessions.create("owner", "terminal")
    original = facts.add("owner", "The user drinks oat milk flat white coffee").fact
    said = sessions.append("owner", talk.id, "user", "she drinks her white coffee daily")
    # Newer facts whose exchanges hold the same words crowd the candidates (the newest first)
    for i in range(60):
        facts.add("owner", f"The user mentioned topic number {i}",
                  source_message_ids=[said.id])
    merged = facts.add("owner", "The user drinks oat milk flat white coffee daily")
    assert merged.status == "merged" and merged.id == original.id


def test_m019_adds_the_message_answered_to_facts_indexed_by_m018(tmp_path):
    db = sqlite_utils.Database(tmp_path / "m018.db")
    db.execute("PRAGMA foreign_keys=ON")
    before = Migrations("hermes")
    names = [m.name for m in migrations._migrations]
    before._migrations = migrations._migrations[:names.index(
        "m019_exchange_with_the_message_answered")]
    before.apply(db)
    db.execute("INSERT INTO sessions (user, source, started_at, last_active_at) "
               "VALUES ('owner', 'terminal', 't', 't')")
    db.execute("INSERT INTO messages (id, session_id, user, role, content, created_at) VALUES "
               "(1, 1, 'owner', 'assistant', 'what instrument do you play?', 't'), "
               "(2, 1, 'owner', 'user', 'the cello, badly', 't')")
    db.execute("INSERT INTO facts (user, content, content_key, created_at, updated_at, "
               "source_message_ids) VALUES ('owner', 'The user plays music', 'k', 't', 't', "
               "'[2]')")
    assert exchange(db, 1) == "the cello, badly"  # m018: the sources only
    db.conn.commit()
    migrate(db)
    assert exchange(db, 1) == "the cello, badly\nwhat instrument do you play?"
    assert found(FactStore(db, FactsConfig()), "owner", "instrument") == [1]
    assert db.execute("SELECT message_id, answered FROM fact_sources").fetchall() == [
        (1, 1), (2, 0)]
    check_index(db)
