"""Options and their parsing that several commands share: ``--since``, ``--source`` and the
limits of every opt-in job over many sessions (``hermes learn backfill``, ``hermes sessions
summarize``): the same words mean the same limits."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

import typer

from hermes.clock import Clock, parse_ts, to_ts
from hermes.errors import HermesError

if TYPE_CHECKING:
    from hermes.budget import PlannedCalls

_DURATION = re.compile(r"^\s*(\d+)\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

SinceOption = typer.Option(None, "--since", help="Only sessions active since: 7d, 2w or a date.",
                           show_default=False)
SourceOption = typer.Option(None, "--source", help="Only this source (import: ChatGPT/Claude "
                            "exports).", show_default=False)
DryRunOption = typer.Option(False, "--dry-run", help="Print the plan and its cost, and stop.")
BudgetOption = typer.Option(None, "--budget", help="Stop before going past it: dollars ($2, "
                            "0.50) or model calls (100).", show_default=False)
RateOption = typer.Option(20.0, "--rate", min=0.0, help="At most this many model calls a minute "
                          "(0: no limit).")
YesOption = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation.")


def cost_text(cost: float | None, model: str | None) -> str:
    if cost == 0 and not model:
        return "none (no model call)"
    if not model:
        return "unknown: no model is set (the plan needs none; the run does)"
    if cost is None:
        return f"unknown (litellm has no price for {model})"
    return f"~${cost:.4f} with {model} (litellm's prices)"


def estimate_lines(plan: PlannedCalls, model: str | None) -> list[str]:
    """What a plan's model calls take, as the batch commands print it under their plan."""
    lines = []
    if plan.model_calls and model:
        lines.append(f"  tokens        ~{plan.prompt_tokens:,} in, ~{plan.completion_tokens:,} "
                     "out (estimated)")
    return [*lines, f"  cost          {cost_text(plan.cost, model)}"]



def parse_since(text: str | None, clock: Clock) -> str | None:
    """``--since``: ``30m``, ``12h``, ``7d``, ``2w`` (ago), or an ISO date or time; None
    without one."""
    if text is None:
        return None
    found = _DURATION.match(text)
    if found:
        amount, unit = int(found.group(1)), found.group(2)
        try:
            return to_ts(clock.now() - timedelta(**{_UNITS[unit]: amount}))
        except OverflowError:
            raise HermesError(f"--since: {text.strip()} ago is before the year 1.") from None
    try:
        return to_ts(parse_ts(text.strip()))
    except ValueError:
        raise HermesError(f"--since: expected 7d, 12h, 30m, 2w or a date like 2026-11-01 "
                          f"(got {text!r}).") from None


def session_sources() -> tuple[str, ...]:
    """The sources an imported session may have: the built-in ones and every registered
    front-end's (a plugin's front-end records its sessions under its name)."""
    from hermes import plugins
    from hermes.memory.sessions.store import SOURCES

    return plugins.loaded().frontends.sources(SOURCES)


def known_source(source: str | None) -> str | None:
    """``--source`` as stored (lower case), or one line naming the sources: a misspelt one is
    a mistake, not "no sessions". The plugins are loaded only for a name not built in."""
    if source is None:
        return None
    from hermes.memory.sessions.store import SOURCES

    name = source.strip().lower()
    if name in SOURCES or name in session_sources():
        return name
    raise HermesError(f"--source {source!r}: use one of {', '.join(session_sources())}.")
