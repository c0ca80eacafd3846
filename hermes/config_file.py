"""The config as written, before it is validated: which file, its YAML, the
``HERMES_<SECTION>__<KEY>`` overrides of the environment, and the home they name.

:func:`hermes.config.load_settings` validates what :func:`read_config` returns into
:class:`hermes.config.Settings`. Validation needs pydantic and the settings' models, about
0.3 s of CPU to import; a command that a running daemon answers needs only the home (for its
socket) and the user it acts for, which :func:`home_and_user` reads from the same data
without them. Nothing here imports pydantic.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hermes.errors import ConfigError

DEFAULT_USER = "owner"


@dataclass
class RawConfig:
    """The config file's keys with the environment's overrides and the home merged in."""

    data: dict[str, Any]
    # Where it came from: the config file or "defaults", with " + environment"
    source: str


def read_config(config_path: str | Path | None = None, home: str | Path | None = None,
                environ: dict[str, str] | None = None) -> RawConfig:
    """The config as written (see :class:`RawConfig`); ConfigError with one line for a file
    that is missing, unreadable or not YAML."""
    environ = dict(os.environ if environ is None else environ)
    path = config_path_from(environ, config_path, home)
    data: dict[str, Any] = {}
    source = "defaults"
    if path is not None:
        source = str(path)
        if not path.exists():
            raise ConfigError(f"{path}: config file not found")
        try:
            # libyaml's loader when PyYAML has it: a commented config.yaml parses in 1 ms
            # instead of 15 (every command reads it).
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            loaded = yaml.load(read_text_file(path, "config file"), Loader=loader)  # noqa: S506
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            reason = getattr(exc, "problem", None) or "not valid YAML"
            raise ConfigError(f"{path}: {reason}{where}") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
        data = loaded
    overrides = _env_overrides(environ)
    if overrides:
        data = _merge(data, overrides)
        source = f"{source} + environment"
    if home is not None:
        data["home"] = str(home)
    elif environ.get("HERMES_HOME"):
        data["home"] = environ["HERMES_HOME"]
    return RawConfig(data, source)


def home_path(home: str | None) -> Path:
    """The home directory the setting ``home`` names (``Settings.home_path``)."""
    return Path(home or "data").expanduser().resolve()


def home_and_user(raw: RawConfig) -> tuple[Path, str] | None:
    """The home and the default user (``users.default``) exactly as the validated settings
    will have them, or None when only the validation can say (a value of the wrong type, an
    empty user name): the caller then validates the settings."""
    home = raw.data.get("home")
    users = raw.data.get("users")
    users = {} if users is None else users  # `users:` with nothing under it: the defaults
    if (home is not None and not isinstance(home, str)) or not isinstance(users, dict):
        return None
    default = users.get("default", DEFAULT_USER)
    if not isinstance(default, str) or not default.strip():
        return None
    return home_path(home), default


def config_path_from(environ: dict[str, str], explicit: str | Path | None = None,
                     home: str | Path | None = None) -> Path | None:
    """The config file: --config, $HERMES_CONFIG, <home>/config.yaml, ./config.yaml.

    The home is `--home` when given, else $HERMES_HOME: `hermes --home /b` must read
    /b/config.yaml, never the config of the home $HERMES_HOME names.
    """
    if explicit:
        return Path(explicit).expanduser()
    if environ.get("HERMES_CONFIG"):
        return Path(environ["HERMES_CONFIG"]).expanduser()
    home = home if home is not None else environ.get("HERMES_HOME")
    if home and (Path(home).expanduser() / "config.yaml").exists():
        return Path(home).expanduser() / "config.yaml"
    local = Path("config.yaml")
    return local if local.exists() else None


def read_text_file(path: Path, what: str) -> str:
    """The UTF-8 text of a file Hermes reads at start (config, .env), or one ConfigError line."""
    if path.is_dir():
        raise ConfigError(f"{path}: the {what} is a directory; point at a file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: the {what} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
            f"offset {exc.start}); save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the {what} ({exc.strerror or exc})") from None


def read_env_file(path: Path) -> dict[str, str | None]:
    """The variables of a ``.env`` file (python-dotenv syntax); empty when there is none.

    A file that is not UTF-8 or cannot be read is one ConfigError line, never a traceback.
    """
    if not path.exists():
        return {}
    import io

    from dotenv import dotenv_values

    return dict(dotenv_values(stream=io.StringIO(read_text_file(path, ".env file"))))


def _env_overrides(environ: dict[str, str]) -> dict[str, Any]:
    """``HERMES_MODEL__NAME=openai/gpt-4.1`` -> {"model": {"name": "openai/gpt-4.1"}}.

    Values are parsed as YAML scalars so numbers and booleans get their types.
    """
    result: dict[str, Any] = {}
    for key, raw in environ.items():
        if not key.startswith("HERMES_") or "__" not in key:
            continue
        path = key[len("HERMES_"):].lower().split("__")
        try:
            value = yaml.safe_load(raw) if raw != "" else None
        except yaml.YAMLError:
            value = raw
        node = result
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"environment {key}: conflicts with another override")
        node[path[-1]] = value
    return result


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged
