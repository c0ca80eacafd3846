"""`hermes stats`: what learning from conversations did, and what it cost."""

from __future__ import annotations

import typer

from hermes.cli import JsonOption, UserOption, runtime
from hermes.cli.output import echo, emit_json
from hermes.learn.stats import extraction_stats


def stats(ctx: typer.Context, user: str = UserOption, as_json: bool = JsonOption) -> None:
    """How Hermes learns: extraction runs, skips by reason, model calls, failures, facts
    created/merged/superseded/forgotten, fast-lane writes and cost where litellm knows it."""
    rt = runtime(ctx)
    result = extraction_stats(rt.db, rt.user(user))
    if as_json:
        emit_json(result.to_json())
        return
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(result.by_status.items())) or "none yet"
    lines = [
        f"Extraction for {result.user}",
        f"  runs          {result.runs} ({statuses})",
        f"  model calls   {result.model_calls} ({result.calls_per_run:.2f} per run)"
        if not result.unanswered else
        f"  model calls   {result.model_calls} answered; {result.unanswered} run(s) got no "
        "answer (see failures)",
    ]
    if result.skips:
        skips = ", ".join(f"{reason} {n}" for reason, n in result.skips.items())
        lines.append(f"  skipped       {skips}")
    failures = f"{result.failures}"
    if result.last_failure:
        failures += f" (last: {result.last_failure[:100]})"
    lines += [
        f"  failures      {failures}",
        f"  facts         {result.created} created, {result.merged} merged, "
        f"{result.superseded} superseded, {result.forgotten} forgotten; "
        f"{result.fast_lane} via the fast lane; {result.active_facts} active",
    ]
    unknown_runs = result.runs_without_cost + result.unanswered
    if result.cost is not None:
        unknown = f" ({unknown_runs} runs of unknown cost)" if unknown_runs else ""
        lines.append(f"  cost          ${result.cost:.4f}{unknown}")
    elif result.model_calls:
        lines.append("  cost          unknown (litellm has no price for this model)")
    elif result.unanswered:
        lines.append("  cost          unknown (no model call was answered)")
    else:
        lines.append("  cost          $0 (no model calls)")
    echo("\n".join(lines))
