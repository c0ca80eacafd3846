"""`hermes stats`: what conversations and learning cost, and what learning did."""

from __future__ import annotations

import typer

from hermes.cli import JsonOption, UserOption, runtime
from hermes.cli.output import echo, emit_json
from hermes.learn.stats import extraction_stats
from hermes.store import usage

SinceOption = typer.Option(None, "--since", help="Model calls since: 7d, 12h, 30m, 2w or a "
                           "date like 2026-11-01 (default: all).")


def usage_lines(totals: usage.UsageTotals) -> list[str]:
    since = f" since {totals.since[:16].replace('T', ' ')}" if totals.since else ""
    lines = [f"Model calls for {totals.user}{since}",
             f"  {'source':12} {'calls':>6} {'prompt tok':>11} {'cached':>7} {'output tok':>11}"
             f" {'cost':>10}"]
    rows = [*totals.sources, totals.total] if totals.sources else []
    for row in rows:
        share = f"{row.cached_share:.0%}" if row.cached_share is not None else "-"
        cost = f"${row.cost:.4f}" if row.cost is not None else "unknown"
        if row.cost is not None and row.calls_without_cost:
            cost += "+"
        lines.append(f"  {row.source:12} {row.calls:>6} {row.prompt_tokens:>11,} {share:>7} "
                     f"{row.completion_tokens:>11,} {cost:>10}")
    if not rows:
        lines.append("  none yet")
    elif totals.total.calls_without_usage:
        lines.append(f"  ({totals.total.calls_without_usage} calls reported no usage)")
    return lines


def stats(ctx: typer.Context, user: str = UserOption, since: str | None = SinceOption,
          as_json: bool = JsonOption) -> None:
    """What it costs and how Hermes learns: model calls per source (chat, compression,
    extraction, summary, context) with prompt tokens, the share served from the provider's
    prompt cache and cost where litellm knows it; extraction runs, skips by reason, failures,
    facts created/merged/superseded/forgotten and fast-lane writes."""
    from hermes.cli.options import parse_since

    rt = runtime(ctx)
    who = rt.user(user)
    since_ts = parse_since(since, rt.clock)
    calls = usage.totals(rt.db, who, since_ts)
    result = extraction_stats(rt.memory, who)
    if as_json:
        emit_json({**result.to_json(), "model_usage": calls.to_json()})
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
        f"  trust         {result.trust_implicit_up} up / {result.trust_implicit_down} down "
        f"learned from use, {result.trust_explicit} by ratings; "
        f"{result.questions_open} question(s) open",
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
    echo("\n".join([*usage_lines(calls), "", *lines]))
