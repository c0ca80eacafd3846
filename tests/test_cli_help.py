"""Command lists show each command's summary as one paragraph, not the docstring's lines."""

from __future__ import annotations

from typer.testing import CliRunner

from hermes.cli import COMMANDS, app, load_command


def _summaries() -> dict[str, str | None]:
    found: dict[str, str | None] = {}

    def walk(command, path: str) -> None:
        found[path] = command.short_help
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, f"{path} {name}")

    for name in COMMANDS:
        walk(load_command(name), name)
    return found


def test_every_summary_is_one_line():
    summaries = _summaries()
    assert {"stats", "facts search", "web token", "sessions index"} <= set(summaries)
    broken = {path: s for path, s in summaries.items() if not s or "\n" in s}
    assert broken == {}


def test_a_wrapped_docstring_reads_as_one_sentence_in_the_list():
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "220"}, prog_name="hermes")
    assert result.exit_code == 0
    (line,) = [ln for ln in result.output.splitlines() if "│ stats " in ln]
    assert "(chat, compression, extraction, summary, context)" in line
