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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import hermes.home
from hermes.errors import ConfigError

DEFAULT_USER = "owner"


@dataclass
class RawConfig:
    """The config file's keys with the overrides (the environment, the home's .env) and the
    home merged in: what the settings are validated from."""

    data: dict[str, Any]
    # Where it came from: the config file or "defaults", with " + <.env>", " + environment"
    source: str
    # What named the home: "--home", "HERMES_HOME", the config file, or "default"
    home_from: str = "default"
    # Lines for the person found while reading (a setting that is not read), said by the CLI
    notes: list[str] = field(default_factory=list)

    @property
    def home_named_now(self) -> bool:
        """As ``Settings.home_named_now``: --home or $HERMES_HOME named the home."""
        return self.home_from in ("--home", "HERMES_HOME")


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
    home_from = "default"
    if home is not None:
        data["home"], home_from = str(Path(home).expanduser().resolve()), "--home"
    elif environ.get("HERMES_HOME"):
        data["home"] = str(Path(environ["HERMES_HOME"]).expanduser().resolve())
        home_from = "HERMES_HOME"
    elif isinstance(data.get("home"), str) and data["home"].strip() and path is not None:
        # The config's home is relative to the config file's folder, never the current one
        data["home"] = str((path.parent / Path(data["home"]).expanduser()).resolve())
        home_from = str(path)
    # HERMES_<SECTION>__<KEY> lines of the home's .env count as environment variables that
    # the real environment overrides (as the provider keys there do).
    home_dir = Path(data["home"]) if isinstance(data.get("home"), str) and data["home"] \
        else hermes.home.default_home()
    env_file = home_dir / ".env"
    in_file = env_file_settings(env_file)
    ignored = env_file_ignored(env_file) if env_file.exists() else []
    overrides = _env_overrides({**in_file, **environ})
    if overrides:
        data = _merge(data, overrides)
        if in_file:
            source = f"{source} + {env_file}"
        if _env_overrides(environ):
            source = f"{source} + environment"
    notes = []
    if ignored:
        notes.append(
            f"Warning: {' and '.join(ignored)} in {env_file} {'is' if len(ignored) == 1 else 'are'}"
            " not read from there (that file is found through the home they would name); set "
            f"{'it' if len(ignored) == 1 else 'them'} in the environment (or use --home, "
            "--config).")
    return RawConfig(data, source, home_from, notes)


def home_path(home: str | None) -> Path:
    """The home directory the setting ``home`` names (``Settings.home_path``)."""
    return Path(home).expanduser().resolve() if home else hermes.home.default_home()


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
    """The config file: --config, $HERMES_CONFIG, <home>/config.yaml, the checkout's
    config.yaml (running from a source checkout).

    The home is `--home` when given, else $HERMES_HOME, else the default home: `hermes --home
    /b` must read /b/config.yaml, never the config of the home $HERMES_HOME names. The current
    folder's config.yaml is not read: one in a folder a person happens to be in (another
    project's) would decide the home and the model.
    """
    if explicit:
        return Path(explicit).expanduser()
    if environ.get("HERMES_CONFIG"):
        return Path(environ["HERMES_CONFIG"]).expanduser()
    home = home if home is not None else environ.get("HERMES_HOME")
    in_home = (Path(home).expanduser() if home else hermes.home.default_home()) / "config.yaml"
    if in_home.exists():
        return in_home
    checkout = hermes.home.source_checkout()
    if checkout is not None and (checkout / "config.yaml").exists():
        return checkout / "config.yaml"
    return None


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


# Read from the environment only: the .env they would be read from is in the home they name.
NOT_FROM_ENV_FILE = ("HERMES_HOME", "HERMES_CONFIG")


def env_file_settings(path: Path) -> dict[str, str]:
    """The ``HERMES_<SECTION>__<KEY>`` lines of a home's .env (see :data:`NOT_FROM_ENV_FILE`)."""
    return {key: value for key, value in read_env_file(path).items()
            if key.startswith("HERMES_") and "__" in key and value is not None}


def env_file_ignored(path: Path) -> list[str]:
    """The variables of a home's .env that are not read from it (doctor says so)."""
    return [key for key in read_env_file(path) if key in NOT_FROM_ENV_FILE]


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
