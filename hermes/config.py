"""Settings: the config.yaml model, its loading and validation, and where Hermes keeps state.

Precedence, lowest first: built-in defaults, the YAML file, ``HERMES_<SECTION>__<KEY>`` environment
variables, command-line flags. ``HERMES_HOME`` (or ``--home``) relocates all state; with neither,
the config's ``home`` (relative to the config file's folder), else :func:`hermes.home.default_home`.
Nothing here depends on the current directory.
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
)

import hermes.home
from hermes.errors import ConfigError

DEFAULT_USER = "owner"


class Section(BaseModel):
    # A misspelt key is an error, not a silently ignored setting.
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic reads `true` as 1 for an int field: `basic_char_limit: true` would be a
        # one-character memory. A number field takes a number.
        field = cls.model_fields.get(info.field_name or "")
        if isinstance(value, bool) and field is not None and field.annotation in (int, float):
            raise ValueError(f"expected a number, not {str(value).lower()}")
        # `model:` with every key under it commented out is YAML null: the section's defaults,
        # as when the line is not there (likewise an empty list or mapping: `jobs:`).
        if value is None and field is not None and field.default_factory is not None:
            return field.default_factory()  # type: ignore[call-arg]
        return value


class UserProfile(Section):
    # What the model calls this person (the terminal has no name of its own); unset: "the user"
    name: str | None = Field(None, max_length=80)


class UsersConfig(Section):
    # Any other key is a user's profile: users.<user>.name, e.g. {"owner": {"name": "Alice"}}
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, UserProfile] = Field(init=False)

    default: str = DEFAULT_USER
    # identity -> user, e.g. {"discord:1234": "alice", "terminal:bob": "owner"}
    identities: dict[str, str] = Field(default_factory=dict)

    @field_validator("default")
    @classmethod
    def _default_named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a user name cannot be empty")
        return value

    @field_validator("identities")
    @classmethod
    def _identities_named(cls, value: dict[str, str]) -> dict[str, str]:
        for identity, user in value.items():
            if not user.strip():
                raise ValueError(f"{identity!r} maps to an empty user name")
        return value


class MemoryConfig(Section):
    basic_char_limit: int = Field(8000, gt=0)


class FactsConfig(Section):
    # At least one; a fact added without a category gets "general", so it must be listed.
    categories: list[str] = Field(
        default_factory=lambda: ["user_pref", "project", "tool", "general", "person", "event"],
        min_length=1,
    )

    @field_validator("categories")
    @classmethod
    def _has_general(cls, value: list[str]) -> list[str]:
        if "general" not in value:
            raise ValueError("must include 'general', the category of a fact added without one")
        return value
    default_trust: float = Field(0.5, ge=0, le=1)
    search_min_trust: float = Field(0.3, ge=0, le=1)
    helpful_delta: float = Field(0.05, ge=0, le=1)
    unhelpful_delta: float = Field(0.10, ge=0, le=1)
    # rapidfuzz token_set_ratio at or above which a new fact merges into an existing one
    merge_threshold: float = Field(90.0, ge=0, le=100)
    # Bounds of one fact, from every path (CLI, tools, extraction, import): a write over them
    # is refused (extraction keeps the first ones and notes the rest).
    max_content_chars: int = Field(2000, gt=0)
    max_entities_per_fact: int = Field(20, gt=0)
    max_tags_per_fact: int = Field(20, gt=0)
    # rapidfuzz ratio at or above which an entity name resolves to an existing entity
    entity_match_threshold: float = Field(92.0, ge=0, le=100)
    # entity -> list of aliases, e.g. {"PostgreSQL": ["Postgres", "postgres db"]}
    aliases: dict[str, list[str]] = Field(default_factory=dict)
    # The trust a fact starts with when it came from elsewhere than the user (the model's own
    # inference, an import, a tool's output, a document): below default_trust, so it ranks
    # below what the user said until confirmed (hermes.memory.facts.provenance).
    outside_trust: float = Field(0.35, ge=0, le=1)


class ModelConfig(Section):
    # Any litellm model name: openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5, ollama/llama3.1 ...
    name: str | None = None
    api_base: str | None = None
    temperature: float = Field(0.7, ge=0, le=2)
    timeout: float = Field(60.0, gt=0)
    retries: int = Field(3, ge=0)
    # Model for background work (extraction, summaries, context); default: the main model
    background: str | None = None
    # Context window used when litellm does not know the model
    context_window_fallback: int = Field(8192, gt=0)
    # auto: mark the stable prefix with cache_control where the provider needs it (Claude),
    # entries of 5 minutes while a conversation is quick, of an hour after a pause; 5m or 1h:
    # always that (hermes.agent.prompt_cache.cache_ttl); off: no marks
    prompt_cache: Literal["auto", "5m", "1h", "off"] = "auto"

    @field_validator("prompt_cache", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        # YAML reads a bare `off` as false (and `on` as true)
        if isinstance(value, bool):
            return "auto" if value else "off"
        return value


class AgentConfig(Section):
    persona_file: str | None = None
    max_tool_rounds: int = Field(6, ge=0)
    # What each prompt recalls shares one budget, the sum of the two shares: recalled facts
    # take theirs first, past messages (other sessions, hermes.memory.sessions.past_messages)
    # what is left, then more facts what the messages left (hermes.agent.prompt.recalled).
    recall_char_budget: int = Field(2000, ge=0)
    recall_max_facts: int = Field(20, ge=0)
    recall_messages_char_budget: int = Field(2000, ge=0)
    recall_max_messages: int = Field(8, ge=0)
    # A message that refers back ("as I said", "the thing I told you about") may have one
    # background-model call before recall: what that earlier message most likely said, searched
    # after it (hermes.agent.recall_rewrite); the reply waits at most recall_rewrite_seconds
    recall_rewrite: bool = True
    recall_rewrite_seconds: float = Field(4.0, gt=0)
    # Fraction of the context window at which older turns are summarised
    compress_at: float = Field(0.75, gt=0, le=1)


# The embedding models Hermes has itself (hermes.memory.embeddings.models registers them).
BUILTIN_EMBEDDING_MODELS = ("e5", "minilm")


class SessionsConfig(Section):
    idle_minutes: int = Field(120, gt=0)
    # Hybrid recall: a local embedding model next to bm25. On by default: MiniLM (a default
    # dependency) meets the budget of issue 13 on one core (README: "Which embedding model")
    embeddings: bool = True
    # Which model: minilm, e5 (hermes[embeddings]; hermes.memory.embeddings) or one a plugin
    # registers (register_embedding_models); vectors are stored per model
    embedding_model: str = "minilm"
    # Replace secrets in a message by a marker when it is recorded (hermes.safety.secrets)
    redact_secrets: bool = True

    @field_validator("embedding_model")
    @classmethod
    def _registered_model(cls, value: str) -> str:
        if value in BUILTIN_EMBEDDING_MODELS:
            return value
        from hermes.plugins import loaded  # another name: load the plugins

        names = loaded().embedding_models
        if value not in names:
            raise ValueError(f"unknown embedding model; use one of {', '.join(names)} (a "
                             "plugin can register more)")
        return value


class ContextConfig(Section):
    max_chars: int = Field(4000, gt=0)
    days: int = Field(7, gt=0)
    refresh_hours: float = Field(6.0, gt=0)


class ExtractionConfig(Section):
    # None means: on when a model is configured
    enabled: bool | None = None
    model: str | None = None
    include_cron: bool = False
    min_chars: int = Field(12, ge=0)
    concurrency: int = Field(1, ge=1)
    # Bounds of one extraction run: actions past max_actions are dropped (and noted), a fact
    # longer than max_content_chars is skipped.
    max_actions: int = Field(50, gt=0)
    max_content_chars: int = Field(500, gt=0)


class DiscordConfig(Section):
    # The token may also come from the DISCORD_TOKEN environment variable
    token: str | None = None
    # With no allowlist, nobody is served
    allowed_users: list[int] = Field(default_factory=list)
    allowed_roles: list[int] = Field(default_factory=list)
    allowed_channels: list[int] = Field(default_factory=list)
    require_mention_in_guilds: bool = True
    edit_interval_seconds: float = Field(1.2, gt=0)


class CronJobConfig(Section):
    name: str
    user: str | None = None  # None: users.default
    schedule: str
    prompt: str
    deliver: str = "terminal"
    enabled: bool = True


class CronConfig(Section):
    timezone: str = "UTC"

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (e.g. UTC, Europe/Berlin)") from None
        return value
    grace_minutes: int = Field(60, ge=0)
    jobs: list[CronJobConfig] = Field(default_factory=list)


class PrivacyConfig(Section):
    # What a reply read in a shared place (a Discord server channel or thread) may draw on
    # (hermes.memory.audience): place_only, what was learned in that place and what you marked
    # shareable; shareable, also what was learned in any shared place; everything, all but what
    # you marked private. Private places (DMs, the terminal, the web panel, MCP) see everything.
    shared_places: Literal["place_only", "shareable", "everything"] = "place_only"


class WebConfig(Section):
    # The web panel (`hermes run` serves it; `hermes web` runs it alone)
    enabled: bool = True
    # None: 127.0.0.1. Anything but loopback must be set here explicitly, and warns at start
    host: str | None = None
    port: int = Field(8765, ge=0, le=65535)
    # A login link (`hermes web token`) works for this many days; a browser logged in with it
    # stays logged in for session_days (across restarts of the daemon)
    token_days: float = Field(7.0, gt=0)
    session_days: float = Field(30.0, gt=0)


class LoggingConfig(Section):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    file_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    file_max_mb: float = Field(default=10.0, gt=0)
    file_backups: int = Field(default=5, ge=0)


class Settings(Section):
    home: str | None = None
    users: UsersConfig = Field(default_factory=UsersConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    facts: FactsConfig = Field(default_factory=FactsConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    context: ContextConfig = Field(default_factory=ContextConfig)
    extraction: ExtractionConfig = Field(default_factory=ExtractionConfig)
    discord: DiscordConfig = Field(default_factory=DiscordConfig)
    cron: CronConfig = Field(default_factory=CronConfig)
    web: WebConfig = Field(default_factory=WebConfig)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    model_config = ConfigDict(extra="forbid")
    # Where the settings came from (the config file, "+ environment"); not a config key. Errors
    # found after loading (a cron job's delivery, checked against the front-ends) start with it.
    _source: str = PrivateAttr("defaults")
    # What named the home: "--home", "HERMES_HOME", the config file, or "default".
    _home_from: str = PrivateAttr("default")
    # Lines for the person found while loading (a setting that is not read), said by the CLI
    _notes: list[str] = PrivateAttr(default_factory=list)

    @property
    def source(self) -> str:
        return self._source

    @property
    def notes(self) -> list[str]:
        return list(self._notes)

    @property
    def home_from(self) -> str:
        return self._home_from if self.home else "default"

    @property
    def home_named_now(self) -> bool:
        """The person named the home for this command (--home, $HERMES_HOME); a config file's
        ``home`` (a clone's config.yaml names its data/) or the default is chosen for them, so
        Hermes says where it is on first use and finds memory left in an old ./data."""
        return self.home_from in ("--home", "HERMES_HOME")

    @property
    def home_path(self) -> Path:
        return Path(self.home).expanduser().resolve() if self.home else hermes.home.default_home()

    @property
    def db_path(self) -> Path:
        return self.home_path / "hermes.db"

    def resolve_user(self, identity: str | None = None) -> str:
        """Turn a front-end identity (``discord:1234``, ``terminal:alice``) into a Hermes user."""
        if identity is None:
            return self.users.default
        return self.users.identities.get(identity, self.users.default if identity.startswith(
            "terminal:") else identity)


    def section(self, name: str) -> BaseModel:
        """A plugin front-end's section of the config (``register(name, ..., config=Model)``),
        validated as the built-in sections are; the model's defaults when the file has none."""
        found = getattr(self, name, None)
        if isinstance(found, BaseModel):
            return found
        from hermes.plugins import loaded

        model = loaded().frontends.config_sections().get(name)
        if model is None:
            raise ConfigError(f"No front-end declares a config section {name!r}.")
        return model()

    def display_name(self, user: str) -> str | None:
        """The person's name for the model (``users.<user>.name``), or None: say "the user"."""
        profile = (self.users.__pydantic_extra__ or {}).get(user)
        name = " ".join(profile.name.split()) if profile is not None and profile.name else ""
        return name or None


def terminal_identity() -> str:
    try:
        return f"terminal:{getpass.getuser()}"
    except Exception:  # noqa: BLE001 - getuser raises several types when no name is known
        return "terminal:unknown"


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


def _format_validation_error(source: str, error: ValidationError) -> str:
    first = error.errors()[0]
    key = ".".join(str(part) for part in first["loc"]) or "(top level)"
    problem = first["msg"].removeprefix("Value error, ")
    if first["type"] == "model_type":  # pydantic: "Input should be a valid dictionary or ..."
        problem = "expected a section (its keys indented under it)"
    if first["type"] == "extra_forbidden":
        problem = "unknown key"
    elif "input" in first and not isinstance(first["input"], dict | list):
        problem = f"{problem} (got {first['input']!r})"
    more = len(error.errors()) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"{source}: {key}: {problem}{suffix}"


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


def settings_model(data: dict[str, Any]) -> type[Settings]:
    """:class:`Settings`, with the sections the plugin front-ends declare when the config has
    keys the built-in sections do not (the plugins are loaded only then); a key no front-end
    declares stays an unknown key."""
    unknown = set(data) - set(Settings.model_fields)
    if not unknown:
        return Settings
    from hermes.plugins import loaded

    sections = loaded().frontends.config_sections()
    declared: dict[str, Any] = {key: (sections[key], Field(default_factory=sections[key]))
                                for key in sorted(unknown) if key in sections}
    if not declared:
        return Settings
    return create_model("Settings", __base__=Settings, **declared)


def load_settings(
    config_path: str | Path | None = None,
    home: str | Path | None = None,
    environ: dict[str, str] | None = None,
) -> Settings:
    """Load and validate settings. Raises ConfigError with one line naming the key and problem."""
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
    try:
        settings = settings_model(data).model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(source, exc)) from None
    settings._source = source
    settings._home_from = home_from
    if ignored:
        settings._notes.append(
            f"Warning: {' and '.join(ignored)} in {env_file} {'is' if len(ignored) == 1 else 'are'}"
            " not read from there (that file is found through the home they would name); set "
            f"{'it' if len(ignored) == 1 else 'them'} in the environment (or use --home, "
            "--config).")
    return settings
