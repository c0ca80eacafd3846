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


def test_a_flag_is_never_shown_as_taking_a_value():
    """typer 0.29 rendered every flag as `--json <bool>`, as if it took a value (pinned <0.29)."""
    runner, wide = CliRunner(), {"COLUMNS": "200"}
    shown: dict[str, list[str]] = {}
    for path in _summaries():
        result = runner.invoke(app, [*path.split(), "--help"], env=wide, prog_name="hermes")
        assert result.exit_code == 0, (path, result.output)
        flags = [ln for ln in result.output.splitlines() if "<bool>" in ln]
        if flags:
            shown[path] = flags
    assert shown == {}
    result = runner.invoke(app, ["facts", "search", "--help"], env=wide, prog_name="hermes")
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("│ --explain")]
    assert "Show the parts of each score." in line
