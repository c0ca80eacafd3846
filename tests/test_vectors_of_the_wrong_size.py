"""A stored vector of the wrong size (a damaged or hand-edited row) must not
turn every search and every turn into a traceback. It is left out (the fact or message is found
by its words), said once in the log, and embedded again by the next index run."""

from __future__ import annotations

import logging

import pytest

np = pytest.importorskip("numpy")

from hermes.config import FactsConfig  # noqa: E402
from hermes.memory.facts.store import FactStore  # noqa: E402
from hermes.memory.facts.vectors import FactVectors  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from tests.histories import say  # noqa: E402
from tests.test_embeddings import ToyEmbedder as MessageToy  # noqa: E402
from tests.test_fact_vectors import ToyEmbedder as FactToy  # noqa: E402


@pytest.mark.parametrize("damage", [b"\x01\x02\x03", b"\x00\x3c" * 3])  # odd bytes; too short
def test_a_fact_vector_of_the_wrong_size_is_left_out_not_raised(db, clock, caplog, damage):
    facts = FactStore(db, FactsConfig(), clock, vectors=FactVectors(db, FactToy()))
    tesla = facts.add("owner", "The user owns a Tesla Model 3").fact
    umbrella = facts.add("owner", "The umbrella is in the car").fact
    assert facts.vectors.index("owner") == 2
    db.execute("UPDATE fact_vectors SET vector = ? WHERE fact_id = ?", [damage, umbrella.id])
    with caplog.at_level(logging.WARNING):
        found = facts.search("owner", "what automobile do I drive?")
        again = facts.search("owner", "umbrella")
    assert [f.id for f in found] == [tesla.id]  # by meaning, the damaged one left out
    assert [f.id for f in again][:1] == [umbrella.id]  # still found by its words, first
    assert sum("wrong size" in r.getMessage() for r in caplog.records) == 1
    assert facts.vectors.index("owner") == 1  # embedded again


@pytest.mark.parametrize("damage", [b"\x01\x02\x03", b"\x00\x3c" * 3])
def test_a_message_vector_of_the_wrong_size_is_left_out_not_raised(db, clock, caplog, damage):
    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, MessageToy()))
    (car,) = say(store, clock, "owner", "my car is blue")
    (rain,) = say(store, clock, "owner", "rain all day")
    store.vectors.index("owner")
    db.execute("UPDATE message_vectors SET vector = ? WHERE message_id = ?", [damage, rain])
    with caplog.at_level(logging.WARNING):
        hits = store.search_messages("owner", "automobile")
        words = store.search_messages("owner", "rain")
    assert [h.message.id for h in hits][:1] == [car]
    assert [h.message.id for h in words][:1] == [rain]
    assert any("wrong size" in r.getMessage() for r in caplog.records)


def test_a_message_vector_damaged_after_it_was_loaded_is_left_out_and_embedded_again(
        db, clock, caplog):
    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, MessageToy()))
    (car,) = say(store, clock, "owner", "my car is blue")
    (rain,) = say(store, clock, "owner", "rain all day")
    (bob_car,) = say(store, clock, "bob", "my car is red")
    store.vectors.index("owner")
    store.vectors.index("bob")
    assert [h.message.id for h in store.search_messages("owner", "automobile")][:1] == [car]
    db.execute("UPDATE message_vectors SET vector = ? WHERE message_id = ?", [b"\x01" * 7, car])
    with caplog.at_level(logging.WARNING):
        hits = store.search_messages("owner", "automobile")  # the held matrix, brought up to date
    assert bob_car not in [h.message.id for h in hits]
    assert sum("wrong size" in r.getMessage() for r in caplog.records) == 1
    # the search re-embedded it (a few a search): found by meaning again, nothing more logged
    assert len(db.execute("SELECT vector FROM message_vectors WHERE message_id = ?",
                          [car]).fetchone()[0]) == 10
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert [h.message.id for h in store.search_messages("owner", "automobile")][:1] == [car]
    assert not caplog.records


def test_db_check_finds_vectors_of_the_wrong_size_and_repair_deletes_only_those(
        cli, hermes_home):
    import sqlite3

    for text in ("Alice deployed redis", "Bob likes tea", "Carol runs Debian"):
        assert cli("facts", "add", text).exit_code == 0
    conn = sqlite3.connect(hermes_home / "hermes.db")
    ids = [r[0] for r in conn.execute("SELECT id FROM facts ORDER BY id")]
    conn.executemany("INSERT INTO fact_vectors (fact_id, user, model, content_key, vector, "
                     "context_vector) SELECT id, user, 'toy', content_key, ?, x'' FROM facts "
                     "WHERE id = ?", [(b"\x00\x3c" * 5, ids[0]), (b"\x00\x3c" * 5, ids[1]),
                                      (b"\x01\x02\x03", ids[2])])
    conn.commit()
    conn.close()
    result = cli("db", "check", "--json")
    assert result.exit_code == 2
    (bad,) = [c for c in result.json()["checks"] if not c["ok"]]
    assert bad["name"] == "vectors" and "1 in fact_vectors" in bad["detail"]
    assert "hermes db check --repair" in bad["detail"]
    repaired = cli("db", "check", "--repair", "--json")
    assert repaired.exit_code == 0
    assert [c["name"] for c in repaired.json()["checks"] if c["repaired"]] == ["vectors"]
    conn = sqlite3.connect(hermes_home / "hermes.db")
    assert [r[0] for r in conn.execute("SELECT fact_id FROM fact_vectors ORDER BY 1")] == ids[:2]
    conn.close()
    assert "ok    vectors: every stored vector has its model's size" in cli("db", "check").stdout
