"""The Discord front-end: a discord.py Client that turns allowed messages into agent turns.

Who is served: only users on the allowlist (``discord.allowed_users``, or members with one of
``allowed_roles``, or anyone in ``allowed_channels``); with no allowlist, nobody. A message
from anyone else, or from a bot, is dropped before anything is stored or logged beyond an id.

Where: DMs always; in servers, messages that mention the bot (``require_mention_in_guilds``).
Each DM, each thread, and each (channel, user) pair in a server is its own Hermes session.
Which memory: the Discord id goes through ``users.identities`` (``discord:<id>``). Who reads the
reply: a DM is a private place (all of the person's memory); a server channel or thread is a
shared place (``discord:<server>:<channel>``, a thread as its parent channel), whose replies are
built only from what its members may see (hermes.memory.audience): each session is opened with
its place, and every turn in it reads for that place.

A reply streams into its message by edits (at most every ``edit_interval_seconds``), and is
split into pieces under Discord's 2,000 characters with code blocks intact. Each piece is
linked to the assistant message, so a 👍/👎 on it, by the person the reply was for, rates
exactly the facts that were shown to the model for that reply.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import discord
from discord import app_commands

from hermes.aio import finish_or_cancel
from hermes.errors import HermesError
from hermes.frontends.chunking import chunk_message
from hermes.frontends.commands import MemoryCommands
from hermes.home import write_private_text
from hermes.memory.audience import adopt_place
from hermes.memory.place import PRIVATE, Place, Scope
from hermes.store.db import write_transaction

if TYPE_CHECKING:
    from hermes.agent.turn import Agent
    from hermes.cron.store import CronJob
    from hermes.memory import Memory

log = logging.getLogger(__name__)

THUMBS_UP = "\N{THUMBS UP SIGN}"
THUMBS_DOWN = "\N{THUMBS DOWN SIGN}"
APOLOGY = "Sorry, something went wrong with that reply; it has been logged. Please try again."


def ref_for(message_id: int, author_id: int) -> str:
    """The message_refs key of one reply piece: the Discord message and who it was for."""
    return f"discord:{message_id}:{author_id}"


def cut_off(text: str, error: str) -> str:
    """A reply the model stopped answering mid-way, marked as such."""
    return f"{text.rstrip()}\n\n(reply cut off: {error})"


THREAD_TYPES = (discord.ChannelType.public_thread, discord.ChannelType.private_thread,
                discord.ChannelType.news_thread)


def _channel_key(guild_id: int | None, channel: object, channel_id: int | None,
                 author_id: int) -> str:
    """DM, thread, or (channel, person): each its own session."""
    if guild_id is None:
        return f"discord:dm:{channel_id}"
    # A cached Thread or an uncached PartialMessageable: both carry the channel type.
    if getattr(channel, "type", None) in THREAD_TYPES:
        return f"discord:thread:{channel_id}"
    return f"discord:channel:{channel_id}:user:{author_id}"


def _place(guild_id: int | None, channel: object, channel_id: int | None) -> Place:
    """Who reads a reply here: a DM is private; a server channel is shared, a thread as its
    parent channel (whose members read it)."""
    if guild_id is None or channel_id is None:
        return PRIVATE
    if getattr(channel, "type", None) in THREAD_TYPES:
        parent = getattr(channel, "parent_id", None)
        # a thread whose parent is not known: a place of its own, shared all the same
        return Place.discord_channel(guild_id, parent) if parent else \
            Place.discord_unknown_thread(channel_id)
    return Place.discord_channel(guild_id, channel_id)


def place_for(message: discord.Message) -> Place:
    return _place(message.guild.id if message.guild else None, message.channel,
                  message.channel.id)


def place_for_interaction(interaction: discord.Interaction) -> Place:
    return _place(interaction.guild_id, interaction.channel, interaction.channel_id)


def channel_key_for(message: discord.Message) -> str:
    return _channel_key(message.guild.id if message.guild else None, message.channel,
                        message.channel.id, message.author.id)


def channel_key_for_interaction(interaction: discord.Interaction) -> str:
    return _channel_key(interaction.guild_id, interaction.channel, interaction.channel_id,
                        interaction.user.id)


RECEIPTS_KEPT = 200
DISCORD_LIMIT = 2000


def learned_line(ids: list[int]) -> str:
    listed = ", ".join(f"#{i}" for i in sorted(ids))
    first = sorted(ids)[0]
    return f"learned {listed} (/forget {first} undoes it)"


def receipt_line(shown: list[int]) -> str:
    """The reply's receipt in Discord: one line of small text (``-#``) under it, saying which
    facts it used and how to rate or drop them (the memory stays the same: it is not stored)."""
    ids = ", ".join(f"#{i}" for i in sorted(shown))
    noun = "fact" if len(shown) == 1 else "facts"
    return f"-# used {len(shown)} {noun} ({ids}) · react 👍/👎 to rate them · /forget ID drops one"


class HermesBot(discord.Client):
    def __init__(self, memory: Memory, agent: Agent | None, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 background: list[Callable[[], Coroutine[Any, Any, None]]] | None = None) -> None:
        intents = discord.Intents.default()
        # Privileged: enable "Message Content Intent" in the Developer Portal as well.
        intents.message_content = True
        # Model output and cron digests are not trusted to ping: no @everyone/@here, roles or
        # users, ever. (Replies also pass mention_author=False.)
        super().__init__(intents=intents, allowed_mentions=discord.AllowedMentions.none())
        self.memory = memory
        self.agent = agent
        self.config = memory.settings.discord
        self.commands = MemoryCommands(memory)
        self.tree = app_commands.CommandTree(self)
        self.monotonic = monotonic
        self.accepting = True
        self._background = list(background or [])
        self._tasks: set[asyncio.Task[None]] = set()
        self._turns: set[asyncio.Task[None]] = set()
        self._locks: dict[str, asyncio.Lock] = {}
        # channels (and threads) whose rows placed without their server were renamed to their
        # full place this process (hermes.memory.audience.adopt_place)
        self._adopted: set[int] = set()
        self._parents: dict[int, int] = {}  # thread id -> parent channel id, looked up
        # A reply's last message, for its receipt to say what was learned from it later
        self._receipts: OrderedDict[int, discord.Message] = OrderedDict()
        self._add_commands()

    # ------------------------------------------------------------------ lifecycle
    async def setup_hook(self) -> None:
        await self._sync_commands()
        for job in self._background:
            task = asyncio.create_task(job(), name=f"hermes-discord-{job.__name__}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _sync_commands(self) -> None:
        """Register the slash commands, only when they changed (syncing is rate-limited)."""
        spec = json.dumps([c.to_dict(self.tree) for c in self.tree.get_commands()],
                          sort_keys=True)
        digest = hashlib.sha256(f"{self.application_id}:{spec}".encode()).hexdigest()
        marker = self.memory.settings.home_path / "discord-commands.sha256"
        if marker.exists() and marker.read_text(encoding="utf-8").strip() == digest:
            log.info("discord: slash commands unchanged, not synced")
            return
        try:
            await self.tree.sync()
        except discord.DiscordException:
            # Messages still work; the next start tries again (no marker written).
            log.exception("discord: syncing the slash commands failed; continuing without")
            return
        write_private_text(marker, digest + "\n")  # 0600, whatever the umask
        log.info("discord: slash commands synced")

    async def on_ready(self) -> None:
        log.info("discord: connected as %s (%s)", self.user, getattr(self.user, "id", "?"))

    async def drain(self, timeout: float | None = None) -> int:
        """Stop taking messages and wait for running turns; returns how many were cut short."""
        self.accepting = False
        return len(await finish_or_cancel(self._turns, timeout))

    async def close(self) -> None:
        self.accepting = False
        for task in list(self._tasks):
            task.cancel()
        await super().close()

    # ------------------------------------------------------------------ who is served
    def is_allowed(self, author: discord.abc.Snowflake, channel: object) -> bool:
        config = self.config
        if author.id in config.allowed_users:
            return True
        if config.allowed_roles and isinstance(author, discord.Member) and any(
                role.id in config.allowed_roles for role in author.roles):
            return True
        if config.allowed_channels and channel is not None:
            ids = {getattr(channel, "id", None), getattr(channel, "parent_id", None)}
            return bool(ids & set(config.allowed_channels))
        return False

    def user_for(self, discord_id: int) -> str:
        return self.memory.settings.resolve_user(f"discord:{discord_id}")

    def wants(self, message: discord.Message) -> bool:
        """Should Hermes answer this message? Nothing is stored for one it does not want."""
        if not self.accepting or message.author.bot or self.user is None:
            return False
        if message.author.id == self.user.id:
            return False
        if not self.is_allowed(message.author, message.channel):
            log.debug("discord: ignored a message from a user not on the allowlist")
            return False
        if message.guild is None:
            return True
        return not self.config.require_mention_in_guilds or self.user in message.mentions

    def text_of(self, message: discord.Message) -> str:
        assert self.user is not None
        text = message.content
        for mention in (f"<@{self.user.id}>", f"<@!{self.user.id}>"):
            text = text.replace(mention, "")
        return text.strip()

    # ------------------------------------------------------------------ messages
    async def on_message(self, message: discord.Message) -> None:
        if not self.wants(message):
            return
        text = self.text_of(message)
        if not text:
            return
        task = asyncio.current_task()
        if task is not None:
            self._turns.add(task)
        try:
            key = channel_key_for(message)
            async with self._locks.setdefault(key, asyncio.Lock()):
                await self._answer(message, key, text)
        except Exception:
            log.exception("discord: a turn failed")
            try:
                await message.reply(APOLOGY, mention_author=False)
            except discord.DiscordException:
                log.exception("discord: could not even send the apology")
        finally:
            if task is not None:
                self._turns.discard(task)

    async def _answer(self, message: discord.Message, key: str, text: str) -> None:
        assert self.agent is not None, "a bot without an agent only serves slash commands"
        user = self.user_for(message.author.id)
        place = await self._place_of(message)
        self._adopt(place, message.channel)
        session = self.memory.sessions.open_for(user, "discord", key, place=place)
        turn = self.agent.turn(user, session.id, text, speaker=message.author.display_name)
        sent: list[discord.Message] = []
        streamed = ""
        last_edit = self.monotonic()
        async with message.channel.typing():
            async for chunk in turn:
                streamed += chunk
                if self.monotonic() - last_edit >= self.config.edit_interval_seconds:
                    await self._show(message, sent, chunk_message(streamed + " …"))
                    last_edit = self.monotonic()
        result = turn.result
        final = result.text if result.text.strip() else streamed
        if result.error and not final.strip():
            final = f"Sorry, I could not answer: {result.error}"
        elif result.error:
            final = cut_off(final, result.error)    # a partial reply must not look complete
        elif result.shown_fact_ids:
            final += "\n" + receipt_line(result.shown_fact_ids)
        await self._show(message, sent, chunk_message(final) or ["(no reply)"])
        if result.assistant_message_id is not None:
            for piece in sent:
                self.commands.ops.link_ref(Scope(user), ref_for(piece.id, message.author.id),
                                           result.assistant_message_id)
            if sent:
                self._receipts[result.assistant_message_id] = sent[-1]
                while len(self._receipts) > RECEIPTS_KEPT:
                    self._receipts.popitem(last=False)

    def learned(self, record: Any) -> None:
        """An ``ExtractionWorker.on_commit`` listener: a fact learned from a reply of this bot
        is added to that reply's receipt line (``· learned #12, /forget 12 undoes it``)."""
        sent = self._receipts.get(record.last_message_id)
        if sent is None or record.changes is None:
            return
        ids = [c.fact_id for c in record.changes.changes if c.kind in ("created", "superseded")]
        if not ids:
            return
        task = asyncio.ensure_future(self._add_learned(record.last_message_id, sent, ids))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _add_learned(self, reply_id: int, sent: discord.Message, ids: list[int]) -> None:
        learned = learned_line(ids)
        lines = sent.content.split("\n")
        if lines[-1].startswith("-# "):
            lines[-1] += " · " + learned
        else:
            lines.append("-# " + learned)
        content = "\n".join(lines)
        if len(content) > DISCORD_LIMIT:
            return                       # no room left in the message; the facts page has it
        try:
            self._receipts[reply_id] = await sent.edit(content=content)
        except discord.DiscordException:
            log.warning("discord: could not add what was learned to a reply's receipt")

    async def _show(self, message: discord.Message, sent: list[discord.Message],
                    pieces: list[str]) -> None:
        """Make the reply's messages show ``pieces``: edit what is there, send the rest."""
        for index, piece in enumerate(pieces):
            if index < len(sent):
                if sent[index].content != piece:
                    sent[index] = await sent[index].edit(content=piece)
            elif index == 0:
                sent.append(await message.reply(piece, mention_author=False))
            else:
                sent.append(await message.channel.send(piece))
        while len(sent) > len(pieces):
            await sent.pop().delete()

    # ------------------------------------------------------------------ reactions
    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        await self._reaction(payload, added=True)

    async def on_raw_reaction_remove(self, payload: discord.RawReactionActionEvent) -> None:
        await self._reaction(payload, added=False)

    async def _reaction(self, payload: discord.RawReactionActionEvent, *, added: bool) -> None:
        """👍/👎: one rating per (reply, person); switching replaces it, removing withdraws it.

        The rating is keyed by the assistant message, so the pieces of a long reply share it.
        Removing 👎 while 👍 is in effect (both were added) leaves the 👍 in effect.
        """
        emoji = str(payload.emoji)
        if emoji not in (THUMBS_UP, THUMBS_DOWN) or self.user is None:
            return
        if payload.user_id == self.user.id or payload.user_id not in self._allowed_ids(payload):
            return
        try:
            ops, scope = self.commands.ops, Scope(self.user_for(payload.user_id))
            ref = ref_for(payload.message_id, payload.user_id)
            message_id = ops.message_for_ref(scope, ref)
            if message_id is None:
                return          # not a Hermes reply, or a reply for someone else
            helpful = emoji == THUMBS_UP
            rater = f"discord:{payload.user_id}"
            in_effect = ops.reply_rating(scope, message_id, rater)
            if not added:
                if in_effect != helpful:
                    return      # removing a reaction that is not the one in effect
                rating: bool | None = None
            else:
                rating = helpful
            rated = ops.set_reply_rating(scope, message_id, rater, rating)
            log.info("discord: %s %s on reply %d changed %d fact(s)", emoji,
                     "added" if added else "removed", message_id, len(rated))
            reach = ops.reply_reach(scope, message_id)
            if added and in_effect != helpful and reach.basis == "unclear":
                # Nothing moved though facts were shown: say so once, and how to rate one.
                rate_one = f"/rate fact_id:ID rating:{'up' if helpful else 'down'}"
                channel = self.get_partial_messageable(payload.channel_id)
                await channel.get_partial_message(payload.message_id).reply(
                    f"-# {reach.explain(helpful, rate_one)}", mention_author=False)
        except Exception:
            log.exception("discord: rating a reply failed")

    def _allowed_ids(self, payload: discord.RawReactionActionEvent) -> set[int]:
        """The reacting user, when allowed (a raw event carries no Member for DMs)."""
        member = payload.member
        channel = self.get_channel(payload.channel_id)
        author = member or discord.Object(id=payload.user_id)
        return {payload.user_id} if self.is_allowed(author, channel) else set()

    async def _place_of(self, message: discord.Message) -> Place:
        """:func:`place_for`, with a thread's parent channel looked up when discord.py did not
        have it (an uncached thread): once per thread and process. Unknown still: the thread
        is a shared place of its own."""
        place = place_for(message)
        channel = message.channel
        if place != Place.discord_unknown_thread(channel.id):
            return place
        parent = self._parents.get(channel.id)
        if parent is None:
            try:
                parent = getattr(await self.fetch_channel(channel.id), "parent_id", None)
            except discord.DiscordException:
                log.warning("discord: the parent of thread %s is not known", channel.id)
                return place
            if parent is None:
                return place
            self._parents[channel.id] = parent
        assert message.guild is not None
        return Place.discord_channel(message.guild.id, parent)

    def _adopt(self, place: Place, channel: object) -> None:
        """Once per channel and process: rows placed in this channel (or thread) before its
        server was known (migration m033, an unresolved cron delivery) take its full place."""
        channel_id = getattr(channel, "id", None)
        if not place.shared or channel_id is None or channel_id in self._adopted:
            return
        self._adopted.add(channel_id)
        is_thread = getattr(channel, "type", None) in THREAD_TYPES
        parent = getattr(channel, "parent_id", None) if is_thread else channel_id
        db = self.memory.db
        with write_transaction(db):
            moved = adopt_place(db, place, channel_id=parent or channel_id,
                                thread_id=channel_id if is_thread else None)
        if moved:
            log.info("discord: %d earlier row(s) of channel %s placed in %s", moved,
                     channel_id, place.key)

    async def place_for(self, target: str) -> Place:
        """Who reads a cron delivery to ``discord:<target>``: a DM channel is private, a server
        channel shared (a thread as its parent). A channel that cannot be looked up is a shared
        place of its own, whose readers see only what was marked shareable."""
        try:
            channel = self.get_channel(int(target)) or await self.fetch_channel(int(target))
        except (ValueError, discord.DiscordException):
            log.warning("discord: channel %s not found: its cron replies hold only what is "
                        "shareable", target)
            return Place.discord_unknown(target)
        guild = getattr(channel, "guild", None)
        if guild is None:
            return PRIVATE if isinstance(channel, discord.DMChannel | discord.GroupChannel) \
                else Place.discord_unknown(target)
        place = _place(guild.id, channel, channel.id)
        self._adopt(place, channel)
        return place

    # ------------------------------------------------------------------ cron delivery
    async def deliver(self, job: CronJob | None, target: str, text: str) -> None:
        channel = self.get_channel(int(target)) or await self.fetch_channel(int(target))
        if not isinstance(channel, discord.abc.Messageable):
            raise HermesError(f"discord:{target} is not a channel Hermes can post in")
        for piece in chunk_message(text):
            await channel.send(piece)

    # ------------------------------------------------------------------ slash commands
    async def _respond(self, interaction: discord.Interaction,
                       action: Callable[[Scope], str]) -> None:
        """Answer a slash command privately. Discord wants a first response within 3 s, and a
        search can take longer (embeddings, a large memory): defer first, then follow up."""
        if not self.is_allowed(interaction.user, interaction.channel):
            await interaction.response.send_message("Hermes is not available to you.",
                                                    ephemeral=True)
            return
        if not self.accepting:
            await interaction.response.send_message(
                "Hermes is shutting down; try again in a minute.", ephemeral=True)
            return
        await interaction.response.defer(ephemeral=True, thinking=True)
        user = self.user_for(interaction.user.id)
        try:
            # The answer is ephemeral: only its user reads it, a private place wherever the
            # command was typed.
            text = action(Scope(user))
        except HermesError as exc:
            text = str(exc)
        except Exception:
            log.exception("discord: slash command /%s failed",
                          interaction.command.qualified_name if interaction.command else "?")
            text = APOLOGY
        for piece in chunk_message(text) or ["(nothing)"]:
            await interaction.followup.send(piece, ephemeral=True)

    def _add_commands(self) -> None:
        tree, cmds = self.tree, self.commands

        @tree.command(name="remember", description="Remember a fact")
        @app_commands.describe(fact="The fact, as one self-contained sentence")
        async def remember(interaction: discord.Interaction, fact: str) -> None:
            await self._respond(interaction, lambda u: cmds.remember(u, fact))

        @tree.command(name="forget", description="Forget a fact by its id")
        async def forget(interaction: discord.Interaction, fact_id: int) -> None:
            await self._respond(interaction, lambda u: cmds.forget(u, fact_id))

        @tree.command(name="rate", description="Rate a fact helpful or unhelpful")
        @app_commands.choices(rating=[app_commands.Choice(name="up", value="up"),
                                      app_commands.Choice(name="down", value="down")])
        async def rate(interaction: discord.Interaction, fact_id: int, rating: str) -> None:
            await self._respond(interaction, lambda u: cmds.rate(u, fact_id, rating == "up"))

        @tree.command(name="pending",
                      description="Questions before an inference overrides what you said")
        @app_commands.describe(settle="Settle one: accept the inference or keep your fact",
                               question_id="The question's id (from /pending)")
        @app_commands.choices(settle=[app_commands.Choice(name="accept", value="accept"),
                                      app_commands.Choice(name="reject", value="reject")])
        async def pending(interaction: discord.Interaction, settle: str = "",
                          question_id: int | None = None) -> None:
            await self._respond(interaction, lambda u: cmds.pending(u, settle, question_id))

        @tree.command(name="new", description="Start a new conversation here")
        async def new(interaction: discord.Interaction) -> None:
            await self._respond(interaction,
                                lambda scope: self._new_session(scope.user, interaction))

        facts = app_commands.Group(name="facts", description="Search what Hermes knows")

        @facts.command(name="search", description="Search facts")
        async def facts_search(interaction: discord.Interaction, query: str) -> None:
            await self._respond(interaction, lambda u: cmds.search(u, query))

        @facts.command(name="probe", description="Everything about one entity")
        async def facts_probe(interaction: discord.Interaction, entity: str) -> None:
            await self._respond(interaction, lambda u: cmds.probe(u, entity))

        @facts.command(name="reason", description="What connects entities (comma-separated)")
        async def facts_reason(interaction: discord.Interaction, entities: str) -> None:
            await self._respond(interaction, lambda u: cmds.reason(u, entities.split(",")))

        marks = [app_commands.Choice(name=m, value=m)
                 for m in ("shareable", "private", "default")]

        @facts.command(name="mark", description="Where a fact may be repeated: shareable in "
                       "any channel, private (DMs only), or default")
        @app_commands.choices(mark=marks)
        async def facts_mark(interaction: discord.Interaction, fact_id: int, mark: str) -> None:
            await self._respond(interaction, lambda u: cmds.mark(u, fact_id, mark))

        memory = app_commands.Group(name="memory", description="The basic-memory block")

        @memory.command(name="show", description="Show the basic-memory block")
        async def memory_show(interaction: discord.Interaction) -> None:
            await self._respond(interaction, cmds.memory)

        @memory.command(name="mark", description="Where an entry may be shown: shareable in "
                        "any channel, private (DMs only), or default")
        @app_commands.describe(entry="An entry id, or a unique part of its text")
        @app_commands.choices(mark=marks)
        async def memory_mark(interaction: discord.Interaction, entry: str, mark: str) -> None:
            await self._respond(interaction, lambda u: cmds.mark_entry(u, entry, mark))

        sessions = app_commands.Group(name="sessions", description="Past conversations")

        @sessions.command(name="list", description="Recent conversations")
        async def sessions_list(interaction: discord.Interaction) -> None:
            await self._respond(interaction, cmds.session_list)

        @sessions.command(name="search", description="Search past conversations")
        async def sessions_search(interaction: discord.Interaction, query: str) -> None:
            await self._respond(interaction, lambda u: cmds.session_search(u, query))

        for group in (facts, memory, sessions):
            tree.add_command(group)

    def _new_session(self, user: str, interaction: discord.Interaction) -> str:
        store = self.memory.sessions
        current = store.open_for(user, "discord", channel_key_for_interaction(interaction),
                                 place=place_for_interaction(interaction))
        if current.message_count:
            store.close(user, current.id)
        return "Started a new conversation; the next message here begins it."
