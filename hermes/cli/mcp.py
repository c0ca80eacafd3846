"""`hermes mcp`: serve one user's memory to MCP clients (Claude Desktop, Claude Code, Cursor)."""

from __future__ import annotations

import typer

from hermes.cli import UserOption, runtime


def mcp(
    ctx: typer.Context,
    user: str = UserOption,
    write: bool = typer.Option(False, "--write", help="Offer the write tools too (memory "
                               "add/replace/remove, facts add/update/forget/rate)."),
    http: bool = typer.Option(False, "--http", help="Streamable HTTP instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", help="With --http: the address to bind."),
    port: int = typer.Option(8766, "--port", min=1, max=65535, help="With --http: the port "
                             "(not the web panel's 8765)."),
    print_config: str | None = typer.Option(
        None, "--print-config", metavar="CLIENT", show_default=False,
        help="Print the JSON to paste into claude-desktop, claude-code or cursor, and exit."),
) -> None:
    """Serve the memory of one user over MCP: stdio (what Claude Desktop, Claude Code and
    Cursor launch), or streamable HTTP with --http.

    Read-only unless --write. The user is fixed at start (--user, default users.default): no
    tool takes a user, so a client cannot reach anyone else's memory. Writes go through the
    same checks as chat (caps, secrets, history) and are recorded as mcp:<client name>. Over
    HTTP every request needs `Authorization: Bearer <token>`, the token in <home>/mcp_token."""
    from hermes.frontends import mcp_server

    rt = runtime(ctx)
    who = rt.user(user)
    if print_config is not None:
        import os

        from hermes.config import config_path_from

        root = ctx.find_root()
        config = config_path_from(dict(os.environ), root.meta.get("config_path"),
                                  root.meta.get("home"))
        typer.echo(mcp_server.client_config(print_config, home=rt.settings.home_path,
                                            user=who, write=write, config=config))
        return
    server = mcp_server.build_server(rt.memory, who, write=write)
    if not http:
        mcp_server.serve_stdio(server)
        return
    sock = mcp_server.listen(host, port)  # an address in use: one Error: line, nothing else
    token = mcp_server.ensure_token(rt.settings)
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"Warning: binding {host}: anyone who can reach this address and has the "
                   "token can read this memory. Prefer 127.0.0.1 behind a tunnel.", err=True)
    typer.echo(f"hermes mcp: {who}'s memory ({'read and write' if write else 'read-only'}) at "
               f"http://{host}:{port}{mcp_server.HTTP_PATH}; bearer token in "
               f"{mcp_server.token_path(rt.settings)}", err=True)
    mcp_server.serve_http(server, token, host=host, sock=sock)
