"""One extraction output can no longer block every writer (issue 11, part 3).

Caps on actions per run, entities and tags per fact, content length; runs written in bounded
transactions; a writer that finds the lock held says so in one line, never a traceback.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from hermes.config import load_settings
from hermes.learn.consolidate import consolidate
from hermes.learn.parse import parse_actions
from hermes.learn.worker import ExtractionWorker
from hermes.runtime import Runtime
from hermes.store import db as store_db
from hermes.store.db import BoundedWrites, DatabaseBusy, connect, write_transaction


def creates(count, **extra):
    return [{"action": "create", "content": f"Server number {i} runs Debian", **extra}
            for i in range(count)]


# -- caps -------------------------------------------------------------------------------------

def test_parse_caps_actions_entities_tags_and_content_and_says_so():
    many = json.dumps(creates(2000))
    parsed = parse_actions(many)
    assert len(parsed.actions) == 50
    assert "1,950 action(s) past the cap of 50 per run were dropped" in parsed.skipped
    wide = json.dumps([{"action": "create", "content": "Atlas uses many services",
                        "entities": [f"Svc{i}" for i in range(10_000)],
                        "tags": [f"t{i}" for i in range(500)]},
                       {"action": "create", "content": "x" * 501}])
    parsed = parse_actions(wide, max_entities=20, max_tags=5)
    (action,) = parsed.actions
    assert len(action.entities) == 20 and len(action.tags) == 5
    assert "action 1: 10,000 entities, kept the first 20" in parsed.skipped
    assert "action 2: content over 500 characters" in parsed.skipped
    assert len(parse_actions(many, max_actions=2000).actions) == 2000


def test_the_caps_come_from_the_config(config_file):
    config_file.write_text("extraction:\n  max_actions: 3\n  max_content_chars: 40\n"
                           "facts:\n  max_entities_per_fact: 2\n", encoding="utf-8")
    settings = load_settings()
    assert (settings.extraction.max_actions, settings.facts.max_entities_per_fact) == (3, 2)


async def test_a_runaway_extraction_output_writes_only_the_capped_run(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    store = rt.memory.sessions
    session = store.create("owner", "terminal")
    store.append("owner", session.id, "user", "We run a lot of Debian servers at Acme Corp.")
    store.append("owner", session.id, "assistant", "Noted!")
    runaway = creates(2000)
    runaway[0]["entities"] = [f"Host{i}" for i in range(10_000)]
    fake_model.reply(json.dumps(runaway))
    run = await ExtractionWorker(rt.memory).run_session("owner", session.id)
    assert (run.status, run.created) == ("done", 50)
    assert "1,950 action(s) past the cap" in (run.reason or "")
    facts = rt.memory.facts
    first = facts.search("owner", "Server number 0", limit=1)[0]
    assert len(first.entities) == 20
    rt.close()


def test_a_fact_with_too_many_entities_or_tags_is_refused_in_one_line(cli):
    args = ["facts", "add", "Atlas uses many services"]
    for i in range(25):
        args += ["-e", f"Svc{i}"]
    result = cli(*args)
    assert result.exit_code == 1
    assert "at most 20 entities (got 25" in result.stderr and "Traceback" not in result.stderr
    tags = ["facts", "add", "Atlas uses tags"] + [x for i in range(21) for x in ("--tag", f"t{i}")]
    assert "at most 20 tags" in cli(*tags).stderr
    assert cli("facts", "add", "Atlas uses a few services", "-e", "Atlas").exit_code == 0


# -- bounded transactions ---------------------------------------------------------------------

class StepClock:
    """Monotonic time that moves 10 ms each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.01
        return self.now


def test_consolidation_commits_in_batches_within_the_budget(rt):
    facts = rt.memory.facts
    actions = parse_actions(json.dumps(creates(200)), max_actions=200).actions
    holds = []
    clock = StepClock()
    writes = BoundedWrites(rt.db, budget=0.05, clock=clock, sleep=lambda seconds: None)
    original_end = writes._end

    def end(statement):
        if writes.started is not None:
            holds.append(clock.now - writes.started)
        original_end(statement)

    writes._end = end
    with writes:
        result = consolidate(facts, "owner", actions, {}, session_id=None, message_ids=[],
                             writes=writes)
    assert result.created == 200
    assert writes.transactions >= 30  # 200 steps, a commit every few
    assert max(holds) <= 0.05 + 0.03  # the budget plus the last step's reads of the clock
    assert not rt.db.conn.in_transaction


def test_a_failed_step_rolls_back_only_its_batch_and_raises(rt):
    writes = BoundedWrites(rt.db, budget=10)
    with pytest.raises(RuntimeError), writes:
        with writes.step():
            rt.db.execute("INSERT INTO basic_memory (user, text, created_at, updated_at) "
                          "VALUES ('owner', 'a', 'x', 'x')")
        with writes.step():
            raise RuntimeError("boom")
    assert not rt.db.conn.in_transaction
    assert rt.db.execute("SELECT count(*) FROM basic_memory").fetchone()[0] == 0


# -- a writer that finds the lock held --------------------------------------------------------

def test_a_writer_that_times_out_retries_then_says_so_in_one_line(tmp_path, caplog):
    path = tmp_path / "locked.db"
    connect(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    db = connect(path, busy_timeout_ms=20)
    with pytest.raises(DatabaseBusy, match="locked by another Hermes process"), \
            write_transaction(db):
        pass
    assert caplog.text.count("retrying") == store_db.LOCK_RETRIES
    holder.execute("COMMIT")
    with write_transaction(db):  # the lock is free again: the write goes through
        db.execute("INSERT INTO basic_memory (user, text, created_at, updated_at) "
                   "VALUES ('owner', 'b', 'x', 'x')")
    holder.close()


def test_facts_add_while_another_process_holds_the_lock_is_one_line(cli, hermes_home,
                                                                   monkeypatch):
    assert cli("facts", "list").exit_code == 0  # creates the database
    monkeypatch.setattr(store_db, "BUSY_TIMEOUT_MS", 20)
    holder = sqlite3.connect(hermes_home / "hermes.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        result = cli("facts", "add", "The NAS is in the hallway closet")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "Error: The database is locked by another Hermes process")
    assert cli("facts", "add", "The NAS is in the hallway closet").exit_code == 0


def wal_pages(path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size // 4096 if wal.exists() else 0


def test_a_connection_that_checkpoints_elsewhere_leaves_the_wal_to_checkpoint(tmp_path):
    from hermes.store.db import checkpoint, checkpoint_elsewhere

    def fill(db) -> None:
        db.execute("CREATE TABLE IF NOT EXISTS blobs (b BLOB)")
        for _ in range(60):  # ~1,500 pages: past SQLite's autocheckpoint of 1,000
            with write_transaction(db):
                db.execute("INSERT INTO blobs VALUES (zeroblob(100000))")

    # By default a commit past 1,000 pages copies the WAL back (and the WAL is reused).
    usual = connect(tmp_path / "usual.db")
    fill(usual)
    assert wal_pages(tmp_path / "usual.db") < 1_300
    # The daemon's loop connection: its commits leave the WAL as it is ...
    path = tmp_path / "loop.db"
    loop = connect(path)
    checkpoint_elsewhere(loop)
    fill(loop)
    assert wal_pages(path) > 1_400
    # ... and a checkpoint on a connection of its own copies all of it, with the loop's open.
    pages, copied = checkpoint(path)
    assert pages > 1_400 and copied == pages
    with write_transaction(loop):  # the next commit starts the WAL again from its beginning
        loop.execute("INSERT INTO blobs VALUES (zeroblob(100))")
    assert checkpoint(path) == (1, 1)
    assert loop.execute("SELECT count(*) FROM blobs").fetchone()[0] == 61
    usual.conn.close()
    loop.conn.close()
