"""Who gets into the web panel: login tokens under the home, session cookies, CSRF tokens.

A login token is 32 random bytes (URL-safe), shown once; only its SHA-256 is kept, in
``<home>/web/tokens.json`` (mode 0600) with the user it logs in as and when it expires
(``web.token_days``, 7 by default; a token made before tokens expired never does). Its id (the
first characters of the hash) names it in ``hermes web token --list/--revoke`` and on the
panel's Logins page; revoking it also ends the sessions it started.

Logging in with it gives a session cookie (HttpOnly, SameSite=Strict) naming a server-side
session that holds the user and that session's CSRF token, kept in ``<home>/web/sessions.json``
(mode 0600, only the cookie's hash) so that a restart of the daemon logs nobody out. A session
lasts ``web.session_days`` (30 by default) from its login. The user is fixed here, at login: no
request parameter can change it. The login itself is guarded too (someone with a token of their
own must not log another person's browser into their account, where that person's chat would
become their memory): the login form carries a pre-session CSRF token, and a login link opened
from another site is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from hermes.clock import Clock, parse_ts, to_ts
from hermes.errors import HermesError, NotFound
from hermes.home import make_private_dirs
from hermes.memory.place import Scope

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
TOKEN_ID_CHARS = 10


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _read(path: Path) -> dict[str, dict[str, Any]]:
    """The file's entries; a damaged file is one clear error (HermesError), never a 500."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise HermesError(f"{path} is damaged ({exc}); delete it (every browser then logs in "
                          "again; for tokens.json make a new link with `hermes web token`).") \
            from None
    return data


def _write(path: Path, data: dict[str, dict[str, Any]]) -> None:
    """Atomically, readable by this OS user only."""
    make_private_dirs(path.parent)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
    os.replace(tmp, path)


@dataclass(frozen=True)
class LoginToken:
    """A login token as listed (never the token itself: only its hash is kept)."""

    id: str
    user: str
    created_at: str
    expires_at: str | None        # None: made before tokens expired
    expired: bool
    sessions: int = 0             # logged-in browsers it started


class TokenStore:
    """Login tokens of one home: ``create(user)`` returns a new token (the only time it is
    seen); ``login(token)`` the user it logs in as and its id, or None (unknown, expired)."""

    def __init__(self, home: Path, clock: Clock, days: float = 7.0) -> None:
        self.path = home / "web" / "tokens.json"
        self.clock = clock
        self.days = days

    def _load(self) -> dict[str, dict[str, Any]]:
        return _read(self.path)

    def _expired(self, entry: dict[str, Any]) -> bool:
        expires = entry.get("expires_at")
        return expires is not None and parse_ts(expires) <= self.clock.now()

    def create(self, user: str, days: float | None = None) -> str:
        token = secrets.token_urlsafe(32)
        now = self.clock.now()
        tokens = self._load()
        tokens[_digest(token)] = {
            "user": user, "created_at": to_ts(now),
            "expires_at": to_ts(now + timedelta(days=self.days if days is None else days))}
        _write(self.path, tokens)
        return token

    def has_token(self, user: str) -> bool:
        """Whether ``user`` has a token that still logs in."""
        return any(entry["user"] == user and not self._expired(entry)
                   for entry in self._load().values())

    def login(self, token: str) -> tuple[str, str] | None:
        """(user, token id) for a valid token; None for an unknown or expired one."""
        if not token:
            return None
        wanted = _digest(token)
        for digest, entry in self._load().items():
            if hmac.compare_digest(digest, wanted):
                return None if self._expired(entry) else (entry["user"],
                                                          digest[:TOKEN_ID_CHARS])
        return None

    def user_for(self, token: str) -> str | None:
        found = self.login(token)
        return found[0] if found else None

    def expired(self, token: str) -> bool:
        """A token that was valid once: the login page says so, not just "not valid"."""
        entry = self._load().get(_digest(token)) if token else None
        return entry is not None and self._expired(entry)

    def list(self, user: str | None = None) -> list[LoginToken]:
        """Tokens, newest first (``user``: that user's only)."""
        found = [LoginToken(digest[:TOKEN_ID_CHARS], e["user"], e["created_at"],
                            e.get("expires_at"), self._expired(e))
                 for digest, e in self._load().items() if user is None or e["user"] == user]
        return sorted(found, key=lambda t: t.created_at, reverse=True)

    def revoke(self, token_id: str, user: str | None = None) -> LoginToken:
        """Delete a token by its id (``user``: only one of that user's)."""
        tokens = self._load()
        for digest, entry in tokens.items():
            if digest.startswith(token_id.strip()) and len(token_id.strip()) >= 4 and (
                    user is None or entry["user"] == user):
                del tokens[digest]
                _write(self.path, tokens)
                return LoginToken(digest[:TOKEN_ID_CHARS], entry["user"], entry["created_at"],
                                  entry.get("expires_at"), self._expired(entry))
        raise NotFound(f"No login token {token_id!r}; `hermes web token --list` lists them.")


@dataclass(frozen=True)
class WebSession:
    id: str
    user: str
    csrf: str
    token_id: str | None = None
    created_at: str | None = None
    expires_at: str | None = None

    @property
    def scope(self) -> Scope:
        """What the memory operations act on: the user, in a private place (the panel is
        read by its user alone)."""
        return Scope(self.user)


class Sessions:
    """Logged-in browsers: cookie value -> user and CSRF token, kept in the home (only the
    cookie's hash) so that they outlive a restart; and per browser session, in memory, the
    one-time notice of its last write (shown by the page it was sent to) and the form tokens
    already used (a form sent twice is done once)."""

    def __init__(self, home: Path | None = None, clock: Clock | None = None,
                 days: float = 30.0) -> None:
        self.path = home / "web" / "sessions.json" if home is not None else None
        self.clock = clock
        self.days = days
        self._by_id: dict[str, WebSession] = {}
        self._flash: dict[str, dict[str, str]] = {}
        self._used: dict[str, OrderedDict[str, None]] = {}

    # ------------------------------------------------------------ the kept sessions
    def _load(self) -> dict[str, dict[str, Any]]:
        return _read(self.path) if self.path is not None else {}

    def _save(self, kept: dict[str, dict[str, Any]]) -> None:
        if self.path is not None:
            _write(self.path, kept)

    def _live(self, entry: dict[str, Any]) -> bool:
        expires = entry.get("expires_at")
        return (expires is None or self.clock is None
                or parse_ts(expires) > self.clock.now())

    def start(self, user: str, token_id: str | None = None) -> WebSession:
        now = self.clock.now() if self.clock is not None else None
        session = WebSession(
            secrets.token_urlsafe(32), user, secrets.token_urlsafe(24), token_id,
            to_ts(now) if now else None,
            to_ts(now + timedelta(days=self.days)) if now else None)
        self._by_id[session.id] = session
        kept = {k: v for k, v in self._load().items() if self._live(v)}
        kept[_digest(session.id)] = {"user": user, "csrf": session.csrf, "token_id": token_id,
                                     "created_at": session.created_at,
                                     "expires_at": session.expires_at}
        self._save(kept)
        return session

    def get(self, cookie: str | None) -> WebSession | None:
        if not cookie:
            return None
        session = self._by_id.get(cookie)
        if self.path is not None:
            # Read each time (a small file): a session started before a restart is known, and
            # one ended elsewhere (`hermes web token --revoke`) is gone at once.
            entry = self._load().get(_digest(cookie))
            if entry is None:
                self._by_id.pop(cookie, None)
                return None
            session = WebSession(cookie, entry["user"], entry["csrf"], entry.get("token_id"),
                                 entry.get("created_at"), entry.get("expires_at"))
        if session is None:
            return None
        if not self._live({"expires_at": session.expires_at}):
            self.end(cookie)
            return None
        return session

    def end(self, cookie: str | None) -> None:
        if cookie:
            self._by_id.pop(cookie, None)
            self._flash.pop(cookie, None)
            self._used.pop(cookie, None)
            kept = self._load()
            if kept.pop(_digest(cookie), None) is not None:
                self._save(kept)

    def end_for_token(self, token_id: str) -> int:
        """End every session a (revoked) token started; how many."""
        kept = self._load()
        gone = [k for k, v in kept.items() if v.get("token_id") == token_id]
        for key in gone:
            del kept[key]
        if gone:
            self._save(kept)
        for cookie, session in list(self._by_id.items()):
            if session.token_id == token_id:
                self.end(cookie)
        return len(gone)

    def count_by_token(self, user: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for entry in self._load().values():
            if entry["user"] == user and entry.get("token_id") and self._live(entry):
                counts[entry["token_id"]] = counts.get(entry["token_id"], 0) + 1
        return counts

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
