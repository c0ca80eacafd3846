"""The chat page: web sessions on the left, the conversation with streaming replies in the
middle, the "Learned Facts" sidebar on the right, and the live event stream that fills it.

A message goes through the same turn engine as Discord and the terminal, in a session of source
``web``. With JavaScript the reply streams (the POST answers with server-sent events: ``chunk``
then ``done``; a chunk carries now and then the sanitised HTML of the reply so far, rendered
from its Markdown on the server, see ``markdown.py``; the Stop button stops it there); without,
the form posts and the page comes back with the reply. Under each reply: the facts the model was
shown for it, with 👍/👎 rating exactly those facts through the same path as Discord's reactions
(one rating per reply and rater; again withdraws it).
"""

from __future__ import annotations

import asyncio
import itertools
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
from hermes.frontends.web.app import WebContext, back, form_of, redirect, render, wants_json
from hermes.frontends.web.auth import WebSession
from hermes.frontends.web.markdown import StreamRenderer
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


def _reply_view(ctx: WebContext, user: str, message: Any, learned: list[Any], *,
                open: bool = False) -> dict[str, Any]:
    """An assistant message and its receipt: the facts shown for it (their trust, the
    rating), and what was learned from its turn (``open``: unfolded, under a new reply)."""
    shown = []
    for fact_id in ctx.ops.shown_facts(Scope(user), message.id):
        try:
            shown.append(ctx.facts.get(user, fact_id))
        except NotFound:
            continue
    return {"message": message, "shown": shown, "learned": learned, "open": open,
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
    """The chat: the conversation asked for, else the newest open one, else a new one
    (``?new=1``: a new chat, stored once its first message is sent)."""
    store, user = ctx.session_store, ws.user
    query = request.query_params.get("q", "").strip()
    wanted = request.query_params.get("session")
    current = None
    error = None
    temporary = None
    if wanted and int(wanted) < 0:
        temporary = _temporary(ctx, user, int(wanted))
    elif wanted:
        current = store.get(user, int(wanted))
    elif request.query_params.get("temporary"):
        temporary = True
    elif not request.query_params.get("new"):
        recent = store.list_sessions(user, source=SOURCE, limit=1)
        current = recent[0] if recent and recent[0].ended_at is None else None
    if query:
        from hermes.errors import QueryError

        try:
            listing = [hit.session for hit in store.search(user, query, limit=30, source=SOURCE)]
        except QueryError as exc:
            listing, error = [], str(exc)
    else:
        listing = store.list_sessions(user, source=SOURCE, limit=50)
    turns = conversation(ctx, user, current.id) if current else []
    if temporary is not None and temporary is not True:
        turns = [_temporary_view(ctx, user, m, temporary) if m.role == "assistant"
                 else {"message": m} for m in temporary.kept if m.role in ("user", "assistant")]
    return render(ctx, request, ws, "chat.html", sessions=listing, current=current,
                  turns=turns, query=query, facts=sidebar_facts(ctx, user), error=error,
                  writable=current is None or current.source == SOURCE,
                  temporary=temporary is not None,
                  temporary_id=temporary.session_id if temporary not in (None, True) else "")


def _temporary(ctx: WebContext, user: str, chat_id: int) -> Any:
    """The user's temporary chat ``chat_id`` (another user's is as unknown as a gone one)."""
    owner, transcript = ctx.temporary.get(chat_id, (None, None))
    if owner != user:
        raise NotFound("That temporary chat is gone: it is kept only while Hermes runs. "
                       "Start another, or a normal chat to keep it.")
    return transcript


def _temporary_view(ctx: WebContext, user: str, message: Any, transcript: Any,
                    *, open: bool = False) -> dict[str, Any]:
    """A temporary chat's reply and its receipt: the facts it used (read from memory as any
    reply does), nothing learned, no rating of the reply (it is not kept)."""
    shown = []
    for fact_id in transcript.shown.get(message.id, []):
        try:
            shown.append(ctx.facts.get(user, fact_id))
        except NotFound:
            continue
    return {"message": message, "shown": shown, "learned": [], "open": open,
            "rating": None, "temporary": True}


async def new_chat(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """A new chat: stored when its first message is sent (no empty conversations)."""
    return RedirectResponse("/chat?new=1", status_code=303)


async def delete_chat(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """Delete a conversation with its messages (confirmed); what was learned from it stays."""
    form = await form_of(request)
    session_id = int(request.path_params["id"])
    session = ctx.session_store.get(ws.user, session_id)     # 404 for another user's
    if form.get("confirm") != "yes":
        raise RefusedWrite("Tick the box to delete the conversation: it cannot be undone.")
    if session_id in ctx.replies:
        raise RefusedWrite("Still answering in this conversation; stop the reply first.")
    count = ctx.session_store.delete(ws.user, session_id)
    if ctx.agent is not None:
        ctx.agent.conversations.drop(ws.user, session_id)
    return redirect(ctx, ws, "/chat?new=1", notice=f"Deleted the conversation "
                    f"\u201c{session.display_title}\u201d ({count} messages). Facts learned "
                    "from it are kept: forget them on the Facts page.")


def _session_for(ctx: WebContext, user: str, given: str | None) -> Any:
    store = ctx.session_store
    if given:
        session = store.get(user, int(given))
        if session.source != SOURCE:
            raise RefusedWrite(f"Refused: session {session.id} is a {session.source} "
                               "conversation; continue it there, or start a new chat here.")
        return session
    return store.create(user, SOURCE, channel_key=f"web:{uuid.uuid4().hex}")


_temporary_ids = itertools.count(-1, -1)


def _new_temporary(ctx: WebContext, user: str) -> Any:
    """A temporary chat: its turns read memory, and nothing of it is kept or learned from
    (hermes.agent.turn.Transcript); it lasts while this process runs."""
    from hermes.agent.turn import Transcript

    transcript = Transcript(next(_temporary_ids), ctx.memory.clock)
    ctx.temporary[transcript.session_id] = (user, transcript)
    return transcript


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


async def send(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    form = await form_of(request)
    text = form.get("text", "").strip()
    if not text:
        raise RefusedWrite("Nothing to send: type a message first.")
    from hermes.agent.turn import MAX_MESSAGE_CHARS, MessageTooLong, too_long_message

    if len(text) > MAX_MESSAGE_CHARS:
        # Said before a new chat is made: the form post (no JS) redirected to an empty new
        # conversation, the refusal nowhere on the page (review rev4).
        raise MessageTooLong(too_long_message(len(text)))
    given = form.get("session")
    temporary = bool(form.get("temporary")) or bool(given and int(given) < 0)
    # Whose it is first (another user's is a 404), then whether there is an agent
    transcript = _temporary(ctx, ws.user, int(given)) if temporary and given else None
    session: Any = None if temporary else _session_for(ctx, ws.user, given)
    if ctx.agent is None:
        raise RefusedWrite("Chat needs the agent: run `hermes run` or `hermes web`.")
    if temporary and transcript is None:
        transcript = _new_temporary(ctx, ws.user)
    chat_id = transcript.session_id if transcript is not None else session.id
    lock = ctx.chat_locks.setdefault(chat_id, asyncio.Lock())
    if lock.locked():
        raise RefusedWrite("Still answering in this conversation; wait for that reply.")
    turn = ctx.agent.turn(ws.user, chat_id, text, speaker=ws.user, transcript=transcript)
    before = _snapshot(ctx, ws.user) if ctx.hub.subscribers(ws.user) else None
    new_chat = not given and transcript is None
    if "text/event-stream" not in request.headers.get("accept", ""):
        async with lock:
            result = await turn.run()
        publish_turn_changes(ctx, ws.user, before, result)
        if new_chat and result.assistant_message_id is not None:
            title_new_chat(ctx, ws.user, chat_id)
        return RedirectResponse(f"/chat?session={chat_id}#end", status_code=303)

    async def stream() -> AsyncIterator[bytes]:
        async with lock:
            started: dict[str, Any] = {"session_id": chat_id}
            if new_chat:  # a new conversation: its line in the list
                started["item_html"] = ctx.templates.get_template("session_item.html").render(
                    s=session, current=session, title=" ".join(text.split())[:80])
            yield _event("start", started)
            running = ctx.replies[chat_id] = RunningReply(turn)
            try:
                async for name, data in running.events():
                    yield _event(name, data)
            except Exception:  # noqa: BLE001 - logged; the page gets one line
                log.exception("web: the turn failed")
                yield _event("done", {"error": "Sorry, that reply failed; it has been logged."})
                return
            finally:
                if ctx.replies.get(chat_id) is running:
                    del ctx.replies[chat_id]
            result = turn.result
            publish_turn_changes(ctx, ws.user, before, result)
            if new_chat and result.assistant_message_id is not None:
                title_new_chat(ctx, ws.user, chat_id)
            html = ""
            if result.assistant_message_id is not None and transcript is not None:
                reply = next(m for m in transcript.kept if m.id == result.assistant_message_id)
                html = ctx.templates.get_template("reply.html").render(
                    turn=_temporary_view(ctx, ws.user, reply, transcript, open=True),
                    csrf=ws.csrf)
            elif result.assistant_message_id is not None:
                reply = ctx.session_store.window(ws.user, session.id,
                                                 result.assistant_message_id, 0)[0]
                # (what extraction learned from it already, if it was that quick)
                view = next((t for t in conversation(ctx, ws.user, session.id)
                             if t["message"].id == reply.id), None)
                html = ctx.templates.get_template("reply.html").render(
                    turn=_reply_view(ctx, ws.user, reply, view["learned"] if view else [],
                                     open=True), csrf=ws.csrf)
            yield _event("done", {"message_id": result.assistant_message_id,
                                  "error": result.error, "html": html,
                                  "session_id": chat_id, "stopped": result.stopped})

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


def title_new_chat(ctx: WebContext, user: str, session_id: int) -> None:
    """A new conversation's title from its first exchange, written by the background model in
    a task of its own (the reply never waits for it); open pages get it as a ``title`` event
    and put it in their list. Until then, and without a model, the list shows the first
    message."""
    from hermes.agent.summarize import title_from_start

    agent = ctx.agent
    if agent is None or session_id in ctx.titles:
        return

    async def write_title() -> None:
        try:
            title = await title_from_start(agent.memory, agent.background_llm, user, session_id)
        except Exception:  # noqa: BLE001 - logged; the list keeps the first message
            log.exception("web: the title of session %s failed", session_id)
            return
        if title:
            ctx.hub.publish(user, "title", {"session_id": session_id, "title": title})

    task = asyncio.create_task(write_title())
    ctx.titles[session_id] = task
    task.add_done_callback(lambda _: ctx.titles.pop(session_id, None))


class RunningReply:
    """A reply being streamed to a page: its events (the text as it comes, its HTML now and
    then, also while the model pauses), and ``stop()``, as Ctrl-C in the terminal: the turn
    keeps what was sent, marked as stopped."""

    def __init__(self, turn: Any) -> None:
        self.turn = turn
        self.stopped = False
        self._next: asyncio.Future[str] | None = None

    def stop(self) -> None:
        self.stopped = True
        if self._next is not None and not self._next.done():
            self._next.cancel()

    async def events(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        rendered = StreamRenderer()
        chunks = aiter(self.turn)
        try:
            while not self.stopped:
                # The next chunk in a task of its own: waiting for it with a timeout (to
                # render the text that came before a pause) must not cancel the turn.
                self._next = asyncio.ensure_future(anext(chunks))
                while not (await asyncio.wait({self._next}, timeout=rendered.due()))[0]:
                    yield "chunk", {"text": "", "html": str(rendered.flush())}
                try:
                    chunk = self._next.result()
                except (StopAsyncIteration, asyncio.CancelledError):
                    break                   # the end, or stopped (the turn kept its text)
                html = rendered.add(chunk)
                # The text as it comes; now and then the HTML of all of it so far
                yield "chunk", {"text": chunk} if html is None else {"text": chunk,
                                                                     "html": str(html)}
        finally:
            if self._next is not None and not self._next.done():
                self._next.cancel()         # the page went away: the turn stops there
                await asyncio.gather(self._next, return_exceptions=True)
            await chunks.aclose()


async def stop(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    """Stop the reply being written in a conversation (the Stop button)."""
    form = await form_of(request)
    chat_id = int(form.get("session") or 0)
    if chat_id < 0:
        _temporary(ctx, ws.user, chat_id)            # 404 for another user's
    else:
        chat_id = ctx.session_store.get(ws.user, chat_id).id
    running = ctx.replies.get(chat_id)
    if running is not None:
        running.stop()
    if wants_json(request):
        return JSONResponse({"stopped": running is not None})
    return back(request, f"/chat?session={chat_id}")


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
    reach = ctx.ops.reply_reach(ws.scope, message_id)
    # Why fewer facts moved than were shown (a 👎 never lowers a fact the reply did not use).
    note = "" if wanted is None else reach.explain(wanted, "the fact's own 👍/👎 below")
    if wants_json(request):
        facts = {f.id: f.trust for f in (ctx.ops.get(ws.scope, i) for i in reach.shown)}
        return JSONResponse({"rating": None if wanted is None else ("up" if wanted else "down"),
                             "changed": len(changes), "note": note,
                             "trust": {str(k): round(v, 2) for k, v in facts.items()}})
    done = ("Rating withdrawn" if wanted is None
            else f"Rated this reply {'helpful' if wanted else 'not helpful'}")
    ctx.sessions.flash(ws.id, notice=f"{done}: trust of {len(changes)} fact(s) changed. {note}"
                       .strip())
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
    learned = ctx.templates.get_template("receipt_learned.html")
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
            "learned_html": learned.render(f=fact), "committed_at": time.time() * 1000})


def extraction_listener(ctx: WebContext) -> Callable[[Any], None]:
    """An ``ExtractionWorker.on_commit`` listener: each fact a run wrote, as a ``fact`` event
    with its sidebar item already rendered (and the version it replaced, if any)."""
    item = ctx.templates.get_template("fact_item.html")
    # Under the reply (its forms post with the page's CSRF header: one event, every page)
    learned = ctx.templates.get_template("receipt_learned.html")

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
                "learned_html": learned.render(f=fact), "committed_at": committed_at})

    return on_commit


def routes(page: Callable[..., Any]) -> list[Route]:
    return [
        Route("/chat", page(chat)),
        Route("/chat/new", page(new_chat), methods=["POST"]),
        Route("/chat/send", page(send), methods=["POST"]),
        Route("/chat/stop", page(stop), methods=["POST"]),
        Route("/chat/{id:int}/delete", page(delete_chat), methods=["POST"]),
        Route("/chat/rate/{id:int}", page(rate), methods=["POST"]),
        Route("/events", page(events)),
    ]
