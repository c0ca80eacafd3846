"""Regenerate the parts of the docs that come from the code, so that they cannot drift.

A generated part sits between two markers in a Markdown file::

    <!-- generated: cli-reference -->
    ...whatever the generator of that name prints...
    <!-- end generated -->

    python scripts/gen_docs.py           # rewrite every generated part in README.md and docs/
    python scripts/gen_docs.py --check   # change nothing; exit 1 naming the stale files

Generators: ``cli-reference`` (every command's ``--help``, as simonw/llm's docs/help.md does
with cog) and ``config-keys`` (the settings model of hermes/config.py, with the comment above
each key in config.yaml). tests/test_docs.py fails when a generated part is stale.
"""

from __future__ import annotations

import argparse
import re
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a clone without an install, as the benches are

BLOCK = re.compile(r"(?P<start><!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)"
                   r"(?P<end><!-- end generated -->)", re.S)
WIDTH = 88  # columns of the --help text, whatever the terminal running this


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# --- cli-reference ------------------------------------------------------------------------


def _command_paths(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name in getattr(group, "commands", {}) or {}:
        yield from _command_paths(group.commands[name], (*path, name))


def cli_reference() -> str:
    """Every built-in command's --help, plain text (not the terminal's boxes), one block each."""
    import contextlib
    import io
    import os
    import tempfile

    import typer.core
    import typer.main
    from typer._click import formatting

    from hermes.cli import COMMANDS, app, load_command

    root = typer.main.get_command(app)
    # Plugins installed here would add their commands to the list: the reference is Hermes's own
    root._plugin_commands = True  # type: ignore[attr-defined]
    paths: list[tuple[str, ...]] = [()]
    for name in COMMANDS:
        paths.extend(_command_paths(load_command(name), (name,)))
    saved = typer.core.HAS_RICH, formatting.FORCED_WIDTH, dict(os.environ)
    typer.core.HAS_RICH, formatting.FORCED_WIDTH = False, WIDTH
    out: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as home:
            # The root callback loads the settings: a throwaway home, so nothing is created
            os.environ["HERMES_HOME"] = home
            for path in paths:
                buffer = io.StringIO()
                with contextlib.redirect_stdout(buffer):
                    code = root.main([*path, "--help"], prog_name="hermes", standalone_mode=False)
                if code not in (0, None):
                    raise SystemExit(f"hermes {' '.join(path)} --help failed:\n{buffer.getvalue()}")
                title = " ".join(("hermes", *path))
                out += [f"{'#' * (3 if len(path) < 2 else 4)} `{title}`", "", "```",
                        buffer.getvalue().rstrip(), "```", ""]
    finally:
        typer.core.HAS_RICH, formatting.FORCED_WIDTH = saved[0], saved[1]
        os.environ.clear()
        os.environ.update(saved[2])
    return "\n".join(out)


# --- config-keys --------------------------------------------------------------------------


def _yaml_comments() -> dict[str, str]:
    """``section.key`` (or ``key`` at the top) -> the comment lines right above it in
    config.yaml, joined; a commented-out example (``#   key: value``) is not a description."""
    found: dict[str, str] = {}
    section = ""
    pending: list[str] = []
    for line in (ROOT / "config.yaml").read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            pending = []
        elif stripped.startswith("#"):
            text = stripped[1:]
            if not text.startswith("   "):  # an example, indented under the comment
                pending.append(text.strip())
        elif ":" in stripped:
            key = stripped.split(":", 1)[0].strip()
            if indent == 0:
                section = key
                name = key
            elif indent == 2 and section:
                name = f"{section}.{key}"
            else:
                pending = []
                continue
            if pending:
                found[name] = " ".join(pending)
            pending = []
    return found


def _type(annotation: Any) -> str:
    origin = get_origin(annotation)
    args = [a for a in get_args(annotation) if a is not type(None)]
    if origin is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in get_args(annotation))
    if origin in (types.UnionType,) or str(origin) == "typing.Union":
        inner = " or ".join(_type(a) for a in args)
        return f"{inner} or null" if type(None) in get_args(annotation) else inner
    if origin is list:
        return f"list of {_type(args[0])}"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    return {int: "integer", float: "number", bool: "true / false", str: "text"}.get(
        annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(field: Any) -> str:
    parts = []
    for item in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            value = getattr(item, attr, None)
            if value is not None:
                parts.append(f"{sign} {value}")
    return f", {' and '.join(parts)}" if parts else ""


def _default(field: Any) -> str:
    import yaml

    value = field.get_default(call_default_factory=True)
    if hasattr(value, "model_dump"):
        return ""
    text = yaml.safe_dump(value, default_flow_style=True, width=1000).strip()
    return f"`{text.removesuffix('...').strip()}`"


def _cell(text: str) -> str:
    """Comment text as a Markdown table cell: `<id>` is not an HTML tag, `|` not a column."""
    return text.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def config_keys() -> str:
    """One table per section of the settings model: key, type, default, environment variable,
    and the comment above the key in config.yaml. Keys that share one comment share a row."""
    from pydantic import BaseModel

    from hermes.config import Settings

    comments = _yaml_comments()
    out: list[str] = []
    for section, field in Settings.model_fields.items():
        model = field.annotation
        nested = isinstance(model, type) and issubclass(model, BaseModel)
        fields = model.model_fields if nested else {section: field}
        rows: list[list[str]] = []
        for key, sub in fields.items():
            if isinstance(sub.annotation, type) and issubclass(sub.annotation, BaseModel):
                continue
            name = f"{section}.{key}" if nested else key
            env = "`HERMES_HOME`" if name == "home" else \
                f"`HERMES_{name.upper().replace('.', '__')}`"
            kind = _type(sub.annotation) + _bounds(sub)
            if "list of" in kind and "CronJobConfig" in kind:
                kind = "list of jobs ([above](#cron-jobs-in-the-config))"
            cells = [f"`{name}`", kind, _default(sub), env]
            note = comments.get(name)
            if note is None and rows:  # described by the comment of the key before it
                for i in range(4):
                    rows[-1][i] += f"<br>{cells[i]}"
                continue
            rows.append([*cells, _cell(note or "")])
        out += [f"### `{section}`", "", "| key | type | default | environment | what it does |",
                "|---|---|---|---|---|"]
        out += ["| " + " | ".join(row) + " |" for row in rows]
        out.append("")
    return "\n".join(out)


GENERATORS: dict[str, Callable[[], str]] = {
    "cli-reference": cli_reference,
    "config-keys": config_keys,
}


def render(text: str, cache: dict[str, str] | None = None) -> str:
    """The text with every generated part as its generator prints it today."""
    cache = {} if cache is None else cache

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in GENERATORS:
            raise SystemExit(f"unknown generated part {name!r}; known: {', '.join(GENERATORS)}")
        if name not in cache:
            cache[name] = GENERATORS[name]().rstrip("\n") + "\n"
        return match["start"] + cache[name] + match["end"]

    return BLOCK.sub(fill, text)


def stale_files(paths: list[Path] | None = None) -> list[Path]:
    cache: dict[str, str] = {}
    return [p for p in paths or doc_files()
            if (text := p.read_text(encoding="utf-8")) != render(text, cache)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 naming "
                        "the files whose generated parts are stale")
    args = parser.parse_args(argv)
    cache: dict[str, str] = {}
    stale = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        new = render(text, cache)
        if new != text:
            stale.append(path)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for path in stale:
        verb = "is stale" if args.check else "regenerated"
        print(f"{path.relative_to(ROOT)} {verb}")
    if args.check and stale:
        print("Run `python scripts/gen_docs.py` to regenerate.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
