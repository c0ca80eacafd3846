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
# Where the part of the front that every session shares ends (the persona: the same for every
# session and user of a home). Anthropic caches tools, then system, then messages, so a mark
# here lets a new session, a /new or a compression read the tools and the persona from the
# cache; without it they are written again with the rest of the new front.
SHARED_FRONT_END = "</persona>"


def _marked(message: dict[str, Any]) -> dict[str, Any]:
    marked = dict(message)
    content = marked.get("content")
    if marked.get("role") == "tool" or not isinstance(content, str) or not content:
        marked["cache_control"] = dict(EPHEMERAL)   # litellm reads it off the message
    else:
        marked["content"] = [{"type": "text", "text": content, "cache_control": dict(EPHEMERAL)}]
    return marked


def _front_marked(message: dict[str, Any]) -> dict[str, Any]:
    """The front as two marked text blocks, split after the shared part (one when it has
    none); the text is unchanged."""
    content = message.get("content")
    if not isinstance(content, str):
        return _marked(message)
    end = content.find(SHARED_FRONT_END)
    if end < 0 or not content[end + len(SHARED_FRONT_END):].strip():
        return _marked(message)
    end += len(SHARED_FRONT_END)
    return {**message, "content": [
        {"type": "text", "text": content[:end], "cache_control": dict(EPHEMERAL)},
        {"type": "text", "text": content[end:], "cache_control": dict(EPHEMERAL)}]}


def mark_cache(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with Anthropic's cache breakpoints (at most 4 are allowed, all 4 are used):
    the end of the persona and the end of the front (the first system message), the previous
    request's last user message (so the cache written then is read now, also after more than
    20 blocks of tool calls) and the last message (written for the next request).
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
        result[index] = _marked(result[index])
    if front:
        result[0] = _front_marked(result[0])
    elif 0 in points:
        result[0] = _marked(result[0])
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
