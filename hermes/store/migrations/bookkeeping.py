"""m021 on: this home's own state beside the memory (import resumes, the vector change log,
vector cells). Not exported."""

from __future__ import annotations

import sqlite_utils

from hermes.store.migrations import migrations, run_script
from hermes.store.migrations.exchanges import _ids_of, _m019_exchange


@migrations()
def m021_restores(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- `hermes import` of one file for one user, so that the same command run again after
        -- an interruption or a crash resumes it instead of refusing a home that now has memory
        -- (hermes.memory.transfer.ledger). Bookkeeping of this home, not memory: not exported.
        CREATE TABLE restores (
          id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          file_sha256 TEXT NOT NULL,      -- of every line of the file, as read
          through_line INTEGER NOT NULL DEFAULT 0,  -- the file's lines up to here are committed
          started_at TEXT NOT NULL,
          finished_at TEXT,               -- NULL: stopped part-way (the same file resumes)
          UNIQUE (user, file_sha256)
        );
        -- What the committed part wrote: each id the file names and the row it became here
        -- (renumbered when the id was taken), so a resumed run links to the same rows. Emptied
        -- when the import finishes.
        CREATE TABLE restore_ids (
          restore_id INTEGER NOT NULL REFERENCES restores(id) ON DELETE CASCADE,
          tbl TEXT NOT NULL,
          old_id INTEGER NOT NULL,
          new_id INTEGER NOT NULL,
          PRIMARY KEY (restore_id, tbl, old_id)
        ) WITHOUT ROWID;
        """
    )


@migrations()
def m022_vector_changes(db: sqlite_utils.Database) -> None:
    # A process holds each user's vectors in memory (hermes.memory.vectors.matrix) and read only
    # rows past the highest message id it had: an edited or redacted message kept its old
    # vector, and a running process never saw a vector deleted, replaced, or written for an
    # older message (a backlog is embedded newest first). Now an edit of a message's text or
    # speaker, and its deletion, delete its vectors (the next vector pass embeds it as it now
    # reads; meanwhile it is found by its words), and every write of a message or fact vector is
    # logged in vector_changes, in order: each process reads the changes past the last one it
    # saw and re-reads those rows (the user's own). The log is pruned to its newest rows
    # (MessageVectors.index); a process that finds a gap past what it saw reloads the user.
    run_script(db,
        """
        CREATE TABLE vector_changes (
          seq INTEGER PRIMARY KEY AUTOINCREMENT,
          kind TEXT NOT NULL,            -- message | fact
          user TEXT NOT NULL,
          model TEXT NOT NULL,
          item_id INTEGER NOT NULL       -- the message id or fact id whose vector changed
        );
        -- (user, model, kind, seq): the rowid ends every index entry, so "seq > ?" is a range
        CREATE INDEX idx_vector_changes_user ON vector_changes(user, model, kind);
        -- The newest seq pruned from the log (one row, once the log was first pruned).
        CREATE TABLE vector_changes_pruned (
          id INTEGER PRIMARY KEY CHECK (id = 1),
          through INTEGER NOT NULL
        );
        CREATE TRIGGER message_vectors_changes_ai AFTER INSERT ON message_vectors BEGIN
          INSERT INTO vector_changes (kind, user, model, item_id)
            VALUES ('message', new.user, new.model, new.message_id);
        END;
        CREATE TRIGGER message_vectors_changes_au AFTER UPDATE ON message_vectors BEGIN
          INSERT INTO vector_changes (kind, user, model, item_id)
            VALUES ('message', new.user, new.model, new.message_id);
        END;
        CREATE TRIGGER message_vectors_changes_ad AFTER DELETE ON message_vectors BEGIN
          INSERT INTO vector_changes (kind, user, model, item_id)
            VALUES ('message', old.user, old.model, old.message_id);
        END;
        CREATE TRIGGER fact_vectors_changes_ai AFTER INSERT ON fact_vectors BEGIN
          INSERT INTO vector_changes (kind, user, model, item_id)
            VALUES ('fact', new.user, new.model, new.fact_id);
        END;
        CREATE TRIGGER fact_vectors_changes_au AFTER UPDATE ON fact_vectors BEGIN
          INSERT INTO vector_changes (kind, user, model, item_id)
            VALUES ('fact', new.user, new.model, new.fact_id);
        END;
        CREATE TRIGGER fact_vectors_changes_ad AFTER DELETE ON fact_vectors BEGIN
          INSERT INTO vector_changes (kind, user, model, item_id)
            VALUES ('fact', old.user, old.model, old.fact_id);
        END;
        CREATE TRIGGER messages_vector_au AFTER UPDATE OF content, speaker ON messages
        WHEN new.content IS NOT old.content OR new.speaker IS NOT old.speaker BEGIN
          DELETE FROM message_vectors WHERE message_id = old.id;
        END;
        -- Also when foreign keys are off on a connection (ON DELETE CASCADE would not run).
        CREATE TRIGGER messages_vector_bd BEFORE DELETE ON messages BEGIN
          DELETE FROM message_vectors WHERE message_id = old.id;
        END;
        """
    )


@migrations()
def m023_vector_cells(db: sqlite_utils.Database) -> None:
    # A coarse index (IVF) over a long history's vectors (hermes.memory.vectors.cells): a
    # search scans the vectors of the cells nearest the query instead of every vector. The
    # centroids of one user's vectors of one kind and model, and each vector's cell. The cell
    # is not a change of the vector: the change log (m022) now follows the vector columns only.
    run_script(db,
        """
        CREATE TABLE vector_cells (
          kind TEXT NOT NULL,            -- message | fact
          user TEXT NOT NULL,
          model TEXT NOT NULL,
          version INTEGER NOT NULL,      -- 1, 2, ...: each clustering of these vectors
          dim INTEGER NOT NULL,
          trained_on INTEGER NOT NULL,   -- how many vectors there were when clustered
          centroids BLOB NOT NULL,       -- float32, one unit vector per cell
          PRIMARY KEY (kind, user, model)
        );
        -- version * 2^20 + cell; NULL: written before its user's vectors were clustered
        -- (facts are few: a process computes their cells when it loads them)
        ALTER TABLE message_vectors ADD COLUMN cell INTEGER;
        DROP TRIGGER message_vectors_changes_au;
        CREATE TRIGGER message_vectors_changes_au
            AFTER UPDATE OF message_id, user, model, vector ON message_vectors BEGIN
          INSERT INTO vector_changes (kind, user, model, item_id)
            VALUES ('message', new.user, new.model, new.message_id);
        END;
        DROP TRIGGER fact_vectors_changes_au;
        CREATE TRIGGER fact_vectors_changes_au
            AFTER UPDATE OF fact_id, user, model, content_key, vector, context_vector
            ON fact_vectors BEGIN
          INSERT INTO vector_changes (kind, user, model, item_id)
            VALUES ('fact', new.user, new.model, new.fact_id);
        END;
        """
    )


@migrations()
def m024_facts_scope_index(db: sqlite_utils.Database) -> None:
    # Whose a fact is, whether it is active, its trust and age, by id, in a narrow index: a
    # word's matches in facts_fts are joined to facts by id to keep only the user's active
    # facts (per-turn recall counts a word's matches among the user's facts up to 1,000,
    # hermes.memory.facts.recall). Read from the table, each match cost a visit to a wide row
    # (content, tags, sources: ~10 a page), ~1.3 us; from this index ~0.35 us (100k facts).
    # Used where a query names it (INDEXED BY): SQLite looks a rowid up in the table itself.
    db.execute("CREATE INDEX idx_facts_scope ON facts(id, user, forgotten_at, superseded_by, "
               "trust, updated_at)")


@migrations()
def m025_redacted_vectors(db: sqlite_utils.Database) -> None:
    # `hermes sessions redact` rewrote messages before m022's triggers existed (they now drop an
    # edited message's vectors): those kept the vectors of their text as first stored, secrets
    # included. It was the only code that rewrote a message's text before m022, and every
    # message it rewrote holds a redaction marker, so their vectors are dropped here and the
    # vector pass embeds them again as they now read. (A text hash kept with each vector would
    # not have told them apart: no hash was kept when they were embedded. Messages redacted as
    # they were recorded hold the marker too and are embedded again to the same vector; finding
    # them reads every message once, 0.23 s of CPU at 1M.)
    db.execute("DELETE FROM message_vectors WHERE message_id IN "
               "(SELECT id FROM messages WHERE instr(content, '[redacted') > 0)")


@migrations()
def m026_facts_active_user_index(db: sqlite_utils.Database) -> None:
    # Per-turn recall counts each of a message's words among the user's active facts, up to
    # 1,000 (hermes.memory.facts.recall.FactRecall.doc_count): each match of the word in
    # facts_fts is looked up by id to see whose it is. Through m024's index (id, user, both
    # states, trust, updated_at: ~5 MB at 100k facts) a word whose matches are spread over the
    # ids cost a page read each, ~1.1-1.7 us a match; this one holds only the active facts'
    # (id, user), ~1 MB, which stays in SQLite's page cache: 0.3-0.5 us a match, the same counts
    # (scripts/bench_turn.py's home; whole turns -0.9 ms CPU p50). Named by INDEXED BY.
    db.execute("CREATE INDEX idx_facts_active_user ON facts(id, user) "
               "WHERE forgotten_at IS NULL AND superseded_by IS NULL")


@migrations()
def m027_facts_active_trust_index(db: sqlite_utils.Database) -> None:
    # Fact search ranks a word's matches by bm25 x trust from FTS5's bm25 order alone, reading
    # a fact's row (whose, active, trust) only for the best matches, until no match left can
    # beat the last one kept: its bm25 x the user's highest trust among their active facts
    # (hermes.memory.facts.search._best_matches). That maximum is one seek into this index
    # (it was a walk over every fact of the user, ~25 ms at 90k facts). Named by INDEXED BY.
    db.execute("CREATE INDEX idx_facts_active_trust ON facts(user, trust) "
               "WHERE forgotten_at IS NULL AND superseded_by IS NULL")


# Full-width ASCII (U+FF01-U+FF5E) or the ideographic space in a text, for m028: a byte search
# first (their UTF-8 begins EF BC, EF BD or is E3 80 80), the exact class only for those.
_WIDE_TEXT = ("(instr(CAST({0} AS BLOB), X'EFBC') OR instr(CAST({0} AS BLOB), X'EFBD') "
              "OR instr(CAST({0} AS BLOB), X'E38080')) AND {0} GLOB '*[\uff01-\uff5e\u3000]*'")


@migrations()
def m028_full_width_vectors(db: sqlite_utils.Database) -> None:
    # MiniLM now reads full-width letters and digits as the letters they are ("ＲＥＤＩＳ" was
    # [UNK] to it: hermes.memory.embeddings.MiniLM.embed); other text embeds as before. The
    # MiniLM vectors of texts holding such characters (a message, its speaker, a fact or a
    # message a fact was learned from) are dropped, and the vector passes embed them again as
    # the model now reads them. Finding them reads every message once: 0.85 s of CPU at 1M
    # messages (scripts/bench_turn.py's home, none found).
    minilm = "model LIKE 'all-MiniLM-L6-v2%'"
    wide_message = ("SELECT id FROM messages WHERE " + _WIDE_TEXT.format("content") + " OR ("
                    + _WIDE_TEXT.format("coalesce(speaker, '')") + ")")
    db.execute(f"CREATE TEMP TABLE m028_wide AS {wide_message}")
    db.execute(f"DELETE FROM message_vectors WHERE {minilm} AND message_id IN "
               "(SELECT id FROM m028_wide)")
    db.execute(
        f"DELETE FROM fact_vectors WHERE {minilm} AND fact_id IN (SELECT f.id FROM facts f "
        f"WHERE ({_WIDE_TEXT.format('f.content')}) OR EXISTS (SELECT 1 FROM json_each("
        "CASE WHEN json_valid(f.source_message_ids) THEN f.source_message_ids ELSE '[]' END) j "
        "WHERE j.value IN (SELECT id FROM m028_wide)))")
    db.execute("DROP TABLE temp.m028_wide")


def _m029_sources(fact: str) -> str:
    """m019's rows of a fact's exchange, without the message answered for a fact the user
    asked to be remembered (tagged ``fastlane``): "Remember that my dentist is Dr. Silva" says
    all of it, and the reply before it is another conversation."""
    explicit = f"instr({fact}.tags, '\"fastlane\"') > 0"
    own = f"SELECT value FROM json_each({_ids_of(fact)}) WHERE type = 'integer'"
    first = f"(SELECT min(s.id) FROM messages s WHERE s.user = {fact}.user AND s.id IN ({own}))"
    return f"""
      SELECT m.id, {fact}.id, {fact}.user, 0 FROM messages m
      WHERE m.user = {fact}.user AND m.id IN ({own})
      UNION ALL
      SELECT max(p.id), {fact}.id, {fact}.user, 1 FROM messages p
      WHERE p.user = {fact}.user AND p.role IN ('user', 'assistant') AND NOT {explicit}
        AND p.session_id = (SELECT session_id FROM messages WHERE id = {first})
        AND p.id < {first}
      HAVING max(p.id) IS NOT NULL"""


@migrations()
def m029_fast_lane_exchange(db: sqlite_utils.Database) -> None:
    # A fact the fast lane wrote ("Remember that my dentist is Dr. Silva") was indexed with the
    # message before it as its conversation (m019's "message answered": often an unrelated
    # reply, so `facts search beagle` found the dentist). Its conversation is now the message
    # that said it and the reply to it (the fast lane adds the reply to its sources). The two
    # triggers that compute a fact's exchange are made again with that rule, and the fast-lane
    # facts there are re-indexed (facts_fts_au recomputes what touching their sources changes).
    exchange_now = "coalesce((SELECT text FROM fact_exchanges WHERE fact_id = {0}.id), '')"
    run_script(db,
        f"""
        DROP TRIGGER facts_fts_ai;
        DROP TRIGGER facts_fts_au;
        CREATE TRIGGER facts_fts_ai AFTER INSERT ON facts BEGIN
          INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user, answered)
            {_m029_sources('new')};
          INSERT INTO fact_exchanges (fact_id, user, text)
            SELECT new.id, new.user, t FROM (SELECT {_m019_exchange('new')} AS t) WHERE t != '';
          INSERT INTO facts_fts(rowid, content, tags, entity_names, exchange)
            VALUES (new.id, new.content, new.tags, new.entity_names,
                    {exchange_now.format('new')});
        END;
        CREATE TRIGGER facts_fts_au AFTER UPDATE OF content, tags, entity_names,
            source_message_ids, user ON facts BEGIN
          INSERT INTO facts_fts(facts_fts, rowid, content, tags, entity_names, exchange)
            VALUES ('delete', old.id, old.content, old.tags, old.entity_names,
                    {exchange_now.format('old')});
          DELETE FROM fact_sources WHERE fact_id = old.id;
          INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user, answered)
            {_m029_sources('new')};
          DELETE FROM fact_exchanges WHERE fact_id = old.id;
          INSERT INTO fact_exchanges (fact_id, user, text)
            SELECT new.id, new.user, t FROM (SELECT {_m019_exchange('new')} AS t) WHERE t != '';
          INSERT INTO facts_fts(rowid, content, tags, entity_names, exchange)
            VALUES (new.id, new.content, new.tags, new.entity_names,
                    {exchange_now.format('new')});
        END;
        """
    )
    db.execute("UPDATE facts SET source_message_ids = source_message_ids "
               "WHERE instr(tags, '\"fastlane\"') > 0")
    # The context vector (m017) of each was its exchange's meaning: embedded again.
    db.execute("UPDATE fact_vectors SET context_vector = NULL WHERE fact_id IN "
               "(SELECT id FROM facts WHERE instr(tags, '\"fastlane\"') > 0)")


@migrations()
def m030_fact_tombstones(db: sqlite_utils.Database) -> None:
    # Forget that stays forgotten: forgetting, correcting or purging a fact leaves its text
    # here, so that extraction, consolidation, `learn backfill` and re-imported conversations
    # never learn the same or a near-same statement again from messages said before ``at``
    # (hermes.memory.facts.tombstones). The user's memory: exported, listed, removable.
    run_script(db,
        """
        CREATE TABLE fact_tombstones (
          id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          fact_id INTEGER,             -- the fact forgotten or corrected; NULL once purged
          content TEXT NOT NULL,       -- its text, as it was
          content_key TEXT NOT NULL,   -- hermes.memory.facts.records.content_key(content)
          action TEXT NOT NULL,        -- forget | correct | purge
          reason TEXT,
          at TEXT NOT NULL             -- when: what was said before is not learned again
        );
        CREATE INDEX idx_fact_tombstones_key ON fact_tombstones(user, content_key, at);
        CREATE INDEX idx_fact_tombstones_fact ON fact_tombstones(fact_id);
        """
    )
    # The facts forgotten or superseded before this migration leave theirs, as of then.
    db.execute(
        "INSERT INTO fact_tombstones (user, fact_id, content, content_key, action, reason, at) "
        "SELECT user, id, content, content_key, CASE WHEN forgotten_at IS NOT NULL THEN "
        "'forget' ELSE 'correct' END, forgotten_reason, coalesce(forgotten_at, valid_to, "
        "updated_at) FROM facts WHERE forgotten_at IS NOT NULL OR superseded_by IS NOT NULL "
        "ORDER BY id")


@migrations()
def m031_fact_questions(db: sqlite_utils.Database) -> None:
    # Ask before overriding what the user said: an inference that would supersede a fact the
    # user stated (or trusts highly) waits here as a question for the next reply and the
    # web panel (hermes.memory.facts.questions); the fact stays as it is until it is settled.
    run_script(db,
        """
        CREATE TABLE fact_questions (
          id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          fact_id INTEGER NOT NULL,      -- the fact the user stated, kept active meanwhile
          content TEXT NOT NULL,         -- what extraction inferred instead
          session_id INTEGER,            -- where it was inferred from
          message_ids TEXT NOT NULL DEFAULT '[]',
          created_at TEXT NOT NULL,
          asked_at TEXT,                 -- when a reply was asked to put it to the user
          resolved_at TEXT,
          resolution TEXT                -- accepted | rejected | answered (the fact changed)
        );
        CREATE INDEX idx_fact_questions_open ON fact_questions(user, resolved_at, fact_id);
        """
    )


@migrations()
def m032_shown_facts_relied(db: sqlite_utils.Database) -> None:
    # Trust that learns from use: extraction says which of the facts shown for a reply the reply
    # relied on (hermes.learn.consolidate); a 👎 then lowers only those, not every fact shown
    # (hermes.memory.facts.ratings). 0 for every reply until its extraction says otherwise.
    db.execute("ALTER TABLE shown_facts ADD COLUMN relied INTEGER NOT NULL DEFAULT 0")
