"""The web panel's pages machinery: Jinja2 pages, login and CSRF checks (the app that routes to
them is hermes.frontends.web.site).

Every page and action goes through :func:`page` (a logged-in session is required; a write also
needs the session's CSRF token and a same-origin request) and receives the user the login fixed.
Memory is read and written only through the stores, with that user: an id of another user's
fact, session or cron job is a 404, as an unknown one is.

A write answers with a redirect to the page that shows its result (Post/Redirect/Get), which
says what was done once (:func:`redirect`); every form carries a one-time token, so the same
form sent again (the back button, a double click) does nothing. A refused write is shown on
the spot with the draft kept (sending it again is refused again).
"""

from __future__ import annotations

import logging
import re
import secrets
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import jinja2
import jinja2.runtime
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from hermes.errors import HermesError, NotFound
from hermes.frontends.web import markdown
from hermes.frontends.web.auth import (
    COOKIE,
    CSRF_FIELD,
    CSRF_HEADER,
    LOGIN_COOKIE,
    LOGIN_COOKIE_SECONDS,
    ONCE_FIELD,
    Sessions,
    TokenStore,
    WebSession,
    csrf_ok,
    login_csrf_ok,
    login_nonce,
)
from hermes.frontends.web.events import EventHub
from hermes.memory.operations import MemoryOperations

if TYPE_CHECKING:
    from hermes.agent.turn import Agent
    from hermes.cron.runner import CronRunner
    from hermes.learn.worker import ExtractionWorker
    from hermes.memory import Memory

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
Handler = Callable[[Request, "WebContext", WebSession], Awaitable[Response]]


@dataclass
class WebContext:
    """What the routes need: the runtime, the agent, and the panel's own state."""

    memory: Memory
    agent: Agent | None = None
    worker: ExtractionWorker | None = None
    runner: CronRunner | None = None
    hub: EventHub = field(default_factory=EventHub)
    chat_locks: dict[int, Any] = field(default_factory=dict)  # session id -> asyncio.Lock
    replies: dict[int, Any] = field(default_factory=dict)  # session id -> RunningReply
    # Temporary chats, in this process only: (negative) id -> (user, agent.turn.Transcript)
    temporary: dict[int, tuple[str, Any]] = field(default_factory=dict)
    # New conversations' titles being written: session id -> asyncio.Task
    titles: dict[int, Any] = field(default_factory=dict)

    @cached_property
    def tokens(self) -> TokenStore:
        return TokenStore(self.memory.settings.home_path, self.memory.clock,
                          days=self.memory.settings.web.token_days)

    @cached_property
    def sessions(self) -> Sessions:
        return Sessions(self.memory.settings.home_path, self.memory.clock,
                        days=self.memory.settings.web.session_days)

    @cached_property
    def facts(self) -> Any:
        return self.agent.facts if self.agent else self.memory.facts

    @cached_property
    def session_store(self) -> Any:
        return self.agent.sessions if self.agent else self.memory.sessions

    @cached_property
    def basic(self) -> Any:
        return self.agent.basic if self.agent else self.memory.basic

    @cached_property
    def ops(self) -> MemoryOperations:
        """The memory operations every page reads and writes through."""
        return MemoryOperations(self.agent.memory if self.agent else self.memory)

    @cached_property
    def templates(self) -> jinja2.Environment:
        env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                 autoescape=True, trim_blocks=True, lstrip_blocks=True)
        env.filters["short_time"] = lambda ts: (ts or "")[:16].replace("T", " ")
        # where a fact or entry was learned, who may see it, where a fact came from
        # (hermes.memory.audience, hermes.memory.facts.provenance)
        from hermes.memory.audience import mark_name, who_sees
        from hermes.memory.facts import provenance
        from hermes.memory.facts.matched import why_found
        from hermes.memory.place import Place

        policy = self.memory.settings.privacy.shared_places
        env.filters["place_name"] = lambda key: Place(key).describe()
        env.filters["mark_name"] = mark_name
        env.filters["who_sees"] = lambda item: who_sees(item.place, item.shared, policy)
        env.filters["came_from"] = provenance.describe
        env.tests["outside"] = lambda fact: provenance.outside(fact.source)
        env.tests["withheld"] = provenance.is_withheld
        env.globals["form_fields"] = form_fields
        env.filters["markdown"] = markdown.to_html
        env.filters["marked"] = marked
        env.filters["why_found"] = why_found  # a fact a search found: why
        return env


def marked(text: str, snippet: str) -> Markup:
    """``text`` escaped, the words its search snippet highlighted (``snippet``: the query's
    words as FTS5 matched them, stems included) in ``<mark>``: a line found by meaning alone
    has none, and nothing in it is lit as if its words had matched."""
    from hermes.memory.sessions.bm25 import snippet_parts

    words = {text.strip() for text, marked in snippet_parts(snippet) if marked}
    words.discard("")
    if not words:
        return escape(text)
    found = re.compile("|".join(_whole(w) for w in sorted(words, key=len, reverse=True)),
                       re.IGNORECASE)
    out, at = [], 0
    for match in found.finditer(text):
        out += [escape(text[at:match.start()]),
                Markup("<mark>{}</mark>").format(match.group())]
        at = match.end()
    out.append(escape(text[at:]))
    return Markup("").join(out)


def _whole(word: str) -> str:
    """A pattern of ``word`` where FTS5 would see it: not inside a longer token (letters and
    digits; "foo" in "foo_bar" is one), except at a CJK edge, matched inside its run."""
    def edge(char: str) -> bool:
        return char.isalnum() and unicodedata.east_asian_width(char) not in ("W", "F")

    return (("(?<![^\\W_])" if edge(word[0]) else "") + re.escape(word)
            + ("(?![^\\W_])" if edge(word[-1]) else ""))


@jinja2.pass_context
def form_fields(context: jinja2.runtime.Context) -> Markup:
    """The hidden fields of a write's form: the session's CSRF token, and a token of this form
    alone (sent a second time, by the back button or a double click, it does nothing)."""
    return Markup('<input type="hidden" name="{}" value="{}">'
                  '<input type="hidden" name="{}" value="{}">').format(
        CSRF_FIELD, context.get("csrf", ""), ONCE_FIELD, secrets.token_urlsafe(12))


def render(ctx: WebContext, request: Request, ws: WebSession | None, name: str,
           status: int = 200, csrf: str | None = None, **values: Any) -> HTMLResponse:
    """A whole page; with the one-time notice of the write that redirected here, if any."""
    if ws is not None:
        for key, text in ctx.sessions.take_flash(ws.id).items():
            if not values.get(key):
                values[key] = text
    html = ctx.templates.get_template(name).render(
        request=request, user=ws.user if ws else None,
        csrf=csrf if csrf is not None else ws.csrf if ws else "", path=request.url.path,
        **values)
    return HTMLResponse(html, status_code=status)


async def form_data(request: Request) -> dict[str, str]:
    """A urlencoded form body (no multipart: the panel never uploads files)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    return {key: values[-1] for key, values in parse_qs(body, keep_blank_values=True).items()}


def wants_json(request: Request) -> bool:
    return "application/json" in request.headers.get("accept", "")


def back(request: Request, default: str) -> RedirectResponse:
    """After a no-JS form post: back to the page it came from, on this site only (the path of
    the Referer; another site's Referer goes to ``default``)."""
    parts = urlsplit(request.headers.get("referer") or default)
    if parts.netloc and parts.netloc != request.url.netloc:
        parts = urlsplit(default)
    target = (parts.path or default) + (f"?{parts.query}" if parts.query else "")
    return RedirectResponse(target, status_code=303)


def redirect(ctx: WebContext, ws: WebSession, url: str, *, notice: str | None = None,
             error: str | None = None) -> RedirectResponse:
    """Post/Redirect/Get: a write answers with a redirect to the page that shows its result,
    and that page says ``notice`` once. A reload there reloads the page, never the write."""
    ctx.sessions.flash(ws.id, notice=notice, error=error)
    return RedirectResponse(url, status_code=303)


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True           # no Origin (an old browser, a test client): the token decides
    # The scheme too: https://127.0.0.1:<port> is another origin than the panel's http one.
    given = urlsplit(origin)
    return (given.scheme, given.netloc) == (request.url.scheme, request.url.netloc)


def _from_another_site(request: Request) -> bool:
    """A request a page of another site (another port of this host included) made the browser
    send: Sec-Fetch-Site says so (what the person typed, clicked in a terminal or bookmarked is
    ``none``)."""
    return request.headers.get("sec-fetch-site") in ("cross-site", "same-site")


def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """Login required; writes need the CSRF token and a same-origin request. A HermesError
    becomes one line: NotFound a 404 page, anything else a 400 page."""

    async def endpoint(request: Request) -> Response:
        ctx: WebContext = request.app.state.ctx
        try:
            ws = ctx.sessions.get(request.cookies.get(COOKIE))
        except HermesError as exc:          # a damaged sessions file: one line
            log.error("web: %s", exc)
            return error_page(ctx, request, None, 500, str(exc))
        if ws is None:
            if request.method == "GET" and not wants_json(request):
                return RedirectResponse("/login", status_code=303)
            return JSONResponse({"error": "Not logged in."}, status_code=401)
        if request.method != "GET":
            given = request.headers.get(CSRF_HEADER)
            if given is None:
                request.state.form = await form_data(request)
                given = request.state.form.get(CSRF_FIELD)
            if not (_same_origin(request) and csrf_ok(ws, given)):
                return error_page(ctx, request, ws, 403,
                                  "Refused: the form's CSRF token is missing or wrong. "
                                  "Reload the page and try again.")
        # A form's one-time token (scripts' posts carry the CSRF header and guard themselves)
        once = (getattr(request.state, "form", {}).get(ONCE_FIELD)
                if request.method != "GET" else None)
        if once and not ctx.sessions.claim_form(ws.id, once):
            ctx.sessions.flash(ws.id, notice="That form was already sent; it was not done "
                               "again.")
            return back(request, "/chat")
        try:
            response = await handler(request, ctx, ws)
        except NotFound as exc:
            response = error_page(ctx, request, ws, 404, str(exc))
        except HermesError as exc:
            response = error_page(ctx, request, ws, 400, str(exc))
        except ValueError:
            response = error_page(ctx, request, ws, 400, "That id or number is not valid.")
        except Exception:
            log.exception("web: %s %s failed", request.method, request.url.path)
            response = error_page(ctx, request, ws, 500,
                                  "Sorry, that failed; it has been logged (hermes.log).")
        if once and response.status_code >= 400:
            ctx.sessions.release_form(ws.id, once)      # refused: sending it again may work
        return response

    endpoint.__name__ = handler.__name__
    return endpoint


async def form_of(request: Request) -> dict[str, str]:
    """The form of a write (already read by the CSRF check when it came as a field)."""
    form = getattr(request.state, "form", None)
    if form is None:
        form = request.state.form = await form_data(request)
    return form


def error_page(ctx: WebContext, request: Request, ws: WebSession | None, status: int,
               message: str) -> Response:
    if wants_json(request) or request.headers.get(CSRF_HEADER):
        return JSONResponse({"error": message}, status_code=status)
    return render(ctx, request, ws, "error.html", status=status, message=message)


# --------------------------------------------------------------------------- login
def _login_page(ctx: WebContext, request: Request, status: int = 200,
                error: str | None = None) -> Response:
    """The login form with its pre-session CSRF token, in the form and in its cookie (the
    browser's own again after a refusal, so that a page of another site cannot spoil it)."""
    nonce = request.cookies.get(LOGIN_COOKIE) or login_nonce()
    response = render(ctx, request, None, "login.html", status=status, csrf=nonce, error=error)
    response.set_cookie(LOGIN_COOKIE, nonce, max_age=LOGIN_COOKIE_SECONDS, httponly=True,
                        samesite="strict", path="/login", secure=request.url.scheme == "https")
    return response


async def login(request: Request) -> Response:
    """GET /login?token=...: the link `hermes web token` prints. POST: the pasted token, with
    the login form's CSRF token, from this site."""
    ctx: WebContext = request.app.state.ctx
    if request.method == "POST":
        form = await form_data(request)
        if not (_same_origin(request) and not _from_another_site(request)
                and login_csrf_ok(request.cookies.get(LOGIN_COOKIE), form.get(CSRF_FIELD))):
            return _login_page(ctx, request, 403, "Refused: the login form's CSRF token is "
                               "missing or wrong (an old page, or a form of another site). "
                               "Paste the token again here.")
        token = form.get("token", "").strip()
    else:
        token = request.query_params.get("token", "")
        if token and _from_another_site(request):
            return _login_page(ctx, request, 403, "Refused: this login link was opened from "
                               "another site. Open the link Hermes printed yourself, or paste "
                               "its token here.")
    if not token:
        return _login_page(ctx, request)
    try:
        found = ctx.tokens.login(token)
    except HermesError as exc:              # a damaged tokens file: one line
        log.error("web: %s", exc)
        return _login_page(ctx, request, 500, str(exc))
    if found is None:
        why = ("That login link has expired" if ctx.tokens.expired(token)
               else "That login token is not valid")
        return _login_page(ctx, request, 403, f"{why}. `hermes web token` makes a new one.")
    user, token_id = found
    ctx.sessions.end(request.cookies.get(COOKIE))
    ws = ctx.sessions.start(user, token_id)
    response = RedirectResponse("/chat", status_code=303)
    # Kept by the browser for the session's life (a browser restart does not log out)
    response.set_cookie(COOKIE, ws.id, httponly=True, samesite="strict", path="/",
                        max_age=int(ctx.sessions.days * 86400),
                        secure=request.url.scheme == "https")
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


@page
async def logout(request: Request, ctx: WebContext, ws: WebSession) -> Response:
    ctx.sessions.end(ws.id)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


async def root(request: Request) -> Response:
    return RedirectResponse("/chat", status_code=303)
