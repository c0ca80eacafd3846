"""m021 on: this home's own state beside the memory (import resumes, the vector change log,
vector cells). Not exported."""

from __future__ import annotations

import sqlite_utils

from hermes.store.migrations import migrations, run_script


@migrations()
def m021_restores(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- `hermes import` of one file for one user, so that the same command run again after
        -- an interruption or a crash resumes it instead of refusing a home that now has memory
        -- (hermes.memory.restore_ledger). Bookkeeping of this home, not memory: not exported.
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
    # A process holds each user's vectors in memory (hermes.memory.vector_matrix) and read only
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
    # A coarse index (IVF) over a long history's vectors (hermes.memory.vector_cells): a
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
