"""One home whatever the working directory, said where it is, and private: the home 0700 and
every kind of file Hermes writes in it (or for it) 0600, whatever the umask."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shlex
import shutil
import sqlite3
import stat
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import hermes
from hermes.config import load_settings
from hermes.home import loose_modes, source_checkout
from hermes.runtime import Runtime

CHECKOUT = Path(hermes.__file__).resolve().parent.parent


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def no_home_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Neither HERMES_HOME nor HERMES_CONFIG: the home and config are found as a user's are."""
    monkeypatch.delenv("HERMES_HOME")
    monkeypatch.delenv("HERMES_CONFIG")


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_home_named) -> Path:
    """Hermes as installed from a package (no checkout around it): the per-user data folder,
    here under a temp XDG_DATA_HOME. Returns the home it gets."""
    monkeypatch.setattr("hermes.home.source_checkout", lambda: None)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "hermes"


# --------------------------------------------------------------------------- where it is
def test_from_a_clone_the_home_is_the_clones_data_whatever_the_folder(
        no_home_named, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert source_checkout() == CHECKOUT
    homes = set()
    for folder in (tmp_path, tmp_path / "elsewhere", CHECKOUT):
        folder.mkdir(exist_ok=True)
        monkeypatch.chdir(folder)
        homes.add(load_settings().home_path)
    assert homes == {CHECKOUT / "data"}
    assert not (tmp_path / "data").exists() and not (tmp_path / "elsewhere" / "data").exists()


def test_installed_the_home_is_the_user_data_folder_whatever_the_folder(
        installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in (tmp_path, CHECKOUT):
        monkeypatch.chdir(folder)
        assert load_settings().home_path == installed


def test_a_config_in_the_current_folder_is_not_read(
        installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # another project's config.yaml would have decided the home (and failed on its keys)
    (tmp_path / "config.yaml").write_text("home: here\nbuild: {target: x86}\n")
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.home_path == installed and settings.source == "defaults"
    # the home's own config.yaml is read, wherever the command runs
    installed.mkdir(parents=True)
    (installed / "config.yaml").write_text("memory: {basic_char_limit: 900}\n")
    assert load_settings().memory.basic_char_limit == 900


def test_the_configs_home_is_relative_to_the_config_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_home_named) -> None:
    config = tmp_path / "conf" / "config.yaml"
    config.parent.mkdir()
    config.write_text("home: state\n")
    for folder in (tmp_path, CHECKOUT):
        monkeypatch.chdir(folder)
        settings = load_settings(config_path=config)
        assert settings.home_path == tmp_path / "conf" / "state"
        assert settings.home_from == str(config)


def test_home_and_hermes_home_still_name_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_home_named) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HERMES_HOME", "rel")
    assert load_settings().home_path == tmp_path / "rel"     # resolved once, at start
    assert load_settings(home=tmp_path / "flag").home_path == tmp_path / "flag"
    assert load_settings(home=tmp_path / "flag").home_from == "--home"


def test_first_use_says_where_the_home_is_once(installed: Path, cli) -> None:
    first = cli("memory", "add", "Prefers tea")
    assert first.exit_code == 0, first.stderr
    assert f"Hermes keeps its memory in {installed} " in first.stderr
    assert (installed / "hermes.db").is_file()
    again = cli("memory", "show")
    assert "keeps its memory" not in again.stderr and "Prefers tea" in again.stdout


def test_the_doctor_names_the_home_and_what_named_it(cli, hermes_home: Path,
                                                     installed: Path) -> None:
    named = cli("--home", str(hermes_home), "doctor", "--json").json()
    (home,) = [c for c in named["checks"] if c["name"] == "home"]
    assert home["detail"] == f"{hermes_home} does not exist yet; it can be created (named by " \
        "--home)"
    cli("memory", "add", "Prefers tea")
    default = cli("doctor")
    assert f"{installed} is writable (the default home: the per-user data folder)" \
        in default.stdout


def test_memory_left_in_an_old_data_folder_is_found_and_how_to_keep_it_said(
        installed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    old = tmp_path / "notes"
    Runtime(load_settings(home=old / "data")).memory.basic.add("owner", "Lives in Lyon")
    monkeypatch.chdir(old)
    shown = cli("memory", "show")
    assert f"Note: {old / 'data'} holds Hermes memory" in shown.stderr
    assert f"`mv {old / 'data'} {installed}`" in shown.stderr          # the new home is not there
    assert f"`export HERMES_HOME={old / 'data'}`" in shown.stderr
    assert "Lives in Lyon" not in shown.stdout                          # not silently adopted
    doctor = cli("doctor", "--json").json()
    (found,) = [c for c in doctor["checks"] if c["name"] == "old home"]
    assert found["status"] == "warn" and f"{installed}.new" in found["detail"]  # it exists now
    # Moved as said: the memory is there, from any folder, and the note is gone
    os.rename(installed, tmp_path / "aside")
    os.rename(old / "data", installed)
    monkeypatch.chdir(tmp_path)
    moved = cli("memory", "show")
    assert "Lives in Lyon" in moved.stdout and moved.stderr == ""


def test_a_home_named_by_the_config_is_said_and_old_memory_found_too(
        no_home_named, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:
    """A clone's config.yaml names its data/ (`home: data`): the home is chosen for the person
    as much as the default is, so the first use says where it is, and memory in ./data of the
    folder they are in (where `home: data` used to point) is found."""
    config = tmp_path / "clone" / "config.yaml"
    config.parent.mkdir()
    config.write_text("home: data\n", encoding="utf-8")
    monkeypatch.setenv("HERMES_CONFIG", str(config))
    home = tmp_path / "clone" / "data"
    old = tmp_path / "notes"
    Runtime(load_settings(home=old / "data")).memory.basic.add("owner", "Lives in Lyon")
    monkeypatch.chdir(old)
    first = cli("memory", "add", "Prefers tea")
    assert f"Note: {old / 'data'} holds Hermes memory" in first.stderr
    assert f"`mv {old / 'data'} {home}`" in first.stderr
    doctor = cli("doctor", "--json").json()
    assert [c["status"] for c in doctor["checks"] if c["name"] == "old home"] == ["warn"]
    monkeypatch.chdir(tmp_path)
    os.rename(home, tmp_path / "aside")
    again = cli("memory", "show")
    assert f"Hermes keeps its memory in {home} " in again.stderr
    # Named for this command: the person knows where it is
    named = cli("--home", str(home), "memory", "show")
    assert named.stderr == ""


def test_the_repository_brings_no_home_folder() -> None:
    """git checks a folder out 0755 (and a file in it 0644), and Hermes leaves an existing
    home's mode alone: a clone's data/ must be made by Hermes (0700), so git holds nothing in
    it."""
    if shutil.which("git") is None or not (CHECKOUT / ".git").exists():
        pytest.skip("not a git checkout")
    import subprocess

    tracked = subprocess.run(["git", "-C", str(CHECKOUT), "ls-files", "--", "data"],
                             capture_output=True, text=True, check=True).stdout
    assert tracked == ""


def test_version(cli) -> None:
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout == f"hermes {hermes.__version__}\n"


# --------------------------------------------------------------------------- modes
def test_the_home_database_wal_and_shm_are_private_whatever_the_umask(settings, clock) -> None:
    with umask(0o022):
        rt = Runtime(settings, clock=clock)
        rt.memory.basic.add("owner", "Prefers tea")
        home = settings.home_path
        try:
            assert mode(home) == 0o700
            for name in ("hermes.db", "hermes.db-wal", "hermes.db-shm"):
                assert mode(home / name) == 0o600, name
        finally:
            rt.close()


def test_the_log_and_its_rotations_are_private(settings, hermes_home: Path) -> None:
    from hermes.logs import file_handler

    hermes_home.mkdir()
    settings.logging.file_max_mb = 0.0001  # ~100 bytes: rolls over at once
    handler = file_handler(settings)
    record = logging.LogRecord("t", logging.WARNING, __file__, 1, "x" * 80, None, None)
    with umask(0o022):
        for _ in range(3):
            handler.handle(record)
    handler.close()
    assert mode(hermes_home / "hermes.log") == 0o600
    assert mode(hermes_home / "hermes.log.1") == 0o600


async def test_the_repl_history_is_private(rt) -> None:
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from hermes.agent.turn import Agent
    from hermes.frontends.repl import Repl

    with umask(0o022), create_pipe_input() as inp, \
            create_app_session(input=inp, output=DummyOutput()):
        Repl(rt.memory, Agent(rt.memory), emit=lambda kind, text: None)
    assert mode(rt.settings.home_path / "repl_history") == 0o600


async def test_an_outbox_file_is_private(rt, clock, hermes_home: Path) -> None:
    from hermes.assembly import cron_store
    from tests.test_cron import ScriptedPrompt, runner_for

    job = cron_store(rt.memory).add("digest", "owner", "every 30m", "Summarise", "file:out/d.md")
    runner = runner_for(rt, ScriptedPrompt("The day."))
    clock.advance(minutes=31)
    with umask(0o022):
        assert (await runner.tick(job.id)).status == "ok"
    assert mode(hermes_home / "outbox" / "out" / "d.md") == 0o600


def test_a_backup_and_an_export_are_private(cli, rt, tmp_path: Path) -> None:
    from hermes.store.maintenance import backup

    cli("memory", "add", "Prefers tea")
    with umask(0o022):
        backup(rt.db, tmp_path / "copy.db")          # what `hermes db backup` calls
        assert cli("export", "-o", str(tmp_path / "me.jsonl")).exit_code == 0
    assert mode(tmp_path / "copy.db") == 0o600
    assert mode(tmp_path / "me.jsonl") == 0o600


def test_a_context_file_a_token_and_the_lock_are_private(rt, hermes_home: Path) -> None:
    import asyncio

    from hermes.daemon import HomeLock
    from hermes.frontends.web.auth import TokenStore
    from hermes.memory import context as context_file

    rt.memory.basic.add("owner", "Prefers tea")
    with umask(0o022):
        asyncio.run(context_file.refresh(rt.memory, "owner", None))
        TokenStore(hermes_home, rt.clock).create("owner")
        lock = HomeLock(hermes_home)
        lock.acquire()
        lock.release()
    assert mode(context_file.path_for(rt, "owner")) == 0o600
    assert {mode(p) for p in (hermes_home / "web").iterdir()} == {0o600}
    assert mode(hermes_home / "hermes.lock") == 0o600
    assert not loose_modes(hermes_home)


def test_the_caches_vector_files_and_graphs_are_private(tmp_path: Path) -> None:
    import numpy as np

    from hermes.memory.embeddings.graph_cache import GraphCache
    from hermes.memory.vectors.file import save

    with umask(0o022):
        save(tmp_path / "cache" / "v.vec", {"model": "toy"},
             {"rows": np.zeros((4, 8), dtype=np.int8)})
        built = tmp_path / "cache" / ".built.tmp"
        built.write_bytes(b"onnx")              # what onnxruntime writes, with the umask's mode
        source = tmp_path / "model.onnx"
        source.write_bytes(b"model")
        cache = GraphCache(tmp_path / "cache", "toy", source, "engine")
        cache.save(cache.key(), built)
    assert {p.name: mode(p) for p in (tmp_path / "cache").iterdir()} == {
        "v.vec": 0o600, f"toy-{cache.key()}.onnx": 0o600, f"toy-{cache.key()}.json": 0o600}


def test_the_folders_hermes_makes_in_the_home_are_private_whatever_the_umask(
        tmp_path: Path) -> None:
    """The cache and its vector files' folder, made by a daemon or a front-end that does not
    run under the CLI's umask (review item 12): 0700, parents made on the way too; a folder
    that exists keeps its mode (`hermes doctor` names a loose one)."""
    import numpy as np

    from hermes.home import make_private_dirs
    from hermes.memory.vectors.file import save

    home = tmp_path / "home"
    with umask(0o022):
        save(home / "cache" / "vectors" / "owner.vec", {"model": "toy"},
             {"rows": np.zeros((4, 8), dtype=np.int8)})
        make_private_dirs(home / "cache" / "graphs")
    assert {p.relative_to(tmp_path).as_posix(): mode(p)
            for p in (home, home / "cache", home / "cache" / "vectors",
                      home / "cache" / "graphs")} == {
        "home": 0o700, "home/cache": 0o700, "home/cache/vectors": 0o700,
        "home/cache/graphs": 0o700}
    assert mode(home / "cache" / "vectors" / "owner.vec") == 0o600
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o755)
    loose.chmod(0o755)
    make_private_dirs(loose)
    assert mode(loose) == 0o755
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    with pytest.raises(FileExistsError):
        make_private_dirs(tmp_path / "a-file")


def test_every_command_runs_with_a_private_umask(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files the code above does not name (a plugin's, a library's) are private too: every
    command runs with umask 077, and the caller's umask is back afterwards."""
    import hermes.cli

    seen = []
    base = hermes.cli.Runtime

    class Recording(base):  # type: ignore[misc, valid-type]
        def __init__(self, settings) -> None:
            seen.append(os.umask(0o077))
            os.umask(seen[-1])
            super().__init__(settings)

    monkeypatch.setattr(hermes.cli, "Runtime", Recording)
    with umask(0o022):
        cli("db", "path")
        assert os.umask(0o022) == 0o022
    assert seen == [0o077]


def test_the_doctor_reports_loose_modes_and_how_to_fix_them(cli, hermes_home: Path) -> None:
    cli("memory", "add", "Prefers tea")
    assert [c for c in cli("doctor", "--json").json()["checks"]
            if c["name"] == "modes"][0]["status"] == "ok"
    os.chmod(hermes_home, 0o755)
    (hermes_home / ".env").write_text("OPENAI_API_KEY=sk-x\n")
    os.chmod(hermes_home / ".env", 0o644)
    os.chmod(hermes_home / "hermes.db", 0o644)
    result = cli("doctor", "--json")
    (modes,) = [c for c in result.json()["checks"] if c["name"] == "modes"]
    assert result.exit_code == 1 and modes["status"] == "warn"
    assert modes["detail"] == ("other accounts can read your memory: the home is 0755; 2 "
                               "file(s) not 0600 (.env 0644, hermes.db 0644); run "
                               f"`chmod -R go-rwx {hermes_home}`")
    os.system(f"chmod -R go-rwx {hermes_home}")  # the advice, as given
    assert cli("doctor", "--json").exit_code == 0


def test_an_existing_database_keeps_working_when_it_cannot_be_made_private(tmp_path) -> None:
    # A database made by another program (or an older Hermes) is opened as it is. (It holds a
    # table: an empty file is refused once it is older than a moment, by its modification time.)
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as made:
        made.execute("CREATE TABLE notes (body TEXT)")
    os.chmod(path, 0o644)
    from hermes.store.db import connect

    connect(path).conn.close()
    assert mode(path) == 0o644  # left alone: `hermes doctor` says so


# --------------------------------------------------------------------------- a session of use
def private_or_not(home: Path) -> tuple[set[str], list[str]]:
    """Every file under ``home`` (relative names) and what is not private in it: a folder not
    0700, a file not 0600 (the daemon's socket: nothing for group or others)."""
    files: set[str] = set()
    loose: list[str] = []
    for folder, _dirs, names in os.walk(home):
        if mode(Path(folder)) != 0o700:
            loose.append(f"{Path(folder).relative_to(home.parent)}/ {mode(Path(folder)):04o}")
        for name in names:
            path = Path(folder) / name
            info = path.lstat()
            files.add(str(path.relative_to(home)))
            bad = info.st_mode & 0o077 if stat.S_ISSOCK(info.st_mode) \
                else stat.S_IMODE(info.st_mode) != 0o600
            if bad:
                loose.append(f"{path.relative_to(home)} {stat.S_IMODE(info.st_mode):04o}")
    return files, loose


def wait_until(condition: Callable[[], bool], tmux: Any, timeout: float = 120) -> None:
    """Polled, as a terminal is (a file appearing has no event to wait on here)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, tmux.screen()
        time.sleep(0.05)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_session_of_use_leaves_nothing_another_account_can_read(
        tmp_path: Path, hermes_home: Path, config_file: Path, cli) -> None:
    """`hermes run` started with umask 022 (its REPL on a real terminal, the web panel, a cron
    job delivering to a file, the local socket) and used as the README's tour uses it, with the
    CLI beside it: every file it leaves in the home is 0600 and every folder 0700, while it
    runs and after it stopped; a backup and an export outside the home too."""
    from datetime import timedelta
    from urllib.request import urlopen

    from hermes.assembly import cron_store
    from hermes.clock import FakeClock, SystemClock
    from tests.test_repl_terminal import Tmux
    from tests.web_client import hermes_env

    config_file.write_text("sessions: {embeddings: false}\nextraction: {enabled: false}\n",
                           encoding="utf-8")
    # A job that fired 5 minutes ago (inside the grace window): the daemon runs it at start
    rt = Runtime(load_settings(), clock=FakeClock(SystemClock().now() - timedelta(minutes=35)))
    cron_store(rt.memory).add("digest", "owner", "every 30m", "Summarise my day",
                              "file:digests/today.md")
    rt.close()
    # Every model call (the job, the replies, the session's summary) gets the same words
    env = hermes_env(hermes_home, config_file, TERM="xterm-256color",
                     HERMES_TEST_REPLIES=json.dumps(["Noted, all of it."] * 12))
    tmux = Tmux(["sh", "-c", f"umask 022 && exec {shlex.quote(sys.executable)} "
                 "-m tests.daemon_harness run"], env, CHECKOUT, width=400)
    try:
        shown = tmux.wait_for("hermes>")
        tmux.keys("/remember The NAS is in the hallway closet", "Enter")
        tmux.wait_for("Remembered [1]")
        tmux.keys("where is the NAS?", "Enter")
        tmux.wait_for("Noted, all of it.")
        link = re.search(r"Web panel: log in at (\S+)", tmux.wait_for("Web panel: log in at"))
        assert link is not None, shown
        with urlopen(link.group(1), timeout=60) as page:    # a browser's login: its session
            assert page.status == 200
        with umask(0o022):
            assert cli("facts", "search", "NAS").exit_code == 0
            asked = cli("ask", "and the router?")           # through the daemon's socket
            assert asked.exit_code == 0 and "Noted, all of it." in asked.stdout, asked.stderr
            assert cli("web", "token").exit_code == 0
            assert cli("db", "backup", str(tmp_path / "copy.db")).exit_code == 0
            assert cli("export", "-o", str(tmp_path / "me.jsonl")).exit_code == 0
        wait_until(lambda: (hermes_home / "outbox" / "digests" / "today.md").exists(), tmux)
        running, loose = private_or_not(hermes_home)
        assert loose == [], loose
        tmux.keys("C-d")                                    # leaving the REPL stops Hermes
        wait_until(lambda: not (hermes_home / "hermes.sock").exists(), tmux)
    finally:
        tmux.kill()
    stopped, loose = private_or_not(hermes_home)
    assert loose == [], loose
    assert {"hermes.db", "hermes.db-wal", "hermes.db-shm", "hermes.log", "hermes.lock",
            "hermes.sock", "repl_history", "web/tokens.json", "web/sessions.json",
            "outbox/digests/today.md"} <= running | stopped, running
    assert mode(hermes_home) == 0o700
    assert mode(tmp_path / "copy.db") == 0o600 and mode(tmp_path / "me.jsonl") == 0o600
