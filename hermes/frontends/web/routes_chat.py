"""The chat page: web sessions on the left, the conversation with streaming replies in the
middle, the "Learned Facts" sidebar on the right, and the live event stream that fills it.

A message goes through the same turn engine as Discord and the terminal, in a session of source
``web``. With JavaScript the reply streams (the POST answers with server-sent events: ``chunk``
then ``done``); without, the form posts and the page comes back with the reply. Under each
reply: the facts the model was shown for it, with 👍/👎 rating exactly those facts through the
same path as Discord's reactions (one rating per reply and rater; again withdraws it).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from hermes.errors import NotFound, RefusedWrite
from hermes.frontends.web.app import WebContext, back, form_of, render, wants_json
from hermes.frontends.web.auth import WebSession
from hermes.memory.place import Scope

log = logging.getLogger(__name__)

SOURCE = "web"
SIDEBAR_FACTS = 40
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def rater_for(user: str) -> str:
    """Who rates from the web panel: one rating per reply for the logged-in user."""
    return f"web:{user}"


def sidebar_facts(ctx: WebContext, user: str) -> list[Any]:
    return ctx.facts.list_facts(user, include_inactive=True, limit=SIDEBAR_FACTS)


def _reply_view(ctx: WebContext, user: str, message: Any, learned: list[Any]) -> dict[str, Any]:
    """An assistant message with the facts shown for it, their trust, and the rating."""
    shown = []
    for fact_id in ctx.ops.shown_facts(Scope(user), message.id):
        try:
            shown.append(ctx.facts.get(user, fact_id))
        except NotFound:
            continue
    return {"message": message, "shown": shown, "learned": learned,
            "rating": ctx.ops.reply_rating(Scope(user), message.id, rater_for(user))}


def conversation(ctx: WebContext, user: str, session_id: int) -> list[dict[str, Any]]:
    """The user and assistant messages of a session; each reply with what it used and what
    was learned from its turn (facts whose source messages end at or before it)."""
    messages = [m for m in ctx.session_store.messages(user, session_id)
                if m.role in ("user", "assistant")]
    learned: dict[int, list[Any]] = {}
    replies = [m.id for m in messages if m.role == "assistant"]
    for fact in ctx.facts.list_facts(user, include_inactive=True, limit=500):
        if fact.source_session_id != session_id or not fact.source_message_ids:
            continue
        last = max(fact.source_message_ids)
        reply = next((r for r in replies if r >= last), None)
        if reply is not None:
            learned.setdefault(reply, []).append(fact)
    return [_reply_view(ctx, user, m, learned.get(m.id, [])) if m.role == "assistant"
            else {"message": m} for m in messages]


async def chat(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    store, user = ctx.session_store, ws.user
    query = request.query_params.get("q", "").strip()
    wanted = request.query_params.get("session")
    current = None
    if wanted:
        current = store.get(user, int(wanted))
    else:
        recent = store.list_sessions(user, source=SOURCE, limit=1)
        current = recent[0] if recent and recent[0].ended_at is None else None
    if query:
        from hermes.errors import QueryError

        try:
            listing = [hit.session for hit in store.search(user, query, limit=30, source=SOURCE)]
        except QueryError:
            listing = []
    else:
        listing = store.list_sessions(user, source=SOURCE, limit=50)
    turns = conversation(ctx, user, current.id) if current else []
    return render(ctx, request, ws, "chat.html", sessions=listing, current=current,
                  turns=turns, query=query, facts=sidebar_facts(ctx, user),
                  writable=current is None or current.source == SOURCE)


async def new_chat(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    session = ctx.session_store.create(ws.user, SOURCE, channel_key=f"web:{uuid.uuid4().hex}")
    return RedirectResponse(f"/chat?session={session.id}", status_code=303)


def _session_for(ctx: WebContext, user: str, given: str | None) -> Any:
    store = ctx.session_store
    if given:
        session = store.get(user, int(given))
        if session.source != SOURCE:
            raise RefusedWrite(f"Refused: session {session.id} is a {session.source} "
                               "conversation; continue it there, or start a new chat here.")
        return session
    return store.create(user, SOURCE, channel_key=f"web:{uuid.uuid4().hex}")


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def send(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    form = await form_of(request)
    text = form.get("text", "").strip()
    if not text:
        raise RefusedWrite("Nothing to send: type a message first.")
    session = _session_for(ctx, ws.user, form.get("session"))
    if ctx.agent is None:
        raise RefusedWrite("Chat needs the agent: run `hermes run` or `hermes web`.")
    lock = ctx.chat_locks.setdefault(session.id, asyncio.Lock())
    if lock.locked():
        raise RefusedWrite("Still answering in this conversation; wait for that reply.")
    turn = ctx.agent.turn(ws.user, session.id, text, speaker=ws.user)
    before = _snapshot(ctx, ws.user) if ctx.hub.subscribers(ws.user) else None
    if "text/event-stream" not in request.headers.get("accept", ""):
        async with lock:
            result = await turn.run()
        publish_turn_changes(ctx, ws.user, before, result)
        return RedirectResponse(f"/chat?session={session.id}#end", status_code=303)

    async def stream() -> AsyncIterator[bytes]:
        async with lock:
            yield _event("start", {"session_id": session.id})
            try:
                async for chunk in turn:
                    yield _event("chunk", {"text": chunk})
            except Exception:  # noqa: BLE001 - logged; the page gets one line
                log.exception("web: the turn failed")
                yield _event("done", {"error": "Sorry, that reply failed; it has been logged."})
                return
            result = turn.result
            publish_turn_changes(ctx, ws.user, before, result)
            html = ""
            if result.assistant_message_id is not None:
                reply = ctx.session_store.window(ws.user, session.id,
                                                 result.assistant_message_id, 0)[0]
                html = ctx.templates.get_template("reply.html").render(
                    turn=_reply_view(ctx, ws.user, reply, []), csrf=ws.csrf)
            yield _event("done", {"message_id": result.assistant_message_id,
                                  "error": result.error, "html": html,
                                  "session_id": session.id})

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


async def rate(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """👍/👎 on a reply: the facts shown for it, as a Discord reaction would. The rating in
    effect again withdraws it."""
    form = await form_of(request)
    message_id = int(request.path_params["id"])
    helpful = form.get("rating") == "up"
    rater = rater_for(ws.user)
    current = ctx.ops.reply_rating(ws.scope, message_id, rater)
    wanted: bool | None = None if current == helpful else helpful
    changes = ctx.ops.set_reply_rating(ws.scope, message_id, rater, wanted)
    if wants_json(request):
        facts = {f.id: f.trust for f in (ctx.ops.get(ws.scope, i) for i in
                                         ctx.ops.shown_facts(ws.scope, message_id))}
        return JSONResponse({"rating": None if wanted is None else ("up" if wanted else "down"),
                             "changed": len(changes),
                             "trust": {str(k): round(v, 2) for k, v in facts.items()}})
    return back(request, "/chat")


async def events(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    return StreamingResponse(ctx.hub.stream(ws.user), media_type="text/event-stream",
                             headers=SSE_HEADERS)


def _snapshot(ctx: WebContext, user: str) -> dict[int, str]:
    return {f.id: f.updated_at for f in ctx.facts.list_facts(user, include_inactive=True,
                                                       limit=SIDEBAR_FACTS)}


def publish_turn_changes(ctx: WebContext, user: str, before: dict[int, str] | None,
                         result: Any) -> None:
    """Facts the turn itself wrote (the fast lane's "remember that ...", the model's memory
    tools) to the user's open pages, as extraction's commits are: what is new or changed in the
    newest facts since ``before`` (taken as the turn started)."""
    if before is None or not ctx.hub.subscribers(user):
        return
    item = ctx.templates.get_template("fact_item.html")
    after = ctx.facts.list_facts(user, include_inactive=True, limit=SIDEBAR_FACTS)
    replaced = {f.superseded_by: f for f in after if f.superseded_by is not None}
    for fact in reversed(after):                    # oldest first: the newest ends on top
        if before.get(fact.id) == fact.updated_at:
            continue
        if fact.superseded_by is not None and fact.superseded_by not in before:
            continue                    # shown by its new version's event (old_html)
        old = replaced.get(fact.id)
        if fact.id in before:
            kind = fact.status if fact.status != "active" else "merged"
        else:
            kind = "superseded" if old is not None else "created"
        ctx.hub.publish(user, "fact", {
            "kind": kind, "fact_id": fact.id, "old_id": old.id if old else None,
            "session_id": result.session_id,
            "reply_id": result.assistant_message_id or result.user_message_id,
            "trust": fact.trust, "content": fact.content,
            "html": item.render(fact=fact, change=kind, fresh=fact.active),
            "old_html": item.render(fact=old, change=None) if old else None,
            "committed_at": time.time() * 1000})


def extraction_listener(ctx: WebContext) -> Callable[[Any], None]:
    """An ``ExtractionWorker.on_commit`` listener: each fact a run wrote, as a ``fact`` event
    with its sidebar item already rendered (and the version it replaced, if any)."""
    item = ctx.templates.get_template("fact_item.html")

    def on_commit(record: Any) -> None:
        committed_at = time.time() * 1000
        if not ctx.hub.subscribers(record.user):
            return
        for change in record.changes.changes:
            try:
                fact = ctx.facts.get(record.user, change.fact_id)
                old = (ctx.facts.get(record.user, change.old_id)
                       if change.old_id is not None else None)
            except NotFound:
                continue           # purged in the meantime
            ctx.hub.publish(record.user, "fact", {
                "kind": change.kind, "fact_id": fact.id, "old_id": change.old_id,
                "session_id": record.session_id, "reply_id": record.last_message_id,
                "trust": fact.trust, "content": fact.content,
                "html": item.render(fact=fact, change=change.kind, fresh=True),
                "old_html": item.render(fact=old, change=None) if old else None,
                "committed_at": committed_at})

    return on_commit


def routes(page: Callable[..., Any]) -> list[Route]:
    return [
        Route("/chat", page(chat)),
        Route("/chat/new", page(new_chat), methods=["POST"]),
        Route("/chat/send", page(send), methods=["POST"]),
        Route("/chat/rate/{id:int}", page(rate), methods=["POST"]),
        Route("/events", page(events)),
    ]
