"""Live updates for the web panel: one queue per open page, events only to their own user.

``EventHub.publish(user, name, data)`` reaches every ``/events`` stream (server-sent events)
of that user and no other. A slow page that lets its queue fill loses the oldest events, never
the daemon's memory; ``close()`` ends every stream at shutdown.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

QUEUE_SIZE = 100
KEEPALIVE_SECONDS = 15.0


@dataclass(frozen=True)
class Event:
    name: str
    data: dict[str, Any]

    def encode(self) -> bytes:
        return f"event: {self.name}\ndata: {json.dumps(self.data, ensure_ascii=False)}\n\n".encode()


_CLOSE = Event("close", {})


class EventHub:
    def __init__(self) -> None:
        self._queues: dict[str, set[asyncio.Queue[Event]]] = {}
        self.closed = False

    def subscribers(self, user: str) -> int:
        return len(self._queues.get(user, ()))

    def publish(self, user: str, name: str, data: dict[str, Any]) -> int:
        """Send to every open stream of ``user``; returns how many got it."""
        event = Event(name, data)
        queues = self._queues.get(user, set())
        for queue in queues:
            if queue.full():
                queue.get_nowait()          # the oldest goes; the page reloads to catch up
            queue.put_nowait(event)
        return len(queues)

    async def stream(self, user: str, *, keepalive: float = KEEPALIVE_SECONDS
                     ) -> AsyncIterator[bytes]:
        """The bytes of one ``text/event-stream`` for ``user``, until ``close()``."""
        queue: asyncio.Queue[Event] = asyncio.Queue(QUEUE_SIZE)
        self._queues.setdefault(user, set()).add(queue)
        try:
            yield b": connected\n\nretry: 2000\n\n"
            while not self.closed:
                try:
                    event = await asyncio.wait_for(queue.get(), timeout=keepalive)
                except TimeoutError:
                    yield b": keepalive\n\n"
                    continue
                if event is _CLOSE:
                    return
                yield event.encode()
        finally:
            self._queues.get(user, set()).discard(queue)

    def close(self) -> None:
        self.closed = True
        for queues in self._queues.values():
            for queue in queues:
                if queue.full():
                    queue.get_nowait()
                queue.put_nowait(_CLOSE)
