"""Redacting what was stored before redaction existed (``hermes sessions redact``).

Messages are redacted when they are recorded (``sessions.redact_secrets``); rows written by an
older Hermes, or with the setting off, may still hold secrets, and so does their search index.
This rewrites them once, on request: each changed message is updated in place (the FTS triggers
re-index it), in bounded transactions so a concurrent writer never waits long, and the session
titles and summaries and the user's context file likewise. Facts and basic-memory entries are
not rewritten (a fact is a statement; a marker in its middle would make it false): the ones the
guard would now refuse are listed, to forget or edit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hermes.memory.vectors import file as vector_file
from hermes.safety.guard import find_problem
from hermes.safety.secrets import redact, redact_json, redact_text
from hermes.store.db import write_transaction

BATCH = 500


@dataclass
class RedactReport:
    user: str
    messages: int = 0          # messages rewritten
    secrets: int = 0           # secrets removed from them
    sessions: int = 0          # titles or summaries rewritten
    context_file: bool = False
    facts: list[int] = field(default_factory=list)        # ids of facts holding a secret
    basic_memory: list[int] = field(default_factory=list)  # ids of entries holding a secret

    def to_json(self) -> dict[str, Any]:
        return {"user": self.user, "messages": self.messages, "secrets": self.secrets,
                "sessions": self.sessions, "context_file": self.context_file,
                "facts_with_secrets": self.facts, "basic_memory_with_secrets": self.basic_memory}


def redact_stored(rt: Any, user: str) -> RedactReport:
    """Rewrite ``user``'s stored messages, summaries and context file with secrets redacted."""
    from hermes.memory import context as context_file

    db = rt.db
    report = RedactReport(user)
    last = 0
    while True:
        rows = db.execute(
            "SELECT id, content, tool_args FROM messages WHERE user = ? AND id > ? "
            "ORDER BY id LIMIT ?", [user, last, BATCH]).fetchall()
        if not rows:
            break
        last = int(rows[-1][0])
        changes = []
        for message_id, content, tool_args in rows:
            redacted = redact(content or "")
            args = None if tool_args is None else redact_json(tool_args)
            if redacted.findings or args != tool_args:
                changes.append((redacted.text, args, message_id))
                report.secrets += len(redacted.findings)
        if changes:
            with write_transaction(db):
                db.conn.executemany(
                    "UPDATE messages SET content = ?, tool_args = ? WHERE id = ? AND user = ?",
                    [(c, a, i, user) for c, a, i in changes])
            report.messages += len(changes)
    if report.messages:  # the vectors of the old text: dropped by the database, and their copy
        vector_file.discard(rt.settings.home_path / "cache", user)
    sessions = db.execute("SELECT id, title, summary FROM sessions WHERE user = ?",
                          [user]).fetchall()
    changed = [(redact_text(t) if t else t, redact_text(s) if s else s, i)
               for i, t, s in sessions
               if (t and redact_text(t) != t) or (s and redact_text(s) != s)]
    if changed:
        with write_transaction(db):
            db.conn.executemany("UPDATE sessions SET title = ?, summary = ? WHERE id = ? "
                                "AND user = ?", [(t, s, i, user) for t, s, i in changed])
        report.sessions = len(changed)
    path = context_file.path_for(rt, user)
    if path.exists():
        raw = path.read_text(encoding="utf-8")
        if redact_text(raw) != raw:
            context_file.write_atomic(path, redact_text(raw))
            report.context_file = True
    report.facts = [int(i) for i, content in db.execute(
        "SELECT id, content FROM facts WHERE user = ? AND forgotten_at IS NULL ORDER BY id",
        [user]).fetchall() if _holds_secret(content)]
    report.basic_memory = [int(i) for i, text in db.execute(
        "SELECT id, text FROM basic_memory WHERE user = ? ORDER BY id", [user]).fetchall()
        if _holds_secret(text)]
    return report


def _holds_secret(text: str | None) -> bool:
    problem = find_problem(text or "")
    return problem is not None and "secret" in problem
