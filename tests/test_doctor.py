"""`hermes db check` and `hermes doctor`: each check reports what it finds, and the exit code
says whether something is wrong."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

GOOD_TOKEN = "MTIzNDU2Nzg5MDEyMzQ1Njc4.GaBcDe.abcdefghijklmnopqrstuvwxyz0123456789AB"


def _seed(cli) -> None:
    assert cli("facts", "add", "Alice deployed redis for Project Atlas").exit_code == 0
    assert cli("memory", "add", "Runs Debian 13 on the home server").exit_code == 0


def _damage_facts_fts(db_path: Path, seed: int = 11) -> None:
    # Seeded garbage, not randomblob(): about one random blob in a hundred happens to read back
    # or to ask FTS5 for an absurd allocation, which made these tests flaky.
    rng = random.Random(seed)
    conn = sqlite3.connect(db_path)
    conn.create_function("garbage", 1, lambda n: rng.randbytes(n), deterministic=False)
    conn.execute("UPDATE facts_fts_data SET block = garbage(length(block)) WHERE id > 1")
    conn.commit()
    conn.close()


def _checks(result, name: str) -> list[dict]:
    return [c for c in result.json()["checks"] if c["name"] == name]


def test_db_check_on_a_healthy_database(cli, hermes_home: Path) -> None:
    _seed(cli)
    result = cli("db", "check")
    assert result.exit_code == 0, result.stdout
    for table in ("facts_fts", "messages_fts", "sessions_fts"):
        assert f"ok    {table}: the full-text index matches its table" in result.stdout
    assert "ok    integrity:" in result.stdout
    assert "ok    migrations: all" in result.stdout


def test_db_check_finds_a_damaged_fts_index_and_repair_rebuilds_it(cli,
                                                                  hermes_home: Path) -> None:
    _seed(cli)
    _damage_facts_fts(hermes_home / "hermes.db")
    assert cli("facts", "search", "redis").exit_code == 2
    result = cli("db", "check", "--json")
    assert result.exit_code == 2
    bad = [c for c in result.json()["checks"] if not c["ok"]]
    assert [c["name"] for c in bad] == ["facts_fts"]
    assert "hermes db check --repair" in bad[0]["detail"]
    repaired = cli("db", "check", "--repair", "--json")
    assert repaired.exit_code == 0
    assert [c["name"] for c in repaired.json()["checks"] if c["repaired"]] == ["facts_fts"]
    found = cli("facts", "search", "redis", "--json")
    assert found.exit_code == 0 and len(found.json()) == 1
    assert cli("db", "check").exit_code == 0


def test_a_damaged_index_that_reads_as_out_of_memory_is_damage(cli, hermes_home: Path) -> None:
    # This garbage gives a length FTS5 tries to allocate (SQLITE_NOMEM, raised as MemoryError):
    # it is reported and repaired like any other damage, not a traceback.
    _seed(cli)
    _damage_facts_fts(hermes_home / "hermes.db", seed=36)
    search = cli("facts", "search", "redis")
    assert search.exit_code == 2 and "Traceback" not in search.stderr
    assert search.stderr.strip().count("\n") == 0 and "hermes db check --repair" in search.stderr
    result = cli("db", "check", "--json")
    assert result.exit_code == 2
    bad = [c for c in result.json()["checks"] if not c["ok"]]
    assert [c["name"] for c in bad] == ["facts_fts"]
    assert "more memory than it can hold" in bad[0]["detail"]
    assert cli("db", "check", "--repair").exit_code == 0
    assert cli("facts", "search", "redis", "--json").json()


def test_db_check_on_a_file_that_is_not_a_database(cli, hermes_home: Path) -> None:
    hermes_home.mkdir(parents=True)
    (hermes_home / "hermes.db").write_text("my shopping list\n" * 300, encoding="utf-8")
    result = cli("db", "check")
    assert result.exit_code == 2
    assert "FAIL  integrity:" in result.stdout and "not a readable database" in result.stdout
    assert "hermes db backup" in result.stdout


def test_db_check_does_not_migrate(cli, hermes_home: Path) -> None:
    hermes_home.mkdir(parents=True)
    conn = sqlite3.connect(hermes_home / "hermes.db")
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    result = cli("db", "check", "--json")
    migrations = [c for c in result.json()["checks"] if c["name"] == "migrations"][0]
    assert migrations["ok"] and "pending" in migrations["detail"]
    conn = sqlite3.connect(hermes_home / "hermes.db")
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert tables == {"notes"}


def test_doctor_on_a_healthy_home(cli, hermes_home: Path) -> None:
    _seed(cli)
    result = cli("doctor", "--json")
    assert result.exit_code == 0, result.stdout
    report = result.json()
    assert report["ok"] is True
    names = {c["name"] for c in report["checks"]}
    assert names == {"config", "home", "modes", "database", "migrations", "disk", "background",
                     "model", "discord"}
    assert all(c["status"] == "ok" for c in report["checks"])
    text = cli("doctor")
    assert text.exit_code == 0 and f"ok    home        {hermes_home} is writable (named by " \
        "HERMES_HOME)" in text.stdout


def test_doctor_reports_a_broken_config_and_checks_the_rest(cli, config_file: Path) -> None:
    config_file.write_text("memory:\n  basic_char_limit: lots\n", encoding="utf-8")
    result = cli("doctor", "--json")
    assert result.exit_code == 2
    config = _checks(result, "config")[0]
    assert config["status"] == "fail" and "memory.basic_char_limit" in config["detail"]
    assert _checks(result, "home")[0]["status"] == "ok"
    # Every other command still refuses to run on it.
    assert cli("memory", "show").exit_code == 2


def test_doctor_finds_a_damaged_database(cli, hermes_home: Path) -> None:
    _seed(cli)
    _damage_facts_fts(hermes_home / "hermes.db")
    result = cli("doctor", "--json")
    assert result.exit_code == 2
    failed = [c for c in result.json()["checks"] if c["status"] == "fail"]
    assert [c["name"] for c in failed] == ["database"]
    assert failed[0]["detail"].startswith("facts_fts: the full-text index is damaged")


def test_doctor_reports_migrations_from_a_newer_hermes(cli, hermes_home: Path) -> None:
    _seed(cli)
    conn = sqlite3.connect(hermes_home / "hermes.db")
    conn.execute("INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
                 "VALUES ('hermes', 'm999_from_the_future', '2027-01-01')")
    conn.commit()
    conn.close()
    result = cli("doctor", "--json")
    migrations = _checks(result, "migrations")[0]
    assert migrations["status"] == "fail" and "m999_from_the_future" in migrations["detail"]
    assert result.exit_code == 2


def test_doctor_home_that_is_a_file(cli, hermes_home: Path) -> None:
    hermes_home.write_text("not a directory", encoding="utf-8")
    result = cli("doctor", "--json")
    home = _checks(result, "home")[0]
    assert home["status"] == "fail" and "is a file, not a directory" in home["detail"]
    assert result.exit_code == 2


def test_doctor_low_disk_space(cli, hermes_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil
    from collections import namedtuple

    _seed(cli)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**10, 10**10 - 10**6, 10**6))
    result = cli("doctor", "--json")
    disk = _checks(result, "disk")[0]
    assert disk["status"] == "fail" and "0.0 GB free" in disk["detail"]
    assert result.exit_code == 2


def test_doctor_reports_recent_background_failures(cli, hermes_home: Path,
                                                   tmp_path: Path) -> None:
    source = tmp_path / "s.jsonl"
    source.write_text('{"source": "terminal", "started_at": "2026-11-20T10:00:00Z", "messages": '
                      '[{"role": "user", "content": "hello there", "created_at": '
                      '"2026-11-20T10:00:00Z"}]}\n', encoding="utf-8")
    assert cli("sessions", "import", str(source)).exit_code == 0
    from hermes.clock import SystemClock, to_ts

    now = to_ts(SystemClock().now())
    conn = sqlite3.connect(hermes_home / "hermes.db")
    for first, status, when in ((1, "failed", now), (2, "retry", now),
                                (3, "failed", "2020-01-01T00:00:00.000000Z"), (4, "done", now)):
        conn.execute("INSERT INTO extraction_runs (user, session_id, first_message_id, "
                     "last_message_id, status, reason, started_at) VALUES ('owner', 1, ?, ?, ?, "
                     "?, ?)", [first, first, status, f"model said no {first}", when])
    conn.commit()
    conn.close()
    result = cli("doctor", "--json")
    background = _checks(result, "background")[0]
    assert background["status"] == "warn"
    assert "2 extraction run(s) failed (last: model said no 2)" in background["detail"]
    assert result.exit_code == 1


def test_doctor_model_is_called_only_with_model(cli, fake_model) -> None:
    result = cli("doctor", "--json")
    assert "not called" in _checks(result, "model")[0]["detail"]
    assert fake_model.requests == []
    fake_model.reply("ok")
    result = cli("doctor", "--model", "--json")
    model = _checks(result, "model")[0]
    assert model["status"] == "ok" and "fake/scripted answered" in model["detail"]
    assert len(fake_model.requests) == 1
    assert result.exit_code == 0


def test_doctor_model_times_the_request_alone(cli, fake_model, monkeypatch) -> None:
    """Not litellm's import (seconds on a cold start): a model answering in 0.01 s was said
    to answer in 5.6-8.4 s."""
    import hermes.doctor
    from hermes.agent import llm

    elapsed = [100.0]
    load, imported = llm.load_litellm, []

    def slow_import():  # the first call imports (seconds); later ones return the module
        if not imported:
            imported.append(True)
            elapsed[0] += 5.0
        return load()

    def answer(request):
        elapsed[0] += 0.25
        return "ok"

    monkeypatch.setattr(hermes.doctor, "now", lambda: elapsed[0])
    monkeypatch.setattr(llm, "load_litellm", slow_import)
    # a server of one's own: no key to look for, so nothing loads litellm before the request
    monkeypatch.setenv("HERMES_MODEL__API_BASE", "http://127.0.0.1:9/v1")
    fake_model.respond(answer)
    model = _checks(cli("doctor", "--model", "--json"), "model")[0]
    assert model["detail"] == ("fake/scripted at http://127.0.0.1:9/v1 (model.api_base) "
                               "answered in 0.2 s")


def test_doctor_model_that_refuses(cli, fake_model) -> None:
    from tests.fakellm import bad_request

    fake_model.error(bad_request("invalid api key"))
    result = cli("doctor", "--model", "--json")
    model = _checks(result, "model")[0]
    assert model["status"] == "fail" and "invalid api key" in model["detail"]
    assert result.exit_code == 2


def test_doctor_discord_token_shape(cli, monkeypatch: pytest.MonkeyPatch,
                                    config_file: Path) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "paste-your-token-here")
    result = cli("doctor", "--json")
    discord = _checks(result, "discord")[0]
    assert discord["status"] == "fail" and "does not look like a bot token" in discord["detail"]
    assert "paste-your-token-here" not in result.stdout
    monkeypatch.setenv("DISCORD_TOKEN", GOOD_TOKEN)
    assert _checks(cli("doctor", "--json"), "discord")[0]["status"] == "warn"  # no allowlist
    config_file.write_text("discord:\n  allowed_users: [1234]\n", encoding="utf-8")
    result = cli("doctor", "--json")
    assert _checks(result, "discord")[0]["status"] == "ok"
    assert GOOD_TOKEN not in result.stdout


def test_doctor_names_the_missing_key_of_the_provider(cli, hermes_home: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("HERMES_MODEL__NAME", "anthropic/claude-sonnet-4-5")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    for flags in ((), ("--model",)):  # no network either way: refused before any request
        result = cli("doctor", *flags, "--json")
        model = _checks(result, "model")[0]
        assert model["status"] == "fail"
        assert model["detail"] == (
            "anthropic/claude-sonnet-4-5: ANTHROPIC_API_KEY is not set; set it in the "
            f"environment or in {hermes_home.resolve() / '.env'}")
        assert result.exit_code == 2

    # The home's .env counts (as it does for a turn), and the doctor leaves the environment
    # as it found it.
    hermes_home.mkdir(parents=True, exist_ok=True)
    (hermes_home / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-not-a-real-one\n")
    model = _checks(cli("doctor", "--json"), "model")[0]
    assert model["status"] == "ok" and "not called" in model["detail"]
    assert "ANTHROPIC_API_KEY" not in os.environ
    assert "sk-ant" not in cli("doctor").stdout


def test_doctor_asks_litellm_with_the_env_files_keys(cli, hermes_home: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemini takes GOOGLE_API_KEY or GEMINI_API_KEY: one of them in .env is enough."""
    import os

    monkeypatch.setenv("HERMES_MODEL__NAME", "gemini/gemini-2.0-flash")
    for key in ("GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    model = _checks(cli("doctor", "--json"), "model")[0]
    assert model["status"] == "fail" and model["detail"].startswith(
        "gemini/gemini-2.0-flash: its key is not set (litellm looks for GOOGLE_API_KEY, "
        "GEMINI_API_KEY); set it in the environment or in ")
    hermes_home.mkdir(parents=True, exist_ok=True)
    (hermes_home / ".env").write_text("GEMINI_API_KEY=not-a-real-one\n")
    model = _checks(cli("doctor", "--json"), "model")[0]
    assert model["status"] == "ok", model
    assert "GEMINI_API_KEY" not in os.environ


def test_an_ollama_model_without_api_base_uses_litellms_default_address(
        cli, hermes_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm sends ollama/ requests to OLLAMA_API_BASE, or http://localhost:11434 without it
    (its validate_environment still reports the variable missing): the doctor names the
    address instead of failing."""
    import os

    monkeypatch.setenv("HERMES_MODEL__NAME", "ollama/llama3.1")
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    model = _checks(cli("doctor", "--json"), "model")[0]
    assert model == {**model, "status": "ok", "detail": (
        "ollama/llama3.1 at http://localhost:11434 (litellm's default, without model.api_base "
        "or OLLAMA_API_BASE) (not called; `hermes doctor --model` sends one tiny request)")}
    hermes_home.mkdir(parents=True, exist_ok=True)
    (hermes_home / ".env").write_text("OLLAMA_API_BASE=http://gpu-box:11434\n")
    model = _checks(cli("doctor", "--json"), "model")[0]
    assert model["status"] == "ok" and model["detail"].startswith(
        "ollama/llama3.1 at http://gpu-box:11434 (OLLAMA_API_BASE) (not called")
    assert "OLLAMA_API_BASE" not in os.environ
    monkeypatch.setenv("HERMES_MODEL__API_BASE", "http://127.0.0.1:8080")
    assert _checks(cli("doctor", "--json"), "model")[0]["detail"].startswith(
        "ollama/llama3.1 at http://127.0.0.1:8080 (model.api_base) (not called")


def test_the_docs_show_the_migration_count_the_code_prints(cli) -> None:
    """docs/backup.md's `db check`, `doctor` and `db stats` examples name how many migrations a
    home has: appending one makes this fail until the page says the new count."""
    import re

    from hermes.store.migrations import migrations

    readme = (Path(__file__).parent.parent / "docs" / "backup.md").read_text(encoding="utf-8")
    count = len(migrations._migrations)
    _seed(cli)
    check = [ln for ln in cli("db", "check").stdout.splitlines() if "migrations:" in ln]
    assert check == [f"  ok    migrations: all {count} applied"]
    assert check[0] in readme, \
        f"docs/backup.md: say `all {count} applied` in the `db check` example"
    doctor = [ln for ln in cli("doctor").stdout.splitlines() if ln.startswith("ok    migrations")]
    assert doctor == [f"ok    migrations  all {count} applied"]
    assert doctor[0] in readme, f"docs/backup.md: say `all {count} applied` in the `doctor` example"
    assert re.findall(r"^_sqlite_migrations +(\d+) *$", readme, re.M) == [str(count)], (
        f"docs/backup.md: the `db stats` example has {count} _sqlite_migrations rows")
