"""`hermes import` of a crafted file never reaches another user's rows (issue 11, part 4).

Every imported row is written for the importing user, ids are renumbered where this home has
them already, every reference is remapped inside the file and a reference to anything else
refuses the file; the end record catches a file cut short; the table list is one list.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from hermes.clock import FakeClock
from hermes.config import load_settings
from hermes.memory.basic import BasicMemory
from hermes.memory.operations import MemoryOperations, Scope
from hermes.memory.transfer import (
    EXPORT_END,
    EXPORTED_TABLES,
    NOT_EXPORTED,
    export_user,
    sealed_lines,
)
from hermes.runtime import Runtime
from hermes.store.db import connect


def seed(rt: Runtime, user: str) -> None:
    """Every tier, written the way Hermes writes it, plus the rows that hang off messages."""
    BasicMemory(rt.db, clock=rt.clock).add(user, f"{user} runs Debian 13")
    facts = rt.memory.facts
    old = facts.add(user, "The server runs PostgreSQL 15", entities=["PostgreSQL"]).id
    facts.update(user, old, "The server runs PostgreSQL 16")
    facts.entity_store.add_alias(user, "PostgreSQL", "pg")
    sessions = rt.memory.sessions
    session = sessions.create(user, "discord")
    sessions.append(user, session.id, "user", "which postgres do we run?")
    reply = sessions.append(user, session.id, "assistant", "PostgreSQL 16 on the server")
    sessions.append(user, session.id, "user", "thanks")
    fact_id = facts.search(user, "PostgreSQL", limit=1)[0].id
    db = rt.db
    with db.conn:
        db.execute("INSERT INTO shown_facts (message_id, fact_id) VALUES (?, ?)",
                   [reply.id, fact_id])
        db.execute("INSERT INTO message_refs (ref, message_id, user) VALUES (?, ?, ?)",
                   [f"discord:{user}:{reply.id}", reply.id, user])
        db.execute("INSERT INTO extraction_runs (user, session_id, first_message_id, "
                   "last_message_id, status, started_at) VALUES (?, ?, ?, ?, 'done', ?)",
                   [user, session.id, reply.id - 1, reply.id, "2026-11-29T12:00:00.000000Z"])
        db.execute("UPDATE sessions SET extracted_through = ? WHERE id = ?",
                   [reply.id, session.id])
        db.execute("UPDATE facts SET source_session_id = ?, source_message_ids = ? WHERE id = ?",
                   [session.id, json.dumps([reply.id - 1]), fact_id])
    MemoryOperations(rt.memory).set_reply_rating(Scope(user), reply.id, "discord:42", False)


@pytest.fixture
def bob_home(tmp_path):
    """A home where bob has memory in every tier."""
    home = tmp_path / "shared"
    rt = Runtime(load_settings(home=home), clock=FakeClock("2026-11-29T12:00:00+00:00"))
    seed(rt, "bob")
    rt.close()
    return home


@pytest.fixture
def mallory_records(tmp_path):
    """An honest export of mallory from another home: its ids are the same as bob's."""
    rt = Runtime(load_settings(home=tmp_path / "elsewhere"),
                 clock=FakeClock("2026-11-29T12:00:00+00:00"))
    seed(rt, "mallory")
    records = [json.loads(line) for line in export_user(rt.db, "mallory")]
    rt.close()
    return [r for r in records if r["type"] != EXPORT_END]


def write(tmp_path, records, name="crafted.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in sealed_lines(records)), encoding="utf-8")
    return path


def bob_export(cli, home):
    return cli("--home", str(home), "export", "--user", "bob").stdout


def rows_not_of(db_path, user):
    """Every row of a user table that belongs to someone else than ``user`` or bob, and every
    link row that joins rows of two different users."""
    db = sqlite3.connect(db_path)
    bad = []
    for table in ("basic_memory", "entities", "entity_aliases", "facts", "fact_history",
                  "sessions", "messages", "message_refs", "extraction_runs", "reply_ratings"):
        bad += [(table, r) for r in db.execute(
            f"SELECT * FROM {table} WHERE user NOT IN (?, 'bob')", [user])]
    mixed = {
        "fact_entities": "SELECT * FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
                         "JOIN entities e ON e.id = fe.entity_id WHERE f.user != e.user",
        "shown_facts": "SELECT * FROM shown_facts sf JOIN messages m ON m.id = sf.message_id "
                       "JOIN facts f ON f.id = sf.fact_id WHERE m.user != f.user",
        "messages": "SELECT * FROM messages m JOIN sessions s ON s.id = m.session_id "
                    "WHERE m.user != s.user",
        "entity_aliases": "SELECT * FROM entity_aliases a JOIN entities e ON e.id = a.entity_id "
                          "WHERE a.user != e.user",
        "fact_history": "SELECT * FROM fact_history h JOIN facts f ON f.id = h.fact_id "
                        "WHERE h.user != f.user",
        "extraction_runs": "SELECT * FROM extraction_runs r JOIN sessions s ON "
                           "s.id = r.session_id WHERE r.user != s.user",
        "reply_ratings": "SELECT * FROM reply_ratings r JOIN messages m ON m.id = r.message_id "
                         "WHERE r.user != m.user",
        "message_refs": "SELECT * FROM message_refs r JOIN messages m ON m.id = r.message_id "
                        "WHERE r.user != m.user",
        "facts": "SELECT * FROM facts f JOIN facts g ON g.id = f.superseded_by "
                 "WHERE f.user != g.user",
    }
    for table, sql in mixed.items():
        bad += [(table, r) for r in db.execute(sql)]
    db.close()
    return bad


def test_an_honest_file_with_colliding_ids_lands_in_its_own_user_only(cli, tmp_path, bob_home,
                                                                     mallory_records):
    before = bob_export(cli, bob_home)
    result = cli("--home", str(bob_home), "import", str(write(tmp_path, mallory_records)),
                 "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["renumbered"] > 0
    assert bob_export(cli, bob_home) == before  # not one of bob's rows changed
    assert rows_not_of(bob_home / "hermes.db", "mallory") == []
    # mallory's memory is whole: same content, new ids, links intact
    mallory = [json.loads(x) for x in cli("--home", str(bob_home), "export", "--user",
                                          "mallory").stdout.splitlines()]
    assert [r["type"] for r in mallory] == [r["type"] for r in mallory_records] + [EXPORT_END]
    session = next(r for r in mallory if r["type"] == "sessions")
    assert [m["content"] for m in session["messages"]] == [
        "which postgres do we run?", "PostgreSQL 16 on the server", "thanks"]
    reply_id = session["messages"][1]["id"]
    assert session["row"]["extracted_through"] == reply_id
    run = next(r for r in mallory if r["type"] == "extraction_runs")["row"]
    assert (run["session_id"], run["first_message_id"], run["last_message_id"]) == (
        session["row"]["id"], reply_id - 1, reply_id)
    rating = next(r for r in mallory if r["type"] == "reply_ratings")["row"]
    shown = next(r for r in mallory if r["type"] == "shown_facts")["row"]
    assert rating["message_id"] == reply_id == shown["message_id"]
    assert list(json.loads(rating["applied"])) == [str(shown["fact_id"])]
    # bob's search still works (it raised KeyError when a message of mallory sat in his session)
    rt = Runtime(load_settings(home=bob_home))
    store = rt.memory.sessions
    hits = store.search_messages("bob", "postgres")
    assert hits and {h.session.user for h in hits} == {"bob"}
    assert store.get("bob", 1).message_count == 3
    rt.close()


@pytest.mark.parametrize(("kind", "column", "value"), [
    ("entity_aliases", "entity_id", 999),
    ("fact_entities", "entity_id", 999),
    ("fact_entities", "fact_id", 999),
    ("fact_history", "fact_id", 999),
    ("facts", "superseded_by", 999),
    ("shown_facts", "message_id", 999),
    ("shown_facts", "fact_id", 999),
    ("message_refs", "message_id", 999),
    ("extraction_runs", "session_id", 999),
    ("reply_ratings", "message_id", 999),
    ("reply_ratings", "applied", '{"999": -0.1}'),
])
def test_a_reference_outside_the_file_refuses_it(cli, tmp_path, bob_home, mallory_records, kind,
                                                 column, value):
    """Bob's rows exist under these ids too (fact 1, message 2, session 1): a record of a
    crafted file that points at them, or at ids it never defines, is refused by its line (a
    fact's newer version: the link is dropped), the rest of the file is mallory's, and nothing
    of it touches bob's rows."""
    record = next(r for r in mallory_records if r["type"] == kind)
    record["row"][column] = value
    number = mallory_records.index(record) + 1
    before = bob_export(cli, bob_home)
    result = cli("--home", str(bob_home), "import", str(write(tmp_path, mallory_records)))
    assert result.exit_code == 1, result.stdout
    assert "Traceback" not in result.stderr
    assert any(line.startswith(f"  line {number}: ") and column in line
               for line in result.stderr.splitlines()), result.stderr
    assert bob_export(cli, bob_home) == before
    assert rows_not_of(bob_home / "hermes.db", "mallory") == []
    kept = cli("--home", str(bob_home), "export", "--user", "mallory").stdout
    assert "mallory runs Debian 13" in kept and "which postgres do we run?" in kept


def test_a_message_naming_bobs_session_is_written_into_its_own(cli, tmp_path, bob_home,
                                                              mallory_records):
    session = next(r for r in mallory_records if r["type"] == "sessions")
    for message in session["messages"]:
        message["session_id"] = 1  # bob's session in the shared home
        message["user"] = "bob"
    session["row"]["user"] = "bob"
    assert cli("--home", str(bob_home), "import", str(write(tmp_path, mallory_records)),
               "--user", "mallory").exit_code == 0
    assert rows_not_of(bob_home / "hermes.db", "mallory") == []
    db = sqlite3.connect(bob_home / "hermes.db")
    assert db.execute("SELECT count(*) FROM messages WHERE session_id = 1").fetchone()[0] == 3
    assert db.execute("SELECT message_count FROM sessions WHERE id = 1").fetchone()[0] == 3


def test_round_trip_into_an_empty_home_is_identical_with_ratings(cli, tmp_path, bob_home):
    first = bob_export(cli, bob_home)
    assert '"type":"reply_ratings"' in first
    path = tmp_path / "bob.jsonl"
    path.write_text(first, encoding="utf-8")
    other = tmp_path / "empty"
    assert cli("--home", str(other), "import", str(path)).exit_code == 0
    assert bob_export(cli, other) == first


def test_a_file_cut_short_is_refused_unless_asked(cli, tmp_path, bob_home):
    lines = bob_export(cli, bob_home).splitlines()
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(lines[:5]) + "\n", encoding="utf-8")  # `head -n 5`
    result = cli("--home", str(tmp_path / "h1"), "import", str(cut))
    assert result.exit_code == 1 and "cut short" in result.stderr
    assert "--allow-incomplete" in result.stderr
    assert cli("--home", str(tmp_path / "h1"), "export", "--user", "bob").stdout.count("\n") == 2
    anyway = cli("--home", str(tmp_path / "h1"), "import", str(cut), "--allow-incomplete")
    assert anyway.exit_code == 0 and "Warning: the file ends at line 5" in anyway.stderr


def test_a_changed_file_or_wrong_counts_are_refused(cli, tmp_path, bob_home):
    text = bob_export(cli, bob_home)
    changed = tmp_path / "changed.jsonl"
    changed.write_text(text.replace("runs Debian 13", "runs Debian 12"), encoding="utf-8")
    result = cli("--home", str(tmp_path / "h2"), "import", str(changed))
    assert result.exit_code == 1 and "checksum" in result.stderr
    lines = text.splitlines()
    dropped = tmp_path / "dropped.jsonl"  # a record removed, the end record kept
    dropped.write_text("\n".join(lines[:1] + lines[2:]) + "\n", encoding="utf-8")
    result = cli("--home", str(tmp_path / "h3"), "import", str(dropped))
    assert result.exit_code == 1 and "records are missing" in result.stderr


def test_a_version_1_file_imports_with_a_warning(cli, tmp_path, bob_home):
    lines = bob_export(cli, bob_home).splitlines()[:-1]
    lines[0] = lines[0].replace('"version":2', '"version":1')
    old = tmp_path / "v1.jsonl"
    old.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = cli("--home", str(tmp_path / "h4"), "import", str(old))
    assert result.exit_code == 0 and "version 1 export" in result.stderr


def test_every_user_table_is_exported_or_listed_as_not(tmp_path):
    """A new table that holds a user's rows (a `user` column, or a link to such a table) must
    be added to EXPORTED_TABLES or to NOT_EXPORTED with the reason."""
    db = connect(tmp_path / "t.db")
    tables = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND sql NOT LIKE 'CREATE VIRTUAL%' AND name NOT LIKE '%_fts_%' "
        "AND name != '_sqlite_migrations'")]
    user_tables = {t for t in tables
                   if "user" in {c[1] for c in db.execute(f"PRAGMA table_info({t})")}}
    changed = True
    while changed:  # tables linked to a user table hold user rows too
        changed = False
        for table in tables:
            targets = {r[2] for r in db.execute(f"PRAGMA foreign_key_list({table})")}
            if table not in user_tables and targets & user_tables:
                user_tables.add(table)
                changed = True
    travelling = {t.name for t in EXPORTED_TABLES} | set(NOT_EXPORTED)
    assert user_tables - travelling == set()
    assert "reply_ratings" in {t.name for t in EXPORTED_TABLES}


@pytest.mark.parametrize("value", [[1], {"a": 1}, "1", 999])
def test_a_fact_source_of_any_shape_is_dropped_not_a_crash(cli, tmp_path, bob_home,
                                                           mallory_records, value):
    """Provenance the file does not hold (a session it lacks, a list: found by
    scripts/stress_import.py as a TypeError) is dropped; the fact is kept."""
    fact = next(r for r in mallory_records if r["type"] == "facts" and
                r["row"]["source_session_id"] is not None)
    fact["row"]["source_session_id"] = value
    result = cli("--home", str(bob_home), "import", str(write(tmp_path, mallory_records)))
    assert result.exit_code == 0, result.stderr
    assert rows_not_of(bob_home / "hermes.db", "mallory") == []
