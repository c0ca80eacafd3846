import pytest

from hermes.config import load_settings
from hermes.errors import ConfigError


def test_defaults_without_a_file(monkeypatch, hermes_home):
    monkeypatch.delenv("HERMES_CONFIG")
    monkeypatch.chdir(hermes_home.parent)
    settings = load_settings()
    assert settings.memory.basic_char_limit == 8000
    assert settings.users.default == "owner"
    assert settings.home_path == hermes_home.resolve()


def test_wrong_type_names_the_key(config_file):
    config_file.write_text("memory:\n  basic_char_limit: lots\n")
    with pytest.raises(ConfigError) as err:
        load_settings()
    message = str(err.value)
    assert "memory.basic_char_limit" in message and "lots" in message
    assert "\n" not in message


def test_unknown_key_is_an_error(config_file):
    config_file.write_text("memroy:\n  basic_char_limit: 10\n")
    with pytest.raises(ConfigError, match="memroy: unknown key"):
        load_settings()


def test_broken_yaml_gives_line(config_file):
    config_file.write_text("memory:\n  basic_char_limit: [1, 2\n")
    with pytest.raises(ConfigError, match="line"):
        load_settings()


def test_environment_overrides_file(config_file, monkeypatch):
    config_file.write_text("model:\n  name: openai/gpt-4.1-mini\n  temperature: 0.2\n")
    monkeypatch.setenv("HERMES_MODEL__NAME", "ollama/llama3.1")
    monkeypatch.setenv("HERMES_MEMORY__BASIC_CHAR_LIMIT", "500")
    settings = load_settings()
    assert settings.model.name == "ollama/llama3.1"
    assert settings.model.temperature == 0.2
    assert settings.memory.basic_char_limit == 500


def test_home_flag_beats_environment(tmp_path):
    settings = load_settings(home=tmp_path / "elsewhere")
    assert settings.home_path == (tmp_path / "elsewhere").resolve()
    assert settings.db_path.parent == settings.home_path


def test_identity_mapping(config_file):
    config_file.write_text("users:\n  identities:\n    'discord:42': alice\n")
    settings = load_settings()
    assert settings.resolve_user("discord:42") == "alice"
    assert settings.resolve_user("terminal:someone") == "owner"
    # An unmapped Discord user is their own user: two people never share memory by default.
    assert settings.resolve_user("discord:99") == "discord:99"


def test_cli_broken_config_exits_2_with_one_line(cli, config_file):
    config_file.write_text("memory:\n  basic_char_limit: -5\n")
    result = cli("memory", "show")
    assert result.exit_code == 2
    assert "memory.basic_char_limit" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_cli_home_flag_relocates_state(cli, tmp_path):
    other = tmp_path / "other-home"
    assert cli("--home", str(other), "memory", "add", "Lives in Lisbon").exit_code == 0
    assert (other / "hermes.db").exists()
    assert cli("memory", "show", "--json").json()["entries"] == []
    assert cli("--home", str(other), "memory", "show", "--json").json()["entries"][0]["text"] == (
        "Lives in Lisbon"
    )


def test_embedding_model_is_chosen_by_name(config_file):
    assert load_settings().sessions.embedding_model == "minilm"  # the default (issue 13)
    config_file.write_text("sessions:\n  embeddings: true\n  embedding_model: minilm\n")
    assert load_settings().sessions.embedding_model == "minilm"
    config_file.write_text("sessions:\n  embedding_model: bert\n")
    with pytest.raises(ConfigError, match="sessions.embedding_model"):
        load_settings()


def test_a_user_can_set_the_name_the_model_calls_them(config_file):
    config_file.write_text("users:\n  owner:\n    name: Alice\n", encoding="utf-8")
    settings = load_settings()
    assert settings.display_name("owner") == "Alice" and settings.display_name("bob") is None
    assert settings.users.default == "owner"
    config_file.write_text("users:\n  owner:\n    nick: Al\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="users.owner.nick: unknown key"):
        load_settings()


@pytest.mark.parametrize("text,message", [
    ("memory:\n  basic_char_limit: true\n",
     "memory.basic_char_limit: expected a number, not true"),
    ("agent:\n  compress_at: false\n", "agent.compress_at: expected a number, not false"),
    ("facts:\n  categories: []\n", "facts.categories: List should have at least 1 item"),
    ("facts:\n  categories: [work]\n", "facts.categories: must include 'general'"),
    ("cron:\n  timezone: Mars/Olympus\n", "cron.timezone: unknown time zone 'Mars/Olympus'"),
])
def test_values_that_would_break_later_are_refused_at_load(config_file, text, message):
    config_file.write_text(text)
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        load_settings()


def test_a_boolean_setting_still_takes_a_boolean(config_file):
    config_file.write_text("sessions:\n  embeddings: true\n")
    assert load_settings().sessions.embeddings is True


def test_an_invalid_timezone_fails_cron_list_too(cli, config_file):
    config_file.write_text("cron:\n  timezone: Mars/Olympus\n")
    result = cli("cron", "list")
    assert result.exit_code == 2
    assert "cron.timezone: unknown time zone 'Mars/Olympus'" in result.stderr


@pytest.mark.parametrize("job,message", [
    ('{name: digest, schedule: "every fortnight", prompt: hi}',
     "cron.jobs.1.schedule ('digest'): schedule 'every fortnight'"),
    ('{name: digest, schedule: "every 1d", prompt: hi, deliver: "email:me"}',
     "cron.jobs.1.deliver ('digest'): deliver 'email:me'"),
])
def test_a_bad_cron_job_in_the_config_names_its_key(cli, config_file, job, message):
    config_file.write_text("cron:\n  jobs:\n    - {name: ok, schedule: every 1h, prompt: x}\n"
                           f"    - {job}\n")
    result = cli("cron", "list")
    assert result.exit_code == 2
    # The file first, as every other config error says it (the key alone was a riddle).
    assert result.stderr.startswith(f"Error: {config_file}: {message}")
    assert result.stderr.count("\n") == 1


def test_an_empty_section_is_its_defaults_and_a_scalar_one_is_named(cli, config_file):
    # Every key under `model:` commented out is YAML null: the defaults, as with no line.
    config_file.write_text("model:\n#  name: openai/gpt-4.1-mini\ncron:\n  jobs:\n")
    settings = load_settings()
    assert settings.model.name is None and settings.model.retries == 3
    assert settings.cron.jobs == []
    assert cli("memory", "show").exit_code == 0
    config_file.write_text("memory: 3\n")
    result = cli("memory", "show")
    assert result.exit_code == 2 and result.stderr == (
        f"Error: {config_file}: memory: expected a section (its keys indented under it) "
        "(got 3)\n")


def test_home_flag_reads_that_homes_config_not_hermes_home(cli, hermes_home, tmp_path,
                                                            monkeypatch):
    # $HERMES_HOME names one home (with its config); --home names another: the flag's home
    # is the one whose config.yaml counts, for every command and for the doctor.
    monkeypatch.delenv("HERMES_CONFIG", raising=False)
    hermes_home.mkdir(parents=True, exist_ok=True)
    (hermes_home / "config.yaml").write_text("memory:\n  basic_char_limit: 9000\n")
    other = tmp_path / "other-home"
    other.mkdir()
    (other / "config.yaml").write_text("memory:\n  basic_char_limit: lots\n")
    result = cli("--home", str(other), "memory", "show")
    assert result.exit_code == 2 and "other-home/config.yaml" in result.stderr
    (other / "config.yaml").write_text("memory:\n  basic_char_limit: 6000\n")
    assert cli("--home", str(other), "memory", "show", "--json").json()["limit"] == 6000
    doctor = cli("--home", str(other), "doctor", "--json").json()
    assert "other-home/config.yaml" in doctor["checks"][0]["detail"]


def test_hermes_settings_in_the_homes_env_file_are_read(hermes_home, config_file, monkeypatch):
    hermes_home.mkdir()
    config_file.write_text("memory:\n  basic_char_limit: 5000\n")
    (hermes_home / ".env").write_text("OPENAI_API_KEY=sk-not-real\n"
                                      "HERMES_MODEL__NAME=openai/gpt-4.1-mini\n"
                                      "export HERMES_MEMORY__BASIC_CHAR_LIMIT=6000\n")
    settings = load_settings()
    assert settings.model.name == "openai/gpt-4.1-mini"
    assert settings.memory.basic_char_limit == 6000                   # over the config file
    assert settings.source == f"{config_file} + {hermes_home / '.env'}"
    monkeypatch.setenv("HERMES_MEMORY__BASIC_CHAR_LIMIT", "7000")
    assert load_settings().memory.basic_char_limit == 7000            # the environment wins
    monkeypatch.delenv("HERMES_MEMORY__BASIC_CHAR_LIMIT")
    (hermes_home / ".env").write_text("HERMES_MEMORY__BASIC_CHAR_LIMIT=lots\n")
    with pytest.raises(ConfigError, match=f"{hermes_home / '.env'}: memory.basic_char_limit"):
        load_settings()


def test_home_and_config_in_the_env_file_are_said_not_to_be_read(cli, hermes_home, tmp_path):
    hermes_home.mkdir()
    (hermes_home / ".env").write_text(f"HERMES_HOME={tmp_path / 'elsewhere'}\n")
    shown = cli("memory", "show")
    assert shown.stderr.startswith(f"Warning: HERMES_HOME in {hermes_home / '.env'} is not read "
                                   "from there")
    assert (hermes_home / "hermes.db").exists() and not (tmp_path / "elsewhere").exists()
    (config,) = [c for c in cli("doctor", "--json").json()["checks"] if c["name"] == "config"]
    assert config["status"] == "warn" and "set it in the environment" in config["detail"]


# (config.yaml, environment, .env in the home, --home); "HOME" in them is the test's folder
CONFIG_CASES = [
    ("", {}, "", None),
    ("", {"HERMES_HOME": "HOME/h"}, "", None),
    ("", {"HERMES_HOME": "HOME/h"}, "", "HOME/other"),
    ("home: rel\n", {}, "", None),
    ("home: ~/x\nusers:\n  default: alice\n", {}, "", None),
    ("users:\n  default: alice\n", {"HERMES_USERS__DEFAULT": "bob"}, "", None),
    ("users:\n", {"HERMES_HOME": "HOME/h"}, "HERMES_USERS__DEFAULT=carol\nHERMES_HOME=/x\n", None),
    ("users:\n  default: alice\n  alice:\n    name: Alice\n", {}, "", None),
]


@pytest.mark.parametrize(("text", "environ", "env_file", "home"), CONFIG_CASES)
def test_the_config_as_written_names_the_home_and_user_the_settings_have(
        tmp_path, text, environ, env_file, home):
    """A command the daemon answers finds its socket and user from the config as written
    (hermes.config_file, no pydantic); the settings must agree, or it would ask another
    home's daemon, or for another user."""
    from hermes.config_file import home_and_user, read_config

    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    environ = {k: v.replace("HOME", str(tmp_path)) for k, v in environ.items()}
    home = home.replace("HOME", str(tmp_path)) if home else None
    if env_file:
        (tmp_path / "h").mkdir()
        (tmp_path / "h" / ".env").write_text(env_file, encoding="utf-8")
    raw = read_config(config, home, environ)
    settings = load_settings(config, home, environ)
    assert home_and_user(raw) == (settings.home_path, settings.users.default)
    assert (raw.home_from, raw.home_named_now, raw.notes) == (
        settings.home_from, settings.home_named_now, settings.notes)


@pytest.mark.parametrize("text", ["users:\n  default: 5\n", "users:\n  default: ' '\n",
                                  "users: [alice]\n", "home: [a, b]\n"])
def test_what_only_the_validation_can_judge_is_left_to_it(tmp_path, text):
    from hermes.config_file import home_and_user, read_config

    config = tmp_path / "config.yaml"
    config.write_text(text, encoding="utf-8")
    assert home_and_user(read_config(config, None, {})) is None
    with pytest.raises(ConfigError):
        load_settings(config, None, {})
