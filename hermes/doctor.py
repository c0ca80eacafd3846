"""`hermes doctor`: is this installation in working order, and if not, what to do.

Each check is a :class:`Check` with a status (``ok``, ``warn``, ``fail``) and one line. Nothing
is changed: the database is examined as it is (:mod:`hermes.store.check`), the home is tested
with a temp file that is removed again, the model's keys are looked for where litellm and the
home's .env would find them, and the model is called (one tiny request) only when asked. A
token or key is never printed.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sqlite3
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Literal

import hermes.home
from hermes.clock import Clock, to_ts
from hermes.config import Settings, config_path_from
from hermes.errors import ConfigError, HermesError
from hermes.home import loose_modes, old_home_note
from hermes.store.check import background_failures, check_database

Status = Literal["ok", "warn", "fail"]

# The clock a model request is timed by (a test's own, to see what is timed)
now = time.perf_counter
# Below this much free space a write (a turn, an import) may fail at any moment.
MIN_FREE_BYTES = 100 * 1024 * 1024
FAILURE_WINDOW = timedelta(days=7)
# A bot token is three base64url parts: the bot's id, a timestamp, an HMAC.
DISCORD_TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9_-]{17,40}\.[A-Za-z0-9_-]{4,10}\.[A-Za-z0-9_-]{20,}$")


@dataclass
class Check:
    name: str
    status: Status
    detail: str


def exit_code(checks: list[Check]) -> int:
    """2 when something is broken, 1 when something needs a look, 0 when all is well."""
    statuses = {c.status for c in checks}
    return 2 if "fail" in statuses else 1 if "warn" in statuses else 0


def as_json(checks: list[Check]) -> dict[str, object]:
    return {"ok": exit_code(checks) == 0, "exit_code": exit_code(checks),
            "checks": [asdict(c) for c in checks]}


def _config(settings: Settings, problem: ConfigError | None, explicit: Path | None,
            home: Path | None) -> Check:
    if problem is not None:
        return Check("config", "fail", str(problem))
    path = config_path_from(dict(os.environ), explicit, home)
    if settings.notes:
        return Check("config", "warn", " ".join(n.removeprefix("Warning: ") for n in
                                                  settings.notes))
    return Check("config", "ok", f"{path} is valid" if path else "no config file; built-in "
                 "defaults and HERMES_* variables")


def _home_named_by(settings: Settings) -> str:
    if settings.home_from == "default":
        if hermes.home.source_checkout() is not None:
            return "the default home: the clone's data/"
        return "the default home: the per-user data folder"
    if settings.home_from in ("--home", "HERMES_HOME"):
        return f"named by {settings.home_from}"
    return f"named by `home` in {settings.home_from}"


def _home(settings: Settings) -> Check:
    home = settings.home_path
    named = f"({_home_named_by(settings)})"
    if home.exists() and not home.is_dir():
        return Check("home", "fail", f"{home} is a file, not a directory; point HERMES_HOME, "
                     "--home or the config's `home` at a directory")
    existing = next((p for p in (home, *home.parents) if p.exists()), Path("/"))
    if existing != home:
        if os.access(existing, os.W_OK | os.X_OK):
            return Check("home", "ok", f"{home} does not exist yet; it can be created {named}")
        return Check("home", "fail", f"{home} does not exist and {existing} is not writable")
    try:
        fd, name = tempfile.mkstemp(prefix=".doctor-", dir=home)
        os.close(fd)
        os.unlink(name)
    except OSError as exc:
        return Check("home", "fail", f"{home} is not writable ({exc.strerror or exc}); fix its "
                     "permissions or point HERMES_HOME at another directory")
    return Check("home", "ok", f"{home} is writable {named}")


def _modes(home: Path) -> Check:
    if not home.is_dir():
        return Check("modes", "ok", "no home yet: it is created readable by you alone")
    loose = loose_modes(home)
    if not loose:
        return Check("modes", "ok", "only you can read the home and its files")
    return Check("modes", "warn", f"other accounts can read your memory: {loose.describe()}; "
                 f"run `{loose.advice()}`")


def _old_home(settings: Settings) -> list[Check]:
    if settings.home_named_now:
        return []
    try:
        note = old_home_note(settings.home_path, Path.cwd())
    except OSError:
        return []
    return [Check("old home", "warn", note.removeprefix("Note: "))] if note else []


def _database(db_path: Path) -> list[Check]:
    checks = []
    for finding in check_database(db_path):
        name = "migrations" if finding.name == "migrations" else "database"
        label = "" if finding.name in ("migrations", "file") else f"{finding.name}: "
        checks.append(Check(name, "ok" if finding.ok else "fail", f"{label}{finding.detail}"))
    return checks


def _disk(home: Path, db_path: Path) -> Check:
    existing = next((p for p in (home, *home.parents) if p.exists()), Path("/"))
    try:
        free = shutil.disk_usage(existing).free
    except OSError as exc:
        return Check("disk", "warn", f"cannot read the free space of {existing} ({exc})")
    db_size = db_path.stat().st_size if db_path.is_file() else 0
    line = f"{free / 1e9:,.1f} GB free on the disk holding {existing}"
    if free < MIN_FREE_BYTES:
        return Check("disk", "fail", f"{line}: writes may fail; free some space")
    if free < 2 * db_size:
        return Check("disk", "warn", f"{line}, less than twice the database "
                     f"({db_size / 1e9:,.1f} GB): a backup may not fit")
    return Check("disk", "ok", line)


def _discord(settings: Settings) -> Check:
    from hermes.frontends.discord_frontend import discord_token

    try:
        token = discord_token(settings)
    except ConfigError as exc:
        return Check("discord", "fail", str(exc))
    if not token:
        return Check("discord", "ok", "no token set: the Discord bot stays off")
    if not DISCORD_TOKEN_SHAPE.match(token.strip()):
        return Check("discord", "fail", "the token does not look like a bot token (three "
                     "dot-separated parts); copy it again from the Developer Portal, Bot page")
    if not settings.discord.allowed_users and not settings.discord.allowed_roles \
            and not settings.discord.allowed_channels:
        return Check("discord", "warn", "the token looks right, but no allowlist is set "
                     "(discord.allowed_users): nobody is served")
    return Check("discord", "ok", "the token looks like a bot token")


def _background(db_path: Path, clock: Clock) -> Check:
    since = to_ts(clock.now() - FAILURE_WINDOW)
    if not db_path.is_file():
        return Check("background", "ok", "no database yet")
    try:
        conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            failures = background_failures(conn, since)
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return Check("background", "warn", f"cannot read the run records ({exc})")
    parts = []
    if failures.extraction_runs:
        last = f" (last: {failures.last_extraction_reason})" if \
            failures.last_extraction_reason else ""
        parts.append(f"{failures.extraction_runs} extraction run(s) failed{last}")
    if failures.cron_runs:
        parts.append(f"{failures.cron_runs} cron run(s) failed (`hermes cron runs`)")
    if failures.summaries:
        parts.append(f"{failures.summaries} session summary(ies) failed")
    if not parts:
        return Check("background", "ok", "no failed extraction runs, cron runs or summaries "
                     "in the last 7 days")
    return Check("background", "warn", "in the last 7 days: " + "; ".join(parts) +
                 " (`hermes stats` and hermes.log say more)")


def _model(settings: Settings, call: bool) -> Check:
    from hermes.agent.llm import LLM, load_litellm

    llm = LLM.from_settings(settings)
    if not llm.configured:
        return Check("model", "ok", "none configured: memory commands work; `ask`, `chat` "
                     "and the bot need model.name")
    missing = llm.missing_keys()
    if missing:
        # litellm lists one key, or the several a provider reads (one of them, or all).
        what = f"{missing[0]} is not set; set it" if len(missing) == 1 else \
            f"its key is not set (litellm looks for {', '.join(missing)}); set it"
        return Check("model", "fail", f"{llm.name}: {what} in the environment or in "
                     f"{settings.home_path / '.env'}")
    server = llm.server()
    name = f"{llm.name} at {server[0]} ({server[1]})" if server else str(llm.name)
    if not call:
        return Check("model", "ok", f"{name} (not called; `hermes doctor --model` sends "
                     "one tiny request)")
    # The request alone is timed: litellm's import (seconds) and the event loop's start are
    # this process's, not the model's.
    load_litellm()

    async def ask() -> float:
        started = now()
        await llm.complete([{"role": "user", "content": "Reply with: ok"}], max_tokens=1)
        return now() - started

    try:
        took = asyncio.run(ask())
    except HermesError as exc:
        return Check("model", "fail", f"{llm.name}: {exc}")
    return Check("model", "ok", f"{name} answered in {took:.1f} s")


def run_checks(settings: Settings, clock: Clock, *, config_problem: ConfigError | None = None,
               config_path: Path | None = None, home: Path | None = None,
               call_model: bool = False) -> list[Check]:
    """Every check, in the order a person would fix things (``home``: the --home flag)."""
    checks = [_config(settings, config_problem, config_path, home), _home(settings),
              _modes(settings.home_path), *_old_home(settings)]
    checks += _database(settings.db_path)
    checks += [_disk(settings.home_path, settings.db_path),
               _background(settings.db_path, clock),
               _model(settings, call_model), _discord(settings)]
    return checks
