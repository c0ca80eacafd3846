"""A network-free Discord for tests: real discord.py objects, a fake HTTP layer.

Every REST call discord.py makes goes through ``HTTPClient.request``; replacing it (and
``static_login``) lets the library's real ``send``/``reply``/``edit``/``typing``/``tree.sync``
code run while we record the calls. Interaction responses go through the webhook adapter,
patched on its class. Guilds, channels, threads, DMs, messages, reactions and interactions are
built from Discord API payloads with the library's own constructors.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import discord
from discord.http import Route
from discord.webhook.async_ import AsyncWebhookAdapter

TS = "2026-11-29T12:00:00+00:00"
_ids = itertools.count(900_000_000_000_000_000)


def snowflake() -> int:
    return next(_ids)


def user_payload(uid: int, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {"id": str(uid), "username": name, "discriminator": "0", "global_name": name.title(),
            "avatar": None, "bot": bot}


def member_payload(user: dict[str, Any] | None = None, roles: list[int] = ()) -> dict[str, Any]:
    # "flags" is required: without it discord.py silently leaves message.author a plain User.
    data: dict[str, Any] = {"roles": [str(r) for r in roles], "joined_at": TS, "deaf": False,
                            "mute": False, "flags": 0, "nick": None}
    if user is not None:
        data["user"] = user
    return data


def message_payload(*, channel_id: int, author: dict[str, Any], content: str,
                    mid: int | None = None, guild_id: int | None = None,
                    mentions: list[dict[str, Any]] = (), roles: list[int] = ()) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": str(mid or snowflake()), "channel_id": str(channel_id), "author": author,
        "content": content, "timestamp": TS, "edited_timestamp": None, "tts": False,
        "mention_everyone": False, "mentions": list(mentions), "mention_roles": [],
        "attachments": [], "embeds": [], "pinned": False, "type": 0, "flags": 0,
    }
    if guild_id is not None:
        data["guild_id"] = str(guild_id)
        data["member"] = member_payload(roles=roles)
    return data


@dataclass
class Call:
    method: str
    path: str
    route: Route
    json: Any = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    response: Any = None


class FakeDiscordAPI:
    """Records every REST call and answers it; an unexpected route fails the test."""

    def __init__(self) -> None:
        self.bot_user = user_payload(snowflake(), "hermes", bot=True)
        self.app_id = snowflake()
        self.calls: list[Call] = []
        self.webhook_calls: list[Call] = []
        self.channels: dict[int, dict[str, Any]] = {}
        self.routes: dict[tuple[str, str], Callable[[Call], Any]] = {
            ("GET", "/users/@me"): lambda c: self.bot_user,
            ("GET", "/oauth2/applications/@me"): self._app_info,
            ("POST", "/channels/{channel_id}/messages"): self._echo_message,
            ("PATCH", "/channels/{channel_id}/messages/{message_id}"): self._echo_message,
            ("DELETE", "/channels/{channel_id}/messages/{message_id}"): lambda c: None,
            ("POST", "/channels/{channel_id}/typing"): lambda c: None,
            ("PUT", "/applications/{application_id}/commands"): self._sync_commands,
            ("GET", "/channels/{channel_id}"): lambda c: self.channels[int(c.route.channel_id)],
        }

    def sent(self, method: str = "POST",
             path: str = "/channels/{channel_id}/messages") -> list[Call]:
        return [c for c in self.calls if c.method == method and c.path == path]

    def messages_in(self, channel_id: int) -> list[Call]:
        return [c for c in self.sent() if c.route.channel_id == channel_id]

    def install(self, client: discord.Client, monkeypatch: Any) -> None:
        http = client.http

        async def fake_static_login(token: str) -> Any:
            http.token = token
            return await http.request(Route("GET", "/users/@me"))

        monkeypatch.setattr(http, "request", self.request)
        monkeypatch.setattr(http, "static_login", fake_static_login)
        monkeypatch.setattr(AsyncWebhookAdapter, "request", self._webhook_request())

    async def request(self, route: Route, *, files: Any = None, form: Any = None,
                      **kwargs: Any) -> Any:
        call = Call(route.method, route.path, route, kwargs.get("json"), kwargs)
        self.calls.append(call)
        handler = self.routes.get((route.method, route.path))
        if handler is None:
            raise AssertionError(f"unexpected Discord REST call {route.method} {route.path}")
        call.response = handler(call)
        return call.response

    def _webhook_request(self) -> Callable[..., Any]:
        api = self

        async def webhook_request(adapter: Any, route: Route, session: Any = None, *,
                                  payload: Any = None, multipart: Any = None, files: Any = None,
                                  params: Any = None, **kwargs: Any) -> Any:
            api.webhook_calls.append(Call(route.method, route.path, route, payload))
            if route.path == "/interactions/{webhook_id}/{webhook_token}/callback":
                return {"interaction": {"id": str(route.webhook_id), "type": 2,
                                        "response_message_id": str(snowflake())}}
            content = (payload or {}).get("content") or ""
            return message_payload(channel_id=1, author=api.bot_user, content=content)

        return webhook_request

    def _app_info(self, call: Call) -> dict[str, Any]:
        return {"id": str(self.app_id), "name": "Hermes", "description": "", "icon": None,
                "bot_public": False, "bot_require_code_grant": False,
                "owner": user_payload(1, "owner"), "verify_key": "x", "flags": 0}

    def _echo_message(self, call: Call) -> dict[str, Any]:
        body = call.json or {}
        mid = int(call.route.url.rsplit("/", 1)[-1]) if call.method == "PATCH" else snowflake()
        return message_payload(mid=mid, channel_id=int(call.route.channel_id),
                               author=self.bot_user, content=body.get("content") or "")

    def _sync_commands(self, call: Call) -> list[dict[str, Any]]:
        return [dict(cmd, id=str(snowflake()), application_id=str(self.app_id), version="1")
                for cmd in call.json]


class World:
    """A guild with a text channel and a thread; people with DMs; all in the client's cache."""

    def __init__(self, client: discord.Client, api: FakeDiscordAPI) -> None:
        self.client = client
        self.api = api
        self.state = client._connection
        self.guild_id, self.channel_id, self.thread_id = snowflake(), snowflake(), snowflake()
        self.role_id = snowflake()
        self.people: dict[str, dict[str, Any]] = {
            name: user_payload(snowflake(), name) for name in ("alice", "bob", "mallory")
        }
        bot = self.state.user
        assert bot is not None
        channel = {"id": str(self.channel_id), "type": 0, "guild_id": str(self.guild_id),
                   "name": "general", "position": 0, "permission_overwrites": [], "nsfw": False,
                   "parent_id": None, "topic": None, "last_message_id": None,
                   "rate_limit_per_user": 0}
        api.channels[self.channel_id] = channel
        thread = {"id": str(self.thread_id), "type": 11, "guild_id": str(self.guild_id),
                  "parent_id": str(self.channel_id), "owner_id": str(bot.id), "name": "plans",
                  "last_message_id": None, "rate_limit_per_user": 0, "message_count": 0,
                  "member_count": 1, "thread_metadata": {
                      "archived": False, "auto_archive_duration": 1440,
                      "archive_timestamp": TS, "locked": False}}
        members = [member_payload(p) for p in self.people.values()]
        members.append(member_payload(user_payload(bot.id, bot.name, bot=True)))
        self.guild = self.state._add_guild_from_data({
            "id": str(self.guild_id), "name": "Test Guild", "icon": None, "owner_id": "1",
            "roles": [{"id": str(self.guild_id), "name": "@everyone", "permissions": "0",
                       "position": 0, "color": 0, "hoist": False, "managed": False,
                       "mentionable": False},
                      {"id": str(self.role_id), "name": "hermes-users", "permissions": "0",
                       "position": 1, "color": 0, "hoist": False, "managed": False,
                       "mentionable": False}],
            "channels": [channel], "threads": [thread], "members": members,
            "member_count": len(members), "features": [], "emojis": [], "stickers": [],
        })
        self.channel = self.guild.get_channel(self.channel_id)
        self.thread = self.guild.get_thread(self.thread_id)
        self.dms: dict[str, discord.DMChannel] = {}
        for name, person in self.people.items():
            self.dms[name] = self.state.add_dm_channel(
                {"id": str(snowflake()), "type": 1, "recipients": [person]})

    def id_of(self, name: str) -> int:
        return int(self.people[name]["id"])

    def dm(self, name: str, content: str, *, author: dict[str, Any] | None = None
           ) -> discord.Message:
        channel = self.dms[name]
        data = message_payload(channel_id=channel.id, author=author or self.people[name],
                               content=content)
        return discord.Message(state=self.state, channel=channel, data=data)

    def in_guild(self, name: str, content: str, *, mention: bool = True, thread: bool = False,
                 roles: list[int] = ()) -> discord.Message:
        bot = self.state.user
        assert bot is not None
        mentions = [user_payload(bot.id, bot.name, bot=True)] if mention else []
        if mention:
            content = f"<@{bot.id}> {content}"
        channel = self.thread if thread else self.channel
        data = message_payload(channel_id=channel.id, guild_id=self.guild_id,
                               author=self.people[name], content=content, mentions=mentions,
                               roles=roles)
        return discord.Message(state=self.state, channel=channel, data=data)

    def reaction(self, *, name: str, message_id: int, channel_id: int, emoji: str,
                 removed: bool = False) -> discord.RawReactionActionEvent:
        data = {"user_id": str(self.id_of(name)), "channel_id": str(channel_id),
                "message_id": str(message_id), "emoji": {"id": None, "name": emoji},
                "burst": False, "type": 0}
        return discord.RawReactionActionEvent(data, discord.PartialEmoji(name=emoji),
                                              "REACTION_REMOVE" if removed else "REACTION_ADD")

    def interaction_payload(self, name: str, command: str, options: dict[str, Any] | None = None, *,
                    sub: str | None = None, dm: bool = False,
                    thread: bool = False) -> dict[str, Any]:
        """A chat-input interaction, as INTERACTION_CREATE delivers it."""
        opts = [{"name": k, "type": 4 if isinstance(v, int) else 3, "value": v}
                for k, v in (options or {}).items()]
        if sub is not None:
            opts = [{"name": sub, "type": 1, "options": opts}]
        data: dict[str, Any] = {
            "id": str(snowflake()), "application_id": str(self.client.application_id),
            "type": 2, "token": "interaction-token", "version": 1,
            "attachment_size_limit": 8 * 1024 * 1024, "locale": "en-US", "app_permissions": "0",
            "entitlements": [],
            "data": {"id": str(snowflake()), "name": command, "type": 1, "options": opts},
        }
        if dm:
            channel = self.dms[name]
            data.update(channel={"id": str(channel.id), "type": 1}, channel_id=str(channel.id),
                        user=self.people[name])
        else:
            channel_id, kind = (self.thread_id, 11) if thread else (self.channel_id, 0)
            data.update(guild_id=str(self.guild_id), guild_locale="en-US",
                        channel={"id": str(channel_id), "type": kind},
                        channel_id=str(channel_id),
                        member=dict(member_payload(self.people[name]), permissions="0"))
        return data


async def drain_event_tasks() -> None:
    """Await the tasks discord.py's dispatch and CommandTree created."""
    for _ in range(5):
        await asyncio.sleep(0)
        pending = [t for t in asyncio.all_tasks()
                   if t is not asyncio.current_task() and not t.done()
                   and (t.get_name().startswith("discord.py: ")
                        or t.get_name() == "CommandTree-invoker")]
        if not pending:
            return
        await asyncio.gather(*pending)
