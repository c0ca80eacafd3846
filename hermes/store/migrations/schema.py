"""m001-m017: the three tiers' tables, cron, extraction, vectors and model calls."""

from __future__ import annotations

import sqlite_utils

from hermes.store.migrations import TOKENIZE, migrations, run_script


def _fts_triggers(table: str, fts: str, columns: list[str]) -> str:
    """Triggers that keep an external-content FTS5 table in sync with its base table."""
    cols = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    return f"""
    CREATE TRIGGER {table}_fts_ai AFTER INSERT ON {table} BEGIN
      INSERT INTO {fts}(rowid, {cols}) VALUES (new.id, {new});
    END;
    CREATE TRIGGER {table}_fts_ad AFTER DELETE ON {table} BEGIN
      INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.id, {old});
    END;
    CREATE TRIGGER {table}_fts_au AFTER UPDATE OF {cols} ON {table} BEGIN
      INSERT INTO {fts}({fts}, rowid, {cols}) VALUES ('delete', old.id, {old});
      INSERT INTO {fts}(rowid, {cols}) VALUES (new.id, {new});
    END;
    """


@migrations()
def m001_basic_memory(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- Tier 1: the always-injected block, one row per entry. Row-level writes (never a
        -- whole-block rewrite) are what lets two processes write at once without losing entries.
        CREATE TABLE basic_memory (
          id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          text TEXT NOT NULL,
          created_at TEXT NOT NULL,
          updated_at TEXT NOT NULL,
          UNIQUE (user, text)            -- an exact duplicate is a no-op, even across processes
        );
        CREATE INDEX idx_basic_memory_user ON basic_memory(user, id);
        """
    )


@migrations()
def m002_facts(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- Tier 2: atomic, self-contained statements with trust, entities and history.
        CREATE TABLE facts (
          id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          content TEXT NOT NULL,
          content_key TEXT NOT NULL,      -- normalised content: exact-duplicate detection
          category TEXT NOT NULL DEFAULT 'general',
          kind TEXT NOT NULL DEFAULT 'semantic',   -- semantic | episodic | procedural
          tags TEXT NOT NULL DEFAULT '[]',         -- JSON list of strings
          entity_names TEXT NOT NULL DEFAULT '',   -- linked entity names, copied for FTS recall
          trust REAL NOT NULL DEFAULT 0.5,         -- in [0, 1]; below the threshold: hidden
          importance REAL,                         -- 0..1 as judged by extraction, if known
          created_at TEXT NOT NULL,
          updated_at TEXT NOT NULL,
          valid_from TEXT,
          valid_to TEXT,                           -- set when superseded by a newer fact
          superseded_by INTEGER REFERENCES facts(id),
          forgotten_at TEXT,                       -- soft delete; restorable
          forgotten_reason TEXT,
          source_session_id INTEGER,               -- where it was learned, if from a conversation
          source_message_ids TEXT,                 -- JSON list of message ids
          retrieved_count INTEGER NOT NULL DEFAULT 0,
          helpful_count INTEGER NOT NULL DEFAULT 0,
          unhelpful_count INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX idx_facts_user_key ON facts(user, content_key);
        CREATE INDEX idx_facts_user_updated ON facts(user, updated_at);

        CREATE TABLE entities (
          id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          name TEXT NOT NULL,                      -- display form, as first seen
          name_key TEXT NOT NULL,                  -- casefolded, whitespace-collapsed
          created_at TEXT NOT NULL,
          UNIQUE (user, name_key)
        );
        -- Other names of an entity ("Postgres" for "PostgreSQL"), resolved case-insensitively.
        CREATE TABLE entity_aliases (
          user TEXT NOT NULL,
          alias_key TEXT NOT NULL,
          alias TEXT NOT NULL,
          entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
          PRIMARY KEY (user, alias_key)
        );
        CREATE INDEX idx_entity_aliases_entity ON entity_aliases(entity_id);
        CREATE TABLE fact_entities (
          fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
          entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
          PRIMARY KEY (fact_id, entity_id)
        ) WITHOUT ROWID;
        CREATE INDEX idx_fact_entities_entity ON fact_entities(entity_id, fact_id);

        -- Every change of a fact, with old and new values (JSON), for `hermes facts history`.
        CREATE TABLE fact_history (
          id INTEGER PRIMARY KEY,
          fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
          user TEXT NOT NULL,
          action TEXT NOT NULL,    -- add | merge | update | supersede | rate | forget | restore
          old TEXT,
          new TEXT,
          note TEXT,
          at TEXT NOT NULL
        );
        CREATE INDEX idx_fact_history_fact ON fact_history(fact_id, id);
        """
    )
    run_script(db,
        f"""
        CREATE VIRTUAL TABLE facts_fts USING fts5(
          content, tags, entity_names, content='facts', content_rowid='id', tokenize='{TOKENIZE}'
        );
        {_fts_triggers("facts", "facts_fts", ["content", "tags", "entity_names"])}
        """
    )


@migrations()
def m003_sessions(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- Tier 3: every conversation, from every front-end. Never deleted by summarising.
        CREATE TABLE sessions (
          id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          source TEXT NOT NULL,          -- discord | terminal | cron | import
          channel_key TEXT,              -- where a front-end finds its open session
          title TEXT,
          summary TEXT,                  -- written once, when the session is summarised
          summary_status TEXT,           -- NULL | done | failed
          summary_attempts INTEGER NOT NULL DEFAULT 0,
          started_at TEXT NOT NULL,
          last_active_at TEXT NOT NULL,
          ended_at TEXT,
          message_count INTEGER NOT NULL DEFAULT 0,
          external_id TEXT,              -- an importer's own id, returned in search results
          extracted_through INTEGER NOT NULL DEFAULT 0   -- fact-extraction watermark (message id)
        );
        CREATE INDEX idx_sessions_user_active ON sessions(user, last_active_at);
        CREATE INDEX idx_sessions_user_channel ON sessions(user, channel_key, ended_at);
        CREATE UNIQUE INDEX idx_sessions_external ON sessions(user, source, external_id)
          WHERE external_id IS NOT NULL;

        CREATE TABLE messages (
          id INTEGER PRIMARY KEY,
          session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
          user TEXT NOT NULL,            -- copied from the session: every query scopes by user
          role TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
          speaker TEXT,
          content TEXT NOT NULL,
          created_at TEXT NOT NULL,
          tool_name TEXT,
          tool_args TEXT,                -- JSON
          tool_call_id TEXT,
          external_id TEXT
        );
        CREATE INDEX idx_messages_session ON messages(session_id, id);
        CREATE UNIQUE INDEX idx_messages_external ON messages(session_id, external_id)
          WHERE external_id IS NOT NULL;

        -- The schema keeps the session's counters true, whoever inserts the message.
        CREATE TRIGGER messages_count_ai AFTER INSERT ON messages BEGIN
          UPDATE sessions SET message_count = message_count + 1,
            last_active_at = max(last_active_at, new.created_at)
          WHERE id = new.session_id;
        END;
        """
    )
    run_script(db,
        f"""
        CREATE VIRTUAL TABLE messages_fts USING fts5(
          content, speaker, content='messages', content_rowid='id', tokenize='{TOKENIZE}'
        );
        {_fts_triggers("messages", "messages_fts", ["content", "speaker"])}
        CREATE VIRTUAL TABLE sessions_fts USING fts5(
          title, summary, content='sessions', content_rowid='id', tokenize='{TOKENIZE}'
        );
        {_fts_triggers("sessions", "sessions_fts", ["title", "summary"])}
        """
    )


@migrations()
def m004_turns(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- Which facts the model was shown for each assistant message, so that rating a reply
        -- (a 👎 on Discord, /rate in the terminal) reaches exactly those facts.
        CREATE TABLE shown_facts (
          message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
          fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
          PRIMARY KEY (message_id, fact_id)
        ) WITHOUT ROWID;
        CREATE INDEX idx_shown_facts_fact ON shown_facts(fact_id);

        -- A front-end's handle on an assistant message (a Discord message id), for reactions.
        CREATE TABLE message_refs (
          ref TEXT PRIMARY KEY,           -- e.g. discord:<message id>
          message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
          user TEXT NOT NULL
        );
        """
    )


@migrations()
def m005_extraction(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- One row per extraction run over a range of a session's messages. The unique key makes
        -- a re-run of the same range a no-op.
        CREATE TABLE extraction_runs (
          id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
          first_message_id INTEGER NOT NULL,
          last_message_id INTEGER NOT NULL,
          status TEXT NOT NULL,          -- done | skipped | failed | retry
          reason TEXT,                   -- why skipped or failed
          raw_output TEXT,               -- the model's output when it could not be used
          model_calls INTEGER NOT NULL DEFAULT 0,
          cost REAL,
          created INTEGER NOT NULL DEFAULT 0,
          merged INTEGER NOT NULL DEFAULT 0,
          superseded INTEGER NOT NULL DEFAULT 0,
          forgotten INTEGER NOT NULL DEFAULT 0,
          attempts INTEGER NOT NULL DEFAULT 1,
          started_at TEXT NOT NULL,
          finished_at TEXT,
          UNIQUE (session_id, first_message_id, last_message_id)
        );
        CREATE INDEX idx_extraction_runs_status ON extraction_runs(status, user);
        """
    )


@migrations()
def m006_cron(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        CREATE TABLE cron_jobs (
          id INTEGER PRIMARY KEY,
          name TEXT NOT NULL UNIQUE,
          user TEXT NOT NULL,
          schedule TEXT NOT NULL,        -- a cron expression, or "every 30m" / "every 6h"
          prompt TEXT NOT NULL,
          deliver TEXT NOT NULL,         -- discord:<channel id> | terminal | file:<path>
          enabled INTEGER NOT NULL DEFAULT 1,
          origin TEXT NOT NULL DEFAULT 'cli',   -- cli | config | builtin
          created_at TEXT NOT NULL
        );
        -- One row per scheduled time: the unique key is what makes a job run at most once per
        -- scheduled time, across restarts and across processes.
        CREATE TABLE cron_runs (
          id INTEGER PRIMARY KEY,
          job_id INTEGER NOT NULL REFERENCES cron_jobs(id) ON DELETE CASCADE,
          scheduled_for TEXT NOT NULL,
          status TEXT NOT NULL,          -- running | ok | silent | failed | missed
          output TEXT,
          session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
          started_at TEXT,
          finished_at TEXT,
          UNIQUE (job_id, scheduled_for)
        );
        """
    )


@migrations()
def m007_cron_run_kind(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- schedule: a fire time of the job's schedule; manual: `hermes cron run`. Only scheduled
        -- runs count when working out which fire times a restarted daemon has missed.
        ALTER TABLE cron_runs ADD COLUMN kind TEXT NOT NULL DEFAULT 'schedule';
        CREATE INDEX idx_cron_runs_job_kind ON cron_runs(job_id, kind, scheduled_for);
        """
    )


@migrations()
def m008_facts_vocab(db: sqlite_utils.Database) -> None:
    # Per-term document counts of the facts index, read by fact search to tell informative
    # words from ones found in a large share of all facts (see hermes/memory/facts/search.py).
    db.execute("CREATE VIRTUAL TABLE facts_vocab USING fts5vocab(facts_fts, 'row')")


@migrations()
def m009_message_vectors(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- Optional hybrid recall (sessions.embeddings, hermes[embeddings]): one vector per
        -- message and model, filled lazily before a search. float16, L2-normalised.
        CREATE TABLE message_vectors (
          message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
          user TEXT NOT NULL,
          model TEXT NOT NULL,           -- e.g. all-MiniLM-L6-v2-onnx-int8
          vector BLOB NOT NULL,
          PRIMARY KEY (message_id, model)
        );
        CREATE INDEX idx_message_vectors_user ON message_vectors(user, model, message_id);
        """
    )


@migrations()
def m010_reply_ratings(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- One 👍/👎 per (reply, person who reacted): a repeated reaction does not rate again,
        -- switching replaces the rating, removing the reaction withdraws it. `applied` holds the
        -- trust change each fact actually got ({"<fact id>": delta}), so withdrawing undoes
        -- exactly that, clamping included.
        CREATE TABLE reply_ratings (
          message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
          rater TEXT NOT NULL,            -- front-end identity, e.g. discord:<user id>
          user TEXT NOT NULL,
          helpful INTEGER NOT NULL,       -- 1: 👍, 0: 👎
          applied TEXT NOT NULL,
          rated_at TEXT NOT NULL,
          UNIQUE (message_id, rater)
        );
        """
    )


@migrations()
def m011_cron_config_enabled(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- For config jobs: the `enabled` the config had at the last sync. When the config's
        -- value changes, the job follows it; otherwise a pause/resume from the CLI stands.
        ALTER TABLE cron_jobs ADD COLUMN config_enabled INTEGER;
        UPDATE cron_jobs SET config_enabled = enabled WHERE origin = 'config';
        """
    )


@migrations()
def m012_fact_vectors(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- Fact recall by meaning (hermes.memory.facts.vectors): one vector per fact and model,
        -- written in the background (never on the reply path). content_key is the text the
        -- vector was computed from: a fact whose text changed is embedded again.
        CREATE TABLE fact_vectors (
          fact_id INTEGER NOT NULL REFERENCES facts(id) ON DELETE CASCADE,
          user TEXT NOT NULL,
          model TEXT NOT NULL,
          content_key TEXT NOT NULL,
          vector BLOB NOT NULL,          -- float16, L2-normalised
          PRIMARY KEY (fact_id, model)
        );
        CREATE INDEX idx_fact_vectors_user ON fact_vectors(user, model);
        """
    )


@migrations()
def m013_fact_history_origin(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- Who made a change, when it was not Hermes' own conversation: for example
        -- mcp:claude-desktop for a write from an MCP client. NULL for chat, extraction and CLI.
        ALTER TABLE fact_history ADD COLUMN origin TEXT;
        """
    )


@migrations()
def m014_drop_facts_vocab(db: sqlite_utils.Database) -> None:
    # m008's facts_vocab counted terms over every user's facts, so other users' facts could
    # decide which of my words were searched. Per-turn recall now counts terms within the user
    # (hermes/agent/prompt.py), and nothing reads the table: dropped so no one starts to.
    db.execute("DROP TABLE IF EXISTS facts_vocab")


@migrations()
def m015_cron_job_names_per_user(db: sqlite_utils.Database) -> None:
    # A cron job's name was unique across the home, so `hermes cron add bobcron --user alice`
    # answered "already exists" when bob had one: names are now unique per user. SQLite cannot
    # drop a UNIQUE constraint, so both cron tables are rebuilt (with foreign keys on, dropping
    # cron_jobs first would cascade-delete every run, and renaming it would rewrite cron_runs'
    # reference to the old name). Rows and ids are copied as they are.
    job_columns = ("id, name, user, schedule, prompt, deliver, enabled, origin, created_at, "
                   "config_enabled")
    run_columns = "id, job_id, scheduled_for, status, output, session_id, started_at, " \
        "finished_at, kind"
    db.execute(
        """
        CREATE TABLE cron_jobs_m015 (
          id INTEGER PRIMARY KEY,
          name TEXT NOT NULL,
          user TEXT NOT NULL,
          schedule TEXT NOT NULL,        -- a cron expression, or "every 30m" / "every 6h"
          prompt TEXT NOT NULL,
          deliver TEXT NOT NULL,         -- discord:<channel id> | terminal | file:<path>
          enabled INTEGER NOT NULL DEFAULT 1,
          origin TEXT NOT NULL DEFAULT 'cli',   -- cli | config | builtin
          created_at TEXT NOT NULL,
          config_enabled INTEGER,        -- the config's `enabled` at the last sync
          UNIQUE (user, name)
        )
        """
    )
    db.execute(
        """
        CREATE TABLE cron_runs_m015 (
          id INTEGER PRIMARY KEY,
          job_id INTEGER NOT NULL REFERENCES cron_jobs_m015(id) ON DELETE CASCADE,
          scheduled_for TEXT NOT NULL,
          status TEXT NOT NULL,          -- running | ok | silent | failed | missed
          output TEXT,
          session_id INTEGER REFERENCES sessions(id) ON DELETE SET NULL,
          started_at TEXT,
          finished_at TEXT,
          kind TEXT NOT NULL DEFAULT 'schedule',   -- schedule | manual
          UNIQUE (job_id, scheduled_for)
        )
        """
    )
    db.execute(f"INSERT INTO cron_jobs_m015 ({job_columns}) SELECT {job_columns} FROM cron_jobs")
    db.execute(f"INSERT INTO cron_runs_m015 ({run_columns}) SELECT {run_columns} FROM cron_runs")
    db.execute("DROP TABLE cron_runs")
    db.execute("DROP TABLE cron_jobs")
    # Renaming rewrites cron_runs_m015's reference to the new name as well.
    db.execute("ALTER TABLE cron_jobs_m015 RENAME TO cron_jobs")
    db.execute("ALTER TABLE cron_runs_m015 RENAME TO cron_runs")
    db.execute("CREATE INDEX idx_cron_runs_job_kind ON cron_runs(job_id, kind, scheduled_for)")


@migrations()
def m016_model_calls(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- One row per model call, as litellm reported it (hermes.store.usage): what a
        -- conversation and the background work cost, and how much of it a prompt cache served.
        CREATE TABLE model_calls (
          id INTEGER PRIMARY KEY,
          user TEXT,                     -- NULL: a call made for no one user (hermes doctor)
          source TEXT NOT NULL,   -- chat | compression | extraction | summary | context | other
          session_id INTEGER,
          model TEXT NOT NULL,
          at TEXT NOT NULL,
          prompt_tokens INTEGER,         -- NULL: the provider reported no usage
          cached_tokens INTEGER,         -- read from the prompt cache (part of prompt_tokens)
          cache_write_tokens INTEGER,    -- written to the prompt cache (Anthropic)
          completion_tokens INTEGER,
          cost REAL                      -- USD as litellm prices it; NULL: unknown
        );
        CREATE INDEX idx_model_calls_user ON model_calls(user, at);
        """
    )


@migrations()
def m017_fact_context_vectors(db: sqlite_utils.Database) -> None:
    run_script(db,
        """
        -- A second vector per fact (hermes.memory.facts.vectors): the exchange it was learned
        -- from (its source messages), so that a question worded like the conversation finds
        -- the fact too. NULL: no source messages, or embedded before this column existed.
        ALTER TABLE fact_vectors ADD COLUMN context_vector BLOB;
        """
    )
