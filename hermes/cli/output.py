"""Rendering helpers shared by CLI commands: one JSON document on stdout, or rich tables."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import typer
from rich.console import Console

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def emit_json(value: Any) -> None:
    """Print exactly one JSON document on stdout."""
    typer.echo(json.dumps(value, default=_default, ensure_ascii=False, indent=2))


def fail(message: str, code: int = 1) -> None:
    """Print a one-line error on stderr and exit with ``code``."""
    typer.echo(message, err=True)
    raise typer.Exit(code)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()
