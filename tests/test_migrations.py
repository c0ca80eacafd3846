import sqlite3

import pytest

from hermes.store.db import connect
from hermes.store.migrations import migrations


def test_blank_database_gets_every_table_index_and_trigger(tmp_path):
    db = connect(tmp_path / "blank.db")
    names = {row[0]: row[1] for row in db.execute("SELECT name, type FROM sqlite_master")}
    for table in [
        "basic_memory", "facts", "entities", "entity_aliases", "fact_entities", "fact_history",
        "sessions", "messages", "shown_facts", "message_refs", "extraction_runs", "cron_jobs",
        "cron_runs", "facts_fts", "messages_fts", "sessions_fts", "fact_vectors",
        "message_vectors", "reply_ratings",
    ]:
        assert names.get(table) == "table", table
    for index in ["idx_facts_user_key", "idx_fact_entities_entity", "idx_messages_session",
                  "idx_sessions_user_active", "idx_basic_memory_user", "idx_fact_vectors_user",
                  "idx_facts_active_user", "idx_facts_active_trust"]:
        assert names.get(index) == "index", index
    for trigger in ["facts_fts_ai", "facts_fts_ad", "facts_fts_au", "messages_fts_ai",
                    "messages_fts_ad", "messages_fts_au", "sessions_fts_ai", "sessions_fts_au",
                    "messages_count_ai"]:
        assert names.get(trigger) == "trigger", trigger
    assert "facts_vocab" not in names  # global term counts: dropped by m014
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert db.execute("PRAGMA busy_timeout").fetchone()[0] >= 5000
    # Reads through a memory map of the file (store/db.py MMAP_BYTES): a turn's FTS5 and index
    # reads were a read() call each into a 2 MB page cache.
    assert db.execute("PRAGMA mmap_size").fetchone()[0] >= 2**30
    applied = [m.name for m in migrations.applied(db)]
    assert applied == [m.name for m in migrations._migrations]
    # The history lives in several modules: it still runs in its numbered order, all of it.
    assert applied == sorted(applied) and len(applied) == int(applied[-1][1:4])


def _rollback_db_held_by_another_writer(path):
    seed = sqlite3.connect(path)
    seed.execute("CREATE TABLE t(x)")
    seed.commit()
    seed.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def test_wal_switch_retries_while_another_process_holds_the_lock(tmp_path):
    # Two processes opening a fresh file race to convert it to WAL; the loser used to die
    # with "database is locked" (seen in CI). The switch is retried until the lock is free.
    path = tmp_path / "race.db"
    holder = _rollback_db_held_by_another_writer(path)
    waits = []

    def sleep(seconds):
        waits.append(seconds)
        if len(waits) == 2:
            holder.execute("COMMIT")

    db = connect(path, busy_timeout_ms=20, sleep=sleep)
    assert len(waits) == 2
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert migrations.pending(db) == []


def test_wal_switch_gives_up_loudly_when_the_lock_never_frees(tmp_path):
    path = tmp_path / "stuck.db"
    holder = _rollback_db_held_by_another_writer(path)
    waits = []
    with pytest.raises(sqlite3.OperationalError, match="WAL mode within 50 ms"):
        connect(path, busy_timeout_ms=50, sleep=waits.append)
    assert sum(waits) >= 0.05
    holder.execute("ROLLBACK")
    assert connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrating_twice_is_a_no_op(tmp_path):
    connect(tmp_path / "x.db").conn.close()
    db = connect(tmp_path / "x.db")
    assert migrations.pending(db) == []
    count = db.execute("SELECT count(*) FROM _sqlite_migrations").fetchone()[0]
    assert count == len(migrations._migrations)


def test_fts_triggers_follow_inserts_updates_and_deletes(tmp_path):
    db = connect(tmp_path / "t.db")
    db.execute(
        "INSERT INTO facts (user, content, content_key, created_at, updated_at) "
        "VALUES ('owner', 'Alice deploys with Kubernetes', 'k', 't', 't')"
    )
    match = "SELECT rowid FROM facts_fts WHERE facts_fts MATCH ?"
    assert db.execute(match, ['"deployed"']).fetchall() == [(1,)]  # porter stemming
    db.execute("UPDATE facts SET content = 'Alice uses Nomad' WHERE id = 1")
    assert db.execute(match, ['"kubernetes"']).fetchall() == []
    assert db.execute(match, ['"nomad"']).fetchall() == [(1,)]
    db.execute("DELETE FROM facts WHERE id = 1")
    assert db.execute(match, ['"nomad"']).fetchall() == []
    fts_integrity_check(db, "facts_fts")  # the index still agrees with the table

    # The check is real: an index out of step with its table fails it.
    db.execute(
        "INSERT INTO facts (user, content, content_key, created_at, updated_at) "
        "VALUES ('owner', 'Bob runs Postgres', 'p', 't', 't')"
    )
    db.execute("DROP TRIGGER facts_fts_au")
    db.execute("UPDATE facts SET content = 'Bob runs MySQL' WHERE content_key = 'p'")
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        fts_integrity_check(db, "facts_fts")


def fts_integrity_check(db, table: str) -> None:
    """FTS5's integrity-check against its content table (rank 1): raises when they disagree."""
    db.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")


def test_message_insert_keeps_session_counters(tmp_path):
    db = connect(tmp_path / "s.db")
    db.execute(
        "INSERT INTO sessions (user, source, started_at, last_active_at) "
        "VALUES ('owner', 'terminal', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')"
    )
    db.execute(
        "INSERT INTO messages (session_id, user, role, content, created_at) "
        "VALUES (1, 'owner', 'user', 'hi', '2026-01-02T00:00:00Z')"
    )
    row = db.execute("SELECT message_count, last_active_at FROM sessions").fetchone()
    assert row == (1, "2026-01-02T00:00:00Z")
    try:
        db.execute(
            "INSERT INTO messages (session_id, user, role, content, created_at) "
            "VALUES (1, 'owner', 'wizard', 'x', 't')"
        )
    except sqlite3.IntegrityError:
        pass
    else:  # pragma: no cover
        raise AssertionError("role CHECK constraint missing")


def test_m019_reads_each_facts_sources_by_id_never_scanning_every_message(tmp_path):
    """m019 fills fact_sources from every fact's source ids: the plan must go facts -> ids ->
    each message by its rowid. SQLite's own choice scanned all messages and, for each, all of
    its user's facts: over 20 minutes at 1M messages / 100k facts, holding the write lock."""
    from hermes.store.migrations.exchanges import M019_OWN_SOURCES

    db = connect(tmp_path / "plan.db")
    plan = [row[3] for row in db.execute("EXPLAIN QUERY PLAN " + M019_OWN_SOURCES).fetchall()]
    assert plan[0] == "SCAN f"
    assert "SEARCH m USING INTEGER PRIMARY KEY (rowid=?)" in plan
    assert "SCAN m" not in plan


def test_m025_drops_the_vectors_of_messages_redacted_before_m022(tmp_path):
    """A message `hermes sessions redact` rewrote before m022 kept the vector of its text with
    the secret; m025 drops it (and only it), logged, so every process reads the change."""
    from hermes.store.migrations.bookkeeping import m025_redacted_vectors

    db = connect(tmp_path / "old.db")
    db.execute("INSERT INTO sessions (id, user, source, started_at, last_active_at) VALUES "
               "(1, 'owner', 'terminal', '2026-01-01', '2026-01-01')")
    for mid, text in [(1, "deploy with [redacted gitlab token …rS6t] please"),
                      (2, "nothing secret here")]:
        db.execute("INSERT INTO messages (id, session_id, user, role, content, created_at) "
                   "VALUES (?, 1, 'owner', 'user', ?, '2026-01-01')", [mid, text])
        db.execute("INSERT INTO message_vectors (message_id, user, model, vector) "
                   "VALUES (?, 'owner', 'toy', x'0000')", [mid])
    seq = db.execute("SELECT max(seq) FROM vector_changes").fetchone()[0]
    m025_redacted_vectors(db)
    kept = [r[0] for r in db.execute("SELECT message_id FROM message_vectors").fetchall()]
    assert kept == [2]
    assert db.execute("SELECT item_id FROM vector_changes WHERE seq > ?",
                      [seq]).fetchall() == [(1,)]


def test_m026_on_an_existing_home_keeps_every_fact_findable_and_counted(tmp_path, clock):
    """A home from before m026 (its facts written, the index not there yet): the migration adds
    the active facts' (id, user) index, and every fact is still found by its words, counted
    among its own user's facts only (recall's word counts go through the new index)."""
    from hermes.config import FactsConfig
    from hermes.memory.facts.recall import FactRecall
    from hermes.memory.facts.store import FactStore
    from hermes.store.fts import build_match
    from hermes.store.migrations.bookkeeping import m026_facts_active_user_index

    db = connect(tmp_path / "old.db")
    db.execute("DROP INDEX idx_facts_active_user")  # as before m026
    facts = FactStore(db, FactsConfig(), clock)
    written = {user: [facts.add(user, f"{user} keeps kestrel note {i}").fact.id
                      for i in range(4)] for user in ("owner", "bob")}
    facts.forget("owner", written["owner"][0])
    m026_facts_active_user_index(db)
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'idx_facts_active_user'")
    assert "WHERE forgotten_at IS NULL AND superseded_by IS NULL" in sql.fetchone()[0]
    recall = FactRecall(facts, clock)
    kestrel = build_match("kestrel").terms[0]
    assert recall.doc_count("owner", kestrel) == 3 and recall.doc_count("bob", kestrel) == 4
    for user, ids in written.items():
        active = ids[1:] if user == "owner" else ids
        assert sorted(f.id for f in facts.search(user, "kestrel note", limit=10)) == active
        assert {f.id for f in recall.ranked(user, "any kestrel notes?", limit=10)} == set(active)


def test_m027_on_an_existing_home_keeps_every_fact_found_by_its_words_for_its_user(
        tmp_path, clock):
    """A home from before m027 (its facts written, the index not there yet): the migration adds
    the active facts' (user, trust) index that fact search's bound reads, and every active fact
    is still found by its words, for its own user only, whatever its trust."""
    from hermes.config import FactsConfig
    from hermes.memory.facts.store import FactStore
    from hermes.store.migrations.bookkeeping import m027_facts_active_trust_index

    db = connect(tmp_path / "old.db")
    db.execute("DROP INDEX idx_facts_active_trust")  # as before m027
    facts = FactStore(db, FactsConfig(), clock)
    written = {user: [facts.add(user, f"{user} keeps kestrel note {i}").fact.id
                      for i in range(4)] for user in ("owner", "bob")}
    db.execute("UPDATE facts SET trust = 0.9 WHERE id = ?", [written["owner"][3]])
    facts.forget("owner", written["owner"][0])
    m027_facts_active_trust_index(db)
    sql = db.execute("SELECT sql FROM sqlite_master WHERE name = 'idx_facts_active_trust'")
    assert "(user, trust) WHERE forgotten_at IS NULL AND superseded_by IS NULL" in \
        sql.fetchone()[0]
    for user, ids in written.items():
        active = ids[1:] if user == "owner" else ids
        found = facts.search(user, "kestrel note", limit=10)
        assert sorted(f.id for f in found) == active
    assert facts.search("owner", "kestrel note", limit=1)[0].id == written["owner"][3]


SCRIPT = """
-- a comment; with a semicolon
CREATE TABLE t (a TEXT DEFAULT 'x;y', b INTEGER);
CREATE TRIGGER t_ai AFTER INSERT ON t BEGIN
  INSERT INTO t (a) SELECT 'one;' WHERE new.b = 1;
  UPDATE t SET b = 2 WHERE a = "semi;colon";
END;
/* block; comment */ CREATE INDEX idx_t ON t(a);
-- trailing words
"""


def test_a_migration_script_is_split_as_sqlite_utils_splits_it():
    from sqlite_utils.db import _iter_complete_sql_statements

    from hermes.store.migrations import script_statements

    assert list(script_statements(SCRIPT)) == list(_iter_complete_sql_statements(SCRIPT))
    assert len(list(script_statements(SCRIPT))) == 4  # three statements, then the comment


def test_every_migration_script_runs_through_run_script():
    # db.executescript inside a migration's transaction re-scans the script after every
    # character (sqlite-utils 4.2): 0.5 s of a blank home's migrations, paid by every new home
    import ast
    from pathlib import Path

    import hermes.store.migrations as package

    for path in Path(package.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            assert not (isinstance(node, ast.Attribute) and node.attr == "executescript"), \
                f"{path.name}:{node.lineno}: use run_script(db, sql)"
