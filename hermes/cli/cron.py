"""`hermes cron`: scheduled prompts, stored in the database (config.yaml jobs are synced in)."""

from __future__ import annotations

import asyncio
from typing import Any

import typer

from hermes.assembly import cron_store
from hermes.cli import JsonOption, UserOption, ask_daemon, runtime
from hermes.cli.output import echo, emit_json
from hermes.clock import to_ts
from hermes.cron.store import CronJob, CronRun, CronStore, trigger_for
from hermes.runtime import Runtime

app = typer.Typer(no_args_is_help=True, help="Scheduled prompts: add, list, run, pause.")


def _store(ctx: typer.Context) -> CronStore:
    rt = runtime(ctx)
    store = cron_store(rt.memory)
    store.sync_config(rt.settings.cron.jobs, rt.settings.source)
    return store


def _next_run(store: CronStore, job: CronJob) -> str | None:
    if not job.enabled:
        return None
    fire = trigger_for(job, store.timezone).get_next_fire_time(None, store.clock.now())
    return to_ts(fire) if fire else None


def _short(ts: str | None) -> str:
    return f"{ts[:10]} {ts[11:16]} UTC" if ts else "-"


def _job_json(store: CronStore, job: CronJob) -> dict[str, Any]:
    last = store.runs(name=job.name, limit=1)
    return {**job.to_json(), "next_run": _next_run(store, job),
            "last_run": last[0].to_json() if last else None}


def _say(job: CronJob, message: str, as_json: bool, store: CronStore) -> None:
    if as_json:
        emit_json(_job_json(store, job))
    else:
        echo(message)


@app.command()
def add(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="A unique name for the job."),
    schedule: str = typer.Argument(..., help="A cron expression ('0 8 * * *') or an interval "
                                   "('every 30m', 'every 6h'), in cron.timezone."),
    prompt: str = typer.Argument(..., help="What to ask Hermes at each run."),
    deliver: str = typer.Option("terminal", "--deliver", "-d",
                                help="discord:<channel id> | terminal | file:<path under home> | "
                                "<plugin front-end>:<target>"),
    paused: bool = typer.Option(False, "--paused", help="Add it paused."),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Add a job that runs PROMPT on SCHEDULE for a user and delivers the reply."""
    store = _store(ctx)
    job = store.add(name, runtime(ctx).user(user), schedule, prompt, deliver, enabled=not paused)
    next_run = _next_run(store, job)
    _say(job, f"Added cron job {job.name!r} for {job.user}"
         + (f"; next run {_short(next_run)}." if next_run else " (paused)."), as_json, store)


@app.command("list")
def list_jobs(ctx: typer.Context, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """List jobs (all users', or one user's with --user) with their next and last runs."""
    store = _store(ctx)
    jobs = store.list_jobs(user=user)
    if as_json:
        emit_json([_job_json(store, job) for job in jobs])
        return
    if not jobs:
        echo("No cron jobs. Add one with `hermes cron add` or in config.yaml (cron.jobs).")
        return
    for job in jobs:
        last = store.runs(name=job.name, limit=1)
        state = ("on" if job.enabled else "paused") + f", {job.origin}"
        echo(f"{job.name}  ({job.user}, {state})  {job.schedule!r} -> {job.deliver}")
        echo(f"    next: {_short(_next_run(store, job))}   last: "
                   + (f"{_short(last[0].scheduled_for)} {last[0].status}" if last else "-"))


@app.command()
def remove(ctx: typer.Context, name: str, user: str = UserOption,
           as_json: bool = JsonOption) -> None:
    """Remove a job added with `hermes cron add` (and its run history)."""
    store = _store(ctx)
    job = store.remove(name, user=user)
    if as_json:
        emit_json(job.to_json())
    else:
        echo(f"Removed cron job {job.name!r}.")


@app.command()
def pause(ctx: typer.Context, name: str, user: str = UserOption,
          as_json: bool = JsonOption) -> None:
    """Pause a job: it does not run until resumed (fire times while paused are not run)."""
    store = _store(ctx)
    job = store.set_enabled(name, False, user=user)
    _say(job, f"Paused cron job {job.name!r}.", as_json, store)


@app.command()
def resume(ctx: typer.Context, name: str, user: str = UserOption,
           as_json: bool = JsonOption) -> None:
    """Resume a paused job."""
    store = _store(ctx)
    job = store.set_enabled(name, True, user=user)
    _say(job, f"Resumed cron job {job.name!r}; next run {_short(_next_run(store, job))}.", as_json,
         store)


def _print_run(run: CronRun) -> None:
    echo(f"[{run.id}] {run.job_name} {run.scheduled_for} {run.kind} {run.status}")
    if run.output:
        echo(run.output)


@app.command()
def run(ctx: typer.Context, name: str, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """Run a job now, outside its schedule, and deliver the reply as configured. With a daemon
    running on the home (`hermes run`) the daemon runs it, with its model layer loaded and its
    own deliveries (a terminal delivery shows in the daemon's terminal)."""
    from hermes.cron.store import CronRun
    from hermes.daemon_calls import record_from

    rt = runtime(ctx)
    store = _store(ctx)
    job = store.get(name, user=user)
    remote = ask_daemon(ctx, "cron.run", job.user, name=job.name)
    result = record_from(CronRun, remote) if remote is not None else asyncio.run(
        _run_now(rt, name, user))
    if as_json:
        emit_json(result.to_json())
    else:
        _print_run(result)
    if result.status == "failed":
        raise typer.Exit(1)


async def _run_now(rt: Runtime, name: str, user: str | None) -> CronRun:
    from hermes.assembly import build_agent, cron_runner

    agent, worker = build_agent(rt)
    runner = cron_runner(rt.memory, agent)
    try:
        return await runner.run_now(name, user=user)
    finally:
        if worker is not None:
            await worker.drain(30)


@app.command()
def runs(
    ctx: typer.Context,
    name: str | None = typer.Argument(None, help="Only this job's runs."),
    limit: int = typer.Option(20, "--limit", "-n", min=1),
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Show recent runs with their status (ok, silent, failed, missed) and output."""
    store = _store(ctx)
    found = store.runs(name=name, user=user, limit=limit)
    if as_json:
        emit_json([r.to_json() for r in found])
        return
    if not found:
        echo("No runs yet.")
    for item in found:
        _print_run(item)
