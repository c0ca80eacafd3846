"""Helpers for the web panel's tests: the app on an in-process ASGI client, logged in."""

from __future__ import annotations

import re

import httpx

from hermes.frontends.web.app import WebContext, build_app

CSRF = re.compile(r'name="csrf" content="([^"]+)"')


class Panel:
    """An httpx client on the app, and the CSRF token of its logged-in session."""

    def __init__(self, ctx: WebContext) -> None:
        self.ctx = ctx
        self.app = build_app(ctx)
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app),
                                        base_url="http://testserver")
        self.csrf = ""

    async def login(self, user: str = "owner") -> Panel:
        token = self.ctx.tokens.create(user)
        response = await self.client.get(f"/login?token={token}")
        assert response.status_code == 303, response.text
        page = await self.client.get("/chat")
        self.csrf = CSRF.search(page.text).group(1)
        return self

    async def get(self, url: str, **kw) -> httpx.Response:
        return await self.client.get(url, **kw)

    async def post(self, url: str, data: dict | None = None, *, csrf: bool = True,
                   **kw) -> httpx.Response:
        form = dict(data or {})
        if csrf:
            form["csrf"] = self.csrf
        return await self.client.post(url, data=form, **kw)

    async def close(self) -> None:
        await self.client.aclose()
