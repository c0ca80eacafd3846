"""Memory pages: basic memory, facts (search / probe / reason, edit, forget, restore, purge,
aliases, history), sessions, the context file, cron jobs and runs, and stats.

Each handler gets the logged-in user from :func:`hermes.frontends.web.app.page` and passes its
scope (the user, in a private place: only they read the panel) to every memory operation. A
refused write is shown inline on the page it came from, with its reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from hermes.errors import NotFound, QueryError, RefusedWrite
from hermes.frontends.web.app import WebContext, back, form_of, redirect, render, wants_json
from hermes.frontends.web.auth import WebSession
from hermes.memory.place import Scope

FACT_LIMIT = 200


def _int(value: str | None, what: str) -> int:
    try:
        return int(str(value).strip().lstrip("#[").rstrip("]"))
    except ValueError:
        raise QueryError(f"{what} must be a number, not {value!r}.") from None


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        raise QueryError(f"Trust must be a number between 0 and 1, not {value!r}.") from None


# --------------------------------------------------------------------------- basic memory
def _memory_page(ctx: WebContext, request: Request, ws: WebSession, *, status: int = 200,
                 error: str | None = None, notice: str | None = None,
                 draft: str = "") -> Response:
    entries = ctx.ops.basic_entries(ws.scope)
    used = ctx.ops.basic_usage(ws.scope)
    return render(ctx, request, ws, "memory.html", status=status, entries=entries, used=used,
                  limit=ctx.ops.basic_limit, error=error, notice=notice, draft=draft,
                  block="\n".join(e.text for e in entries))


async def memory(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    return _memory_page(ctx, request, ws)


async def memory_write(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """add | replace | remove | edit (the whole block, one entry a line, in one transaction) |
    mark (where an entry may be shown: shareable, private, default)."""
    form = await form_of(request)
    action = request.path_params["action"]
    draft = form.get("text", "")
    ops, scope = ctx.ops, ws.scope
    try:
        if action == "add":
            result = ops.basic_add(scope, draft)
        elif action == "replace":
            result = ops.basic_replace(scope, _int(form.get("id"), "The entry id"), draft)
        elif action == "remove":
            result = ops.basic_remove(scope, _int(form.get("id"), "The entry id"))
        elif action == "mark":
            from hermes.memory.audience import mark_value

            entry = ops.basic_mark(scope, _int(form.get("id"), "The entry id"),
                                   mark_value(form.get("mark", "")))
            notice = f"Entry [{entry.id}] is {entry.mark}."
            if wants_json(request):
                return JSONResponse({"message": notice, "id": entry.id, "shared": entry.mark})
            return _memory_page(ctx, request, ws, notice=notice)
        elif action == "edit":
            # Only what this page showed counts as "before": an entry added elsewhere since
            # is kept, as `hermes memory edit` does.
            draft = form.get("block", "")
            texts = [line for line in draft.splitlines() if line.strip()]
            shown = set(form.get("shown", "").splitlines())
            before = [e for e in ops.basic_entries(scope) if e.text in shown]
            result = ops.basic_edit(scope, before, texts)
        else:
            raise NotFound(f"No memory action {action!r}.")
    except RefusedWrite as exc:
        if wants_json(request):
            return JSONResponse({"error": str(exc), "used": ops.basic_usage(scope),
                                 "limit": ops.basic_limit}, status_code=422)
        return _memory_page(ctx, request, ws, status=422, error=str(exc), draft=draft)
    except NotFound as exc:
        return _memory_page(ctx, request, ws, status=404, error=str(exc), draft=draft)
    if wants_json(request):
        return JSONResponse({"message": result.message, "used": result.chars,
                             "limit": result.limit})
    return redirect(ctx, ws, "/memory", notice=result.message)


# --------------------------------------------------------------------------- facts
async def facts(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """Search / probe / reason, or the list with filters (category, entity, trust, status).
    A filter that is not valid is said beside the form, which keeps what was typed."""
    q = request.query_params
    query, mode = q.get("q", "").strip(), q.get("mode", "search")
    category, entity = q.get("category") or None, q.get("entity", "").strip()
    status = q.get("status", "active")
    ops, scope = ctx.ops, ws.scope
    path: list[str] = []
    error = None
    found: list[Any] = []
    suggestions: list[Any] = []
    min_trust = max_trust = None
    try:
        min_trust, max_trust = _float(q.get("min_trust")), _float(q.get("max_trust"))
        if query and mode == "probe":
            found = ops.probe(scope, query)
            suggestions = entity_suggestions(ctx, scope, query)
        elif query and mode == "reason":
            result = ops.reason(scope, [p.strip() for p in query.split(",") if p.strip()])
            found, path = result.facts, result.path
            if result.unknown:
                error = "Unknown: " + ", ".join(result.unknown)
        elif query:
            # explain: each result says why it was found (its words, its meaning)
            found = ops.search(scope, query, limit=50, category=category,
                               min_trust=min_trust if min_trust is not None else None,
                               explain=True)
        elif entity:
            found = ops.probe(scope, entity)
            suggestions = entity_suggestions(ctx, scope, entity)
        else:
            found = ops.list_facts(scope, category=category, include_inactive=status != "active",
                                   limit=FACT_LIMIT)
    except QueryError as exc:
        error = str(exc)
    if status in ("superseded", "forgotten"):
        found = [f for f in found if f.status == status]
    if category:
        found = [f for f in found if f.category == category]
    if entity and query:
        key = entity.casefold()
        found = [f for f in found if any(key == e.casefold() for e in f.entities)]
    if min_trust is not None:
        found = [f for f in found if f.trust >= min_trust]
    if max_trust is not None:
        found = [f for f in found if f.trust <= max_trust]
    # The list of everything says which facts wait for the user's word (issue 31), each a
    # link to the page where it is decided.
    waiting = [] if query or entity else [
        (question, ops.get(scope, question.fact_id))
        for question in ops.pending_questions(scope)]
    return render(ctx, request, ws, "facts.html", status=422 if error and not path else 200,
                  facts=found, query=query, mode=mode, waiting=waiting,
                  category=category or "", entity=entity, state=status,
                  min_trust=q.get("min_trust", ""), max_trust=q.get("max_trust", ""),
                  chain=path, error=error, suggestions=suggestions,
                  categories=ops.categories)


SUGGESTIONS = 8


def entity_suggestions(ctx: WebContext, scope: Scope, name: str) -> list[Any]:
    """Entities whose name or alias holds the words asked for (probing "Atlas" finds "Project
    Atlas"), the exact one left out, most used first."""
    words = [w for w in name.casefold().split() if w]
    if not words:
        return []
    found = []
    for entity in ctx.ops.entities(scope):       # most used first
        names = [entity.name.casefold(), *(a.casefold() for a in entity.aliases)]
        if name.strip().casefold() in names:
            continue
        if any(all(w in n.split() or w in n for w in words) for n in names):
            found.append(entity)
            if len(found) == SUGGESTIONS:
                break
    return found


async def fact_add(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """Add a fact by hand (the form on the Facts page)."""
    form = await form_of(request)
    content = form.get("content", "").strip()
    entities = [e.strip() for e in form.get("entities", "").split(",") if e.strip()]
    category = form.get("category") or "general"
    try:
        if not content:
            raise RefusedWrite("Refused: write the fact first.")
        fact = ctx.ops.add(ws.scope, content, category=category, entities=entities or None)
    except RefusedWrite as exc:
        return render(ctx, request, ws, "facts.html", status=422, facts=[], query="",
                      mode="search", category="", entity="", state="active", min_trust="",
                      max_trust="", chain=[], error=str(exc), suggestions=[],
                      draft={"content": content, "entities": form.get("entities", ""),
                             "category": category},
                      categories=ctx.ops.categories)
    replaces = "".join(f" It replaces fact {i}, which it contradicts." for i in fact.superseded)
    return redirect(ctx, ws, f"/facts/{fact.id}", notice=f"Added fact {fact.id}.{replaces}")


HIDDEN_KEYS = {"id", "created_at", "updated_at", "valid_from", "kind", "importance",
               "source_message_ids"}


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "none"
    return "none" if value in (None, "") else str(value)


def history_lines(entry: dict[str, Any]) -> list[str]:
    """One change of a fact as a person reads it: what it said, and what became what."""
    old, new = entry.get("old") or {}, entry.get("new") or {}
    action = entry["action"]
    if action == "add":
        about = f", about {_shown(new.get('entities'))}" if new.get("entities") else ""
        return [f"added: \u201c{new.get('content', '')}\u201d (trust "
                f"{_shown(new.get('trust'))}, {new.get('category', 'general')}{about})"]
    if action == "update":
        return [f"\u201c{old.get('content', '')}\u201d \u2192 \u201c{new.get('content', '')}"
                f"\u201d (this version; the old one is #{old.get('id')})"]
    if action == "supersede":
        return [f"replaced by #{new.get('superseded_by')}"]
    if action == "forget":
        return [f"forgotten: {new.get('forgotten_reason') or entry.get('note') or 'no reason'}"]
    if action == "restore":
        return ["restored"]
    if action == "rate" and "trust" in new:
        return [f"{entry.get('note') or 'rated'}: trust {_shown(old.get('trust'))} \u2192 "
                f"{_shown(new.get('trust'))}"]
    lines = []
    for key in sorted(set(old) | set(new)):
        if key in HIDDEN_KEYS or old.get(key) == new.get(key):
            continue
        label = key.replace("_", " ")
        lines.append(f"{label}: {_shown(old.get(key))} \u2192 {_shown(new.get(key))}"
                     if key in old else f"{label}: {_shown(new.get(key))}")
    return lines or [action]


def _fact_page(ctx: WebContext, request: Request, ws: WebSession, fact_id: int, *,
               status: int = 200, error: str | None = None,
               notice: str | None = None) -> Response:
    fact = ctx.ops.get(ws.scope, fact_id)
    history = ctx.ops.history(ws.scope, fact_id)
    sources = []
    if fact.source_session_id is not None:
        wanted = set(fact.source_message_ids)
        try:
            sources = [m for m in ctx.ops.session_messages(ws.scope, fact.source_session_id)
                       if m.id in wanted]
        except NotFound:
            sources = []            # the session was removed since
    # What the user may decide about it (an inference waiting for their word) and what was
    # forgotten of it (not learned again from older conversations): issue 31.
    questions = [q for q in ctx.ops.pending_questions(ws.scope) if q.fact_id == fact.id]
    tombstones = ctx.ops.fact_tombstones(ws.scope, fact.id)
    return render(ctx, request, ws, "fact.html", status=status, fact=fact,
                  history=[(h, history_lines(h)) for h in history],
                  sources=sources, error=error, notice=notice, questions=questions,
                  tombstones=tombstones)


async def fact(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    return _fact_page(ctx, request, ws, _int(request.path_params["id"], "The fact id"))


async def fact_write(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """update | forget | restore | purge (confirmed) | rate | mark (where it may be
    repeated: shareable, private, default) | settle (a pending question)."""
    form = await form_of(request)
    fact_id = _int(request.path_params["id"], "The fact id")
    action = request.path_params["action"]
    ops, scope = ctx.ops, ws.scope
    ops.get(scope, fact_id)                     # 404 for another user's fact, before anything
    try:
        if action == "update":
            new = ops.update(scope, fact_id, form.get("content", ""),
                             note=form.get("note") or "edited in the web panel")
            return redirect(ctx, ws, f"/facts/{new.id}", notice=f"Saved as fact {new.id}; "
                            f"the old version, {fact_id}, is kept (superseded).")
        if action == "forget":
            ops.forget(scope, fact_id, reason=form.get("reason") or "forgotten in the web panel")
            notice = f"Forgot fact {fact_id}; restore brings it back."
        elif action == "restore":
            ops.restore(scope, fact_id)
            notice = f"Restored fact {fact_id}."
        elif action == "purge":
            if form.get("confirm") != "yes":
                return _fact_page(ctx, request, ws, fact_id, status=422,
                                  error="Purging deletes the fact and its older versions for "
                                  "good: tick the confirmation box to do it.")
            ops.purge(scope, fact_id)
            return redirect(ctx, ws, "/facts",
                            notice=f"Fact {fact_id} and its older versions were deleted.")
        elif action == "rate":
            result = ops.rate(scope, fact_id, form.get("rating") == "up", confirms=True)
            notice = f"Trust {result.old_trust:.2f} -> {result.new_trust:.2f}."
        elif action == "mark":
            from hermes.memory.audience import mark_name, mark_value

            marked = ops.mark(scope, fact_id, mark_value(form.get("mark", "")))
            notice = f"Fact {fact_id} is {mark_name(marked.shared)}."
        elif action == "settle":
            question = _int(form.get("question", ""), "The question id")
            accept = form.get("decision") == "accept"
            now = ops.settle_question(scope, question, accept=accept)
            if now.id != fact_id:
                return RedirectResponse(f"/facts/{now.id}", status_code=303)
            notice = f"Kept fact {fact_id} as it was."
        else:
            raise NotFound(f"No fact action {action!r}.")
    except RefusedWrite as exc:
        if wants_json(request):
            return JSONResponse({"error": str(exc)}, status_code=422)
        return _fact_page(ctx, request, ws, fact_id, status=422, error=str(exc))
    if wants_json(request):             # a reply's receipt: the fact as it is now
        now = ops.get(scope, fact_id)
        return JSONResponse({"id": now.id, "status": now.status, "trust": round(now.trust, 2),
                             "message": notice})
    if form.get("back"):                # from under a reply: back to the chat
        ctx.sessions.flash(ws.id, notice=notice)
        return back(request, f"/facts/{fact_id}")
    return redirect(ctx, ws, f"/facts/{fact_id}", notice=notice)


async def entities(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    return render(ctx, request, ws, "entities.html", entities=ctx.ops.entities(ws.scope))


async def alias(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    form = await form_of(request)
    name, other = form.get("entity", "").strip(), form.get("alias", "").strip()
    try:
        if not name or not other:
            raise RefusedWrite("Refused: give both the entity and its other name.")
        entity = ctx.ops.alias(ws.scope, name, other)
    except RefusedWrite as exc:
        return render(ctx, request, ws, "entities.html", status=422,
                      entities=ctx.ops.entities(ws.scope), error=str(exc))
    return redirect(ctx, ws, "/entities", notice=f"{other} is now another name of "
                    f"{entity.name}.")


# --------------------------------------------------------------------------- sessions
async def sessions(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    q = request.query_params
    query, source = q.get("q", "").strip(), q.get("source") or None
    hits, listing, error = [], [], None
    if query:
        try:
            hits = ctx.ops.sessions_search(ws.scope, query, limit=20, source=source)
        except QueryError as exc:
            error = str(exc)
    else:
        listing = ctx.ops.sessions_list(ws.scope, source=source, limit=100)
    from hermes import plugins
    from hermes.memory.sessions.store import SOURCES

    return render(ctx, request, ws, "sessions.html", hits=hits, sessions=listing, query=query,
                  source=source or "", sources=plugins.loaded().frontends.sources(SOURCES),
                  error=error)


async def session(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    session_id = _int(request.path_params["id"], "The session id")
    found = ctx.ops.session(ws.scope, session_id)
    messages = ctx.ops.session_messages(ws.scope, session_id)
    around = request.query_params.get("around")
    return render(ctx, request, ws, "session.html", session=found, messages=messages,
                  around=_int(around, "The message id") if around else None)


# --------------------------------------------------------------------------- context file
async def context_page(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    return render(ctx, request, ws, "context.html", text=ctx.ops.context(ws.scope),
                  limit=ctx.memory.settings.context.max_chars)


async def context_refresh(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    from hermes.memory import context

    llm = ctx.agent.background_llm if ctx.agent else None
    text = await context.refresh(ctx.memory, ws.user, llm)
    return redirect(ctx, ws, "/context", notice=f"Refreshed ({len(text):,}/"
                    f"{ctx.memory.settings.context.max_chars:,} chars).")


# --------------------------------------------------------------------------- cron
def _cron_store(ctx: WebContext) -> Any:
    from hermes.assembly import cron_store

    return ctx.runner.store if ctx.runner else cron_store(ctx.memory)


async def cron(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    store = _cron_store(ctx)
    return render(ctx, request, ws, "cron.html", jobs=store.list_jobs(user=ws.user),
                  runs=store.runs(user=ws.user, limit=50), can_run=ctx.runner is not None)


async def cron_write(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """pause | resume | run (now). The job is looked up with the user: another's is a 404."""
    store = _cron_store(ctx)
    name, action = request.path_params["name"], request.path_params["action"]
    job = store.get(name, user=ws.user)
    if action in ("pause", "resume"):
        store.set_enabled(job.name, action == "resume", user=ws.user)
        notice = f"{'Resumed' if action == 'resume' else 'Paused'} {job.name}."
    elif action == "run":
        if ctx.runner is None:
            raise RefusedWrite("Refused: running a job needs the daemon's scheduler.")
        run = await ctx.runner.run_now(job.name, user=ws.user)
        notice = f"Ran {job.name}: {run.status}."
    else:
        raise NotFound(f"No cron action {action!r}.")
    return redirect(ctx, ws, "/cron", notice=notice)


# --------------------------------------------------------------------------- logins
async def logins(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """This user's login tokens (never the tokens: their ids), the browsers each logged in,
    and which one this browser used."""
    counts = ctx.sessions.count_by_token(ws.user)
    tokens = [(t, counts.get(t.id, 0)) for t in ctx.tokens.list(ws.user)]
    return render(ctx, request, ws, "logins.html", tokens=tokens, mine=ws.token_id,
                  token_days=ctx.tokens.days, session_days=ctx.sessions.days)


async def login_write(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """new (a login link for another device, shown once) | revoke (a token, and the browsers
    it logged in: this one too, if it is the one this browser used)."""
    action = request.path_params["action"]
    if action == "new":
        link = f"{request.url.scheme}://{request.url.netloc}/login?token=" \
               f"{ctx.tokens.create(ws.user)}"
        return redirect(ctx, ws, "/logins", notice=f"A new login link, shown only now (it "
                        f"works for {ctx.tokens.days:g} days): {link}")
    if action == "revoke":
        form = await form_of(request)
        gone = ctx.tokens.revoke(form.get("id", ""), ws.user)   # only this user's
        ended = ctx.sessions.end_for_token(gone.id)
        if gone.id == ws.token_id:
            return RedirectResponse("/login", status_code=303)
        return redirect(ctx, ws, "/logins", notice=f"Revoked login {gone.id}; {ended} "
                        "browser(s) logged out.")
    raise NotFound(f"No login action {action!r}.")


# --------------------------------------------------------------------------- stats
async def stats(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """What `hermes stats` says: model calls, tokens and cost per source, then learning."""
    from hermes.learn.stats import extraction_stats
    from hermes.store import usage

    return render(ctx, request, ws, "stats.html", stats=extraction_stats(ctx.memory, ws.user),
                  usage=usage.totals(ctx.memory.db, ws.user))


def routes(page: Callable[..., Any]) -> list[Route]:
    return [
        Route("/memory", page(memory)),
        Route("/memory/{action}", page(memory_write), methods=["POST"]),
        Route("/facts", page(facts)),
        Route("/facts/add", page(fact_add), methods=["POST"]),
        Route("/facts/{id}", page(fact)),
        Route("/facts/{id}/{action}", page(fact_write), methods=["POST"]),
        Route("/entities", page(entities)),
        Route("/entities/alias", page(alias), methods=["POST"]),
        Route("/sessions", page(sessions)),
        Route("/sessions/{id}", page(session)),
        Route("/context", page(context_page)),
        Route("/context/refresh", page(context_refresh), methods=["POST"]),
        Route("/cron", page(cron)),
        Route("/cron/{name}/{action}", page(cron_write), methods=["POST"]),
        Route("/stats", page(stats)),
        Route("/logins", page(logins)),
        Route("/logins/{action}", page(login_write), methods=["POST"]),
    ]

