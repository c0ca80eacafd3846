"""What a session has sent to the model so far, so the next request extends it, never rewrites it.

A provider caches a request's prefix: the next request is cheap and quick only if it starts with
exactly the same messages. So for each session the agent keeps a :class:`Conversation`: the
front (persona, basic memory and context file as they were when the session started: a
:class:`Snapshot`) and every message after it exactly as it was sent, tool calls, tool results
and each turn's volatile tail included. A turn sends ``front + sent + new user message`` and
then appends its own exchange. A new session, ``/new`` or a compression starts a fresh one; a
restarted process rebuilds the conversation from the stored transcript (tool rows left out,
their calls were not stored) under a fresh snapshot, and extends that from then on.

:func:`shape` makes every request valid for the strictest common providers: after the leading
system messages the first message is the user's, roles alternate (a message that got no reply
is followed by a short assistant note rather than a second user message), every tool result
answers a call of the assistant message before it, and no assistant message is empty. It is a
pure function that only ever looks back, so the shape of a request is a prefix of the shape of
the next one.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hermes.memory.place import PRIVATE, Place

NO_REPLY = "(no reply: this message was not answered)"
CONTINUED = "(an earlier part of this conversation)"
EMPTY_REPLY = "(no text)"
# Conversations kept in memory at once (least recently used dropped: it is rebuilt from the
# stored transcript, at the cost of one request without a cached prefix).
MAX_CONVERSATIONS = 256


@dataclass(frozen=True)
class Snapshot:
    """The front of every request of a session, taken once when the session starts."""

    system: str                  # the system message, exactly as sent
    parts: tuple[str, ...]       # its tags, in order
    basic: tuple[tuple[int, str], ...]  # basic-memory entries (id, text) it shows
    fact_mark: int               # fact-history watermark when it was taken
    # where the session's replies are read: every part of every request is built for it
    # (hermes.memory.audience), so a shared place's front is its own
    place: Place = PRIVATE


@dataclass
class Conversation:
    snapshot: Snapshot
    sent: list[dict[str, Any]] = field(default_factory=list)  # after the front, as sent
    through: int = 0             # id of the newest stored message ``sent`` covers
    shown_facts: set[int] = field(default_factory=set)   # fact ids rendered in a tail so far
    shown_messages: set[int] = field(default_factory=set)  # past messages shown in a tail
    announced: set[tuple[Any, ...]] = field(default_factory=set)  # memory changes shown so far
    version: int = 0             # bumped by every recorded turn (a concurrent turn notices)
    last_sent: float | None = None  # when its last request was answered (clock seconds)

    def record(self, exchange: Sequence[dict[str, Any]], through: int, version: int) -> bool:
        """Append one turn's messages as they were sent. False (nothing kept) when another turn
        of the session was recorded meanwhile: the next turn rebuilds those from the store."""
        if version != self.version:
            return False
        self.sent.extend(dict(m) for m in exchange)
        self.sent = shape(self.sent)
        self.through = max(self.through, through)
        self.version += 1
        return True


class Conversations:
    """The conversation of each (user, session) this process is serving."""

    def __init__(self, limit: int = MAX_CONVERSATIONS) -> None:
        self.limit = limit
        self._items: OrderedDict[tuple[str, int], Conversation] = OrderedDict()

    def get(self, user: str, session_id: int) -> Conversation | None:
        key = (user, session_id)
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, user: str, session_id: int, conversation: Conversation) -> Conversation:
        self._items[(user, session_id)] = conversation
        self._items.move_to_end((user, session_id))
        while len(self._items) > self.limit:
            self._items.popitem(last=False)
        return conversation

    def drop(self, user: str, session_id: int) -> None:
        self._items.pop((user, session_id), None)


def _tool_call_ids(message: dict[str, Any]) -> set[str]:
    return {str(c.get("id")) for c in message.get("tool_calls") or []}


def shape(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation (what follows the leading system messages) in a shape every common
    provider accepts. Idempotent, and it only looks back: shape(a + b) starts with shape(a)
    whenever ``a`` ends with a user or tool message, as every request does."""
    result: list[dict[str, Any]] = []
    open_calls: set[str] = set()   # tool calls of the last assistant message still unanswered
    for original in messages:
        message = dict(original)
        role = message.get("role")
        previous = result[-1]["role"] if result else None
        if role == "system":
            # Only at the very start (a compression summary) or as a one-off instruction; a
            # system message never answers a tool call, so it closes nothing.
            result.append(message)
            continue
        if role == "tool":
            call_id = str(message.get("tool_call_id"))
            if call_id not in open_calls:
                continue   # an orphan result (its call was not kept): providers reject it
            open_calls.discard(call_id)
            result.append(message)
            continue
        if open_calls:
            _close_calls(result, open_calls)
            open_calls = set()
            previous = result[-1]["role"]
        if role == "user":
            if previous in ("user", "tool"):
                result.append({"role": "assistant", "content": NO_REPLY})
            result.append(message)
        elif role == "assistant":
            if previous is None or previous == "system":
                result.append({"role": "user", "content": CONTINUED})
            elif previous == "assistant":
                # Two replies in a row (a reply recorded without its question): one reply.
                merged = dict(result[-1])
                text = "\n\n".join(t for t in (merged.get("content"), message.get("content"))
                                   if t and t not in (EMPTY_REPLY, NO_REPLY))
                merged["content"] = text or EMPTY_REPLY
                if message.get("tool_calls"):
                    merged["tool_calls"] = [*(merged.get("tool_calls") or []),
                                            *message["tool_calls"]]
                result[-1] = merged
                open_calls = _tool_call_ids(merged)
                continue
            if not message.get("tool_calls"):
                message.pop("tool_calls", None)
                if not message.get("content"):
                    message["content"] = EMPTY_REPLY
            result.append(message)
            open_calls = _tool_call_ids(message)
    return result


def _close_calls(result: list[dict[str, Any]], open_calls: set[str]) -> None:
    """Answer tool calls that got no result (a turn stopped mid-way), so the calls stay valid."""
    for call_id in sorted(open_calls):
        result.append({"role": "tool", "tool_call_id": call_id,
                       "content": '{"error":"no result: the turn was stopped"}'})
