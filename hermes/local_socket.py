"""The daemon's local socket: `hermes ask` and `hermes chat` run their turns in a running daemon.

A daemon (`hermes run`) has litellm loaded, the memory open and the extraction worker running, so
a turn sent to it starts at once and its facts are learned after the client has gone. Without a
daemon (no socket, or a socket left by one that died) the command runs the turn in-process.

The socket is ``<home>/hermes.sock``, created with mode 0600 by the daemon that holds the home's
lock. **Trust model**: a client that can connect is the OS user who owns the home (the kernel's
file permissions; the daemon also checks the peer's uid with SO_PEERCRED where there is one), and
that user can already read and write ``hermes.db`` directly and run any command with any
``--user``. So the client names the user it acts for, resolved exactly as the in-process command
resolves it (``--user``, else ``users.default``), and the daemon acts for that user only: a turn
runs on a session only if that session belongs to that user. The socket accepts three requests,
nothing else: run a turn, "the person left" (summarise that user's ended sessions), and a call
of hermes/daemon_calls.py (a CLI command's search or cron run, for that user).

Protocol: one JSON request line from the client; the daemon answers with JSON lines:
``{"chunk": text}`` as the reply streams, then ``{"result": {...}}`` (a TurnResult) or
``{"error": message, "exit_code": n}``.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hermes.errors import HermesError

if TYPE_CHECKING:
    import asyncio

    from hermes.agent.turn import Agent
    from hermes.config import Settings
    from hermes.memory import Memory

log = logging.getLogger(__name__)

SOCKET_NAME = "hermes.sock"
# A Unix socket path is at most 107 bytes on Linux; a longer home has no socket (in-process).
MAX_PATH_BYTES = 107
# A request is one line: a message of at most MAX_MESSAGE_CHARS (hermes.agent.turn) as JSON
# (up to 12 bytes a character as \\u escapes) fits with room to spare. A longer line is refused
# in one line (asyncio's default of 64 KiB closed the connection: "daemon closed the connection").
REQUEST_LIMIT = 1024 * 1024
# A reply line: the result carries the whole reply's text (64 KiB made a long reply a
# traceback, "Separator is found, but chunk is longer than limit").
REPLY_LIMIT = 64 * 1024 * 1024
# After refusing a line over REQUEST_LIMIT, what the client still sends of it is read and
# dropped for at most this long (never kept): a client still writing when the connection
# closed got ECONNRESET and never read the refusal (review rev4: a 2 MiB line).
DISCARD_SECONDS = 5.0


def socket_path(settings: Settings) -> Path:
    return settings.home_path / SOCKET_NAME


class DaemonError(HermesError):
    """The daemon refused a request, or a turn's model failed there: its one line and code."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


# --------------------------------------------------------------------------- the client (CLI)
def connect(path: Path) -> socket.socket | None:
    """A connection to the daemon listening on ``path`` (the home's: :func:`socket_path`); None
    when none answers (no socket, or one left by a daemon that died: it refuses)."""
    if len(os.fsencode(path)) > MAX_PATH_BYTES or not path.exists():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(path))
    except OSError:
        sock.close()
        return None
    return sock


def daemon_running(settings: Settings) -> bool:
    """Whether a daemon answers on the home's socket."""
    sock = connect(socket_path(settings))
    if sock is None:
        return False
    sock.close()
    return True


class RemoteTurn:
    """A turn run by the daemon, shaped like :class:`hermes.agent.turn.Turn` for the CLI:
    iterate for the reply's chunks; then ``result`` (a TurnResult) and ``exception``."""

    def __init__(self, path: Path, request: dict[str, Any]) -> None:
        self.path = path
        self.request = request
        self.result: Any = None
        self.exception: HermesError | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        import asyncio

        from hermes.agent.turn import MAX_MESSAGE_CHARS, MessageTooLong, too_long_message

        text = str(self.request.get("text") or "")
        if len(text) > MAX_MESSAGE_CHARS:  # refused here as in-process: nothing is sent
            from hermes.agent.turn import TurnResult

            self.exception = MessageTooLong(too_long_message(len(text)))
            self.result = TurnResult(
                user=str(self.request.get("user")), session_id=int(self.request["session_id"]),
                user_message_id=0, assistant_message_id=None, text="", shown_fact_ids=[],
                tool_calls=0, memory_written=False, error=str(self.exception))
            return
        try:
            reader, writer = await asyncio.open_unix_connection(os.fspath(self.path),
                                                                limit=REPLY_LIMIT)
        except OSError:
            raise DaemonError("The Hermes daemon stopped; run the command again.") from None
        try:
            writer.write(json.dumps(self.request).encode() + b"\n")
            await writer.drain()
            while line := await _read_line(reader, "reply"):
                message = json.loads(line)
                if "chunk" in message:
                    yield message["chunk"]
                elif "result" in message:
                    from hermes.agent.turn import TurnResult

                    self.result = TurnResult(**message["result"])
                    if message.get("exit_code"):
                        self.exception = DaemonError(self.result.error or "the turn failed",
                                                     int(message["exit_code"]))
                    return
                else:
                    raise DaemonError(message.get("error") or "the daemon failed",
                                      int(message.get("exit_code") or 1))
            raise DaemonError("The Hermes daemon closed the connection before the reply was "
                              "complete.")
        finally:
            writer.close()


class RemoteAgent:
    """The daemon's agent as the CLI sees it: turns, and "the person left"."""

    background_llm = None

    def __init__(self, settings: Settings) -> None:
        self.path = socket_path(settings)

    def turn(self, user: str, session_id: int, text: str, *,
             speaker: str | None = None) -> RemoteTurn:
        return RemoteTurn(self.path, {"op": "turn", "user": user, "session_id": session_id,
                                      "text": text, "speaker": speaker})

    async def left(self, user: str) -> None:
        """The daemon summarises the user's ended sessions, in its own time."""
        import asyncio

        try:
            reader, writer = await asyncio.open_unix_connection(os.fspath(self.path))
        except OSError:
            return                     # gone: its next start summarises them
        writer.write(json.dumps({"op": "left", "user": user}).encode() + b"\n")
        await writer.drain()
        await reader.readline()
        writer.close()


async def _read_line(reader: asyncio.StreamReader, what: str) -> bytes:
    """One line, or a DaemonError saying it is over the limit (the rest is not read)."""
    import asyncio

    try:
        return await reader.readline()
    except (ValueError, asyncio.LimitOverrunError):
        limit = REQUEST_LIMIT if what == "request" else REPLY_LIMIT
        raise DaemonError(f"Refused: a {what} over {limit // 1024 // 1024} MiB on the local "
                          "socket.") from None


# --------------------------------------------------------------------------- the daemon side
async def _discard_rest(reader: asyncio.StreamReader, seconds: float = DISCARD_SECONDS) -> None:
    """Read and drop the rest of a refused line (to its newline or the end of input), for at
    most ``seconds``: the client can then finish writing and read the answer."""
    import asyncio

    try:
        async with asyncio.timeout(seconds):
            while chunk := await reader.read(64 * 1024):
                if b"\n" in chunk:
                    return
    except (TimeoutError, ConnectionError):
        return


def _peer_uid(writer: asyncio.StreamWriter) -> int | None:
    sock = writer.get_extra_info("socket")
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


class SocketServer:
    """Serves the local socket for the daemon: turns on the daemon's agent, for the user the
    client names, on sessions of that user only."""

    def __init__(self, memory: Memory, agent: Agent, *,
                 calls: Callable[[str, str, dict[str, Any]], Awaitable[Any]] | None = None
                 ) -> None:
        self.memory = memory
        self.agent = agent
        # ``calls(user, name, args)``: the CLI commands the daemon answers (hermes/daemon_calls)
        self.calls = calls
        self.path = socket_path(memory.settings)
        self._server: asyncio.AbstractServer | None = None
        self.turns: set[asyncio.Task[Any]] = set()
        self.background: set[asyncio.Task[Any]] = set()

    async def start(self) -> bool:
        import asyncio

        if len(os.fsencode(self.path)) > MAX_PATH_BYTES:
            log.warning("local socket: %s is too long a path; `hermes ask` runs in-process",
                        self.path)
            return False
        # Only this daemon holds the home's lock: a socket file here is a dead daemon's.
        self.path.unlink(missing_ok=True)
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=os.fspath(self.path),
                                                           limit=REQUEST_LIMIT)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        log.info("local socket: %s", self.path)
        return True

    async def stop(self, grace: float) -> None:
        """No new requests; running turns get ``grace`` seconds, then are stopped."""
        from hermes.aio import finish_or_cancel

        if self._server is not None:
            self._server.close()
            self.path.unlink(missing_ok=True)
        late = await finish_or_cancel(self.turns, grace)
        if late:
            log.warning("local socket: %d turn(s) did not finish in time and were stopped",
                        len(late))
        await finish_or_cancel(self.background, grace)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        import asyncio

        task = asyncio.current_task()
        if task is not None:
            self.turns.add(task)
        try:
            uid = _peer_uid(writer)
            if uid is not None and uid not in (os.getuid(), 0):
                await self._write(writer, {"error": "Refused: another OS user's connection."})
                return
            try:
                line = await _read_line(reader, "request")
            except DaemonError as exc:
                await self._write(writer, {"error": str(exc), "exit_code": 1})
                await _discard_rest(reader)
                return
            if not line:                # daemon_running's probe: connected, sent nothing
                return
            try:
                request = json.loads(line)
                user = str(request["user"])
            except (ValueError, KeyError, TypeError, RecursionError):  # nested 100,000 deep
                await self._write(writer, {"error": "Refused: not a Hermes request."})
                return
            if request.get("op") == "turn":
                await self._turn(writer, user, request)
            elif request.get("op") == "call":
                await self._call(writer, user, request)
            elif request.get("op") == "left":
                self._left(user)
                await self._write(writer, {"ok": True})
            else:
                await self._write(writer, {"error": f"Refused: unknown op {request.get('op')!r}."})
        except (ConnectionError, asyncio.IncompleteReadError):
            log.info("local socket: the client went away")
        finally:
            if task is not None:
                self.turns.discard(task)
            writer.close()

    async def _turn(self, writer: asyncio.StreamWriter, user: str,
                    request: dict[str, Any]) -> None:
        from hermes.errors import HermesError

        try:
            session_id = int(request["session_id"])
        except (KeyError, TypeError, ValueError):
            # int()'s own words ("invalid literal for int() with base 10") are no answer
            await self._write(writer, {"error": "Refused: session_id must be a session's number "
                                                f"(got {request.get('session_id')!r:.40}).",
                                       "exit_code": 1})
            return
        try:
            session = self.memory.sessions.get(user, session_id)
        except HermesError as exc:
            # Another user's session is "no such session" for this one.
            await self._write(writer, {"error": str(exc), "exit_code": 1})
            return
        turn = self.agent.turn(user, session.id, str(request.get("text") or ""),
                               speaker=request.get("speaker"))
        async for chunk in turn:
            await self._write(writer, {"chunk": chunk})
        # A model failure is the turn's result (the message is recorded); its exit code too.
        exit_code = turn.exception.exit_code if turn.exception is not None else 0
        await self._write(writer, {"result": asdict(turn.result), "exit_code": exit_code})

    async def _call(self, writer: asyncio.StreamWriter, user: str,
                    request: dict[str, Any]) -> None:
        """A CLI command's work done here (hermes/daemon_calls.py): its result, or one line."""
        try:
            args = request.get("args") or {}
            if not isinstance(args, dict):
                raise HermesError("Refused: a call's arguments are an object.")
            if self.calls is None:
                raise HermesError("Refused: this socket answers no calls.")
            result = await self.calls(user, str(request.get("name")), args)
        except HermesError as exc:
            await self._write(writer, {"error": str(exc),
                                       "exit_code": getattr(exc, "exit_code", 1)})
            return
        except Exception:
            log.exception("local socket: the call %r failed", request.get("name"))
            await self._write(writer, {"error": "The daemon failed to answer; it has been "
                                       "logged (hermes.log).", "exit_code": 1})
            return
        await self._write(writer, {"result": result})

    def _left(self, user: str) -> None:
        import asyncio

        from hermes.agent import summarize

        async def work() -> None:
            try:
                await summarize.summarize_pending(self.memory, self.agent.background_llm, user)
            except Exception:
                log.exception("local socket: summarising %s's ended sessions failed", user)

        task = asyncio.ensure_future(work())
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        writer.write(json.dumps(message, ensure_ascii=False).encode() + b"\n")
        await writer.drain()
