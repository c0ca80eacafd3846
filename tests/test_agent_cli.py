"""`hermes ask`, piped `hermes chat` and `hermes context` through the real command line."""

from __future__ import annotations

import pytest

from hermes.config import load_settings
from hermes.runtime import Runtime
from tests.fakellm import service_unavailable


def stored_sessions():
    rt = Runtime(load_settings())
    try:
        store = rt.memory.sessions
        return [(s, store.messages("owner", s.id)) for s in store.list_sessions("owner")]
    finally:
        rt.close()


def test_ask_streams_the_answer_and_keeps_a_closed_one_turn_session(cli, fake_model):
    fake_model.reply("Paris is the capital.")
    result = cli("ask", "capital of France?")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Paris is the capital.\n"
    [(session, messages)] = stored_sessions()
    assert session.source == "terminal" and session.ended_at is not None
    assert [(m.role, m.content) for m in messages] == [
        ("user", "capital of France?"), ("assistant", "Paris is the capital.")]


def test_ask_json(cli, fake_model):
    fake_model.reply("42")
    data = cli("ask", "answer?", "--json").json()
    assert data["text"] == "42" and data["error"] is None and data["assistant_message_id"]


def test_ask_without_a_model_says_exactly_what_to_set(cli):
    result = cli("ask", "hello")
    assert result.exit_code == 2
    assert "HERMES_MODEL__NAME=openai/gpt-4.1-mini" in result.stderr
    assert "model.name" in result.stderr and "Traceback" not in result.stderr
    # memory commands still work
    assert cli("memory", "add", "Uses vim").exit_code == 0


def test_ask_with_the_provider_down_is_one_line_and_keeps_the_question(cli, fake_model):
    for _ in range(4):
        fake_model.error(service_unavailable())
    result = cli("ask", "still there?")
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0 and "unavailable" in result.stderr
    [(session, messages)] = stored_sessions()
    assert [(m.role, m.content) for m in messages] == [("user", "still there?")]


def test_context_refresh_and_show_without_a_model(cli):
    assert cli("context", "show").exit_code == 1
    rt = Runtime(load_settings())
    store = rt.memory.sessions
    session = store.create("owner", "discord")
    store.append("owner", session.id, "user", "plan the migration to postgres 17")
    store.set_summary("owner", session.id, title="Postgres 17 migration",
                      summary="Planned the upgrade; backups first.")
    rt.close()
    refreshed = cli("context", "refresh", "--json").json()
    assert refreshed["chars"] <= 4000 and "Postgres 17 migration" in refreshed["text"]
    shown = cli("context", "show")
    assert "## discord" in shown.stdout and "backups first" in shown.stdout
    assert "Still open" in shown.stdout


def test_ask_stores_an_explicit_remember_request_before_the_reply(cli, fake_model):
    fake_model.reply("Noted.")
    assert cli("ask", "Remember that my bike is a blue Brompton.").exit_code == 0
    found = cli("facts", "search", "Brompton", "--json").json()
    assert found and "Brompton" in str(found)
    assert "Brompton" in fake_model.last.tail  # recalled in the same turn


# `hermes chat` with piped input: the line-by-line loop

def test_chat_without_a_model_says_what_to_set(cli):
    result = cli("chat", input="hello\n")
    assert result.exit_code == 2 and "HERMES_MODEL__NAME" in result.stderr


def test_chat_runs_turns_in_one_session_and_new_starts_another(cli, fake_model):
    fake_model.reply("one").reply("two").reply("three")
    result = cli("chat", input="first\nsecond\n/new\nthird\n/exit\n")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.split() == ["one", "two", "three"]
    by_session = {s.id: [m.content for m in msgs] for s, msgs in stored_sessions()}
    assert sorted(by_session.values()) == [["first", "one", "second", "two"], ["third", "three"]]
    # the second turn saw the first in its history
    second = fake_model.requests[1]
    assert [m["content"].rsplit("\n\n", 1)[-1] for m in second.messages[1:]] == [
        "first", "one", "second"]
    # ... exactly as it was sent: the first request is a prefix of the second
    assert second.messages[:2] == fake_model.requests[0].messages


def test_piped_slash_commands_run_as_in_the_repl_and_never_reach_the_model(cli, fake_model):
    rt = Runtime(load_settings())
    mine = rt.memory.facts.add("owner", "The user lives in Lisbon").fact
    theirs = rt.memory.facts.add("bob", "Bob lives in Oslo").fact
    rt.close()
    fake_model.reply("noted")
    result = cli("chat", input=(f"/forget {mine.id}\n/forget {theirs.id}\n/help\n/frobnicate\n"
                                "/usr/bin is full again\n"))
    assert result.exit_code == 0, result.stderr
    # the model saw only the message that merely starts with a slash (its reply, and the
    # background calls after leaving, hold no command)
    sent = "\n".join(str(m["content"]) for r in fake_model.requests for m in r.messages)
    assert "/usr/bin is full again" in sent
    assert not any(c in sent for c in ("/forget", "/help", "/frobnicate"))
    assert "/pending" in result.stdout                       # /help lists the REPL's commands
    assert "Unknown command /frobnicate" in result.stderr    # one line, not a message
    rt = Runtime(load_settings())
    assert rt.memory.facts.get("owner", mine.id).status == "forgotten"
    assert rt.memory.facts.get("bob", theirs.id).status == "active"   # another user's: untouched
    rt.close()
    stored = [m.content for _, msgs in stored_sessions() for m in msgs]
    assert not any(text.startswith(("/forget", "/help", "/frobnicate")) for text in stored)


def test_leaving_a_piped_chat_ends_and_summarises_its_session(cli, fake_model):
    # A session an earlier process ended but exited before summarising: done at this start.
    rt = Runtime(load_settings())
    store = rt.memory.sessions
    earlier = store.create("owner", "terminal", channel_key="terminal:x:chat")
    store.append("owner", earlier.id, "user", "good morning")
    store.close("owner", earlier.id)
    rt.close()
    fake_model.reply("Hi!")
    assert cli("chat", input="hello there\n").exit_code == 0
    titles = {s.id: (s.ended_at is not None, s.title) for s, _ in stored_sessions()}
    assert titles[earlier.id] == (True, "good morning")
    assert sorted(titles.values()) == [(True, "good morning"), (True, "hello there")]


def test_chat_reports_a_provider_error_and_goes_on(cli, fake_model):
    for _ in range(4):
        fake_model.error(service_unavailable())
    fake_model.reply("back")
    result = cli("chat", input="a\nb\n")
    assert result.exit_code == 0
    assert "unavailable" in result.stderr and "back" in result.stdout


def test_ask_learns_facts_after_answering(cli, fake_model):
    """`hermes ask` attaches the extraction worker like every entry point: the answer is
    printed first, then the turn's durable facts reach the fact store before the process ends."""
    fake_model.reply("Congratulations on the move!")
    fake_model.reply(
        '[{"action": "create", "content": "The user moved to Lisbon in November 2026.", '
        '"type": "episodic", "category": "general", "entities": ["Lisbon"], "tags": []}]'
    )
    result = cli("ask", "I finally moved to Lisbon this month, the flat is near the river.")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Congratulations on the move!")
    found = cli("facts", "probe", "Lisbon", "--json").json()
    assert [f["content"] for f in found] == ["The user moved to Lisbon in November 2026."]
    assert len(fake_model.requests) == 2  # one reply, one extraction call


# A failure is one line ------------------------------------------------------------------------

def test_a_refused_connection_is_one_line_that_names_it(cli, monkeypatch, hermes_home):
    import socket

    from hermes.agent import llm

    with socket.socket() as probe:       # a port on this machine that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://127.0.0.1:{port}/v1"
    monkeypatch.setenv("HERMES_MODEL__NAME", "openai/gpt-4o-mini")
    monkeypatch.setenv("HERMES_MODEL__API_BASE", base)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    waits: list[float] = []

    async def no_sleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(llm, "default_sleep", no_sleep)
    result = cli("ask", "anyone there?")
    assert result.exit_code == 1 and len(waits) == 3          # retried, quietly
    assert result.stderr.count("\n") == 1 and result.stdout == ""
    assert result.stderr.startswith(f"Error: Cannot reach the model openai/gpt-4o-mini at {base}")
    assert "connection refused" in result.stderr and "InternalServerError" not in result.stderr
    assert "retrying" in (hermes_home / "hermes.log").read_text()


def test_a_failed_background_extraction_is_recorded_not_printed(cli, fake_model):
    fake_model.reply("Congratulations on the move!")
    fake_model.error(service_unavailable())       # the extraction call: the provider went down
    result = cli("ask", "I finally moved to Lisbon this month, the flat is near the river.")
    assert result.exit_code == 0
    assert result.stdout == "Congratulations on the move!\n" and result.stderr == ""
    assert fake_model.sleeps == []                 # no backoff before the process may exit
    stats = cli("stats", "--json").json()
    assert stats["failures"] == 1 and "unavailable" in stats["last_failure"]
    text = cli("stats").stdout
    assert "1 run(s) got no answer" in text and "cost          unknown" in text
    # (the model-call table above it prices the answered chat call: $0.0000 for the fake)
    assert "$0" not in text.split("Extraction for")[1]


def test_an_ollama_model_without_api_base_is_asked_at_litellms_default_address(
        cli, monkeypatch):
    """Not refused for a missing OLLAMA_API_BASE: litellm's own default is tried, and the
    failure names it (nothing listens on port 11434 here; skipped if something does)."""
    import socket

    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 11434)) == 0:
            pytest.skip("something listens on localhost:11434")
    monkeypatch.setenv("HERMES_MODEL__NAME", "ollama/llama3.1")
    monkeypatch.setenv("HERMES_MODEL__RETRIES", "0")
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    result = cli("ask", "anyone there?")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        "Error: Cannot reach the model ollama/llama3.1 at http://localhost:11434 (litellm's "
        "default, without model.api_base or OLLAMA_API_BASE) after 1 attempt: ")
    assert result.stderr.endswith("is the server running, and is its address right?\n")
