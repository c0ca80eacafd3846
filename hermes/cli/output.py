"""Rendering helpers shared by CLI commands: one JSON document on stdout, or rich tables."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import typer

from hermes.safety.guard import printable


def __getattr__(name: str) -> Any:
    """``console`` and ``err_console`` are made on first use: importing rich costs every
    command that prints no table (``memory show``, ``facts search``) about 50 ms."""
    if name in ("console", "err_console"):
        from rich.console import Console

        value = Console(stderr=name == "err_console", highlight=False, soft_wrap=True)
        globals()[name] = value
        return value
    raise AttributeError(name)


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


def echo(message: object = "", *, err: bool = False, nl: bool = True) -> None:
    """``typer.echo`` for text that may come from memory: control and invisible characters are
    shown as escapes (``\\x1b``), never obeyed by the terminal. (JSON escapes them itself.)"""
    typer.echo(printable(str(message)), err=err, nl=nl)


def literal(text: str) -> str:
    """Memory text inside rich markup: printed as written, with its escapes visible."""
    from rich.markup import escape

    return escape(printable(text))


def fail(message: str, code: int = 1) -> None:
    """Print a one-line error on stderr and exit with ``code``."""
    echo(message, err=True)
    raise typer.Exit(code)


def stdout_is_tty() -> bool:
    return sys.stdout.isatty()
