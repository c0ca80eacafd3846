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

import hashlib
import json
import zipfile
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hermes.clock import parse_ts, to_ts
from hermes.errors import HermesError
from hermes.memory.sessions.store import SessionStore
from hermes.memory.sessions.transcripts import (
    ImportLineError,
    ImportReport,
    _ParsedMessage,
    _ParsedSession,
    import_sessions,
    replaced_count,
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
# hundred KB can unzip to gigabytes, and json.loads needs several times the text in memory.
MAX_EXPORT_BYTES = 256 * 1024 * 1024
_CHUNK = 1024 * 1024


def _too_big(name: str, size: int) -> str:
    return (f"{name}: {size / 1024 / 1024:,.0f} MiB of conversations is over the import limit "
            f"of {MAX_EXPORT_BYTES // 1024 // 1024} MiB; nothing was imported.")


def _read_member(path: Path, archive: zipfile.ZipFile, name: str) -> bytes:
    """A member's bytes, refused before reading when its stated size is over the limit and
    while reading when it unzips to more than it said (the header is the archive's word)."""
    info = archive.getinfo(name)
    if info.file_size > MAX_EXPORT_BYTES:
        raise ExportError(_too_big(f"{path.name} ({name})", info.file_size))
    chunks = []
    read = 0
    with archive.open(info) as member:
        while chunk := member.read(_CHUNK):
            read += len(chunk)
            if read > MAX_EXPORT_BYTES:
                raise ExportError(_too_big(f"{path.name} ({name})", read))
            chunks.append(chunk)
    return b"".join(chunks)


def zip_start(path: Path) -> bool:
    """Whether the file starts as a zip does (``PK\\x03\\x04``), readable or not: a download cut
    short has the start but not the directory at its end, so ``zipfile.is_zipfile`` says no."""
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"PK\x03\x04"
    except OSError:
        return False


def load_export(path: Path, not_utf8: list[int] | None = None) -> list[Any]:
    """The list of conversations in ``conversations.json`` or in the export's zip. Bytes that
    are not UTF-8 are read as U+FFFD, and ``not_utf8`` gets how many such sequences there were
    (the command says so)."""
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                names = [n for n in archive.namelist()
                         if n.rsplit("/", 1)[-1] == EXPORT_FILE and not n.startswith("__MACOSX")]
                if not names:
                    raise ExportError(f"{path.name}: the zip holds no {EXPORT_FILE}; is it a "
                                      "ChatGPT or Claude data export?")
                raw = _read_member(path, archive, min(names, key=len))
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            # a damaged member (zlib.error, a bad CRC) is the file's fault, said in one line
            raise ExportError(f"{path.name}: cannot read the zip ({exc}).") from None
    elif zip_start(path):
        # It was read as JSON and said "not valid JSON ... looks like JSON Lines" (review rev4).
        raise ExportError(f"{path.name}: a zip cut short or damaged (its directory at the end is "
                          "missing); download the export again. Nothing was imported.")
    else:
        try:
            size = path.stat().st_size
            if size > MAX_EXPORT_BYTES:
                raise ExportError(_too_big(path.name, size))
            raw = path.read_bytes()
        except OSError as exc:
            raise ExportError(f"{path.name}: cannot read it ({exc.strerror or exc}).") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("utf-8-sig", errors="replace")
        if not_utf8 is not None:
            not_utf8.append(replaced_count(raw, text))
    del raw  # (the text is what is read from here: the bytes need not stay)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ExportError(f"{path.name}: not valid JSON ({exc.msg} at line {exc.lineno}, "
                          f"column {exc.colno}).") from None
    except RecursionError:
        raise ExportError(f"{path.name}: nested too deeply to be an export.") from None
    if isinstance(data, dict) and isinstance(data.get("conversations"), list):
        data = data["conversations"]
    if not isinstance(data, list):
        raise ExportError(f"{path.name}: expected a JSON list of conversations (got "
                          f"{type(data).__name__}).")
    return data


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


def detect_format(conversations: list[Any]) -> str | None:
    """``chatgpt`` or ``claude`` when most of the first conversations carry that service's
    mark (ChatGPT's ``mapping`` tree, Claude's ``chat_messages``), else None."""
    sample = [c for c in conversations[:20] if isinstance(c, dict)]
    votes = {fmt: sum(mark in c for c in sample) for fmt, mark in _MARKS.items()}
    best = max(votes, key=lambda fmt: votes[fmt])
    return best if votes[best] * 2 > len(sample) and sample else None


def import_export(
    store: SessionStore, user: str, conversations: list[Any], fmt: str, *,
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
