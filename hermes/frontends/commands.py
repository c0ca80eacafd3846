"""Memory commands shared by the front-ends (Discord slash commands, REPL slash commands).

Each takes the Hermes user first and returns the text to show; errors meant for a person
(NotFound, RefusedWrite, ...) propagate for the front-end to show as one line.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from hermes.errors import QueryError

if TYPE_CHECKING:
    from hermes.memory.facts.store import Fact, FactStore
    from hermes.memory.sessions.store import SessionStore
    from hermes.runtime import Runtime


def _fact_line(fact: Fact) -> str:
    return f"[{fact.id}] {fact.content} (trust {fact.trust:.2f})"


class MemoryCommands:
    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    @cached_property
    def facts(self) -> FactStore:
        return self.rt.memory.facts

    @cached_property
    def sessions(self) -> SessionStore:
        return self.rt.memory.sessions

    def remember(self, user: str, text: str) -> str:
        from hermes.memory.facts.statement import normalise_statement

        text = text.strip()
        if not text:
            raise QueryError("Nothing to remember: give the fact as text.")
        statement = normalise_statement(text)   # "my sister" -> "The user's sister"
        result = self.facts.add(user, statement.content, tags=statement.tags)
        if result.status == "merged":
            return f"Already known; merged into [{result.id}] {result.fact.content}"
        return f"Remembered [{result.id}] {result.fact.content}"

    def forget(self, user: str, fact_id: int) -> str:
        fact = self.facts.forget(user, fact_id, reason="forgotten on request")
        return f"Forgot [{fact.id}] {fact.content}"

    def search(self, user: str, query: str, *, limit: int = 10) -> str:
        found = self.facts.search(user, query, limit=limit)
        return "\n".join(_fact_line(f) for f in found) or f"No facts match {query!r}."

    def probe(self, user: str, entity: str, *, limit: int = 20) -> str:
        found = self.facts.probe(user, entity, limit=limit)
        return "\n".join(_fact_line(f) for f in found) or f"Nothing known about {entity!r}."

    def reason(self, user: str, entities: list[str]) -> str:
        names = [e.strip() for e in entities if e.strip()]
        if len(names) < 2:
            raise QueryError("Give at least two entities, separated by commas.")
        result = self.facts.reason(user, names)
        lines = [_fact_line(f) for f in result.facts]
        if result.path:
            lines.insert(0, "Connected through: " + " -> ".join(result.path))
        return "\n".join(lines) or f"Nothing connects {', '.join(names)}."

    def rate(self, user: str, fact_id: int, helpful: bool) -> str:
        result = self.facts.rate(user, fact_id, helpful)
        return (f"Rated [{result.id}] {'helpful' if helpful else 'unhelpful'}: trust "
                f"{result.old_trust:.2f} -> {result.new_trust:.2f}")

    def memory(self, user: str) -> str:
        basic = self.rt.memory.basic
        return basic.render(user)

    def session_list(self, user: str, *, limit: int = 10) -> str:
        found = self.sessions.list_sessions(user, limit=limit)
        return "\n".join(
            f"[{s.id}] {s.last_active_at[:16].replace('T', ' ')} {s.source} "
            f"{s.title or '(untitled)'} ({s.message_count} messages)"
            for s in found
        ) or "No sessions yet."

    def session_search(self, user: str, query: str, *, limit: int = 5) -> str:
        hits = self.sessions.search(user, query, limit=limit)
        return "\n".join(
            f"[{h.session.id}] {h.session.started_at[:10]} {h.session.source} "
            f"{h.session.title or '(untitled)'}: {h.snippet}"
            for h in hits
        ) or f"No past conversation matches {query!r}."

    def context(self, user: str) -> str:
        from hermes.memory import context

        return context.read(self.rt, user) or "No context file yet (it is written every 6 hours)."
