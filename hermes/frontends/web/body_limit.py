"""A size limit on every request body the web panel reads (issue 30).

`/login` read a body of any size before any check and without a login (128 MiB: +336 MiB peak
before the 403), and a chat message of 16 MiB was accepted. Every request now carries at most
MAX_BODY_BYTES: a Content-Length over it is refused before a byte is read, and a body streamed
without one is refused once it passes the limit (413, one line, nothing done). The longest chat
message (hermes.agent.turn.MAX_MESSAGE_CHARS, 64,000 characters) fits however it is encoded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

MAX_BODY_BYTES = 1024 * 1024
REFUSAL = (f"Refused: a request body over {MAX_BODY_BYTES // 1024 // 1024} MiB "
           "(a message is at most 64,000 characters).").encode()

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class _TooLarge(Exception):
    pass


class BodyLimit:
    """ASGI middleware: refuses a body over ``limit`` bytes with 413."""

    def __init__(self, app: App, limit: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.limit or declared < 0:
                    await _refuse(send)
                    return
        received = 0
        started = over = False

        async def counted() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    over = True
                    raise _TooLarge
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            if over:
                # An app that catches what its read raised (the MCP SDK: a 500) is not heard:
                # the answer is the refusal (review rev4: a chunked 64 MiB MCP body was a 500).
                if not started:
                    started = True
                    await _refuse(send)
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except _TooLarge:
            if not started:
                await _refuse(send)


async def _refuse(send: Send) -> None:
    await send({"type": "http.response.start", "status": 413,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(REFUSAL)).encode()),
                            (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": REFUSAL})
