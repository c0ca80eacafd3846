"""`hermes web`: the web panel alone, and its login tokens."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

import typer

from hermes.cli import JsonOption, UserOption, runtime
from hermes.cli.output import echo, emit_json
from hermes.runtime import Runtime

app = typer.Typer(no_args_is_help=False, invoke_without_command=True,
                  help="The web panel: chat with a live Learned Facts sidebar, and memory.")


def _login_link(rt: Runtime, user: str, days: float | None = None) -> str:
    from hermes.frontends.web.auth import TokenStore
    from hermes.frontends.web.server import LOOPBACK

    config = rt.settings.web
    host = config.host or LOOPBACK
    token = TokenStore(rt.settings.home_path, rt.clock, days=config.token_days).create(user, days)
    return f"http://{host}:{config.port}/login?token={token}"


@app.callback()
def web(
    ctx: typer.Context,
    open_browser: bool = typer.Option(False, "--open", help="Make a login token for --user "
                                      "(default: owner), print its link and open a browser."),
    user: str | None = UserOption,
) -> None:
    """Run the web panel alone (`hermes run` serves it too, when web.enabled), on web.host
    (default 127.0.0.1) and web.port (default 8765). Stops on Ctrl-C or SIGTERM."""
    if ctx.invoked_subcommand is not None:
        return
    from hermes.daemon import HomeLock, setup_logging
    from hermes.local_socket import daemon_running

    rt = runtime(ctx)
    if open_browser and daemon_running(rt.settings):
        _open_the_daemons_panel(rt, rt.user(user))
        return
    link = _login_link(rt, rt.user(user)) if open_browser else None
    setup_logging(rt.settings)
    lock = HomeLock(rt.settings.home_path)
    lock.acquire()
    try:
        asyncio.run(_serve(rt, link))
    finally:
        lock.release()


def _open_the_daemons_panel(rt: Runtime, user: str) -> None:
    """`hermes web --open` while `hermes run` serves the panel on this home: a login link for
    ``user`` to that panel, printed and opened (nothing else is started)."""
    import webbrowser

    from hermes.errors import HermesError

    config = rt.settings.web
    if not config.enabled:
        raise HermesError("The Hermes daemon on this home runs without the web panel "
                          "(web.enabled: false); set web.enabled: true and restart it, or stop "
                          "it to run `hermes web` alone.")
    if not config.port:
        raise HermesError("The daemon's web panel listens on a port chosen at its start "
                          "(web.port: 0); its 'Web panel at' line in hermes.log names it, and "
                          "`hermes web token` makes a login link to use there.")
    link = _login_link(rt, user)
    print(f"Web panel (served by the running daemon): log in at {link}", file=sys.stderr,
          flush=True)
    webbrowser.open(link)


async def _serve(rt: Runtime, link: str | None) -> None:
    from hermes.assembly import build_agent, cron_runner
    from hermes.frontends.web import WebFrontend

    agent, worker = build_agent(rt)
    runner = cron_runner(rt.memory, agent)
    frontend = WebFrontend(rt.memory, agent, worker=worker, runner=runner, alone=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    if not await frontend.start():
        from hermes.errors import HermesError

        raise HermesError(f"The web panel {frontend.failure}; set web.port to a free port "
                          "(HERMES_WEB__PORT=8780 hermes web).")
    first = frontend.first_login()
    if link:
        link = link.replace(f":{rt.settings.web.port}/", f":{frontend.port}/", 1)
        print(f"Web panel: log in at {link}", file=sys.stderr, flush=True)
        import webbrowser

        webbrowser.open(link)
    elif first:
        print(f"Web panel: log in at {first}", file=sys.stderr, flush=True)
    else:
        print(f"Web panel at {frontend.url} (a login link: `hermes web token`)",
              file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await frontend.stop()
        if worker is not None:
            await worker.drain(30)
        rt.close()


@app.command("token")
def token(
    ctx: typer.Context,
    user: str | None = UserOption,
    days: float | None = typer.Option(None, "--days", min=0.01, help="How long the new link "
                                      "works (default: web.token_days, 7)."),
    list_: bool = typer.Option(False, "--list", help="List the login tokens (never the tokens "
                               "themselves: only their ids), with --user: that user's."),
    revoke: str | None = typer.Option(None, "--revoke", metavar="ID", help="Revoke a token by "
                                      "its id (from --list) and log out the browsers it "
                                      "logged in."),
    as_json: bool = JsonOption,
) -> None:
    """Make a new login token for a user (default: owner) and print its login link. The token
    is shown only now; Hermes keeps its hash. It works for web.token_days (7); a browser logged
    in with it stays logged in for web.session_days (30), across restarts. --list and --revoke
    manage them (the panel's Logins page too)."""
    from hermes.frontends.web.auth import Sessions, TokenStore

    rt = runtime(ctx)
    config = rt.settings.web
    tokens = TokenStore(rt.settings.home_path, rt.clock, days=config.token_days)
    sessions = Sessions(rt.settings.home_path, rt.clock, days=config.session_days)
    if revoke is not None:
        gone = tokens.revoke(revoke, rt.user(user) if user else None)
        ended = sessions.end_for_token(gone.id)
        if as_json:
            emit_json({"revoked": gone.id, "user": gone.user, "sessions_ended": ended})
        else:
            echo(f"Revoked token {gone.id} of {gone.user}; {ended} browser(s) logged out.")
        return
    if list_:
        listed = tokens.list(rt.user(user) if user else None)
        counts: dict[str, int] = {}
        for name in {t.user for t in listed}:
            counts.update(sessions.count_by_token(name))
        rows: list[dict[str, Any]] = [{"id": t.id, "user": t.user, "created_at": t.created_at,
                 "expires_at": t.expires_at, "expired": t.expired,
                 "sessions": counts.get(t.id, 0)} for t in listed]
        if as_json:
            emit_json(rows)
            return
        if not rows:
            echo("No login tokens. `hermes web token` makes one.")
            return
        echo(f"{'ID':<11} {'USER':<12} {'CREATED':<17} {'EXPIRES':<17} BROWSERS")
        for r in rows:
            expires = ("expired" if r["expired"] else
                       str(r["expires_at"] or "never")[:16].replace("T", " "))
            echo(f"{r['id']:<11} {r['user']:<12} {r['created_at'][:16].replace('T', ' '):<17} "
                 f"{expires:<17} {r['sessions']}")
        return
    typer.echo(_login_link(rt, rt.user(user), days))
