"""The cross-thread context file: what happened recently across every channel, for a new session.

A short Markdown note per user under ``<home>/context/``: the summaries of recent sessions grouped
by source, what is still open, and the facts most recently added or changed. The background model
writes it when there is one; otherwise (or when the model fails) it is built deterministically from
the stored titles, summaries and facts. Either way it is capped at ``context.max_chars`` and
written atomically, so a reader never sees half a file. The daemon's scheduler calls
:func:`refresh`; prompt assembly calls :func:`read`.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hermes.clock import parse_ts, to_ts
from hermes.errors import HermesError
from hermes.memory.facts.store import Fact
from hermes.memory.sessions.store import Session
from hermes.safety.secrets import redact_text
from hermes.store import usage
from hermes.store.files import atomic_text_file

if TYPE_CHECKING:
    from hermes.config import Settings
    from hermes.memory import Memory


class Home(Protocol):
    """Where the file is: the settings of a home (its Memory)."""

    @property
    def settings(self) -> Settings: ...


class Condenser(Protocol):
    """What the refresh needs of a model (hermes.agent.llm.LLM is one): the memory layer
    names no class of the agent layer above it."""

    async def complete(self, messages: list[dict[str, Any]]) -> Any: ...

log = logging.getLogger(__name__)

PROMPT_FILE = Path(__file__).resolve().parent.parent / "prompts" / "context.md"
MAX_SESSIONS = 40
MAX_FACTS = 30
# What the model may read to write the note (the note itself is capped at context.max_chars).
MATERIAL_CHARS = 16_000


def path_for(home: Home, user: str) -> Path:
    """``<home>/context/<user>.md``; a user name unsafe as a file name gets a stable hash."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", user) or "_"
    if safe != user or safe.startswith("."):
        safe = f"{safe.lstrip('.')}-{hashlib.sha1(user.encode()).hexdigest()[:8]}"
    return home.settings.home_path / "context" / f"{safe}.md"


def read(home: Home, user: str) -> str | None:
    """The user's context file, or None when none has been written yet.

    Redacted on the way in too: a file written before redaction existed, or edited by hand,
    must not put a secret into every first-turn prompt."""
    path = path_for(home, user)
    try:
        # Edited by hand in Latin-1: U+FFFD for the bad bytes, never a failed prompt.
        return redact_text(path.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        return None


def write_atomic(path: Path, text: str) -> None:
    with atomic_text_file(path) as handle:
        handle.write(text)


def cap(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, at a line boundary when there is one."""
    text = text.strip() + "\n"
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - 2)]
    newline = cut.rfind("\n")
    if newline > 0:
        cut = cut[:newline]
    return cut.rstrip() + "\n…"


# -- the material -----------------------------------------------------------------------------


def _short(text: str | None, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _day(ts: str) -> str:
    return parse_ts(ts).strftime("%Y-%m-%d")


def gather(memory: Memory, user: str) -> tuple[list[Session], list[Fact]]:
    """Recent sessions (newest first) and recently changed facts for ``user``."""
    since = to_ts(memory.clock.now() - timedelta(days=memory.settings.context.days))
    sessions = memory.sessions.list_sessions(user, since=since, limit=MAX_SESSIONS)
    facts = memory.facts.recent(user, since, limit=MAX_FACTS)
    return sessions, facts


def deterministic(memory: Memory, user: str, sessions: Sequence[Session],
                  facts: Sequence[Fact], *, limit: int | None = None) -> str:
    """The context note built from stored titles, summaries and facts, without a model.

    ``limit`` defaults to ``context.max_chars``; the model is given a larger version as material.
    """
    limit = limit or memory.settings.context.max_chars
    header = (f"# Recent context (last {memory.settings.context.days} days, "
              f"as of {memory.clock.now().strftime('%Y-%m-%d %H:%M UTC')})")
    by_source: dict[str, list[str]] = {}
    open_items: list[str] = []
    for session in sessions:
        title = session.title or _short(getattr(session, "preview", None), 60) or "(untitled)"
        line = f"- {_day(session.last_active_at)} {title}"
        if session.summary:
            line += f": {_short(session.summary, 220)}"
        by_source.setdefault(session.source, []).append(line)
        if session.ended_at is None:
            open_items.append(f"- {title} ({session.source}, still open, last active "
                              f"{_day(session.last_active_at)})")
    fact_lines = [f"- {_short(f.content, 200)}" for f in facts]

    def render(n_sessions: int, n_facts: int) -> str:
        blocks = [header]
        budget = n_sessions
        for source in sorted(by_source):
            lines = by_source[source][: max(0, budget)]
            budget -= len(lines)
            if lines:
                blocks.append(f"## {source}\n" + "\n".join(lines))
        if open_items:
            blocks.append("## Still open\n" + "\n".join(open_items[:10]))
        if fact_lines[:n_facts]:
            blocks.append("## Recently learned\n" + "\n".join(fact_lines[:n_facts]))
        if len(blocks) == 1:
            blocks.append("Nothing recorded in this period.")
        return "\n\n".join(blocks) + "\n"

    n_sessions, n_facts = len(sessions), len(fact_lines)
    text = render(n_sessions, n_facts)
    # Drop the oldest items first (sessions and facts in turn) until the note fits.
    while len(text) > limit and (n_sessions > 0 or n_facts > 0):
        if n_sessions >= n_facts and n_sessions > 0:
            n_sessions -= 1
        else:
            n_facts -= 1
        text = render(n_sessions, n_facts)
    return cap(text, limit)


def _model_messages(memory: Memory, draft: str) -> list[dict[str, Any]]:
    instructions = PROMPT_FILE.read_text(encoding="utf-8").replace(
        "{max_chars}", str(memory.settings.context.max_chars))
    return [
        {"role": "system", "content": instructions},
        {"role": "user", "content": draft},
    ]


async def refresh(memory: Memory, user: str, llm: Condenser | None) -> str:
    """Rewrite the user's context file and return its text.

    With a model, the background model condenses the material; on any model failure, or with
    no model, the deterministic note is written instead (and the failure logged).
    """
    sessions, facts = gather(memory, user)
    text = deterministic(memory, user, sessions, facts)
    if llm is not None and getattr(llm, "configured", True) and (sessions or facts):
        material = redact_text(deterministic(memory, user, sessions, facts, limit=MATERIAL_CHARS))
        try:
            with usage.scope(user=user, source="context"):
                completion = await llm.complete(_model_messages(memory, material))
            written = completion.text.strip()
            if written:
                text = cap(written, memory.settings.context.max_chars)
        except HermesError as exc:  # the model layer's ModelUnavailable / ModelNotConfigured
            log.warning("context refresh for %s: model failed (%s); wrote the plain version",
                        user, exc)
    # The model may repeat what it read; older summaries may predate redaction.
    text = redact_text(text)
    write_atomic(path_for(memory, user), text)
    return text
