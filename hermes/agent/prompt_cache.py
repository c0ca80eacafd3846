"""Prompt caching at the model edge: Anthropic's ``cache_control`` marks on what is sent, and
the cached-token counts read back from a provider's ``usage``.

OpenAI-style providers cache a repeated prefix on their own and need no marks; Claude (direct,
or through Bedrock, Vertex or OpenRouter) caches only up to a marked block.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Providers that serve Claude and take Anthropic's cache_control marks through litellm.
CACHE_MARK_PROVIDERS = frozenset({"bedrock", "vertex_ai", "vertex_ai_beta", "openrouter"})
EPHEMERAL = {"type": "ephemeral"}
# How long an entry lives (from its last use), by the mark's ttl; Anthropic charges a write to
# the 5-minute cache 1.25x the input price, to the 1-hour cache 2x, a read 0.1x.
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}
# Where the part of the front that every session shares ends (the persona: the same for every
# session and user of a home). Anthropic caches tools, then system, then messages, so a mark
# here lets a new session, a /new or a compression read the tools and the persona from the
# cache; without it they are written again with the rest of the new front.
SHARED_FRONT_END = "</persona>"


def cache_ttl(setting: str, last_sent: float | None, now: float) -> str:
    """How long what a chat request writes to the cache should live: ``5m`` or ``1h``.

    ``auto``: five minutes while the conversation is quick (its previous request less than five
    minutes ago), an hour when it starts or resumes after a pause. A five-minute entry is gone
    before a message that comes later, and writing the whole conversation again costs 1.25x each
    time (more than sending it without marks); an hour's entry costs 2x once and is read at
    0.1x by every message within the hour. ``5m`` or ``1h`` in the config: always that."""
    if setting in TTL_SECONDS:
        return setting
    if last_sent is None or now - last_sent >= TTL_SECONDS["5m"]:
        return "1h"
    return "5m"


def _control(ttl: str) -> dict[str, str]:
    return dict(EPHEMERAL) if ttl == "5m" else {**EPHEMERAL, "ttl": ttl}


def _marked(message: dict[str, Any], ttl: str) -> dict[str, Any]:
    marked = dict(message)
    content = marked.get("content")
    if marked.get("role") == "tool" or not isinstance(content, str) or not content:
        marked["cache_control"] = _control(ttl)   # litellm reads it off the message
    else:
        marked["content"] = [{"type": "text", "text": content, "cache_control": _control(ttl)}]
    return marked


def _front_marked(message: dict[str, Any], ttl: str) -> dict[str, Any]:
    """The front as two marked text blocks, split after the shared part (one when it has
    none); the text is unchanged."""
    content = message.get("content")
    if not isinstance(content, str):
        return _marked(message, ttl)
    end = content.find(SHARED_FRONT_END)
    if end < 0 or not content[end + len(SHARED_FRONT_END):].strip():
        return _marked(message, ttl)
    end += len(SHARED_FRONT_END)
    return {**message, "content": [
        {"type": "text", "text": content[:end], "cache_control": _control(ttl)},
        {"type": "text", "text": content[end:], "cache_control": _control(ttl)}]}


def mark_cache(messages: Sequence[dict[str, Any]], ttl: str = "5m") -> list[dict[str, Any]]:
    """The messages with Anthropic's cache breakpoints (at most 4 are allowed, all 4 are used):
    the end of the persona and the end of the front (the first system message), the previous
    request's last user message (so the cache written then is read now, also after more than
    20 blocks of tool calls) and the last message (written for the next request). Every mark
    of a request has the same ``ttl`` (Anthropic wants longer ones first).
    The messages themselves are not changed: the marks exist only in what is sent."""
    result = list(messages)
    if not result:
        return result
    users = [i for i, m in enumerate(result) if m.get("role") == "user"]
    points = {len(result) - 1}
    if len(users) >= 2:
        points.add(users[-2])
    front = result[0].get("role") == "system"
    for index in points - {0}:
        result[index] = _marked(result[index], ttl)
    if front:
        result[0] = _front_marked(result[0], ttl)
    elif 0 in points:
        result[0] = _marked(result[0], ttl)
    return result


def _as_int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


def cache_tokens(usage: Any) -> tuple[int | None, int | None]:
    """Cached (read) and cache-written prompt tokens, however the provider reports them:
    OpenAI's prompt_tokens_details.cached_tokens, Anthropic's cache_read_input_tokens and
    cache_creation_input_tokens (litellm copies the latter into the details as well)."""
    if usage is None:
        return None, None
    details = getattr(usage, "prompt_tokens_details", None)
    cached = _as_int(getattr(usage, "cache_read_input_tokens", None))
    if cached is None and details is not None:
        cached = _as_int(getattr(details, "cached_tokens", None))
    written = _as_int(getattr(usage, "cache_creation_input_tokens", None))
    if written is None and details is not None:
        written = _as_int(getattr(details, "cache_creation_tokens", None))
    return cached, written


def wants_marks(name: str) -> bool:
    """Whether the litellm model ``name`` is a Claude that needs cache_control marks."""
    name = name.lower()
    provider = name.split("/", 1)[0] if "/" in name else ""
    if provider == "anthropic" or (not provider and name.startswith("claude")):
        return True
    return provider in CACHE_MARK_PROVIDERS and "claude" in name
