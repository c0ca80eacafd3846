"""The web panel: chat with a live "Learned Facts" sidebar, and memory a person can see and fix.

Self-contained: ``app`` (Starlette app, login, CSRF), ``routes_chat`` and ``routes_memory``,
``events`` (server-sent events per user), ``auth`` (tokens, sessions), ``server``
(:class:`WebFrontend`: start, stop, source ``web``), ``templates/`` and ``static/``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hermes.frontends.web.server import WebFrontend

__all__ = ["WebFrontend"]


def __getattr__(name: str) -> object:
    if name == "WebFrontend":
        from hermes.frontends.web.server import WebFrontend

        return WebFrontend
    raise AttributeError(name)
