"""m018-m020: a fact found by the words and meaning of the conversation it was learned from."""

from __future__ import annotations

import sqlite_utils

from hermes.store.migrations import TOKENIZE, migrations, run_script


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
    run_script(db,
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
    run_script(db,
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
    run_script(db,
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
    run_script(db,
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
    run_script(db,
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
    run_script(db,
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
