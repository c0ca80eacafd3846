"""Session titles and summaries, written once a session is idle or closed.

The background model writes a title and a short summary (used by session browse and search and by
the context file). A few messages of small talk are titled without a model call. Without a model,
a plain title and digest are stored (status ``fallback``). A
model failure is recorded (status ``failed``, attempts counted) and retried by the next
:func:`close_idle` run, up to :data:`MAX_ATTEMPTS`.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Literal

from hermes.agent.llm import LLM, ModelNotConfigured, ModelUnavailable
from hermes.clock import to_ts
from hermes.memory import Memory
from hermes.memory.sessions.records import speaker_name
from hermes.memory.sessions.store import Message
from hermes.safe_text import one_line
from hermes.safety.secrets import redact_text
from hermes.store import usage

log = logging.getLogger(__name__)

PROMPT_FILE = Path(__file__).resolve().parent.parent / "prompts" / "summarize.md"
TITLE_PROMPT_FILE = PROMPT_FILE.with_name("title.md")
MAX_ATTEMPTS = 5
TRANSCRIPT_CHARS = 12_000
TITLE_WORDS = 8
# A session this small, with no long message, is small talk: titled without a model call.
SMALL_TALK_MESSAGES = 4
SMALL_TALK_CHARS = 60

Status = Literal["done", "fallback", "failed", "small_talk", "empty"]


@dataclass
class SummaryOutcome:
    session_id: int
    status: Status
    title: str | None
    summary: str | None
    error: str | None = None


def _spoken(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role in ("user", "assistant") and m.content.strip()]


def is_small_talk(messages: list[Message]) -> bool:
    spoken = _spoken(messages)
    users = [m for m in spoken if m.role == "user"]
    return (0 < len(spoken) <= SMALL_TALK_MESSAGES and len(users) <= 2
            and all(len(m.content) <= SMALL_TALK_CHARS for m in users))


def plain_title(messages: list[Message]) -> str:
    first = next((m.content for m in messages if m.role == "user" and m.content.strip()), "")
    words = first.split()
    title = " ".join(words[:TITLE_WORDS]).strip(" .,!?;:")
    if len(words) > TITLE_WORDS:
        title += "…"
    return title or "Untitled session"


def plain_summary(messages: list[Message]) -> str:
    spoken = _spoken(messages)
    users = [m for m in spoken if m.role == "user"]
    parts = [f"{len(spoken)} messages."]
    if users:
        parts.append(f"Started with: {one_line(users[0].content, 160)}")
    if len(users) > 1:
        parts.append(f"Ended with: {one_line(users[-1].content, 160)}")
    return " ".join(parts)


def transcript(messages: list[Message], limit: int = TRANSCRIPT_CHARS) -> str:
    """The conversation as text; a long one keeps its start and its end."""
    lines = [f"{speaker_name(m.speaker) or m.role}: {m.content}" for m in _spoken(messages)]
    text = "\n".join(lines)
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + "\n[… middle of the conversation left out …]\n" + text[-half:]


def parse_summary(raw: str) -> tuple[str | None, str | None]:
    """Title and summary from the model's output: JSON, fenced JSON, or JSON inside prose.

    Falls back to "first line is the title, the rest the summary" for plain text.
    """
    text = raw.strip()
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fenced:
        text = fenced.group(1).strip()
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        try:
            data = json.loads(text[start : end + 1])
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            title = data.get("title") or data.get("Title")
            summary = data.get("summary") or data.get("Summary")
            return (_clean_title(str(title)) if title else None,
                    str(summary).strip() if summary else None)
    lines = [line.strip() for line in raw.strip().splitlines() if line.strip()]
    if not lines:
        return None, None
    title = re.sub(r"^(?:title\s*:\s*)", "", lines[0], flags=re.I)
    rest = " ".join(re.sub(r"^(?:summary\s*:\s*)", "", line, flags=re.I) for line in lines[1:])
    return _clean_title(title), rest or None


def _clean_title(title: str) -> str:
    title = title.strip().strip("\"'`*# ").rstrip(".")
    words = title.split()
    return " ".join(words[: TITLE_WORDS + 4])


async def summarize_session(memory: Memory, llm: LLM | None, user: str,
                            session_id: int) -> SummaryOutcome:
    """Title and summarise one session and store the result on it."""
    sessions = memory.sessions
    messages = sessions.messages(user, session_id)
    if not _spoken(messages):
        sessions.set_summary(user, session_id, title="Empty session", status="done")
        return SummaryOutcome(session_id, "empty", "Empty session", None)
    title: str | None
    summary: str | None
    if is_small_talk(messages):
        title, summary = plain_title(messages), plain_summary(messages)
        sessions.set_summary(user, session_id, title=title, summary=summary, status="done")
        return SummaryOutcome(session_id, "small_talk", title, summary)
    if llm is None or not llm.configured:
        title, summary = plain_title(messages), plain_summary(messages)
        sessions.set_summary(user, session_id, title=title, summary=summary, status="fallback")
        return SummaryOutcome(session_id, "fallback", title, summary)
    try:
        with usage.scope(user=user, source="summary", session_id=session_id):
            completion = await llm.complete([
                {"role": "system", "content": PROMPT_FILE.read_text(encoding="utf-8")},
                # Recorded messages are redacted already; this also covers rows from before.
                {"role": "user", "content": redact_text(transcript(messages))},
            ])
    except (ModelUnavailable, ModelNotConfigured) as exc:
        sessions.set_summary(user, session_id, status="failed")
        log.warning("summary of session %s for %s failed: %s", session_id, user, exc)
        return SummaryOutcome(session_id, "failed", None, None, error=str(exc))
    title, summary = parse_summary(completion.text)
    if not title and not summary:
        sessions.set_summary(user, session_id, status="failed")
        return SummaryOutcome(session_id, "failed", None, None,
                              error="the model's summary was empty")
    title = title or plain_title(messages)
    sessions.set_summary(user, session_id, title=title, summary=summary, status="done")
    return SummaryOutcome(session_id, "done", title, summary)


async def title_from_start(memory: Memory, llm: LLM | None, user: str,
                           session_id: int) -> str | None:
    """A title for a new conversation from its first exchange (the web panel's list shows it
    at once, not only once the session is summarised), stored on the session; None when it has
    a title already, has no exchange yet, or there is no model, or it failed (logged): the list
    keeps showing its first message. The summary, later, titles it from the whole of it."""
    sessions = memory.sessions
    if sessions.get(user, session_id).title is not None:
        return None
    spoken = _spoken(sessions.messages(user, session_id))
    first = [m for m in spoken if m.role == "user"][:1]
    reply = [m for m in spoken if m.role == "assistant"][:1]
    if not first or not reply or llm is None or not llm.configured:
        return None
    try:
        with usage.scope(user=user, source="summary", session_id=session_id):
            completion = await llm.complete([
                {"role": "system", "content": TITLE_PROMPT_FILE.read_text(encoding="utf-8")},
                {"role": "user", "content": redact_text(transcript(first + reply, 4_000))},
            ])
    except (ModelUnavailable, ModelNotConfigured) as exc:
        log.warning("title of session %s for %s failed: %s", session_id, user, exc)
        return None
    title, _ = parse_summary(completion.text)
    if not title or not sessions.set_title(user, session_id, title):
        return None
    return title


def pending(memory: Memory, user: str) -> list[int]:
    """Ended sessions of ``user`` still without a summary (never tried, or failed before).

    Imported sessions (those with an importer's external id) are not: a large import would
    turn into thousands of model calls at the next start. They are summarised only when asked
    (``hermes sessions summarize``)."""
    return memory.sessions.needing_summary(user, max_attempts=MAX_ATTEMPTS)


async def summarize_pending(memory: Memory, llm: LLM | None, user: str) -> list[SummaryOutcome]:
    """Summarise the user's ended sessions still without a summary: the one just left, one
    left by a process that exited before its summary was written, a failed one to retry."""
    outcomes = [await summarize_session(memory, llm, user, session_id)
                for session_id in pending(memory, user)]
    await first_context(memory, llm, user, outcomes)
    return outcomes


async def first_context(memory: Memory, llm: LLM | None, user: str,
                        outcomes: list[SummaryOutcome]) -> None:
    """The user's first context file, as soon as a session has ended with something to say
    (the daemon's six-hourly refresh keeps it current afterwards). A failure is logged: the
    next session ending tries again."""
    from hermes.memory import context

    if not any(o.status != "empty" for o in outcomes) or context.path_for(memory, user).exists():
        return
    try:
        await context.refresh(memory, user, llm)
    except Exception:
        log.exception("the first context file for %s could not be written", user)


async def close_idle(memory: Memory, llm: LLM | None, now: datetime | None = None,
                     *, user: str | None = None) -> list[SummaryOutcome]:
    """Close every session idle past ``sessions.idle_minutes`` and summarise ended sessions.

    Also retries summaries that failed before. The daemon calls this on a timer; one user's
    failure never stops the others'.
    """
    now = now or memory.clock.now()
    before = to_ts(now - timedelta(minutes=memory.settings.sessions.idle_minutes))
    sessions = memory.sessions
    outcomes = []
    for who in [user] if user else sessions.users():
        for session in sessions.idle(who, before):
            sessions.close(who, session.id)
        done = [await summarize_session(memory, llm, who, session_id)
                for session_id in pending(memory, who)]
        await first_context(memory, llm, who, done)
        outcomes.extend(done)
    return outcomes
