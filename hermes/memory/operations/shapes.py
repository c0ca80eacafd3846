"""The one JSON shape of each memory record, as every client of the memory operations sees it:
the model's chat tools, MCP clients and the web panel's JSON answers.

A record's shape is written here once. A caller whose reader pays for every word (the model in
a turn) passes ``clip``: the long texts (a message, a summary) are cut to that many characters;
the keys stay the same. ``hermes ... --json`` prints the records' full ``to_json()`` (every
column, for scripts), which is a different thing: the record as stored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hermes.memory.facts import provenance
from hermes.memory.sessions.records import speaker_name
from hermes.safe_text import one_line

if TYPE_CHECKING:
    from hermes.memory.basic import Entry, WriteResult
    from hermes.memory.facts.store import AddResult, Fact, RateResult, ReasonResult
    from hermes.memory.sessions.records import Message, SearchHit, Session


def clipped(text: str | None, clip: int | None) -> str:
    """``text`` on one line, cut to ``clip`` characters (with an ellipsis); whole without
    ``clip``."""
    return text or "" if clip is None else one_line(text, clip)


def fact_json(fact: Fact) -> dict[str, Any]:
    data: dict[str, Any] = {"id": fact.id, "content": fact.content,
                            "trust": round(fact.trust, 2), "category": fact.category}
    if fact.entities:
        data["entities"] = fact.entities
    if fact.tags:
        data["tags"] = fact.tags
    if fact.status != "active":
        data["status"] = fact.status
    # where it was learned and where it came from (hermes.memory.audience, facts.provenance)
    if fact.place != "private":
        data["place"] = fact.place
    if fact.source != "said":
        data["source"] = fact.source
    return data


def facts_json(facts: list[Fact]) -> dict[str, Any]:
    return {"facts": [fact_json(f) for f in facts]}


def found_json(facts: list[Fact]) -> dict[str, Any]:
    """A fact search's results, each with why it was found (``found_by``: the query's words it
    holds, those only in its conversation, its closeness in meaning, as `hermes facts search`
    says it; hermes.memory.facts.matched): searched with ``explain``."""
    from hermes.memory.facts.matched import why_found

    shaped = []
    for fact in facts:
        data = fact_json(fact)
        why = why_found(fact)
        if why is not None:
            data["found_by"] = why
        shaped.append(data)
    return {"facts": shaped}


def added_json(added: AddResult) -> dict[str, Any]:
    """A fact added (or merged); ``supersedes``: the facts a statement of the user's replaced
    (only when it replaced one)."""
    data: dict[str, Any] = {"status": added.status, "fact": fact_json(added.fact)}
    if provenance.is_withheld(added.fact):
        # Stored, never shown: the caller is told so, not that it was created.
        data["status"] = "withheld"
        data["note"] = ("stored but never shown to the assistant: it reads like an instruction "
                        "to it; the user may restore it (`hermes facts restore`)")
    if added.superseded:
        data["supersedes"] = list(added.superseded)
    return data


def updated_json(new: Fact, old_id: int) -> dict[str, Any]:
    return {"status": "updated", "fact": fact_json(new), "supersedes": old_id}


def forgotten_json(fact: Fact) -> dict[str, Any]:
    return {"status": fact.status, "id": fact.id}


def rated_json(result: RateResult) -> dict[str, Any]:
    return {"id": result.id, "old_trust": result.old_trust, "new_trust": result.new_trust}


def reasoned_json(result: ReasonResult) -> dict[str, Any]:
    data = facts_json(result.facts)
    if result.path:
        data["path"] = result.path
    if result.unknown:
        data["unknown"] = result.unknown
    return data


def session_json(session: Session, *, clip: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"id": session.id, "source": session.source,
                            "title": session.display_title, "started_at": session.started_at,
                            "last_active_at": session.last_active_at,
                            "messages": session.message_count}
    if session.summary:
        data["summary"] = clipped(session.summary, clip)
    return data


def message_json(message: Message, *, clip: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"id": message.id, "role": message.role,
                            "content": clipped(message.content, clip),
                            "created_at": message.created_at}
    # A front-end identity (terminal:root) is plumbing: a reader sees a name or none.
    if speaker_name(message.speaker):
        data["speaker"] = speaker_name(message.speaker)
    return data


def hit_json(hit: SearchHit, *, clip: int | None = None) -> dict[str, Any]:
    return {"session": session_json(hit.session, clip=clip), "snippet": hit.snippet,
            "match_id": hit.match.id if hit.match else None,
            # what the match matched: words, meaning, both, or facts (SearchHit.matched)
            "matched": hit.matched,
            # why it was found when no word says it: what was learned there
            "learned": [{"fact_id": i, "content": text} for i, text in hit.learned],
            "messages": [message_json(m, clip=clip) for m in hit.context]}


def entry_json(entry: Entry) -> dict[str, Any]:
    return {"id": entry.id, "text": entry.text}


def written_json(result: WriteResult) -> dict[str, Any]:
    """A basic-memory write: what happened, the usage against the cap, and the entry as
    stored (the prompt's front keeps the session's snapshot, so a write's result is where the
    model sees the new text)."""
    data: dict[str, Any] = {"status": result.status, "message": result.message,
                            "usage": f"{result.chars}/{result.limit}"}
    if result.entry is not None:
        data["id"] = result.entry.id
        data["text"] = result.entry.text
    return data
