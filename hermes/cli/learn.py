"""`hermes learn`: learning from conversations on request (imports, old transcripts)."""

from __future__ import annotations

import asyncio

import typer

from hermes.cli import JsonOption, UserOption, ask_daemon, runtime
from hermes.cli.options import (
    BudgetOption,
    DryRunOption,
    RateOption,
    SinceOption,
    SourceOption,
    YesOption,
    estimate_lines,
    known_source,
    parse_since,
)
from hermes.cli.output import emit_json
from hermes.errors import HermesError

app = typer.Typer(no_args_is_help=True,
                  help="Learn facts from past conversations on request (imports, transcripts).")

@app.command()
def backfill(
    ctx: typer.Context,
    since: str | None = SinceOption,
    source: str | None = SourceOption,
    dry_run: bool = DryRunOption,
    budget: str | None = BudgetOption,
    rate: float = RateOption,
    yes: bool = YesOption,
    user: str = UserOption,
    as_json: bool = JsonOption,
) -> None:
    """Extract facts from sessions nobody learned from yet (imports, transcripts), oldest first.

    The same pipeline as after every reply (gate, one model call per run, consolidation), and
    the same run records, so a re-run changes nothing and an interrupted backfill (Ctrl-C)
    continues where it stopped. First it prints how many sessions, messages and model calls
    it would take and the estimated cost (litellm's prices), and asks. ``--dry-run`` needs no
    model: without one it counts and leaves the cost unknown. With a daemon running on the home
    (`hermes run`), the daemon makes the dry run's plan: it has the model layer loaded."""
    from hermes.budget import Budget, Pacer

    rt = runtime(ctx)
    who = rt.user(user)
    limit = Budget.parse(budget)
    since_ts = parse_since(since, rt.clock)
    if dry_run and rt.settings.extraction.enabled is not False:
        from hermes.daemon_calls import plan_from

        remote = ask_daemon(ctx, "learn.backfill_plan", who, since=since_ts,
                            source=known_source(source))
        if remote is not None:
            _print_plan(plan_from(remote), as_json=as_json)
            return
    from hermes.agent.llm import LLM, ModelNotConfigured
    from hermes.learn import backfill as bf
    from hermes.learn.worker import ExtractionWorker, extraction_model_name

    llm = LLM(rt.settings.model, model_name=extraction_model_name(rt.settings),
              env_file=rt.settings.home_path / ".env")
    if not llm.configured and not dry_run:
        raise ModelNotConfigured(llm.not_configured_message())
    llm.record_usage(rt.db, rt.clock)
    # Turned off on purpose; unset is on with a model (the run has one; a dry run needs none).
    if rt.settings.extraction.enabled is False:
        raise HermesError("Extraction is off (extraction.enabled: false); turn it on in "
                          "config.yaml to backfill.")
    plan = bf.plan(rt.memory, who, llm if llm.configured else None, since=since_ts,
                   source=known_source(source))
    if dry_run or not yes or not plan.model_calls:
        _print_plan(plan, as_json=as_json and dry_run)
    if dry_run or not plan.sessions:
        return
    if not yes and not typer.confirm("Go ahead?", err=True):
        raise typer.Exit(1)
    worker = ExtractionWorker(rt.memory, llm=llm)

    async def main() -> bf.Report:
        try:
            return await bf.run(rt.memory, worker, plan, budget=limit,
                                pacer=Pacer(rate or None, rt.clock.now),
                                on_run=_progress(as_json))
        finally:
            await worker.drain(30)

    try:
        report = asyncio.run(main())
    except KeyboardInterrupt:
        typer.echo("\nInterrupted. What was learned is kept; run the same command again to "
                   "continue where it stopped.", err=True)
        raise typer.Exit(130) from None
    if as_json:
        emit_json({"plan": plan.to_json(), "report": report.to_json()})
        return
    typer.echo(f"Done {report.runs} run(s) over {report.sessions_done} session(s): "
               f"{report.model_calls} model call(s), ${report.cost:.4f}; facts: "
               f"{report.created} created, {report.merged} merged, {report.superseded} "
               f"superseded" + (f"; {report.failed} run(s) failed (retried later)"
                                if report.failed else "") + ".")
    if report.stopped:
        typer.echo(f"Stopped: {report.stopped}. Run it again to continue.")


def _print_plan(plan, *, as_json: bool) -> None:
    if as_json:
        emit_json(plan.to_json())
        return
    if not plan.sessions:
        typer.echo(f"Nothing to learn from for {plan.user}: every session is extracted.")
        return
    first = plan.sessions[0].started_at[:10]
    typer.echo(f"Backfill for {plan.user}: {len(plan.sessions):,} session(s), "
               f"{plan.messages:,} message(s) not learned from yet (oldest first, from {first}).")
    retries = f", {plan.retries} interrupted before" if plan.retries else ""
    typer.echo(f"  model calls   {plan.model_calls:,} ({plan.gate_skips:,} run(s) skipped by the "
               f"gate without a call{retries})")
    for line in estimate_lines(plan, plan.model):
        typer.echo(line)


def _progress(quiet: bool):
    def show(report) -> None:
        if not quiet and report.runs % 10 == 0:
            typer.echo(f"  ... {report.runs} run(s), {report.model_calls} call(s), "
                       f"{report.created} fact(s) created", err=True)
    return show
