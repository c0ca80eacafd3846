"""m033 on: where each memory was learned and where it came from (hermes.memory.audience)."""

from __future__ import annotations

import sqlite_utils

from hermes.store.migrations import migrations

# A Discord channel key as the front-end wrote it before m033 (hermes.frontends.discord_bot):
# discord:dm:<channel> (a DM: private), discord:channel:<channel>:user:<user> (a server channel;
# its server was not recorded) and discord:thread:<thread> (a thread; neither its parent channel
# nor its server was recorded).
_CHANNEL = "discord:channel:"
_THREAD = "discord:thread:"


@migrations()
def m033_places(db: sqlite_utils.Database) -> None:
    # Every stored item knows where it was learned: a reply read in a shared place (a Discord
    # channel, whose members all read it) is built only from what they may see
    # (hermes.memory.audience). 'private' is every private place (a DM, the terminal, the web
    # panel, MCP, the CLI, an import); a shared place's key is discord:<server>:<channel> (a
    # thread counts as its parent channel). A message's place is its session's; a fact's is
    # the place it was learned in (its source session's); a basic-memory entry's where it was
    # written. `shared` is the user's mark on a fact or entry: NULL follows the home's
    # privacy.shared_places, 1 shareable (any shared place may show it), 0 private (no shared
    # place may, not even the one it was learned in).
    #
    # And where each fact came from (`source`): said (the user said or typed it), inferred (the
    # model's own inference), import (an imported file or transcript), tool (a tool's output, an
    # MCP client), document (a document read). Facts from elsewhere than the user start with
    # less trust and rank below the user's own until confirmed (`confirmed_at`: a helpful
    # rating, or the user saying it again).
    for statement in (
        "ALTER TABLE sessions ADD COLUMN place TEXT NOT NULL DEFAULT 'private'",
        "ALTER TABLE facts ADD COLUMN place TEXT NOT NULL DEFAULT 'private'",
        "ALTER TABLE facts ADD COLUMN shared INTEGER",           # NULL: default | 1 | 0
        "ALTER TABLE facts ADD COLUMN source TEXT NOT NULL DEFAULT 'said'",
        "ALTER TABLE facts ADD COLUMN confirmed_at TEXT",
        "ALTER TABLE basic_memory ADD COLUMN place TEXT NOT NULL DEFAULT 'private'",
        "ALTER TABLE basic_memory ADD COLUMN shared INTEGER",    # NULL: default | 1 | 0
    ):
        db.execute(statement)
    # Existing rows, placed from their session's source and channel. A server channel's server
    # was never recorded: its sessions get the channel with an unknown server
    # (discord:?:<channel>), and a thread's (whose parent is unknown too) discord:?:thread:<id>;
    # the Discord front-end renames both to the full key when it next sees the channel
    # (hermes.memory.audience.adopt_place). Until then they are shared places no reply is read
    # in: only private places show them. A cron job's runs take the place of its delivery (a
    # Discord channel: with an unknown server). Anything else, or anything that cannot be
    # placed (a DM, the terminal, an import, an unreadable key), is private.
    start = len(_CHANNEL) + 1
    db.execute(
        f"UPDATE sessions SET place = 'discord:?:' || substr(channel_key, {start}, "
        f"instr(substr(channel_key, {start}), ':') - 1) "
        f"WHERE source = 'discord' AND channel_key GLOB '{_CHANNEL}[0-9]*:user:*' "
        f"AND substr(channel_key, {start}, instr(substr(channel_key, {start}), ':') - 1) "
        "NOT GLOB '*[^0-9]*'")
    start = len(_THREAD) + 1
    db.execute(
        f"UPDATE sessions SET place = 'discord:?:thread:' || substr(channel_key, {start}) "
        f"WHERE source = 'discord' AND channel_key GLOB '{_THREAD}[0-9]*' "
        f"AND substr(channel_key, {start}) NOT GLOB '*[^0-9]*'")
    db.execute(
        "UPDATE sessions SET place = (SELECT 'discord:?:' || substr(j.deliver, 9) "
        "FROM cron_jobs j WHERE j.user = sessions.user AND 'cron:' || j.name = "
        "sessions.channel_key AND j.deliver GLOB 'discord:[0-9]*' AND substr(j.deliver, 9) "
        "NOT GLOB '*[^0-9]*') WHERE source = 'cron' AND EXISTS (SELECT 1 FROM cron_jobs j "
        "WHERE j.user = sessions.user AND 'cron:' || j.name = sessions.channel_key "
        "AND j.deliver GLOB 'discord:[0-9]*' AND substr(j.deliver, 9) NOT GLOB '*[^0-9]*')")
    # A fact was learned where its source session was held (the same user's sessions only).
    db.execute(
        "UPDATE facts SET place = (SELECT s.place FROM sessions s WHERE s.id = "
        "facts.source_session_id AND s.user = facts.user) WHERE source_session_id IS NOT NULL "
        "AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = facts.source_session_id "
        "AND s.user = facts.user AND s.place != 'private')")
    db.execute(
        "UPDATE facts SET source = 'import' WHERE source_session_id IS NOT NULL AND EXISTS "
        "(SELECT 1 FROM sessions s WHERE s.id = facts.source_session_id "
        "AND s.user = facts.user AND s.source = 'import')")
    # A shared place's sessions (the few a reply in a channel may draw on).
    db.execute("CREATE INDEX idx_sessions_user_place ON sessions(user, place)")
    # The rows of shared places, by place (adopt_place renames a place for every user):
    # partial, so a home that only ever talks in private keeps no such index entries.
    for table in ("sessions", "facts", "basic_memory"):
        db.execute(f"CREATE INDEX idx_{table}_place ON {table}(place) WHERE place != 'private'")
