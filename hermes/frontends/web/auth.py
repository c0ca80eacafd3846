"""Who gets into the web panel: login tokens under the home, session cookies, CSRF tokens.

A login token is 32 random bytes (URL-safe), shown once; only its SHA-256 is kept, in
``<home>/web/tokens.json`` (mode 0600) with the user it logs in as. Logging in with it gives a
session cookie (HttpOnly, SameSite=Strict) naming a server-side session that holds the user and
that session's CSRF token. The user is fixed here, at login: no request parameter can change it.
The login itself is guarded too (someone with a token of their own must not log another person's
browser into their account, where that person's chat would become their memory): the login
form carries a pre-session CSRF token, and a login link opened from another site is refused.
Sessions live in memory, so a restart asks for the token again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from hermes.clock import Clock, to_ts
from hermes.memory.place import Scope

COOKIE = "hermes_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
# The login form's own CSRF token, before there is a session (OWASP's pre-session token, as a
# double-submit cookie): the form carries it and a cookie only this site can set carries it.
LOGIN_COOKIE = "hermes_login"
LOGIN_COOKIE_SECONDS = 3600


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """Login tokens of one home: ``create(user)`` returns a new token (the only time it is
    seen); ``user_for(token)`` the user it logs in as, or None."""

    def __init__(self, home: Path, clock: Clock) -> None:
        self.path = home / "web" / "tokens.json"
        self.clock = clock

    def _load(self) -> dict[str, dict[str, str]]:
        if not self.path.exists():
            return {}
        return json.loads(self.path.read_text(encoding="utf-8"))

    def create(self, user: str) -> str:
        token = secrets.token_urlsafe(32)
        tokens = self._load()
        tokens[_digest(token)] = {"user": user, "created_at": to_ts(self.clock.now())}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(tokens, out, indent=1)
        os.replace(tmp, self.path)
        return token

    def has_token(self, user: str) -> bool:
        return any(entry["user"] == user for entry in self._load().values())

    def user_for(self, token: str) -> str | None:
        if not token:
            return None
        wanted = _digest(token)
        for digest, entry in self._load().items():
            if hmac.compare_digest(digest, wanted):
                return entry["user"]
        return None


@dataclass(frozen=True)
class WebSession:
    id: str
    user: str
    csrf: str

    @property
    def scope(self) -> Scope:
        """What the memory operations act on: the user, in a private place (the panel is
        read by its user alone)."""
        return Scope(self.user)


class Sessions:
    """Logged-in browsers: cookie value -> user and CSRF token."""

    def __init__(self) -> None:
        self._by_id: dict[str, WebSession] = {}

    def start(self, user: str) -> WebSession:
        session = WebSession(secrets.token_urlsafe(32), user, secrets.token_urlsafe(24))
        self._by_id[session.id] = session
        return session

    def get(self, cookie: str | None) -> WebSession | None:
        return self._by_id.get(cookie) if cookie else None

    def end(self, cookie: str | None) -> None:
        if cookie:
            self._by_id.pop(cookie, None)


def csrf_ok(session: WebSession, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(session.csrf, given or "")


def login_nonce() -> str:
    return secrets.token_urlsafe(24)


def login_csrf_ok(cookie: str | None, given: str | None) -> bool:
    """The login form's token matches the cookie set with the form (a cross-site form has
    neither: the cookie is SameSite=Strict, and another site cannot read it)."""
    return bool(cookie) and bool(given) and hmac.compare_digest(cookie or "", given or "")
