"""Settings: the config.yaml model, its loading and validation, and where Hermes keeps state.

Precedence, lowest first: built-in defaults, the YAML file, ``HERMES_<SECTION>__<KEY>`` environment
variables, command-line flags. ``HERMES_HOME`` (or ``--home``) relocates all state; with neither,
the config's ``home`` (relative to the config file's folder), else :func:`hermes.home.default_home`.
Nothing here depends on the current directory.
"""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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

# Finding and reading the file (and the environment's overrides) is hermes.config_file's, which
# needs no pydantic; these names are kept here for their callers.
from hermes.config_file import (  # noqa: F401
    DEFAULT_USER,
    config_path_from,
    home_path,
    read_config,
    read_env_file,
    read_text_file,
)
from hermes.errors import ConfigError


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
        return home_path(self.home)

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
    raw = read_config(config_path, home, environ)
    data, source = raw.data, raw.source
    try:
        settings = settings_model(data).model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(source, exc)) from None
    settings._source = source
    settings._home_from = raw.home_from
    settings._notes.extend(raw.notes)
    return settings
