"""The schema, as named, append-only migrations (sqlite-utils ``Migrations``).

Each migration runs in its own transaction together with the record that it ran. Never edit a
migration that has shipped: add a new one. Every memory table carries ``user`` so that every
query can be scoped to the person the memory belongs to. Timestamps are ISO 8601 UTC text
(``hermes.clock.to_ts``), so text order is time order.
"""

from __future__ import annotations

import sqlite_utils
from sqlite_utils.migrations import Migrations

migrations = Migrations("hermes")

# One tokenizer for English-language recall: Porter stemming ("deploy" finds "deployed"),
# diacritics folded ("cafe" finds "café"). CJK has no word breaks for unicode61, so queries with
# CJK text fall back to LIKE (see hermes.store.fts).
TOKENIZE = "porter unicode61 remove_diacritics 2"


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
    db.executescript(
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
    db.executescript(
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
    db.executescript(
        f"""
        CREATE VIRTUAL TABLE facts_fts USING fts5(
          content, tags, entity_names, content='facts', content_rowid='id', tokenize='{TOKENIZE}'
        );
        {_fts_triggers("facts", "facts_fts", ["content", "tags", "entity_names"])}
        """
    )


@migrations()
def m003_sessions(db: sqlite_utils.Database) -> None:
    db.executescript(
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
    db.executescript(
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
    db.executescript(
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
    db.executescript(
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
    db.executescript(
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
    db.executescript(
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
    db.executescript(
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
    db.executescript(
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
    db.executescript(
        """
        -- For config jobs: the `enabled` the config had at the last sync. When the config's
        -- value changes, the job follows it; otherwise a pause/resume from the CLI stands.
        ALTER TABLE cron_jobs ADD COLUMN config_enabled INTEGER;
        UPDATE cron_jobs SET config_enabled = enabled WHERE origin = 'config';
        """
    )


@migrations()
def m012_fact_vectors(db: sqlite_utils.Database) -> None:
    db.executescript(
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
    db.executescript(
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
    db.executescript(
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
    db.executescript(
        """
        -- A second vector per fact (hermes.memory.facts.vectors): the exchange it was learned
        -- from (its source messages), so that a question worded like the conversation finds
        -- the fact too. NULL: no source messages, or embedded before this column existed.
        ALTER TABLE fact_vectors ADD COLUMN context_vector BLOB;
        """
    )


# A fact's exchange (m018): the text of its source messages, the same user's only, in message
# order, each "speaker: content", at most 2,000 characters. ``fact`` is the row alias whose
# ``user`` and ``source_message_ids`` are read (new / old in a trigger, f in a query). JSON that
# is not a list of ids counts as no sources (json_each would raise on malformed text).
def _ids_of(fact: str) -> str:
    return (f"CASE WHEN json_valid({fact}.source_message_ids) AND "
            f"json_type({fact}.source_message_ids) = 'array' THEN {fact}.source_message_ids "
            f"ELSE '[]' END")


def _exchange_of(fact: str) -> str:
    ids = _ids_of(fact)
    return f"""coalesce((SELECT substr(group_concat(line, char(10)), 1, 2000) FROM (
      SELECT coalesce(m.speaker || ': ', '') || m.content AS line FROM messages m
      WHERE m.user = {fact}.user AND m.id IN (
        SELECT value FROM json_each({ids}) WHERE type = 'integer')
      ORDER BY m.id)), '')"""


def _sources_of(fact: str) -> str:
    """The message ids a fact cites (a JSON list), as rows of (message_id, fact_id, user)."""
    return (f"SELECT DISTINCT value, {fact}.id, {fact}.user FROM json_each({_ids_of(fact)}) "
            f"WHERE type = 'integer'")


@migrations()
def m018_facts_fts_exchange(db: sqlite_utils.Database) -> None:
    # Recall finds a fact by the words of the conversation it was learned from, not only by
    # its own: "the user owns a Model 3" is found by "what car did I say I got?" when its
    # exchange says "I finally got my Tesla". facts_fts gains a fourth column, exchange (its
    # own bm25 weight, hermes.memory.facts.records.BM25). The exchange text lives in
    # fact_exchanges (not in facts, so keeping it fresh never updates facts from inside a
    # facts trigger, which recursive triggers would re-enter); facts_fts reads its content
    # through the facts_fts_source view. Triggers keep all of it in step with every write of
    # a fact (insert, update of text, tags, entities or sources, delete) and of a source
    # message (edit, redaction, delete), whoever writes: FactStore, an import or raw SQL.
    db.executescript(
        """
        DROP TRIGGER IF EXISTS facts_fts_ai;
        DROP TRIGGER IF EXISTS facts_fts_ad;
        DROP TRIGGER IF EXISTS facts_fts_au;
        DROP TABLE facts_fts;

        -- Which facts cite a message, so that a changed or deleted message reaches them.
        -- Derived from facts.source_message_ids by the triggers below.
        CREATE TABLE fact_sources (
          message_id INTEGER NOT NULL,
          fact_id INTEGER NOT NULL,
          user TEXT NOT NULL,
          PRIMARY KEY (message_id, fact_id)
        ) WITHOUT ROWID;
        CREATE INDEX idx_fact_sources_fact ON fact_sources(fact_id);

        -- The exchange a fact was learned from, as indexed in facts_fts (no row: none).
        CREATE TABLE fact_exchanges (
          fact_id INTEGER PRIMARY KEY,
          user TEXT NOT NULL,
          text TEXT NOT NULL
        );

        CREATE VIEW facts_fts_source AS
          SELECT f.id AS id, f.content AS content, f.tags AS tags,
                 f.entity_names AS entity_names, coalesce(x.text, '') AS exchange
          FROM facts f LEFT JOIN fact_exchanges x ON x.fact_id = f.id;
        """
    )
    db.execute("INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user) "
               f"SELECT j.value, f.id, f.user FROM facts f, json_each({_ids_of('f')}) j "
               "WHERE j.type = 'integer'")
    db.execute(f"INSERT INTO fact_exchanges (fact_id, user, text) SELECT id, user, t FROM "
               f"(SELECT f.id AS id, f.user AS user, {_exchange_of('f')} AS t FROM facts f "
               f"WHERE f.id IN (SELECT fact_id FROM fact_sources)) WHERE t != ''")
    exchange_now = "coalesce((SELECT text FROM fact_exchanges WHERE fact_id = {0}.id), '')"
    db.executescript(
        f"""
        CREATE VIRTUAL TABLE facts_fts USING fts5(
          content, tags, entity_names, exchange, content='facts_fts_source', content_rowid='id',
          tokenize='{TOKENIZE}'
        );
        INSERT INTO facts_fts(facts_fts) VALUES ('rebuild');

        CREATE TRIGGER facts_fts_ai AFTER INSERT ON facts BEGIN
          INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user) {_sources_of('new')};
          INSERT INTO fact_exchanges (fact_id, user, text)
            SELECT new.id, new.user, t FROM (SELECT {_exchange_of('new')} AS t) WHERE t != '';
          INSERT INTO facts_fts(rowid, content, tags, entity_names, exchange)
            VALUES (new.id, new.content, new.tags, new.entity_names,
                    {exchange_now.format('new')});
        END;
        CREATE TRIGGER facts_fts_ad AFTER DELETE ON facts BEGIN
          INSERT INTO facts_fts(facts_fts, rowid, content, tags, entity_names, exchange)
            VALUES ('delete', old.id, old.content, old.tags, old.entity_names,
                    {exchange_now.format('old')});
          DELETE FROM fact_exchanges WHERE fact_id = old.id;
          DELETE FROM fact_sources WHERE fact_id = old.id;
        END;
        CREATE TRIGGER facts_fts_au AFTER UPDATE OF content, tags, entity_names,
            source_message_ids, user ON facts BEGIN
          INSERT INTO facts_fts(facts_fts, rowid, content, tags, entity_names, exchange)
            VALUES ('delete', old.id, old.content, old.tags, old.entity_names,
                    {exchange_now.format('old')});
          DELETE FROM fact_sources WHERE fact_id = old.id;
          INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user) {_sources_of('new')};
          DELETE FROM fact_exchanges WHERE fact_id = old.id;
          INSERT INTO fact_exchanges (fact_id, user, text)
            SELECT new.id, new.user, t FROM (SELECT {_exchange_of('new')} AS t) WHERE t != '';
          INSERT INTO facts_fts(rowid, content, tags, entity_names, exchange)
            VALUES (new.id, new.content, new.tags, new.entity_names,
                    {exchange_now.format('new')});
        END;
        """
    )
    # A source message edited (redaction), or deleted: each fact citing it is re-indexed with
    # its exchange as it now reads. fact_sources.user = the message's user: a message never
    # reaches another user's fact, even one that names its id.
    citing = ("SELECT s.fact_id FROM fact_sources s WHERE s.message_id = old.id "
              "AND s.user = old.user")
    reindex = f"""
          INSERT INTO facts_fts(facts_fts, rowid, content, tags, entity_names, exchange)
            SELECT 'delete', f.id, f.content, f.tags, f.entity_names, {exchange_now.format('f')}
            FROM facts f WHERE f.id IN ({citing});
          DELETE FROM fact_exchanges WHERE fact_id IN ({citing});
          INSERT INTO fact_exchanges (fact_id, user, text)
            SELECT id, user, t FROM (SELECT f.id AS id, f.user AS user, {_exchange_of('f')} AS t
                                     FROM facts f WHERE f.id IN ({citing})) WHERE t != '';
          INSERT INTO facts_fts(rowid, content, tags, entity_names, exchange)
            SELECT f.id, f.content, f.tags, f.entity_names, {exchange_now.format('f')}
            FROM facts f WHERE f.id IN ({citing});
    """
    db.executescript(
        f"""
        CREATE TRIGGER messages_exchange_au AFTER UPDATE OF content, speaker ON messages
        WHEN EXISTS (SELECT 1 FROM fact_sources WHERE message_id = old.id) BEGIN
          {reindex}
        END;
        CREATE TRIGGER messages_exchange_ad AFTER DELETE ON messages
        WHEN EXISTS (SELECT 1 FROM fact_sources WHERE message_id = old.id) BEGIN
          {reindex}
          DELETE FROM fact_sources WHERE message_id = old.id AND user = old.user;
        END;
        """
    )


# m019: a fact's exchange also holds the message its first source answered (the message before
# it in its session, the user's own sessions only): "A Tesla, finally." says what was bought only
# after "What car did you go for?". Of that message only the end counts (ANSWERED_CHARS: where
# the question is), after the sources, so a long reply before never pushes the sources out.
ANSWERED_CHARS = 600


def _m019_sources(fact: str) -> str:
    """Rows (message_id, fact_id, user, answered) of the messages ``fact``'s exchange is made
    of: its sources that are the user's own messages (answered 0), and the message before the
    first of them in its session, from the user or the assistant (answered 1)."""
    own = f"SELECT value FROM json_each({_ids_of(fact)}) WHERE type = 'integer'"
    first = f"(SELECT min(s.id) FROM messages s WHERE s.user = {fact}.user AND s.id IN ({own}))"
    return f"""
      SELECT m.id, {fact}.id, {fact}.user, 0 FROM messages m
      WHERE m.user = {fact}.user AND m.id IN ({own})
      UNION ALL
      SELECT max(p.id), {fact}.id, {fact}.user, 1 FROM messages p
      WHERE p.user = {fact}.user AND p.role IN ('user', 'assistant')
        AND p.session_id = (SELECT session_id FROM messages WHERE id = {first})
        AND p.id < {first}
      HAVING max(p.id) IS NOT NULL"""


def _m019_exchange(fact: str) -> str:
    """The exchange text of ``fact`` from its fact_sources rows: the sources in order, then the
    end of the message answered; at most 2,000 characters."""
    return f"""coalesce((SELECT substr(group_concat(line, char(10)), 1, 2000) FROM (
      SELECT CASE WHEN s.answered THEN substr(coalesce(m.speaker || ': ', '') || m.content,
                                              -{ANSWERED_CHARS})
             ELSE coalesce(m.speaker || ': ', '') || m.content END AS line
      FROM fact_sources s JOIN messages m ON m.id = s.message_id
      WHERE s.fact_id = {fact}.id AND m.user = {fact}.user
      ORDER BY s.answered, m.id)), '')"""


# Each fact's own sources, in bulk. CROSS JOIN fixes the order (facts, their ids, each message by
# its id): left to itself, SQLite 3.40 scanned every message and, for each, every fact of its
# user (over 20 minutes at 1M messages / 100k facts, with the write lock held; now 7 s).
M019_OWN_SOURCES = ("SELECT m.id, f.id, f.user, 0 FROM facts f "
                    f"CROSS JOIN json_each({_ids_of('f')}) j CROSS JOIN messages m "
                    "ON m.id = j.value WHERE j.type = 'integer' AND m.user = f.user")


@migrations()
def m019_exchange_with_the_message_answered(db: sqlite_utils.Database) -> None:
    # fact_sources now lists every message of a fact's exchange (its sources and the message
    # answered), so an edit or delete of either reaches the fact; such a write re-indexes the
    # citing facts by touching their source_message_ids (facts_fts_au recomputes everything:
    # one place, and no facts trigger ever updates facts).
    exchange_now = "coalesce((SELECT text FROM fact_exchanges WHERE fact_id = {0}.id), '')"
    db.executescript(
        """
        DROP TRIGGER facts_fts_ai;
        DROP TRIGGER facts_fts_ad;
        DROP TRIGGER facts_fts_au;
        DROP TRIGGER messages_exchange_au;
        DROP TRIGGER messages_exchange_ad;
        DROP TABLE fact_sources;
        -- The messages a fact's exchange is made of (derived from facts.source_message_ids and
        -- the messages, by the triggers below), so that a changed or deleted message reaches
        -- the facts whose exchange holds it.
        CREATE TABLE fact_sources (
          message_id INTEGER NOT NULL,
          fact_id INTEGER NOT NULL,
          user TEXT NOT NULL,
          answered INTEGER NOT NULL DEFAULT 0,  -- 1: not a source, the message it answered
          PRIMARY KEY (message_id, fact_id)
        ) WITHOUT ROWID;
        CREATE INDEX idx_fact_sources_fact ON fact_sources(fact_id);
        DELETE FROM fact_exchanges;
        """
    )
    # Every fact's exchange anew, in bulk, then the index rebuilt from it.
    db.execute("INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user, answered) "
               + M019_OWN_SOURCES)
    before = ("(SELECT max(p.id) FROM messages p WHERE p.user = f.user AND p.role IN "
              "('user', 'assistant') AND p.session_id = fm.session_id AND p.id < fm.id)")
    db.execute("INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user, answered) "
               f"SELECT {before}, f.id, f.user, 1 FROM facts f JOIN (SELECT fact_id, "
               "min(message_id) AS first FROM fact_sources GROUP BY fact_id) s ON s.fact_id = f.id "
               f"JOIN messages fm ON fm.id = s.first WHERE {before} IS NOT NULL")
    db.execute("INSERT INTO fact_exchanges (fact_id, user, text) SELECT id, user, t FROM "
               f"(SELECT f.id AS id, f.user AS user, {_m019_exchange('f')} AS t FROM facts f "
               "WHERE f.id IN (SELECT fact_id FROM fact_sources)) WHERE t != ''")
    db.execute("INSERT INTO facts_fts(facts_fts) VALUES ('rebuild')")
    db.executescript(
        f"""
        CREATE TRIGGER facts_fts_ai AFTER INSERT ON facts BEGIN
          INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user, answered)
            {_m019_sources('new')};
          INSERT INTO fact_exchanges (fact_id, user, text)
            SELECT new.id, new.user, t FROM (SELECT {_m019_exchange('new')} AS t) WHERE t != '';
          INSERT INTO facts_fts(rowid, content, tags, entity_names, exchange)
            VALUES (new.id, new.content, new.tags, new.entity_names,
                    {exchange_now.format('new')});
        END;
        CREATE TRIGGER facts_fts_ad AFTER DELETE ON facts BEGIN
          INSERT INTO facts_fts(facts_fts, rowid, content, tags, entity_names, exchange)
            VALUES ('delete', old.id, old.content, old.tags, old.entity_names,
                    {exchange_now.format('old')});
          DELETE FROM fact_exchanges WHERE fact_id = old.id;
          DELETE FROM fact_sources WHERE fact_id = old.id;
        END;
        CREATE TRIGGER facts_fts_au AFTER UPDATE OF content, tags, entity_names,
            source_message_ids, user ON facts BEGIN
          INSERT INTO facts_fts(facts_fts, rowid, content, tags, entity_names, exchange)
            VALUES ('delete', old.id, old.content, old.tags, old.entity_names,
                    {exchange_now.format('old')});
          DELETE FROM fact_sources WHERE fact_id = old.id;
          INSERT OR IGNORE INTO fact_sources (message_id, fact_id, user, answered)
            {_m019_sources('new')};
          DELETE FROM fact_exchanges WHERE fact_id = old.id;
          INSERT INTO fact_exchanges (fact_id, user, text)
            SELECT new.id, new.user, t FROM (SELECT {_m019_exchange('new')} AS t) WHERE t != '';
          INSERT INTO facts_fts(rowid, content, tags, entity_names, exchange)
            VALUES (new.id, new.content, new.tags, new.entity_names,
                    {exchange_now.format('new')});
        END;
        CREATE TRIGGER messages_exchange_au AFTER UPDATE OF content, speaker, role, session_id
            ON messages WHEN EXISTS (SELECT 1 FROM fact_sources WHERE message_id = old.id) BEGIN
          UPDATE facts SET source_message_ids = source_message_ids WHERE user = old.user
            AND id IN (SELECT fact_id FROM fact_sources WHERE message_id = old.id
                       AND user = old.user);
        END;
        CREATE TRIGGER messages_exchange_ad AFTER DELETE ON messages
            WHEN EXISTS (SELECT 1 FROM fact_sources WHERE message_id = old.id) BEGIN
          UPDATE facts SET source_message_ids = source_message_ids WHERE user = old.user
            AND id IN (SELECT fact_id FROM fact_sources WHERE message_id = old.id
                       AND user = old.user);
          DELETE FROM fact_sources WHERE message_id = old.id AND user = old.user;
        END;
        """
    )


@migrations()
def m020_fact_context_follows_its_messages(db: sqlite_utils.Database) -> None:
    # A fact's context vector (m017) is the meaning of its exchange, its source messages as
    # they read when it was embedded. A source message edited (a redaction) or deleted left it
    # as it was: the fact was still found by the meaning of what the message no longer says.
    # Its context vector is now dropped, and the next vector pass (the daemon's, or `hermes
    # sessions index`) embeds the exchange as it now reads (FactVectors.index takes every fact
    # whose context_vector is NULL); until then the fact is found by its own meaning. BEFORE
    # triggers: the AFTER DELETE trigger of m018/m019 removes the message's fact_sources rows,
    # and the order of two AFTER triggers is not defined. Only the message's own user's facts.
    citing = ("SELECT s.fact_id FROM fact_sources s WHERE s.message_id = old.id "
              "AND s.user = old.user")
    db.executescript(
        f"""
        CREATE TRIGGER messages_context_vector_bu BEFORE UPDATE OF content, speaker ON messages
        WHEN (new.content IS NOT old.content OR new.speaker IS NOT old.speaker)
          AND EXISTS (SELECT 1 FROM fact_sources WHERE message_id = old.id) BEGIN
          UPDATE fact_vectors SET context_vector = NULL WHERE fact_id IN ({citing});
        END;
        CREATE TRIGGER messages_context_vector_bd BEFORE DELETE ON messages
        WHEN EXISTS (SELECT 1 FROM fact_sources WHERE message_id = old.id) BEGIN
          UPDATE fact_vectors SET context_vector = NULL WHERE fact_id IN ({citing});
        END;
        """
    )


@migrations()
def m021_restores(db: sqlite_utils.Database) -> None:
    db.executescript(
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
    db.executescript(
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
    db.executescript(
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
