"""`hermes doctor`: every check of the installation, one line each."""

from __future__ import annotations

import typer

from hermes.cli import JsonOption, runtime
from hermes.cli.output import emit_json

MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def doctor(
    ctx: typer.Context,
    model: bool = typer.Option(False, "--model", help="Also send the model one tiny request "
                               "(costs a few tokens)."),
    as_json: bool = JsonOption,
) -> None:
    """Check the installation: config, home, database (integrity, full-text indexes,
    migrations), disk space, recent background failures, model, Discord token.

    Changes nothing. Exit code 0 when all is well, 1 when something needs a look (WARN),
    2 when something is broken (FAIL)."""
    from hermes.doctor import as_json as checks_json
    from hermes.doctor import exit_code, run_checks

    rt = runtime(ctx)
    root = ctx.find_root()
    checks = run_checks(rt.settings, rt.clock, config_problem=root.meta.get("config_problem"),
                        config_path=root.meta.get("config_path"), home=root.meta.get("home"),
                        call_model=model)
    if as_json:
        emit_json(checks_json(checks))
    else:
        width = max(len(c.name) for c in checks)
        for c in checks:
            typer.echo(f"{MARKS[c.status]}  {c.name:<{width}}  {c.detail}")
    code = exit_code(checks)
    if code:
        raise typer.Exit(code)
