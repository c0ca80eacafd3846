"""`--user ""` (an unset shell variable) is one clear error, never "the default user"."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.cli import COMMANDS, load_command
from hermes.config import load_settings
from hermes.errors import ConfigError


def _paths_taking_user() -> list[tuple[str, ...]]:
    """Every command, sub-commands included, that has a --user option."""
    found: list[tuple[str, ...]] = []

    def walk(command, path: tuple[str, ...]) -> None:
        for sub_name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, (*path, sub_name))
        if any("--user" in getattr(p, "opts", ()) for p in command.params):
            found.append(path)

    for name in COMMANDS:
        walk(load_command(name), (name,))
    return found


PATHS = _paths_taking_user()


def test_the_commands_found_include_every_kind():
    # The walk itself must see groups, sub-commands and single commands.
    assert {("memory", "add"), ("facts", "search"), ("cron", "list"), ("import",),
            ("mcp",), ("web", "token"), ("ask",), ("chat",)} <= set(PATHS)


@pytest.mark.parametrize("path", PATHS, ids=" ".join)
def test_an_empty_user_is_one_error_line(cli, hermes_home: Path, path):
    result = cli(*path, "--user", "")
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert "a user name cannot be empty" in result.stderr
    assert result.stdout == ""
    assert not (hermes_home / "hermes.db").exists()  # nothing was opened, nothing written


@pytest.mark.parametrize("empty", ["", "  "])
def test_a_write_with_an_empty_user_does_not_reach_the_default_user(cli, empty):
    assert cli("memory", "add", "The user likes tea", "--user", empty).exit_code == 1
    assert cli("memory", "show", "--json").json()["entries"] == []


@pytest.mark.parametrize("text, message", [
    ('users:\n  default: ""\n', "users.default: a user name cannot be empty"),
    ('users:\n  default: "  "\n', "users.default: a user name cannot be empty"),
    ('users:\n  identities: {"discord:1": ""}\n',
     "users.identities: 'discord:1' maps to an empty user name"),
])
def test_an_empty_user_in_the_config_is_refused_at_load(config_file, text, message):
    config_file.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_settings()
