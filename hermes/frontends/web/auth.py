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
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from hermes.clock import Clock, to_ts

COOKIE = "hermes_session"
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
# Every form of a write carries a one-time token: the same form sent again does nothing.
ONCE_FIELD = "once"
USED_FORMS = 500
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


class Sessions:
    """Logged-in browsers: cookie value -> user and CSRF token; and per browser session, the
    one-time notice of its last write (shown by the page it was sent to) and the form tokens
    already used (a form sent twice is done once)."""

    def __init__(self) -> None:
        self._by_id: dict[str, WebSession] = {}
        self._flash: dict[str, dict[str, str]] = {}
        self._used: dict[str, OrderedDict[str, None]] = {}

    def start(self, user: str) -> WebSession:
        session = WebSession(secrets.token_urlsafe(32), user, secrets.token_urlsafe(24))
        self._by_id[session.id] = session
        return session

    def get(self, cookie: str | None) -> WebSession | None:
        return self._by_id.get(cookie) if cookie else None

    def end(self, cookie: str | None) -> None:
        if cookie:
            self._by_id.pop(cookie, None)
            self._flash.pop(cookie, None)
            self._used.pop(cookie, None)

    # ------------------------------------------------------------ after a write (Post/Redirect/Get)
    def flash(self, session_id: str, *, notice: str | None = None,
              error: str | None = None) -> None:
        """What the page after the redirect says, once."""
        given = {k: v for k, v in (("notice", notice), ("error", error)) if v}
        if given:
            self._flash[session_id] = given

    def take_flash(self, session_id: str) -> dict[str, str]:
        return self._flash.pop(session_id, {})

    def claim_form(self, session_id: str, token: str) -> bool:
        """False when this form (its one-time token) was sent before: the back button and a
        resend, a double click. The newest ``USED_FORMS`` tokens are kept."""
        used = self._used.setdefault(session_id, OrderedDict())
        if token in used:
            return False
        used[token] = None
        while len(used) > USED_FORMS:
            used.popitem(last=False)
        return True

    def release_form(self, session_id: str, token: str) -> None:
        """The write failed: sending the form again may try again."""
        self._used.get(session_id, OrderedDict()).pop(token, None)


def csrf_ok(session: WebSession, given: str | None) -> bool:
    return bool(given) and hmac.compare_digest(session.csrf, given or "")


def login_nonce() -> str:
    return secrets.token_urlsafe(24)


def login_csrf_ok(cookie: str | None, given: str | None) -> bool:
    """The login form's token matches the cookie set with the form (a cross-site form has
    neither: the cookie is SameSite=Strict, and another site cannot read it)."""
    return bool(cookie) and bool(given) and hmac.compare_digest(cookie or "", given or "")
