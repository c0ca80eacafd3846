"""`hermes facts`: the fact store (tier 2)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import TYPE_CHECKING, Any

import typer

from hermes.cli import JsonOption, UserOption, ask_daemon, runtime
from hermes.cli.output import echo, emit_json
from hermes.errors import HermesError, QueryError
from hermes.memory.audience import mark_name, mark_value, who_sees
from hermes.memory.facts import provenance
from hermes.memory.place import Place, Scope
from hermes.store.fts import brief, build_match

if TYPE_CHECKING:
    from hermes.memory.facts.records import Fact
    from hermes.memory.operations import MemoryOperations

# The memory package is imported when a command works in-process (`_ops`), not with this
# module: a search the daemon answers needs none of it.

app = typer.Typer(
    no_args_is_help=True,
    help="Atomic facts with entities, trust and history: add, search, probe, reason, rate.",
)

LimitOption = typer.Option(10, "--limit", "-n", min=1, help="At most this many results.")
FactIdArgument = typer.Argument(..., metavar="ID")


class Rating(StrEnum):
    helpful = "helpful"
    unhelpful = "unhelpful"


def _ops(ctx: typer.Context) -> MemoryOperations:
    from hermes.memory.operations import MemoryOperations

    # No daemon job embeds what a command writes: with recall by meaning on, it is embedded now.
    return MemoryOperations(runtime(ctx).memory, embed_writes=True)


def _scope(ctx: typer.Context, user: str | None) -> Scope:
    return Scope(runtime(ctx).user(user))


def _answer(as_json: bool, data: Any, line: str) -> None:
    """What a write says: its JSON with --json, else its line."""
    if as_json:
        emit_json(data)
    else:
        echo(line)


def _check_category(ops: MemoryOperations, category: str | None, found: list[Fact]) -> None:
    """A category that is not in facts.categories and matched nothing is most likely misspelt:
    say which there are instead of "No facts found." (a fact kept under a category since
    removed from the config is still listed)."""
    if category is not None and not found and category not in ops.categories:
        raise QueryError(f"Unknown category {category!r}: the categories are "
                         f"{', '.join(ops.categories)} (facts.categories).")


def _line(fact: Fact, *, show_score: bool = False) -> str:
    parts = [f"[{fact.id}]", fact.content]
    from hermes.memory.facts.matched import why_found

    meta = [f"trust {fact.trust:.2f}", fact.category]
    why = why_found(fact) if show_score else None
    if why is not None:  # the fused score is relative to the other results: say why instead
        meta.insert(0, why)
    elif show_score and fact.score is not None:
        meta.insert(0, f"score {fact.score:.4g}")
    if provenance.is_withheld(fact):
        meta.append("withheld: reads like an instruction; `hermes facts restore` to use it")
    elif fact.status != "active":
        meta.append(fact.status)
    # where it was learned, the user's mark, and whence it came
    if fact.place != "private":
        meta.append("learned in " + Place(fact.place).describe())
    if fact.shared is not None:
        meta.append(mark_name(fact.shared))
    if provenance.outside(fact.source):
        meta.append("from " + provenance.describe(fact))
    if fact.entities:
        meta.append("about " + ", ".join(fact.entities))
    if fact.tags:
        meta.append(" ".join(f"#{t}" for t in fact.tags))
    return " ".join(parts) + "  (" + "; ".join(meta) + ")"


def _print_facts(facts: list[Fact], as_json: bool, *, show_score: bool = False,
                 explain: bool = False, empty: str = "No facts found.") -> None:
    if as_json:
        rows = [f.to_json() for f in facts]
        for row in rows if not explain else ():
            row.pop("explain", None)
        emit_json(rows)
        return
    if not facts:
        echo(empty)
    for fact in facts:
        echo(_line(fact, show_score=show_score))
        if fact.explain and explain:
            parts = ", ".join(f"{k}={v}" for k, v in fact.explain.items())
            echo(f"      {parts}")


@app.command()
def add(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="One self-contained statement."),
    entity: list[str] = typer.Option(  # noqa: B008 - typer declares options this way
        [], "--entity", "-e", help="An entity the fact is about (repeatable). Default: taken "
        "from the text."),
    category: str = typer.Option("general", "--category", "-c", help="Category of the fact."),
    tag: list[str] = typer.Option([], "--tag", "-t", help="A tag (repeatable)."),  # noqa: B008
    kind: str = typer.Option("semantic", "--kind", help="semantic, episodic or procedural."),
    importance: float | None = typer.Option(None, "--importance", min=0, max=1,
                                            help="How much it matters, 0 to 1."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Add a fact. An exact or near duplicate merges into the existing fact instead; a fact
    it contradicts ("my doctor is Dr. Jones" after "... Dr. Smith") is superseded by it.

    First person is written as "the user" where the rewrite is certain ("my sister" -> "The
    user's sister"); otherwise your words are kept whole, as The user said: "...".
    """
    result = _ops(ctx).add(_scope(ctx, user), text, entities=entity or None,
                           category=category, tags=tag, kind=kind, importance=importance)
    if as_json:
        emit_json({"id": result.id, "status": result.status,
                   **({"supersedes": result.superseded} if result.superseded else {})})
        return
    about = f" about {', '.join(result.fact.entities)}" if result.fact.entities else ""
    replaces = "".join(f" It replaces fact {i}." for i in result.superseded)
    if result.status == "created":
        echo(f"Created fact {result.id}{about}.{replaces}")
    else:
        how = "an exact duplicate" if result.match == "exact" else "a near duplicate"
        echo(f"Merged into fact {result.id} ({how}): {result.fact.content}")


@app.command()
def search(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="Free text; every character is safe."),
    limit: int = LimitOption,
    category: str | None = typer.Option(None, "--category", "-c", help="Only this category."),
    min_trust: float | None = typer.Option(None, "--min-trust", min=0, max=1,
                                           help="Hide facts below this trust (default: config)."),
    explain: bool = typer.Option(False, "--explain", help="Show the parts of each score."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Search by words and by meaning, best first, trust multiplying. Each result says why it
    was found: the query's words it holds, those found only in the conversation it was learned
    from, and its closeness in meaning (0-1); --explain adds the parts of the score. Without
    the embedding model: all words first (in the fact itself), then any of them. With a daemon
    running on the home (`hermes run`) the daemon answers: it has the model loaded."""
    from hermes.daemon_calls import facts_from

    plan = build_match(query)
    if plan.empty:  # the same answer as `hermes sessions search`
        raise QueryError(f"Nothing to search for in {brief(query)!r}: it has no words.")
    for note in plan.notes:  # a query cut to its bounds says so
        echo(f"Note: {note}.", err=True)
    remote = ask_daemon(ctx, "facts.search", user, query=query, limit=limit, category=category,
                        min_trust=min_trust)
    # explain=True always: the reasons shown come from it (the results only: ~1 ms)
    facts = facts_from(remote) if remote is not None else _ops(ctx).search(
        _scope(ctx, user), query, limit=limit, category=category, min_trust=min_trust,
        explain=True)
    if category is not None and not facts:
        _check_category(_ops(ctx), category, facts)
    _print_facts(facts, as_json, show_score=True, explain=explain)


@app.command()
def probe(
    ctx: typer.Context,
    entity: str = typer.Argument(..., help="An entity name or alias."),
    limit: int | None = typer.Option(None, "--limit", "-n", min=1, help="At most this many."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Every fact about an entity (or its aliases), by trust then recency."""
    if not entity.strip():  # an unset shell variable: a mistake, not "no facts about ''"
        raise HermesError("Nothing to probe: give an entity name (`hermes facts probe NAS`).")
    facts = _ops(ctx).probe(_scope(ctx, user), entity, limit=limit)
    _print_facts(facts, as_json, empty=f"No facts about {entity!r}.")


@app.command()
def reason(
    ctx: typer.Context,
    entities: list[str] = typer.Argument(..., help="Two or more entity names."),  # noqa: B008
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="At most this many."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Facts connecting entities: linked to all, then to several; else the shortest chain."""
    result = _ops(ctx).reason(_scope(ctx, user), entities, limit=limit)
    if as_json:
        emit_json([{**f.to_json(), "path": result.path} for f in result.facts])
        return
    if result.unknown:
        echo(f"Unknown entities: {', '.join(result.unknown)}", err=True)
    if result.path:
        echo("No fact links them directly; shortest connection: "
                   + " -> ".join(result.path))
    _print_facts(result.facts, False, empty="No facts connect them.")


@app.command()
def rate(
    ctx: typer.Context,
    fact_id: int = FactIdArgument,
    rating: Rating = typer.Argument(..., help="helpful or unhelpful"),  # noqa: B008
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Rate a fact: helpful raises its trust, unhelpful lowers it (low trust hides it)."""
    result = _ops(ctx).rate(_scope(ctx, user), fact_id, rating is Rating.helpful,
                            confirms=True)
    _answer(as_json, {"id": result.id, "old_trust": result.old_trust,
                      "new_trust": result.new_trust},
            f"Fact {result.id}: trust {result.old_trust:.2f} -> {result.new_trust:.2f}.")


@app.command()
def show(
    ctx: typer.Context,
    fact_id: int = FactIdArgument,
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Show one fact with all its fields: where it was learned (place), who may see it, and
    where it came from (source: said, inferred, import, tool, document)."""
    fact = _ops(ctx).get(_scope(ctx, user), fact_id)
    if as_json:
        emit_json(fact.to_json())
        return
    for key, value in fact.to_json().items():
        if value not in (None, [], "") and key != "score":
            echo(f"{key:>18}: {value}")
    policy = runtime(ctx).settings.privacy.shared_places
    echo(f"{'shown in':>18}: {who_sees(fact.place, fact.shared, policy)}")
    echo(f"{'came from':>18}: {provenance.describe(fact)}")
    if provenance.is_withheld(fact):
        echo(f"{'note':>18}: stored but never shown to the model: it came from elsewhere and "
             "reads like an instruction. `hermes facts restore` if you trust it.")


@app.command()
def mark(
    ctx: typer.Context,
    fact_id: int = FactIdArgument,
    to: str = typer.Argument(..., metavar="MARK", help="shareable, private or default."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Decide where a fact may be repeated. shareable: in any Discord channel; private: only in
    private places (DMs, the terminal, the web panel, MCP), even if it was learned in a channel;
    default: as privacy.shared_places says (place_only: private places and the channel it was
    learned in)."""
    fact = _ops(ctx).mark(_scope(ctx, user), fact_id, mark_value(to))
    policy = runtime(ctx).settings.privacy.shared_places
    _answer(as_json, fact.to_json(), f"Fact {fact.id} is {mark_name(fact.shared)}: shown in "
            f"{who_sees(fact.place, fact.shared, policy)}.")


@app.command()
def update(
    ctx: typer.Context,
    fact_id: int = FactIdArgument,
    text: str = typer.Argument(..., help="The corrected statement."),
    note: str | None = typer.Option(None, "--note", help="Why it changed (kept in history)."),
    entity: list[str] = typer.Option([], "--entity", "-e",
                                     help="An entity the new version is about (repeatable)."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Replace a fact with a new version; the old one is kept as superseded."""
    new = _ops(ctx).update(_scope(ctx, user), fact_id, text, note=note, entities=entity or None)
    _answer(as_json, {"id": new.id, "status": "updated", "supersedes": fact_id},
            f"Fact {fact_id} superseded by fact {new.id}: {new.content}")


@app.command()
def forget(
    ctx: typer.Context,
    fact_id: int = FactIdArgument,
    reason: str | None = typer.Option(None, "--reason", help="Why (kept in history)."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Hide a fact everywhere (soft delete). `restore` brings it back."""
    fact = _ops(ctx).forget(_scope(ctx, user), fact_id, reason)
    _answer(as_json, {"id": fact.id, "status": fact.status},
            f"Forgot fact {fact.id}. `hermes facts restore {fact.id}` brings it back; until "
            "then it is not learned again from what was said before now.")


@app.command()
def restore(
    ctx: typer.Context,
    fact_id: int = FactIdArgument,
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Bring back a forgotten fact."""
    fact = _ops(ctx).restore(_scope(ctx, user), fact_id)
    _answer(as_json, {"id": fact.id, "status": fact.status}, f"Restored fact {fact.id}.")


@app.command()
def purge(
    ctx: typer.Context,
    fact_id: int = FactIdArgument,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Delete a fact for good, with its history and the older versions it superseded.

    A tombstone of its text stays, so that it is not learned again from older conversations
    (`hermes facts tombstones --remove ID` deletes it)."""
    ops, scope = _ops(ctx), _scope(ctx, user)
    fact = ops.get(scope, fact_id)
    if not yes and not typer.confirm(f"Delete fact {fact.id} for good? {fact.content}"):
        raise typer.Exit(1)
    ops.purge(scope, fact_id)
    _answer(as_json, {"id": fact_id, "status": "purged"}, f"Purged fact {fact_id}.")


@app.command()
def pending(
    ctx: typer.Context,
    accept: int | None = typer.Option(None, "--accept", metavar="ID",
                                      help="The inference is right: it supersedes the fact."),
    reject: int | None = typer.Option(None, "--reject", metavar="ID",
                                      help="The fact stays as the user said it."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Questions learning keeps instead of letting an inference override what the user said
    (the next reply asks each once). --accept or --reject settles one."""
    ops, scope = _ops(ctx), _scope(ctx, user)
    if accept is not None or reject is not None:
        if accept is not None and reject is not None:
            raise QueryError("Give --accept or --reject, not both.")
        question_id = accept if accept is not None else reject
        assert question_id is not None
        fact = ops.settle_question(scope, question_id, accept=accept is not None)
        _answer(as_json, {"question": question_id, "fact": fact.to_json()},
                f"Settled question {question_id}: [{fact.id}] {fact.content}")
        return
    found = ops.pending_questions(scope)
    if as_json:
        emit_json([q.to_json() for q in found])
        return
    if not found:
        echo("No pending questions.")
    for q in found:
        fact = ops.get(scope, q.fact_id)
        asked = f"asked {q.asked_at[:16].replace('T', ' ')}" if q.asked_at else "not asked yet"
        echo(f"[{q.id}] fact {fact.id}: {fact.content}\n    now perhaps: {q.content} ({asked})")


@app.command()
def tombstones(
    ctx: typer.Context,
    remove: int | None = typer.Option(None, "--remove", metavar="ID",
                                      help="Delete this tombstone: older conversations may "
                                      "teach its statement again."),
    limit: int = LimitOption,
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """What was forgotten, corrected or purged, newest first. Learning never stores such a
    statement (or a near-same one) again from what was said before it; saying it again does."""
    ops, scope = _ops(ctx), _scope(ctx, user)
    if remove is not None:
        gone = ops.remove_tombstone(scope, remove)
        _answer(as_json, {"removed": gone.to_json()},
                f"Removed tombstone {gone.id}: {gone.content}")
        return
    found = ops.tombstones(scope, limit=limit)
    if as_json:
        emit_json([t.to_json() for t in found])
        return
    if not found:
        echo("No tombstones: nothing was forgotten, corrected or purged.")
    for t in found:
        fact = f"fact {t.fact_id}" if t.fact_id is not None else "purged"
        echo(f"[{t.id}] {t.at[:16].replace('T', ' ')} {t.action} ({fact}): {t.content}")


@app.command("list")
def list_facts(
    ctx: typer.Context,
    category: str | None = typer.Option(None, "--category", "-c", help="Only this category."),
    include_all: bool = typer.Option(False, "--all", help="Include forgotten and superseded."),
    limit: int = typer.Option(50, "--limit", "-n", min=1, help="At most this many."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """List facts, most recently changed first."""
    facts = _ops(ctx).list_facts(_scope(ctx, user), category=category,
                                 include_inactive=include_all, limit=limit)
    _check_category(_ops(ctx), category, facts)
    _print_facts(facts, as_json)


@app.command()
def entities(ctx: typer.Context, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """List entities with their aliases and how many active facts are about each."""
    found = _ops(ctx).entities(_scope(ctx, user))
    if as_json:
        emit_json([e.to_json() for e in found])
        return
    if not found:
        echo("No entities.")
    for entity in found:
        aliases = f" (also: {', '.join(entity.aliases)})" if entity.aliases else ""
        echo(f"{entity.name}{aliases}: {entity.fact_count} fact"
                   f"{'' if entity.fact_count == 1 else 's'}")


@app.command()
def alias(
    ctx: typer.Context,
    entity: str = typer.Argument(..., help="The entity (created if new)."),
    other_name: str = typer.Argument(..., metavar="ALIAS", help="Another name for it."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Give an entity another name, so probe and reason find it by either."""
    found = _ops(ctx).alias(_scope(ctx, user), entity, other_name)
    _answer(as_json, found.to_json(), f"{found.name} is also: {', '.join(found.aliases)}")


@app.command()
def history(
    ctx: typer.Context,
    fact_id: int = FactIdArgument,
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Where a fact came from (session and messages) and every change, with old and new
    values."""
    ops, scope = _ops(ctx), _scope(ctx, user)
    entries = ops.history(scope, fact_id)
    if as_json:
        emit_json(entries)
        return
    origin = next((e["origin"] for e in entries if e["action"] == "add"), None)
    for line in _source_lines(ops, scope, ops.get(scope, fact_id), origin):
        echo(line)
    for tombstone in ops.fact_tombstones(scope, fact_id):
        echo(f"tombstone {tombstone.id}: {tombstone.action} at {tombstone.at}; not learned "
             "again from what was said before")
    for entry in entries:
        note = f"  ({entry['note']})" if entry["note"] else ""
        via = f"  via {entry['origin']}" if entry.get("origin") else ""
        echo(f"{entry['at']}  {entry['action']}{via}{note}")
        if entry["old"] is not None:
            echo(f"    old: {json.dumps(entry['old'], ensure_ascii=False)}")
        if entry["new"] is not None:
            echo(f"    new: {json.dumps(entry['new'], ensure_ascii=False)}")


def _source_lines(ops: MemoryOperations, scope: Scope, fact: Fact,
                  origin: str | None = None) -> list[str]:
    """The conversation a fact was learned from: its session and the user's words (or the
    client that added it, such as an MCP client)."""
    from hermes.errors import NotFound

    if fact.source_session_id is None:
        if origin:
            return [f"source: added by {origin}, not learned from a conversation"]
        return ["source: added directly, not learned from a conversation"]
    ids = fact.source_message_ids
    try:
        session = ops.session(scope, fact.source_session_id)
    except NotFound:
        return [f"source: session {fact.source_session_id} (no longer stored), messages {ids}"]
    lines = [f"source: session {session.id} ({session.source}, started "
             f"{session.started_at[:16].replace('T', ' ')}), messages "
             f"{', '.join(str(i) for i in ids) or '(none recorded)'}"]
    if ids:
        wanted = set(ids)
        for message in ops.session_messages(scope, session.id, after=min(ids) - 1):
            if message.id > max(ids):
                break
            if message.id in wanted and message.role == "user":
                text = " ".join(message.content.split())
                lines.append(f"    said: {text if len(text) <= 160 else text[:159] + '…'}")
    return lines
