"""The web panel as one ASGI app: the login pages (hermes.frontends.web.app), the chat and
memory pages (routes_chat, routes_memory), the static files, every body bounded (body_limit)."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hermes.frontends.web import routes_chat, routes_memory
from hermes.frontends.web.app import HERE, WebContext, login, logout, page, root
from hermes.frontends.web.body_limit import BodyLimit


def build_app(ctx: WebContext) -> Starlette:
    routes = [
        Route("/", root),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        *routes_chat.routes(page),
        *routes_memory.routes(page),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    # Every body the panel reads is bounded (issue 30, i30): see body_limit.py.
    app = Starlette(routes=routes, middleware=[Middleware(BodyLimit)])
    app.state.ctx = ctx
    # The model loads while someone logs in (`hermes web` as well as `hermes run`): the
    # panel's first search does not wait for it.
    ctx.memory.preload_embeddings()
    return app
