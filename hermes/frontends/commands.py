"""Memory commands shared by the front-ends (Discord slash commands, REPL slash commands).

Each takes the :class:`~hermes.memory.place.Scope` first (the user, and the place the answer is
read in), calls the memory operations and returns the text to show; errors meant for a person
(NotFound, RefusedWrite, ...) propagate for the front-end to show as one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hermes.errors import QueryError
from hermes.memory.audience import mark_name, mark_value, who_sees
from hermes.memory.facts import provenance
from hermes.memory.operations import MemoryOperations, Scope
from hermes.memory.place import Place

if TYPE_CHECKING:
    from hermes.memory import Memory
    from hermes.memory.facts.store import Fact


def _fact_line(fact: Fact) -> str:
    from hermes.memory.facts.matched import why_found

    # why a search found it (its words, its closeness in meaning), when it was searched
    why = why_found(fact)
    notes = [why] if why else []
    notes.append(f"trust {fact.trust:.2f}")
    if fact.place != "private":  # where it was learned: it may be repeated there
        notes.append("learned in " + Place(fact.place).describe())
    if fact.shared is not None:
        notes.append(mark_name(fact.shared))
    if provenance.outside(fact.source):
        notes.append("from " + provenance.describe(fact))
    return f"[{fact.id}] {fact.content} ({'; '.join(notes)})"


class MemoryCommands:
    def __init__(self, memory: Memory) -> None:
        self.ops = MemoryOperations(memory)

    def remember(self, scope: Scope, text: str) -> str:
        text = text.strip()
        if not text:
            raise QueryError("Nothing to remember: give the fact as text.")
        result = self.ops.add(scope, text)
        if result.status == "merged":
            return f"Already known; merged into [{result.id}] {result.fact.content}"
        replaces = "".join(f" (replaces [{i}])" for i in result.superseded)
        return f"Remembered [{result.id}] {result.fact.content}{replaces}"

    def forget(self, scope: Scope, fact_id: int) -> str:
        fact = self.ops.forget(scope, fact_id, reason="forgotten on request")
        return f"Forgot [{fact.id}] {fact.content}"

    def pending(self, scope: Scope, settle: str = "", question_id: int | None = None) -> str:
        """The questions learning keeps instead of letting an inference override what the user
        said; ``settle`` "accept" (the inference supersedes the fact) or "reject" (the fact
        stays) settles question ``question_id``."""
        if settle:
            if settle not in ("accept", "reject") or question_id is None:
                raise QueryError("Settle a question with accept ID or reject ID.")
            fact = self.ops.settle_question(scope, question_id, accept=settle == "accept")
            kept = "now" if settle == "accept" else "still"
            return f"Settled question {question_id}: {kept} [{fact.id}] {fact.content}"
        lines = []
        for question in self.ops.pending_questions(scope):
            fact = self.ops.get(scope, question.fact_id)
            lines.append(f"[{question.id}] fact {fact.id}: {fact.content}\n"
                         f"    now perhaps: {question.content}")
        if not lines:
            return "No pending questions."
        return "\n".join(lines)

    def search(self, scope: Scope, query: str, *, limit: int = 10) -> str:
        found = self.ops.search(scope, query, limit=limit, explain=True)
        return "\n".join(_fact_line(f) for f in found) or f"No facts match {query!r}."

    def probe(self, scope: Scope, entity: str, *, limit: int = 20) -> str:
        found = self.ops.probe(scope, entity, limit=limit)
        return "\n".join(_fact_line(f) for f in found) or f"Nothing known about {entity!r}."

    def reason(self, scope: Scope, entities: list[str]) -> str:
        names = [e.strip() for e in entities if e.strip()]
        if len(names) < 2:
            raise QueryError("Give at least two entities, separated by commas.")
        result = self.ops.reason(scope, names)
        lines = [_fact_line(f) for f in result.facts]
        if result.path:
            lines.insert(0, "Connected through: " + " -> ".join(result.path))
        return "\n".join(lines) or f"Nothing connects {', '.join(names)}."

    def rate(self, scope: Scope, fact_id: int, helpful: bool) -> str:
        result = self.ops.rate(scope, fact_id, helpful, confirms=True)
        return (f"Rated [{result.id}] {'helpful' if helpful else 'unhelpful'}: trust "
                f"{result.old_trust:.2f} -> {result.new_trust:.2f}")

    def mark(self, scope: Scope, fact_id: int, to: str) -> str:
        """Where a fact may be repeated: shareable, private or default."""
        fact = self.ops.mark(scope, fact_id, mark_value(to))
        policy = self.ops.memory.settings.privacy.shared_places
        return (f"[{fact.id}] {fact.content}: {mark_name(fact.shared)}, shown in "
                f"{who_sees(fact.place, fact.shared, policy)}.")

    def mark_entry(self, scope: Scope, target: str, to: str) -> str:
        """Where a basic-memory entry may be shown: shareable, private or default."""
        entry = self.ops.basic_mark(scope, target, mark_value(to))
        policy = self.ops.memory.settings.privacy.shared_places
        return (f"[{entry.id}] {entry.text}: {mark_name(entry.shared)}, shown in "
                f"{who_sees(entry.place, entry.shared, policy)}.")

    def memory(self, scope: Scope) -> str:
        return self.ops.basic_render(scope)

    def session_list(self, scope: Scope, *, limit: int = 10) -> str:
        found = self.ops.sessions_list(scope, limit=limit)
        return "\n".join(
            f"[{s.id}] {s.last_active_at[:16].replace('T', ' ')} {s.source} "
            f"{s.title or '(untitled)'} ({s.message_count} messages)"
            for s in found
        ) or "No sessions yet."

    def session_search(self, scope: Scope, query: str, *, limit: int = 5) -> str:
        hits = self.ops.sessions_search(scope, query, limit=limit)
        return "\n".join(
            f"[{h.session.id}] {h.session.started_at[:10]} {h.session.source} "
            f"{h.session.title or '(untitled)'}: {h.snippet} ({h.found_by})"
            for h in hits
        ) or f"No past conversation matches {query!r}."

    def context(self, scope: Scope) -> str:
        return self.ops.context(scope) or "No context file yet (it is written every 6 hours)."
