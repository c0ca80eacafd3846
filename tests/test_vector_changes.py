"""Vectors that stay true: an edited, redacted or deleted message loses its vector, and every
process that holds vectors in memory sees each change (hermes.memory.vectors.matrix, migration
m022), whoever made it. The model is the toy embedder of tests/test_embeddings.py."""

from __future__ import annotations

import subprocess
import sys

import pytest

np = pytest.importorskip("numpy")

from hermes.config import FactsConfig  # noqa: E402
from hermes.memory.facts.store import FactStore  # noqa: E402
from hermes.memory.facts.vectors import FactVectors  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from hermes.memory.vectors import matrix as vector_matrix  # noqa: E402
from hermes.store.db import write_transaction  # noqa: E402
from tests.test_embeddings import ToyEmbedder, say  # noqa: E402

CAR = "what happened to the car?"


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()),
                        redact_secrets=False)


def nearest(vectors, user="owner", query=CAR, k=3):
    return [m for m, cos in vectors.nearest(user, query, k) if cos > 0.5]


def other_process(db_path, sql, *params):
    """Run one statement in another process, through plain sqlite3 (the triggers are the
    database's own: any client that writes fires them)."""
    code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "c.execute('PRAGMA foreign_keys=ON'); c.execute(sys.argv[2], sys.argv[3:]); "
            "c.commit()")
    subprocess.run([sys.executable, "-c", code, str(db_path), sql, *map(str, params)],
                   check=True, timeout=60)


def test_an_edited_message_is_not_found_by_its_old_meaning_and_is_embedded_anew(store, db):
    sold, _ = say(store, store.clock, "owner", "I sold the old automobile", "nice weather")
    assert nearest(store.vectors) == [sold]
    assert store.search_messages("owner", CAR)[0].message.id == sold
    db.execute("UPDATE messages SET content = 'I sold the old [redacted]' WHERE id = ?", [sold])
    assert db.execute("SELECT count(*) FROM message_vectors WHERE message_id = ?",
                      [sold]).fetchone()[0] == 0  # dropped by the edit itself
    # This process's vectors (held since the first search) see it: the next search embeds
    # the message as it now reads.
    assert nearest(store.vectors) == []
    hit = next(h for h in store.search_messages("owner", CAR) if h.message.id == sold)
    assert hit.parts.get("dense", 0.0) < 0.1
    (blob,) = db.execute("SELECT vector FROM message_vectors WHERE message_id = ?",
                         [sold]).fetchone()
    anew = store.vectors.embedder.embed(["owner: I sold the old [redacted]"])[0]
    assert np.allclose(np.frombuffer(blob, np.float16), anew, atol=1e-3)
    # An update that changes nothing (content = content) keeps the vector.
    db.execute("UPDATE messages SET content = content WHERE id = ?", [sold])
    assert db.execute("SELECT count(*) FROM message_vectors WHERE message_id = ?",
                      [sold]).fetchone()[0] == 1


def test_another_process_editing_or_deleting_is_seen_by_a_running_one(store, rt):
    sold, bought = say(store, store.clock, "owner", "I sold the automobile", "a car again")
    assert sorted(nearest(store.vectors)) == sorted([sold, bought])
    other_process(rt.settings.db_path, "UPDATE messages SET content = 'rain' WHERE id = ?",
                  sold)
    assert nearest(store.vectors) == [bought]
    other_process(rt.settings.db_path, "DELETE FROM messages WHERE id = ?", bought)
    assert nearest(store.vectors) == []
    assert store.vectors.matrix("owner").ids.tolist() == [sold]  # re-embedded as "rain"


def test_a_vector_written_for_an_older_message_reaches_a_running_process(store, db):
    """A backlog is embedded newest first: the older messages' vectors come after the newer
    ones, below the highest id a process already holds."""
    old, new = say(store, store.clock, "owner", "the automobile broke", "my puppy")
    db.execute("DELETE FROM message_vectors")
    store.vectors.index("owner", limit=1)  # the newest only
    searching = MessageVectors(db, store.vectors.embedder)
    assert searching._matrix("owner").ids.tolist() == [new]
    MessageVectors(db, store.vectors.embedder).index("owner")  # another one: the older one
    assert searching._matrix("owner").ids.tolist() == [old, new]
    assert nearest(searching) == [old]


def test_another_users_changes_never_reach_my_vectors(store, db):
    mine = say(store, store.clock, "owner", "the automobile broke")
    bobs = say(store, store.clock, "bob", "my car", "another car")
    store.vectors.index("bob")
    held = store.vectors.matrix("owner")
    db.execute("UPDATE messages SET content = 'rain' WHERE id = ?", [bobs[0]])
    store.vectors.index("bob")
    assert vector_matrix.changes_since(db, "message", "owner", "toy", held.seq).ids == []
    assert store.vectors.matrix("owner") is held  # nothing of mine changed: nothing re-read
    assert nearest(store.vectors) == mine
    assert nearest(store.vectors, "bob") == [bobs[1]]


def test_a_process_behind_the_pruned_log_reloads_and_stays_true(store, db):
    first = say(store, store.clock, "owner", "the automobile broke")
    held = store.vectors.matrix("owner")
    db.execute("UPDATE messages SET content = 'rain' WHERE id = ?", first)
    more = say(store, store.clock, "owner", "a car", "a dog", "a vehicle")
    MessageVectors(db, store.vectors.embedder).index("owner")
    with write_transaction(db):
        assert vector_matrix.prune_changes(db, keep=1) > 0
    assert db.execute("SELECT min(seq) FROM vector_changes").fetchone()[0] > held.seq + 1
    assert vector_matrix.changes_since(db, "message", "owner", "toy", held.seq).gap
    assert sorted(nearest(store.vectors, k=5)) == sorted([more[0], more[2]])


def test_a_running_processs_fact_vectors_follow_an_edited_source_and_a_deleted_fact(
        db, clock, rt):
    toy = ToyEmbedder()
    facts = FactStore(db, FactsConfig(), clock, vectors=FactVectors(db, toy))
    sessions = SessionStore(db, clock=clock, redact_secrets=False)
    talk = sessions.create("owner", "terminal")
    said = sessions.append("owner", talk.id, "user", "I finally got my automobile")
    bought = facts.add("owner", "The user bought it last week",
                       source_message_ids=[said.id]).fact
    plain = facts.add("owner", "The user likes green").fact
    facts.vectors.index("owner")
    held = facts.vectors

    def closeness():
        near = held.similarity("owner", CAR).nearest(2)
        return near[bought.id] - near.get(plain.id, 0.0)

    assert closeness() > 0.05
    other_process(rt.settings.db_path, "UPDATE messages SET content = 'rain' WHERE id = ?",
                  said.id)
    assert abs(closeness()) < 0.02  # the fact's own meaning only, before any vector pass
    other_process(rt.settings.db_path, "DELETE FROM facts WHERE id = ?", plain.id)
    assert list(held.similarity("owner", CAR).nearest(5)) == [bought.id]


def test_the_migration_logs_every_vector_write(db):
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {"message_vectors_changes_ai", "message_vectors_changes_ad",
            "fact_vectors_changes_ai", "messages_vector_au", "messages_vector_bd"} <= names


def test_a_quiet_user_is_not_reloaded_on_every_search_once_the_log_is_pruned(store, db):
    """The log is pruned to its newest rows, whoever they are for. A user whose own newest
    change lies in the pruned part was taken to be behind it (a gap) on every search, and
    reloaded whole each time: 0.8 s CPU a search at 90k fact vectors (11 ms held)."""
    say(store, store.clock, "bob", "bob's automobile")
    store.vectors.matrix("bob")
    say(store, store.clock, "owner", "a car", "a dog", "a vehicle", "a boat")
    store.vectors.index("owner")
    with write_transaction(db):
        assert vector_matrix.prune_changes(db, keep=1) > 0
    store.vectors.matrix("bob")  # behind the pruned log: one reload
    held = store.vectors.matrix("bob")
    assert store.vectors.matrix("bob") is held  # nothing of bob's changed since


def test_a_user_who_searches_sees_others_changes_go_by_without_a_reload(store, db):
    say(store, store.clock, "bob", "bob's automobile")
    held = store.vectors.matrix("bob")
    say(store, store.clock, "owner", "a car", "a dog", "a vehicle", "a boat")
    store.vectors.index("owner")
    assert store.vectors.matrix("bob") is held
    with write_transaction(db):
        assert vector_matrix.prune_changes(db, keep=1) > 0
    assert store.vectors.matrix("bob") is held  # it had seen the log past the pruned part


def test_fact_vectors_are_not_reloaded_each_search_once_message_changes_pruned_the_log(
        db, clock, store):
    facts = FactStore(db, FactsConfig(), clock, vectors=FactVectors(db, ToyEmbedder()))
    facts.add("owner", "The user owns an automobile")
    facts.vectors.index("owner")
    facts.vectors.similarity("owner", CAR)
    say(store, store.clock, "owner", "a car", "a dog", "a vehicle", "a boat")
    store.vectors.index("owner")  # message vectors: the log moves on past the fact's change
    with write_transaction(db):
        assert vector_matrix.prune_changes(db, keep=1) > 0
    facts.vectors.similarity("owner", CAR)
    held = facts.vectors._cache["owner"]
    facts.vectors.similarity("owner", CAR)
    assert facts.vectors._cache["owner"] is held


def test_a_bulk_edit_is_embedded_anew_a_few_messages_a_search(store, db, monkeypatch):
    # More edited messages than a search re-embeds (INLINE_INDEX): the rest wait for the next
    # searches instead of being forgotten until a background pass (a home without a daemon
    # has none).
    from hermes.memory.sessions import vectors as message_vectors

    monkeypatch.setattr(message_vectors, "INLINE_INDEX", 2)
    ids = say(store, store.clock, "owner", *[f"the car number {i}" for i in range(5)])
    store.vectors.index("owner")
    assert len(store.vectors.matrix("owner").ids) == 5
    db.execute(f"UPDATE messages SET content = 'rain ' || id WHERE id IN "
               f"({','.join('?' * len(ids))})", ids)
    held = [len(store.vectors.matrix("owner").ids) for _ in range(4)]
    # the first search embeds the two newest (past the newest vector left) and two more of
    # those it was told were edited; the next one the last (forgotten before: [4, 4, 4, 4])
    assert held == [4, 5, 5, 5]
    assert sorted(store.vectors.matrix("owner").ids.tolist()) == sorted(ids)
