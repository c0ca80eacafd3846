"""ChatGPT and Claude data exports, imported as sessions (source ``import``).

Both services export ``conversations.json`` (inside the zip they let you download): a JSON list
with one object per conversation. Each conversation becomes one session with its title, its
times and its spoken messages, written through :func:`.transcripts.import_sessions`
(validation before writing, batches, idempotence, the report), so an export is imported exactly
like a transcript file:

* **ChatGPT**: ``mapping`` is a tree of message nodes (an edited message or a regenerated reply
  starts a new branch); the conversation as the user last saw it is the branch that ends at
  ``current_node``, followed up through ``parent`` links. Text is in ``content.parts`` (strings;
  images and files are dicts, kept as ``[image]`` / ``[file: name]`` placeholders), times are
  epoch seconds. System and tool nodes, hidden nodes, custom instructions and model reasoning
  are left out.
* **Claude**: ``chat_messages`` in order, ``sender`` human/assistant, text in ``text`` or in
  ``content`` blocks, ISO times; an attachment's extracted text is kept below the message.

External ids (``chatgpt:<conversation id>``, the node or message ids) make a re-import a no-op
and a re-export of a conversation that grew add only its new messages. A malformed
conversation is reported by its position (1-based) and skipped; the rest is imported. A
conversation without spoken messages is counted as empty, not stored.
"""

from __future__ import annotations

import codecs
import hashlib
import itertools
import json
import re
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from hermes.clock import parse_ts, to_ts
from hermes.errors import HermesError
from hermes.memory.sessions.store import SessionStore
from hermes.memory.sessions.transcripts import (
    ImportLineError,
    ImportReport,
    _ParsedMessage,
    _ParsedSession,
    import_sessions,
)
from hermes.safe_text import scrub_value

FORMATS = ("chatgpt", "claude")
EXPORT_FILE = "conversations.json"
# ChatGPT content types that hold what was said; the rest (custom instructions, reasoning,
# browsing and execution output) is not conversation.
_CHATGPT_SPOKEN = {"text", "multimodal_text", "code"}


class ExportError(HermesError):
    """The export file as a whole cannot be read (not JSON, not a list, no conversations.json)."""


# -- reading the file -----------------------------------------------------------------------------


# The largest conversations.json read (in a file or unzipped from an archive): a zip's few
# hundred KB can unzip to gigabytes. The file is read a conversation at a time (see
# :class:`_ConversationStream`), so this bounds the time an import takes, not its memory.
MAX_EXPORT_BYTES = 256 * 1024 * 1024
_CHUNK = 1024 * 1024
# How far before the end of what has been read a JSON error may be the end of the text read so
# far rather than an error (a value cut in the middle: read more and decode it again).
_CUT_MARGIN = 64
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")
_NUMBER_TAIL = re.compile(r"[0-9eE.+-]*")
_FFFD = "\ufffd".encode()


def _too_big(name: str, size: int) -> str:
    return (f"{name}: {size / 1024 / 1024:,.0f} MiB of conversations is over the import limit "
            f"of {MAX_EXPORT_BYTES // 1024 // 1024} MiB; nothing was imported.")


class _Text:
    """The export's bytes as text, in pieces of about a MiB: bytes that are not UTF-8 become
    U+FFFD (counted in ``not_utf8``, less any U+FFFD the file spelt itself), and more than
    MAX_EXPORT_BYTES is an ExportError (a zip member can unzip to more than it said)."""

    def __init__(self, raw: IO[bytes], name: str) -> None:
        self._raw = raw
        self._name = name
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        self._read = 0
        self._tail = b""  # the last bytes of the previous piece: a U+FFFD spelt across two
        self.not_utf8 = 0
        self.done = False

    def read(self) -> str:
        """The next piece ('' at the end)."""
        while not self.done:
            chunk = self._raw.read(_CHUNK)
            self._read += len(chunk)
            if self._read > MAX_EXPORT_BYTES:
                raise ExportError(_too_big(self._name, self._read))
            text = self._decoder.decode(chunk, final=not chunk)
            self.done = not chunk
            if "\ufffd" in text or _FFFD[:1] in chunk:
                self.not_utf8 += text.count("\ufffd") - (self._tail + chunk).count(_FFFD)
            self._tail = chunk[-2:]
            if text:
                return text
        return ""


class _ConversationStream:
    """The conversations of an export's JSON, one at a time: each is decoded by ``json`` itself
    (the same values, floats, NaN, lone surrogates and duplicate keys as ``json.loads`` of the
    whole file), from a window of the text that holds the conversation being read and at most
    about as much again; the file is never in memory whole. A top-level object's
    ``conversations`` list is read the same way."""

    def __init__(self, text: _Text, name: str) -> None:
        self._text = text
        self._name = name
        self._buf = ""
        self._pos = 0
        self._lines = 0  # newlines in the text already dropped from the window
        self._column = 0  # characters after the last of them

    # -- the window

    def _more(self, want: int) -> None:
        """Drop what has been read and read until ``want`` characters are ahead (or the end)."""
        newlines = self._buf.count("\n", 0, self._pos)  # (no copy of what is dropped)
        if newlines:
            self._lines += newlines
            self._column = self._pos - self._buf.rindex("\n", 0, self._pos) - 1
        else:
            self._column += self._pos
        pieces = [self._buf[self._pos:]]
        have = len(pieces[0])
        while have < want and (piece := self._text.read()):
            pieces.append(piece)
            have += len(piece)
        self._buf = "".join(pieces)
        self._pos = 0

    def _peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            self._pos = _SPACE.match(self._buf, self._pos).end()  # type: ignore[union-attr]
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if self._text.done:
                return ""
            self._more(_CHUNK)

    def _value(self) -> Any:
        """The JSON value at the window's position, read whole."""
        while True:
            try:
                value, end = _DECODER.raw_decode(self._buf, self._pos)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") \
                    or exc.pos >= len(self._buf) - _CUT_MARGIN
                if self._text.done or not cut:
                    raise self._error(exc.msg, exc.pos) from None
            except RecursionError:
                raise ExportError(f"{self._name}: nested too deeply to be an export.") from None
            else:
                # A number ends where its characters do: at the window's end it may go on.
                tail = _NUMBER_TAIL.match(self._buf, end).end()  # type: ignore[union-attr]
                if self._text.done or tail < len(self._buf):
                    self._pos = end
                    return value
            # Cut by the window's end: at least twice as much text, so that a long value is
            # decoded a few times at most (the work stays linear in its length).
            self._more(2 * (len(self._buf) - self._pos) + _CHUNK)

    def _error(self, msg: str, pos: int) -> ExportError:
        newlines = self._buf.count("\n", 0, pos)
        if newlines:
            line, column = self._lines + newlines + 1, pos - self._buf.rindex("\n", 0, pos)
        else:
            line, column = self._lines + 1, self._column + pos + 1
        return ExportError(f"{self._name}: not valid JSON ({msg} at line {line}, column "
                           f"{column}).")

    def _expect(self, char: str, msg: str) -> None:
        if self._peek() != char:
            raise self._error(msg, self._pos)
        self._pos += 1

    # -- the structure

    def _items(self) -> Iterator[Any]:
        """The values of the list at the window's position."""
        self._expect("[", "Expecting value")
        if self._peek() == "]":
            self._pos += 1
            return
        while True:
            yield self._value()
            if self._peek() == "]":
                self._pos += 1
                return
            self._expect(",", "Expecting ',' delimiter")
            self._peek()

    def conversations(self) -> Iterator[Any]:
        first = self._peek()
        found = first == "["
        if found:
            yield from self._items()
        elif first == "{":  # {"conversations": [...], ...}
            self._pos += 1
            if self._peek() == "}":
                self._pos += 1
            else:
                while True:
                    if self._peek() != '"':
                        raise self._error("Expecting property name enclosed in double quotes",
                                          self._pos)
                    key = self._value()
                    self._expect(":", "Expecting ':' delimiter")
                    if self._peek() == "[" and key == "conversations" and not found:
                        found = True
                        yield from self._items()
                    else:  # another key's value, read and dropped
                        self._value()
                    if self._peek() == "}":
                        self._pos += 1
                        break
                    self._expect(",", "Expecting ',' delimiter")
        else:
            value = self._value()
        if self._peek():
            raise self._error("Extra data", self._pos)
        if not found:
            kind = "dict" if first == "{" else type(value).__name__
            raise ExportError(f"{self._name}: expected a JSON list of conversations (got "
                              f"{kind}).")


def zip_start(path: Path) -> bool:
    """Whether the file starts as a zip does (``PK\\x03\\x04``), readable or not: a download cut
    short has the start but not the directory at its end, so ``zipfile.is_zipfile`` says no."""
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"PK\x03\x04"
    except OSError:
        return False


@contextmanager
def _opened(path: Path) -> Iterator[tuple[IO[bytes], str]]:
    """The export's conversations.json as a binary stream, and the name errors give it."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist()
                     if n.rsplit("/", 1)[-1] == EXPORT_FILE and not n.startswith("__MACOSX")]
            if not names:
                raise ExportError(f"{path.name}: the zip holds no {EXPORT_FILE}; is it a "
                                  "ChatGPT or Claude data export?")
            info = archive.getinfo(min(names, key=len))
            name = f"{path.name} ({info.filename})"
            # The header is the archive's word: refused here by its stated size, and by
            # _Text while unzipping when it unzips to more than it said.
            if info.file_size > MAX_EXPORT_BYTES:
                raise ExportError(_too_big(name, info.file_size))
            with archive.open(info) as member:
                yield member, name
    elif zip_start(path):
        # It was read as JSON and said "not valid JSON ... looks like JSON Lines" (review rev4).
        raise ExportError(f"{path.name}: a zip cut short or damaged (its directory at the end is "
                          "missing); download the export again. Nothing was imported.")
    else:
        size = path.stat().st_size
        if size > MAX_EXPORT_BYTES:
            raise ExportError(_too_big(path.name, size))
        with path.open("rb") as handle:
            yield handle, path.name


def read_export(path: Path, not_utf8: list[int] | None = None) -> Iterator[Any]:
    """The conversations in ``conversations.json`` or in the export's zip, one at a time (an
    ExportError, when the file is not an export, comes as it is reached: :func:`scan_export`
    checks the whole file first). Bytes that are not UTF-8 are read as U+FFFD, and ``not_utf8``
    gets how many such sequences there were once the file has been read."""
    try:
        with _opened(path) as (raw, name):
            text = _Text(raw, name)
            yield from _ConversationStream(text, path.name).conversations()
            if not_utf8 is not None and text.not_utf8:
                not_utf8.append(text.not_utf8)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        # a damaged member (zlib.error, a bad CRC) is the file's fault, said in one line
        what = "cannot read the zip" if zipfile.is_zipfile(path) else "cannot read it"
        raise ExportError(f"{path.name}: {what} ({getattr(exc, 'strerror', None) or exc}).") \
            from None


@dataclass
class ExportScan:
    """What one pass over an export found, before anything is imported."""
    conversations: int = 0
    not_utf8: int = 0  # byte sequences that are not UTF-8 (read as U+FFFD)
    # The first conversations' marks (each: which of _MARKS' keys it has, None when it is not
    # an object): enough for :func:`detect_format` without keeping a conversation
    sample: list[dict[str, bool] | None] = field(default_factory=list)


def scan_export(path: Path) -> ExportScan:
    """Read the whole export once without keeping it: an ExportError when it is not one (not
    JSON, not a list, too big, a damaged zip), so that a file refused is refused before its
    first conversation is imported; else how many conversations it holds and its format's
    marks. Memory: the largest conversation, not the file."""
    scan = ExportScan()
    not_utf8: list[int] = []
    for conversation in read_export(path, not_utf8):
        scan.conversations += 1
        if len(scan.sample) < _SAMPLE:
            scan.sample.append({mark: True for mark in _MARKS.values() if mark in conversation}
                               if isinstance(conversation, dict) else None)
    scan.not_utf8 = sum(not_utf8)
    return scan


def load_export(path: Path, not_utf8: list[int] | None = None) -> list[Any]:
    """The whole list of conversations (tests and small files; an import streams them with
    :func:`read_export`)."""
    return list(read_export(path, not_utf8))


# -- ChatGPT --------------------------------------------------------------------------------------


def _epoch(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return to_ts(datetime.fromtimestamp(float(value), UTC))
    except (OverflowError, OSError, ValueError):
        return None


def _chatgpt_branch(mapping: dict[str, Any], current: Any) -> list[dict[str, Any]]:
    """The nodes from the root to ``current_node`` (or, without one, to the newest leaf)."""
    if not isinstance(current, str) or current not in mapping:
        leaves = [k for k, n in mapping.items()
                  if isinstance(n, dict) and not n.get("children")]
        if not leaves:
            raise ImportLineError("'mapping' has no leaf node (a cycle?)")
        current = max(leaves, key=lambda k: _node_time(mapping[k]))
    branch = []
    seen: set[str] = set()
    node_id: Any = current
    while isinstance(node_id, str) and node_id in mapping:
        if node_id in seen:
            raise ImportLineError(f"'mapping' has a cycle at node {node_id!r}")
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            raise ImportLineError(f"mapping[{node_id!r}] must be an object")
        branch.append(node)
        node_id = node.get("parent")
    branch.reverse()
    return branch


def _node_time(node: Any) -> float:
    message = node.get("message") if isinstance(node, dict) else None
    value = message.get("create_time") if isinstance(message, dict) else None
    return float(value) if isinstance(value, int | float) else 0.0


def _chatgpt_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if not isinstance(content, dict):
        raise ImportLineError(f"message {message.get('id')!r}: 'content' must be an object")
    kind = content.get("content_type")
    if kind not in _CHATGPT_SPOKEN:
        return ""
    if kind == "code":
        code = content.get("text") or ""
        language = content.get("language") or ""
        if language == "unknown":
            language = ""
        return f"```{language}\n{code}\n```" if code.strip() else ""
    parts = content.get("parts")
    if parts is None:
        return ""
    if not isinstance(parts, list):
        raise ImportLineError(f"message {message.get('id')!r}: 'parts' must be a list")
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):  # an audio transcription
                texts.append(part["text"])
            elif "image" in str(part.get("content_type", "")):
                texts.append("[image]")
            else:
                texts.append(f"[{part.get('content_type') or 'attachment'}]")
    text = "\n".join(t for t in texts if t.strip())
    attachments = (message.get("metadata") or {}).get("attachments") or []
    names = [a.get("name") for a in attachments if isinstance(a, dict) and a.get("name")]
    if names:
        text = "\n".join([text, *(f"[file: {name}]" for name in names)]).strip()
    return text


def parse_chatgpt(conversation: Any) -> _ParsedSession | None:
    """One ChatGPT conversation as a session (None when nobody said anything in it)."""
    if not isinstance(conversation, dict):
        raise ImportLineError("expected a conversation object")
    mapping = conversation.get("mapping")
    if not isinstance(mapping, dict):
        raise ImportLineError("'mapping' must be an object of message nodes")
    title = conversation.get("title")
    started = _epoch(conversation.get("create_time"))
    messages: list[_ParsedMessage] = []
    last_time = started
    for node in _chatgpt_branch(mapping, conversation.get("current_node")):
        message = node.get("message")
        if not isinstance(message, dict):
            continue
        author = message.get("author") or {}
        role = author.get("role") if isinstance(author, dict) else None
        metadata = message.get("metadata") or {}
        hidden = isinstance(metadata, dict) and metadata.get(
            "is_visually_hidden_from_conversation")
        if role not in ("user", "assistant") or hidden:
            continue
        text = _chatgpt_text(message)
        if not text.strip():
            continue
        at = _epoch(message.get("create_time")) or last_time
        last_time = at
        node_id = message.get("id") or node.get("id")
        messages.append(_ParsedMessage(role=role, speaker=None, content=text, created_at=at or "",
                                       external_id=str(node_id) if node_id else None,
                                       tool_name=None, tool_args=None, tool_call_id=None))
    if not messages:
        return None
    started = started or next((m.created_at for m in messages if m.created_at), None)
    if started is None:
        raise ImportLineError("no 'create_time' on the conversation or any of its messages")
    for m in messages:
        m.created_at = m.created_at or started
    conversation_id = conversation.get("conversation_id") or conversation.get("id")
    return _session("chatgpt", conversation, conversation_id, title, started, messages)


# -- Claude ---------------------------------------------------------------------------------------


def _iso(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ImportLineError(f"{name!r} must be an ISO 8601 time (got {type(value).__name__})")
    try:
        return to_ts(parse_ts(value))
    except ValueError:
        raise ImportLineError(f"{name!r} is not an ISO 8601 time: {value!r}") from None


def _claude_text(message: dict[str, Any], where: str) -> str:
    blocks = message.get("content")
    texts: list[str] = []
    if isinstance(blocks, list) and blocks:
        for block in blocks:
            if isinstance(block, dict) and block.get("type", "text") == "text" \
                    and isinstance(block.get("text"), str):
                texts.append(block["text"])
    elif blocks is not None and not isinstance(blocks, list):
        raise ImportLineError(f"{where}.content must be a list of blocks")
    if not texts:
        text = message.get("text")
        if text is not None and not isinstance(text, str):
            raise ImportLineError(f"{where}.text must be a string")
        texts.append(text or "")
    body = "\n\n".join(t for t in texts if t.strip())
    extra = []
    for item in [*(message.get("attachments") or []), *(message.get("files") or [])]:
        if not isinstance(item, dict):
            continue
        name = item.get("file_name") or item.get("file_uuid") or "file"
        extracted = item.get("extracted_content")
        if isinstance(extracted, str) and extracted.strip():
            extra.append(f"[attachment: {name}]\n{extracted.strip()}")
        else:
            extra.append(f"[file: {name}]")
    return "\n\n".join(p for p in [body, *extra] if p)


def parse_claude(conversation: Any) -> _ParsedSession | None:
    """One Claude conversation as a session (None when nobody said anything in it)."""
    if not isinstance(conversation, dict):
        raise ImportLineError("expected a conversation object")
    raw_messages = conversation.get("chat_messages")
    if not isinstance(raw_messages, list):
        raise ImportLineError("'chat_messages' must be a list")
    started = _iso(conversation.get("created_at"), "created_at")
    messages: list[_ParsedMessage] = []
    for index, raw in enumerate(raw_messages):
        where = f"chat_messages[{index}]"
        if not isinstance(raw, dict):
            raise ImportLineError(f"{where} must be an object")
        sender = raw.get("sender")
        if sender not in ("human", "assistant"):
            raise ImportLineError(f"{where}.sender must be human or assistant (got {sender!r})")
        text = _claude_text(raw, where)
        if not text.strip():
            continue
        at = _iso(raw.get("created_at"), f"{where}.created_at") or started
        uuid = raw.get("uuid")
        messages.append(_ParsedMessage(
            role="user" if sender == "human" else "assistant", speaker=None, content=text,
            created_at=at or "", external_id=str(uuid) if uuid else None,
            tool_name=None, tool_args=None, tool_call_id=None))
    if not messages:
        return None
    started = started or next((m.created_at for m in messages if m.created_at), None)
    if started is None:
        raise ImportLineError("no 'created_at' on the conversation or any of its messages")
    for m in messages:
        m.created_at = m.created_at or started
    return _session("claude", conversation, conversation.get("uuid"), conversation.get("name"),
                    started, messages)


# -- shared ---------------------------------------------------------------------------------------


def _session(service: str, conversation: dict[str, Any], conversation_id: Any, title: Any,
             started: str, messages: list[_ParsedMessage]) -> _ParsedSession:
    ids = [m.external_id for m in messages if m.external_id is not None]
    if len(ids) != len(set(ids)):
        raise ImportLineError("two messages share one id")
    if conversation_id:
        external_id = f"{service}:{conversation_id}"
    else:  # no id in the export: the content decides, as for a transcript line
        canonical = json.dumps(conversation, sort_keys=True, ensure_ascii=False, default=str)
        external_id = f"{service}:sha256:{hashlib.sha256(canonical.encode()).hexdigest()[:32]}"
    title_text = " ".join(title.split()) if isinstance(title, str) and title.strip() else None
    return _ParsedSession(
        source="import", title=title_text, summary=None, started_at=started,
        external_id=external_id, channel_key=None, messages=messages,
        ended_at=max(m.created_at for m in messages),
    )


PARSERS: dict[str, Callable[[Any], _ParsedSession | None]] = {
    "chatgpt": parse_chatgpt, "claude": parse_claude,
}


# The key only that service's conversations have: how a file says which export it is.
_MARKS = {"chatgpt": "mapping", "claude": "chat_messages"}
NAMES = {"chatgpt": "ChatGPT", "claude": "Claude"}


_SAMPLE = 20  # the conversations detect_format looks at


def detect_format(conversations: Iterable[Any]) -> str | None:
    """``chatgpt`` or ``claude`` when most of the first conversations carry that service's
    mark (ChatGPT's ``mapping`` tree, Claude's ``chat_messages``), else None."""
    sample = [c for c in itertools.islice(conversations, _SAMPLE) if isinstance(c, dict)]
    votes = {fmt: sum(mark in c for c in sample) for fmt, mark in _MARKS.items()}
    best = max(votes, key=lambda fmt: votes[fmt])
    return best if votes[best] * 2 > len(sample) and sample else None


def import_export(
    store: SessionStore, user: str, conversations: Iterable[Any], fmt: str, *,
    progress: Callable[[int], None] | None = None,
) -> ImportReport:
    """Import the conversations of a ChatGPT or Claude export for ``user``. Idempotent."""
    if fmt not in PARSERS:
        raise HermesError(f"Unknown export format {fmt!r}; use one of {', '.join(FORMATS)}.")
    return import_sessions(store, user, conversations, parse=_guarded(PARSERS[fmt]),
                           progress=progress, unit="conversation")


def _guarded(parse: Callable[[Any], _ParsedSession | None]
             ) -> Callable[[Any], _ParsedSession | None]:
    """A parser whose surprises (a wrong type deep inside) are that conversation's error."""

    def run(conversation: Any) -> _ParsedSession | None:
        try:
            # "\ud83e" escapes decode to lone surrogates, which no row can store: U+FFFD
            # instead, as the JSON Lines importer does (the conversation was skipped whole).
            return parse(scrub_value(conversation))
        except ImportLineError:
            raise
        except (AttributeError, TypeError, ValueError, KeyError, RecursionError) as exc:
            raise ImportLineError(f"malformed ({type(exc).__name__}: {exc})") from None

    return run
