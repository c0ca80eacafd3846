"""Plugins through the real entry-point path: tests/hermes_postbox, given a dist-info on
sys.path, adds a tool the scripted model calls through the turn engine, a front-end that
`hermes run` starts, delivers a cron job to and stops, and a command."""

from __future__ import annotations

import json
import os
import signal
from datetime import timedelta
from pathlib import Path

import pytest

from hermes import plugins
from hermes.agent.turn import Agent
from hermes.assembly import cron_store
from hermes.clock import FakeClock, SystemClock
from hermes.config import load_settings
from hermes.errors import HermesError
from hermes.memory.sessions.store import SessionStore
from hermes.runtime import Runtime
from tests.test_daemon import REPO, Process

TOOL = {"tool": "count_words", "args": {"text": "one two three"}}


def write_dist_info(site: Path, name: str = "postbox",
                    module: str = "tests.hermes_postbox") -> Path:
    """What `pip install` of the plugin would leave: its metadata and its entry point."""
    info = site / f"hermes_{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: hermes-{name}\n"
                                   "Version: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[hermes]\n{name} = {module}\n",
                                           encoding="utf-8")
    return site


def forget_loaded_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    # One registry a process, loaded when first asked: start this test from nothing (the
    # process's registry is restored after it).
    monkeypatch.setattr(plugins, "_loaded", None)


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch) -> Path:
    site = write_dist_info(tmp_path / "site")
    monkeypatch.syspath_prepend(str(site))
    forget_loaded_plugins(monkeypatch)
    return site


def test_the_entry_point_loads_the_plugin_beside_the_default_ones(installed_plugin):
    assert "postbox" in plugins.loaded().names()
    assert "hermes.agent.builtin_tools" in plugins.loaded().names()


def test_without_the_entry_point_there_is_no_plugin(monkeypatch):
    forget_loaded_plugins(monkeypatch)
    assert "postbox" not in plugins.loaded().names()
    assert plugins.loaded().tools.get("count_words") is None
    # Only Hermes's own front-ends, registered by its default plugin the same way.
    assert list(plugins.loaded().frontends.entries) == ["discord", "terminal", "web", "cron"]


async def test_the_scripted_model_calls_the_plugin_tool_through_the_turn_engine(
        installed_plugin, fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    try:
        agent = Agent(rt.memory)
        session_id = rt.memory.sessions.create("owner", "terminal").id
        fake_model.tool_call(TOOL["tool"], TOOL["args"]).reply("Three words.")
        result = await agent.turn("owner", session_id, "count: one two three").run()
        assert result.text == "Three words." and result.tool_calls == 1
        # The built-in tools come first (their order is part of the prompt), the plugin's after.
        assert fake_model.last.tool_names == ["memory", "facts", "fact_feedback",
                                              "session_search", "count_words"]
        tool_message = fake_model.last.messages[-1]
        assert tool_message["role"] == "tool"
        assert json.loads(tool_message["content"]) == {"words": 3, "user": "owner"}
    finally:
        rt.close()


def test_a_registered_front_end_is_a_cron_delivery_target(installed_plugin, rt):
    store = cron_store(rt.memory)
    store.add("digest", "owner", "every 30m", "Summarise my day", "postbox:inbox")
    assert [job.deliver for job in store.list_jobs()] == ["postbox:inbox"]


def test_an_unknown_prefix_is_still_refused(installed_plugin, rt):
    with pytest.raises(HermesError, match="deliver 'mailbox:inbox'"):
        cron_store(rt.memory).add("digest", "owner", "every 30m", "Hi", "mailbox:inbox")


def test_each_front_end_judges_its_own_delivery_targets(installed_plugin, cli):
    """The built-ins' rules and the plugin's come from their registrations, and the refusal
    lists every front-end's form."""
    def add(name: str, deliver: str):
        return cli("cron", "add", name, "every 30m", "Hi", "--deliver", deliver)

    for number, deliver in enumerate(["postbox:inbox", "discord:1234", "terminal",
                                      "file:digest.md"]):
        assert add(f"ok{number}", deliver).exit_code == 0, deliver
    for deliver in ["postbox:two words", "postbox", "discord:general", "terminal:tty1",
                    "web:chat", "cron:again", "file:"]:
        refused = add("bad", deliver)
        assert refused.exit_code == 1 and refused.stderr == (
            f"Error: deliver {deliver!r}: use discord:<channel id>, terminal, "
            "postbox:<box name> or file:<path under the home's outbox/>\n"), deliver


def test_the_plugin_command_runs_and_the_built_ins_load_no_plugin(installed_plugin, cli,
                                                                   monkeypatch):
    assert cli("postbox-hello").stdout.strip() == "hello from the postbox plugin"
    forget_loaded_plugins(monkeypatch)
    cli("memory", "show")
    assert plugins._loaded is None


def test_hermes_run_starts_delivers_to_and_stops_the_plugin_front_end(
        broken_plugins, hermes_home, tmp_path, rt):
    """Beside two broken plugins (one does not import, one's hooks raise): each failure is
    one line, and the daemon, the built-ins and the working plugin are unaffected."""
    installed_plugin = broken_plugins
    settings = load_settings()
    past = Runtime(settings, clock=FakeClock(SystemClock().now() - timedelta(minutes=35)))
    cron_store(past.memory).add("digest", "owner", "every 30m", "Count one two three",
                                     "postbox:inbox")   # fired 5 minutes ago: caught up at start
    past.close()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("HERMES_") and k != "DISCORD_TOKEN"}
    env.update(HERMES_HOME=str(hermes_home), HERMES_CONFIG=str(tmp_path / "config.yaml"),
               PYTHONPATH=f"{REPO}{os.pathsep}{installed_plugin}", HERMES_WEB__ENABLED="false",
               HERMES_TEST_REPLIES=json.dumps([TOOL, "Three words."]))
    proc = Process(["-m", "tests.daemon_harness", "run", "--no-repl"], env)
    try:
        proc.wait_for("front-end postbox: started")
        proc.wait_for("cron catch-up done")
        proc.proc.send_signal(signal.SIGTERM)
        assert proc.finish() == 0
    finally:
        proc.kill()
    assert "Traceback" not in "\n".join(proc.lines)
    assert [line.split(" (")[0] for line in warnings_in("\n".join(proc.lines))] == [
        "Warning: Hermes plugin 'broken' failed to load",
        "Warning: Hermes plugin 'faulty' failed in register_frontends",
        "Warning: Hermes plugin 'faulty' failed in register_tools"]
    assert sum("Hermes plugin" in line for line in proc.lines) == 3  # not again as a log line
    log = (hermes_home / "hermes.log").read_text(encoding="utf-8")
    assert "Hermes plugin 'faulty' failed in register_tools" in log and "Traceback" in log
    postbox = (hermes_home / "postbox.txt").read_text(encoding="utf-8").splitlines()
    assert postbox == ["started", "digest -> inbox: Three words.", "stopped"]
    tool_rows = rt.db.execute("SELECT tool_name, content FROM messages WHERE role = 'tool'"
                              ).fetchall()
    assert [(r[0], json.loads(r[1])) for r in tool_rows] == [
        ("count_words", {"words": 3, "user": "owner"})]


def test_a_plugin_tool_that_writes_counts_as_a_memory_write(rt):
    """writes=True: a plain result is a write, and failures count toward the stop after 3."""
    from hermes.agent.llm import ToolCall
    from hermes.agent.tool_registry import Tool, ToolRegistry
    from hermes.agent.tools import ToolBox

    def note(box, args):
        if not args.get("text"):
            raise HermesError("note needs text.")
        return {"saved": args["text"]}

    registry = ToolRegistry()
    registry.register(Tool("note", "Save a note.", {"type": "object", "properties": {}},
                           note, writes=True))
    box = ToolBox(rt.memory, "owner", tools=registry)
    saved = box.run(ToolCall("1", "note", '{"text": "hi"}'))
    assert saved.ok and saved.wrote_memory and box.writes == 1
    outcomes = [box.run(ToolCall(str(i), "note", "{}")) for i in range(4)]
    assert [o.failed_write for o in outcomes] == [True] * 4
    assert "stop" in json.loads(outcomes[2].content)
    assert json.loads(outcomes[3].content)["error"].startswith("Not attempted")
    # Stopped writes leave the reads alone: a tool that does not write, and the actions of a
    # writing tool that are not among its write_actions.
    registry.register(Tool("peek", "Read notes.", {}, lambda box, args: {"notes": []}))
    registry.register(Tool("notes", "Notes: list, add.", {}, lambda box, args: {"ok": 1},
                           writes=True, write_actions=frozenset({"add"})))
    assert box.run(ToolCall("5", "peek", "{}")).ok
    assert box.run(ToolCall("6", "notes", '{"action": "list"}')).ok
    assert not box.run(ToolCall("7", "notes", '{"action": "add"}')).ok
    with pytest.raises(ValueError, match="two tools"):
        registry.register(Tool("note", "again", {}, note))


def test_hermes_plugins_lists_the_plugins_and_what_they_add(installed_plugin, cli):
    data = json.loads(cli("plugins", "--json").stdout)
    by_name = {p["name"]: p for p in data["plugins"]}
    assert by_name["postbox"] == {"name": "postbox", "default": False, "hooks": [
        "register_commands", "register_embedding_models", "register_frontends",
        "register_tools"]}
    assert by_name["hermes.agent.builtin_tools"]["default"] is True
    assert by_name["hermes.frontends.builtin"] == {"name": "hermes.frontends.builtin",
                                                   "default": True,
                                                   "hooks": ["register_frontends"]}
    assert data["tools"][-1] == "count_words"
    assert data["frontends"] == ["discord", "terminal", "web", "cron", "postbox"]
    assert data["embedding_models"] == ["e5", "minilm", "toy"]
    text = cli("plugins").stdout
    assert ("postbox: register_commands, register_embedding_models, register_frontends, "
            "register_tools") in text
    assert "front-ends: discord, terminal, web, cron, postbox" in text
    assert "embedding models: e5, minilm, toy" in text


@pytest.fixture
def broken_plugins(installed_plugin) -> Path:
    """Beside the postbox plugin: one whose module does not import, one whose hooks raise."""
    write_dist_info(installed_plugin, "broken", "tests.no_such_plugin_module")
    write_dist_info(installed_plugin, "faulty", "tests.hermes_faulty")
    return installed_plugin


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Warning: Hermes plugin")]


def test_a_plugin_that_does_not_import_or_raises_is_named_and_the_rest_works(broken_plugins,
                                                                             cli):
    # A command that needs no plugin is untouched.
    shown = cli("memory", "show")
    assert shown.exit_code == 0 and shown.stderr == ""
    # The others' command runs; the broken one is one line on stderr.
    result = cli("postbox-hello")
    assert result.exit_code == 0
    assert result.stdout.strip() == "hello from the postbox plugin"
    assert warnings_in(result.stderr) == [
        "Warning: Hermes plugin 'broken' failed to load (ModuleNotFoundError: No module named "
        "'tests.no_such_plugin_module'); it is skipped, the rest of Hermes works. Fix or "
        "uninstall it (`hermes plugins` lists it).",
        "Warning: Hermes plugin 'faulty' failed in register_commands (ImportError: No module "
        "named 'faulty_dependency'); it is skipped, the rest of Hermes works. Fix or "
        "uninstall it (`hermes plugins` lists it)."]
    assert "faulty-hello" not in cli("--help").stdout
    assert "Traceback" not in result.stderr


def test_a_hook_that_raises_registers_nothing_and_the_others_register(broken_plugins):
    # Tools: the built-ins and postbox's, nothing of the hook that raised after registering.
    loaded = plugins.loaded()
    assert loaded.tools.names() == (
        "memory", "facts", "fact_feedback", "session_search", "count_words")
    assert list(loaded.frontends.entries) == ["discord", "terminal", "web", "cron", "postbox"]
    assert list(loaded.embedding_models) == ["e5", "minilm", "toy"]
    assert [(f.name, f.stage) for f in loaded.failures] == [
        ("broken", "load"), ("faulty", "register_tools"), ("faulty", "register_frontends"),
        ("faulty", "register_embedding_models")]
    assert loaded.failures[-1].error == ("HermesError: register_embedding_models: a model is "
                                         "already named 'e5'")


def test_hermes_plugins_lists_the_failed_plugins(broken_plugins, cli):
    result = cli("plugins", "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert {p["name"] for p in data["plugins"]} >= {"postbox", "faulty"}
    assert "broken" not in {p["name"] for p in data["plugins"]}
    assert [(f["name"], f["stage"]) for f in data["failed"]] == [
        ("broken", "load"), ("faulty", "register_tools"), ("faulty", "register_frontends"),
        ("faulty", "register_embedding_models"), ("faulty", "register_commands")]
    assert data["frontends"][-1] == "postbox" and data["tools"][-1] == "count_words"
    text = cli("plugins").stdout
    assert ("broken: FAILED, did not load: ModuleNotFoundError: No module named "
            "'tests.no_such_plugin_module'") in text
    assert ("faulty: FAILED, raised in register_tools: RuntimeError: the faulty plugin's "
            "tools are broken") in text


def postbox_transcript(tmp_path: Path) -> Path:
    path = tmp_path / "postbox.jsonl"
    path.write_text(json.dumps({"source": "postbox", "started_at": "2026-11-29T10:00:00+00:00",
                                "messages": [{"role": "user", "content": "A letter came"}]})
                    + "\n", encoding="utf-8")
    return path


def test_a_plugin_front_ends_name_is_a_session_source(installed_plugin, cli, tmp_path):
    report = cli("sessions", "import", str(postbox_transcript(tmp_path)), "--json").json()
    assert report["sessions_created"] == 1 and report["errors"] == []
    (session,) = cli("sessions", "list", "--source", "postbox", "--json").json()
    assert session["source"] == "postbox"


def test_without_the_plugin_its_source_is_refused(monkeypatch, cli, tmp_path):
    forget_loaded_plugins(monkeypatch)
    report = cli("sessions", "import", str(postbox_transcript(tmp_path)), "--json").json()
    assert report["sessions_created"] == 0
    (error,) = report["errors"]
    assert error["error"].startswith("'source' must be one of discord, terminal, cron, import, "
                                     "web (got 'postbox')")


def test_a_plugin_embedding_model_is_chosen_by_name_and_indexes(installed_plugin, cli,
                                                                 config_file, clock):

    config_file.write_text("sessions:\n  embeddings: true\n  embedding_model: toy\n",
                           encoding="utf-8")
    settings = load_settings()
    assert settings.sessions.embedding_model == "toy"
    rt = Runtime(settings, clock=clock)
    try:
        store = SessionStore(rt.db, clock=clock)
        session = store.create("owner", "terminal")
        store.append("owner", session.id, "user", "The parcel went to the neighbour")
        store.append("owner", session.id, "assistant", "Noted.")
        assert cli("sessions", "index").exit_code == 0
        rows = rt.db.execute("SELECT user, model FROM message_vectors").fetchall()
        assert [tuple(r) for r in rows] == [("owner", "postbox-toy-16")] * 2
        assert type(rt.memory.embedders.get("toy")).__name__ == "ToyEmbedder"
    finally:
        rt.close()


def test_an_unknown_embedding_model_is_one_config_line(monkeypatch, cli, config_file):
    forget_loaded_plugins(monkeypatch)      # no postbox: `toy` is nobody's model
    config_file.write_text("sessions:\n  embedding_model: toy\n", encoding="utf-8")
    result = cli("memory", "show")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == (f"Error: {config_file}: sessions.embedding_model: unknown "
                             "embedding model; use one of e5, minilm (a plugin can register "
                             "more) (got 'toy')\n")


async def test_a_plugin_tool_that_opts_in_is_offered_to_mcp_clients(installed_plugin, rt):
    """Tool(..., mcp=True): listed with the schema the plugin wrote, called as the model calls
    it, for the server's user; a tool without it (the chat's own `facts`) is not offered."""
    from mcp import Client

    from hermes.frontends import mcp_server

    async with Client(mcp_server.build_server(rt.memory, "alice")) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert "facts" not in listed and "session_search" not in listed
        counted = listed["count_words"]
        assert counted.input_schema == {"type": "object", "required": ["text"], "properties": {
            "text": {"type": "string", "description": "Any text."}}}
        assert counted.annotations.read_only_hint is True
        result = await client.call_tool("count_words", {"text": "one two three"})
        assert not result.is_error
        assert json.loads(result.content[0].text) == {"words": 3, "user": "alice"}
        missing = await client.call_tool("count_words", {})
        assert missing.is_error
        # the sessions' sources a client may ask for: the built-in ones and the plugin's
        source = listed["sessions_list"].input_schema["properties"]["source"]
        assert source["anyOf"][0]["enum"] == ["discord", "terminal", "cron", "import", "web",
                                              "postbox"]


def test_a_plugin_front_end_has_its_own_config_section(installed_plugin, cli, config_file):
    """`postbox:` in config.yaml is the plugin's section (register(..., config=Model)),
    validated like a built-in one: defaults without it, one line for a wrong key. Its
    identities are plumbing, as Hermes's are."""
    from hermes.memory.sessions.records import speaker_name

    assert load_settings().section("postbox").file == "postbox.txt"
    config_file.write_text("postbox:\n  file: letters.txt\n", encoding="utf-8")
    assert load_settings().section("postbox").file == "letters.txt"
    config_file.write_text("postbox:\n  folder: letters\n", encoding="utf-8")
    wrong = cli("memory", "show")
    assert wrong.exit_code == 2
    assert wrong.stderr == f"Error: {config_file}: postbox.folder: unknown key\n"
    assert speaker_name("postbox:ana") is None and speaker_name("Ana") == "Ana"


def test_without_the_plugin_its_config_section_is_an_unknown_key(monkeypatch, cli, config_file):
    forget_loaded_plugins(monkeypatch)
    config_file.write_text("postbox:\n  file: letters.txt\n", encoding="utf-8")
    gone = cli("memory", "show")
    assert gone.exit_code == 2
    assert gone.stderr == f"Error: {config_file}: postbox: unknown key\n"


def test_a_tool_written_once_is_the_models_an_mcp_clients_and_the_command_lines(
        installed_plugin, cli):
    """`hermes tools call` runs a registered tool as the model does (the same ToolBox): the
    plugin's count_words, offered to the model and to MCP clients above, here too."""
    listed = cli("tools", "list").stdout
    assert "count_words (mcp too): Count the words of text." in listed
    assert "facts: Long-term fact store." in listed
    result = cli("tools", "call", "count_words", '{"text": "one two"}', "--user", "alice")
    assert result.exit_code == 0 and json.loads(result.stdout) == {"words": 2, "user": "alice"}
    refused = cli("tools", "call", "count_words", "{not json")
    assert refused.exit_code == 1 and refused.stderr.startswith("Error: count_words: ")
    unknown = cli("tools", "call", "teleport")
    assert unknown.exit_code == 1 and "Unknown tool 'teleport'" in unknown.stderr


def test_the_built_in_sources_are_the_built_in_front_ends_and_imports():
    """SOURCES (read without loading the plugins, for a cold `--source`) and MCP's SourceName
    (its schema's default) name what the default plugin registers, plus imported sessions: a
    built-in front-end added to builtin.py and not there (or taken out) fails here."""
    from typing import get_args

    from hermes.frontends import builtin
    from hermes.frontends.mcp_server import SourceName
    from hermes.memory.sessions.records import SOURCES

    registered: list[str] = []
    builtin.register_frontends(lambda name, *args, **kwargs: registered.append(name))
    assert set(SOURCES) == {*registered, "import"}
    assert get_args(SourceName) == SOURCES
