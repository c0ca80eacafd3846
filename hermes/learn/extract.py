"""The one model call of an extraction run: new messages + related facts -> the model's output.

Existing facts are shown with short temporary numbers (1, 2, 3 ...), never their ids, so the
model cannot invent or mistype an id into a real but unrelated fact: any number it returns is
checked against this run's mapping (:class:`Prompt.numbered`) by the parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from hermes.clock import parse_ts
from hermes.memory.sessions.records import speaker_name
from hermes.safe_text import cut
from hermes.safety.secrets import redact_text

PROMPT_PATH = Path(__file__).resolve().parent.parent / "prompts" / "extract.md"
MAX_RELATED_FACTS = 15
# The user's words carry the facts; the assistant's replies are context only.
MAX_USER_CHARS = 4000
MAX_ASSISTANT_CHARS = 1200


class MessageLike(Protocol):
    id: int
    role: str
    speaker: str | None
    content: str
    created_at: str


class FactLike(Protocol):
    id: int
    content: str
    category: str
    entities: list[str]
    created_at: str
    valid_from: str | None


@dataclass
class Prompt:
    messages: list[dict[str, str]]              # what goes to LLM.complete
    numbered: dict[int, Any] = field(default_factory=dict)  # temporary number -> Fact
    shown: list[int] = field(default_factory=list)  # numbers of the facts shown for a reply


def load_template() -> str:
    return PROMPT_PATH.read_text(encoding="utf-8")


def _when(ts: str) -> str:
    moment = parse_ts(ts)
    return moment.strftime("%Y-%m-%d %H:%M UTC (%A)")


def render_messages(messages: Sequence[MessageLike], user_name: str) -> str:
    lines = []
    for message in messages:
        if message.role not in ("user", "assistant") or not message.content.strip():
            continue
        if message.role == "user":
            who = f"user ({speaker_name(message.speaker) or user_name})"
            body = cut(message.content.strip(), MAX_USER_CHARS)
        else:
            who = "assistant"
            body = cut(message.content.strip(), MAX_ASSISTANT_CHARS)
        lines.append(f"[{_when(message.created_at)}] {who}: {body}")
    return "\n\n".join(lines)


def render_facts(numbered: dict[int, FactLike]) -> str:
    if not numbered:
        return "(none)"
    lines = []
    for number, fact in numbered.items():
        details = [f"category: {fact.category}"]
        if fact.entities:
            details.insert(0, "entities: " + ", ".join(fact.entities))
        since = fact.valid_from or fact.created_at
        if since:
            details.append(f"since {since[:10]}")
        lines.append(f"{number}. {fact.content} [{'; '.join(details)}]")
    return "\n".join(lines)


def build_prompt(
    messages: Sequence[MessageLike],
    related: Sequence[FactLike],
    *,
    user_name: str,
    now: datetime,
    categories: Sequence[str],
    template: str | None = None,
    shown: Sequence[FactLike] = (),
) -> Prompt:
    """``shown``: the facts the assistant was shown for its replies among ``messages``; they
    are numbered with the related facts (after them), and the model says which the replies
    relied on and which the user contradicted."""
    numbered = {number: fact for number, fact in enumerate(related[:MAX_RELATED_FACTS], start=1)}
    number_of = {fact.id: number for number, fact in numbered.items()}
    for fact in shown:
        if fact.id not in number_of:
            number_of[fact.id] = len(numbered) + 1
            numbered[number_of[fact.id]] = fact
    shown_numbers = [number_of[f.id] for f in shown]
    text = (template or load_template())
    for placeholder, value in (
        ("{{USER}}", user_name),
        ("{{TODAY}}", now.strftime("%Y-%m-%d (%A)")),
        ("{{CATEGORIES}}", ", ".join(categories)),
        ("{{FACTS}}", render_facts(numbered)),
        ("{{SHOWN}}", ", ".join(str(n) for n in shown_numbers) or "(none)"),
    ):
        text = text.replace(placeholder, value)
    # The messages go last and are substituted last, so text in them is never re-substituted.
    system, _, _ = text.partition("{{MESSAGES}}")
    # Recorded messages are redacted already; this also covers rows from before redaction.
    conversation = redact_text(render_messages(messages, user_name))
    return Prompt(
        messages=[
            {"role": "system", "content": system.rstrip()},
            {"role": "user", "content": conversation or "(no messages)"},
        ],
        numbered=numbered,
        shown=shown_numbers,
    )


def related_query(messages: Sequence[MessageLike]) -> str:
    """The text used to find related facts: what the user said in the new messages."""
    return "\n".join(m.content for m in messages if m.role == "user")[:MAX_USER_CHARS]
