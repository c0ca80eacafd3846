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
from hermes.frontends.web.app import WebContext, form_of, render, wants_json
from hermes.frontends.web.auth import WebSession

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
    """add | replace | remove | edit (the whole block, one entry a line, in one transaction)."""
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
    return _memory_page(ctx, request, ws, notice=result.message)


# --------------------------------------------------------------------------- facts
async def facts(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """Search / probe / reason, or the list with filters (category, entity, trust, status)."""
    q = request.query_params
    query, mode = q.get("q", "").strip(), q.get("mode", "search")
    category, entity = q.get("category") or None, q.get("entity", "").strip()
    status = q.get("status", "active")
    min_trust, max_trust = _float(q.get("min_trust")), _float(q.get("max_trust"))
    ops, scope = ctx.ops, ws.scope
    path: list[str] = []
    error = None
    found: list[Any] = []
    try:
        if query and mode == "probe":
            found = ops.probe(scope, query)
        elif query and mode == "reason":
            result = ops.reason(scope, [p.strip() for p in query.split(",") if p.strip()])
            found, path = result.facts, result.path
            if result.unknown:
                error = "Unknown: " + ", ".join(result.unknown)
        elif query:
            found = ops.search(scope, query, limit=50, category=category,
                               min_trust=min_trust if min_trust is not None else None)
        elif entity:
            found = ops.probe(scope, entity)
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
    return render(ctx, request, ws, "facts.html", facts=found, query=query, mode=mode,
                  category=category or "", entity=entity, state=status,
                  min_trust="" if min_trust is None else min_trust,
                  max_trust="" if max_trust is None else max_trust, chain=path, error=error,
                  categories=ops.categories)


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
    return render(ctx, request, ws, "fact.html", status=status, fact=fact, history=history,
                  sources=sources, error=error, notice=notice)


async def fact(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    return _fact_page(ctx, request, ws, _int(request.path_params["id"], "The fact id"))


async def fact_write(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """update | forget | restore | purge (confirmed) | rate."""
    form = await form_of(request)
    fact_id = _int(request.path_params["id"], "The fact id")
    action = request.path_params["action"]
    ops, scope = ctx.ops, ws.scope
    ops.get(scope, fact_id)                     # 404 for another user's fact, before anything
    try:
        if action == "update":
            new = ops.update(scope, fact_id, form.get("content", ""),
                             note=form.get("note") or "edited in the web panel")
            return RedirectResponse(f"/facts/{new.id}", status_code=303)
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
            return render(ctx, request, ws, "error.html", status=200, title="Purged",
                          message=f"Fact {fact_id} and its older versions were deleted.")
        elif action == "rate":
            result = ops.rate(scope, fact_id, form.get("rating") == "up")
            notice = f"Trust {result.old_trust:.2f} -> {result.new_trust:.2f}."
        else:
            raise NotFound(f"No fact action {action!r}.")
    except RefusedWrite as exc:
        return _fact_page(ctx, request, ws, fact_id, status=422, error=str(exc))
    return _fact_page(ctx, request, ws, fact_id, notice=notice)


async def entities(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    return render(ctx, request, ws, "entities.html", entities=ctx.ops.entities(ws.scope),
                  error=None, notice=None)


async def alias(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    form = await form_of(request)
    name, other = form.get("entity", "").strip(), form.get("alias", "").strip()
    error = notice = None
    status = 200
    try:
        if not name or not other:
            raise RefusedWrite("Refused: give both the entity and its other name.")
        entity = ctx.ops.alias(ws.scope, name, other)
        notice = f"{other} is now another name of {entity.name}."
    except RefusedWrite as exc:
        error, status = str(exc), 422
    return render(ctx, request, ws, "entities.html", status=status,
                  entities=ctx.ops.entities(ws.scope), error=error, notice=notice)


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
    from hermes.frontends.base import session_sources
    from hermes.memory.sessions.store import SOURCES

    return render(ctx, request, ws, "sessions.html", hits=hits, sessions=listing, query=query,
                  source=source or "", sources=session_sources(SOURCES), error=error)


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
                  limit=ctx.rt.settings.context.max_chars, notice=None)


async def context_refresh(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    from hermes.memory import context

    llm = ctx.agent.background_llm if ctx.agent else None
    text = await context.refresh(ctx.rt, ws.user, llm)
    return render(ctx, request, ws, "context.html", text=text,
                  limit=ctx.rt.settings.context.max_chars,
                  notice=f"Refreshed ({len(text):,}/{ctx.rt.settings.context.max_chars:,} "
                  "chars).")


# --------------------------------------------------------------------------- cron
def _cron_store(ctx: WebContext) -> Any:
    from hermes.assembly import cron_store

    return ctx.runner.store if ctx.runner else cron_store(ctx.rt)


async def cron(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    store = _cron_store(ctx)
    return render(ctx, request, ws, "cron.html", jobs=store.list_jobs(user=ws.user),
                  runs=store.runs(user=ws.user, limit=50), notice=None,
                  can_run=ctx.runner is not None)


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
    return render(ctx, request, ws, "cron.html", jobs=store.list_jobs(user=ws.user),
                  runs=store.runs(user=ws.user, limit=50), notice=notice,
                  can_run=ctx.runner is not None)


# --------------------------------------------------------------------------- stats
async def stats(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    from hermes.learn.stats import extraction_stats
    from hermes.store.maintenance import table_stats

    return render(ctx, request, ws, "stats.html",
                  stats=extraction_stats(ctx.rt.db, ws.user),
                  tables=[t for t in table_stats(ctx.rt.db, ws.user)
                          if t.user_rows is not None])


def routes(page: Callable[..., Any]) -> list[Route]:
    return [
        Route("/memory", page(memory)),
        Route("/memory/{action}", page(memory_write), methods=["POST"]),
        Route("/facts", page(facts)),
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
    ]

