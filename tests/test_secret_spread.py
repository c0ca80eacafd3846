"""Where a secret typed into a chat ends up: every planted secret of the corpus is followed
through the real turn engine, the fast lane, extraction, the summariser (model and no-model),
the context file and ``hermes.log``, with a model that repeats whatever it is given (the worst
case: a summariser that quotes the conversation). Counted at the fake litellm boundary and in
the database and files: 0 places hold a secret."""

from __future__ import annotations

import io
import json
import logging

import pytest

from hermes.agent.summarize import summarize_session
from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.daemon import setup_logging
from hermes.learn.worker import ExtractionWorker
from hermes.memory import context as context_file
from hermes.memory.sessions.store import SessionStore
from hermes.memory.transfer import export_user
from hermes.runtime import Runtime
from tests.fakellm import Reply
from tests.test_secrets import corpus

SECRETS = corpus("secret")
# The echo's replies run to 3,000 characters; in the fake's usual 4-character pieces they were
# ~42,000 chunks through litellm's stream wrapper, most of this file's time. Where a reply is
# cut does not matter here (a reply is redacted as it is recorded, not piece by piece; the
# cutting itself is tested in test_turn and test_llm).
ECHO_CHUNK = 256
FOLLOW_UP = ("Also, I need to plan the migration of the staging database next week, it has "
             "grown a lot since the summer.")


def echoing_model(fake_model):
    """Every call answers with what it was given, as the kind of call it is."""

    def echo(request):
        fake_model.respond(echo)  # always one more step queued
        user_text = "\n".join(str(m.get("content") or "") for m in request.messages
                              if m.get("role") == "user")
        last_user = next((str(m.get("content") or "") for m in reversed(request.messages)
                          if m.get("role") == "user"), "")
        if request.tools:
            text = f"Noted: {last_user}"
        elif "long-term memory of a personal assistant" in request.system:
            text = json.dumps([{"action": "create", "content": f"The user said {last_user[:180]}",
                                "category": "general", "entities": [], "tags": []}])
        elif "title and summary" in request.system:
            text = json.dumps({"title": "Notes", "summary": user_text[:600]})
        else:
            text = user_text[:3000]  # the context note: the material, repeated
        return Reply(text=text, chunk_size=ECHO_CHUNK)

    fake_model.respond(echo)


def places(rt, fake_model, secret: str) -> dict[str, int]:
    """How many places of each kind hold ``secret``."""
    db = rt.db
    found: dict[str, int] = {}

    def rows(sql: str, *params) -> int:
        return sum(1 for row in db.execute(sql, params).fetchall()
                   if any(secret in str(v) for v in row if v is not None))

    found["messages"] = rows("SELECT content, tool_args FROM messages")
    phrase = '"' + secret.replace('"', " ") + '"'
    for index in ("messages_fts", "sessions_fts", "facts_fts"):
        found[index] = db.execute(
            f"SELECT count(*) FROM {index} WHERE {index} MATCH ?", [phrase]).fetchone()[0]
    found["sessions"] = rows("SELECT title, summary FROM sessions")
    found["facts"] = rows("SELECT content, tags, entity_names FROM facts")
    found["entities"] = rows("SELECT name FROM entities")
    found["basic_memory"] = rows("SELECT text FROM basic_memory")
    found["model_calls"] = sum(1 for r in fake_model.requests
                               if secret in json.dumps(r.messages, ensure_ascii=False))
    path = context_file.path_for(rt, "owner")  # the file itself, not read()'s redacted view
    note = path.read_text(encoding="utf-8") if path.exists() else ""
    found["context_file"] = int(secret in note)
    log = rt.settings.home_path / "hermes.log"
    found["hermes.log"] = log.read_text(encoding="utf-8").count(secret) if log.exists() else 0
    found["export"] = sum(secret in line for line in export_user(db, "owner"))
    return found


async def plant_everything(rt, agent, fake_model, planted=SECRETS) -> None:
    worker = ExtractionWorker(rt.memory)
    worker.attach(agent)
    sessions = rt.memory.sessions
    echoing_model(fake_model)
    for index, (text, _) in enumerate(planted):
        session = sessions.create("owner", "terminal")
        # long enough not to be small talk: the summariser model gets the session
        await agent.turn("owner", session.id, f"{text}\n{FOLLOW_UP}").run()
        await worker.drain()
        sessions.close("owner", session.id)
        # half through the model summariser, half through the no-model summary
        await summarize_session(rt.memory, agent.background_llm if index % 2 else None, "owner",
                                session.id)
    plain = await context_file.refresh(rt.memory, "owner", None)
    leaked_before = [s for _, s in planted if s in plain]
    written = await context_file.refresh(rt.memory, "owner", agent.background_llm)
    assert plain and written and leaked_before == []


@pytest.fixture
def logged(settings):
    root = logging.getLogger()
    before = list(root.handlers), root.level
    setup_logging(settings, console=io.StringIO())
    yield
    for handler in list(root.handlers):
        if getattr(handler, "_hermes", False):
            root.removeHandler(handler)
            handler.close()
    root.handlers[:], root.level = before


async def test_no_planted_secret_spreads_anywhere(fake_model, clock, logged):
    rt = Runtime(load_settings(), clock=clock)
    try:
        agent = Agent(rt.memory)
        await plant_everything(rt, agent, fake_model)
        leaks = {}
        for _text, secret in SECRETS:
            spread = {k: v for k, v in places(rt, fake_model, secret).items() if v}
            if spread:
                leaks[secret] = spread
        assert leaks == {}
        # the harness did reach every place: markers are where the secrets would have been
        markers = rt.db.execute(
            "SELECT count(*) FROM messages WHERE content LIKE '%[redacted %'").fetchone()[0]
        assert markers >= len(SECRETS)
        assert any("[redacted " in json.dumps(r.messages) for r in fake_model.requests
                   if "long-term memory" in r.system)
        assert any("[redacted " in json.dumps(r.messages) for r in fake_model.requests
                   if "title and summary" in r.system)
    finally:
        rt.close()


async def test_the_harness_sees_spread_when_message_redaction_is_off(
        fake_model, clock, logged, monkeypatch):
    monkeypatch.setenv("HERMES_SESSIONS__REDACT_SECRETS", "false")
    rt = Runtime(load_settings(), clock=clock)
    try:
        agent = Agent(rt.memory)
        await plant_everything(rt, agent, fake_model, [
            ("remember that my gitlab token is glpat-xY7zK2mN9pQ4rS6tU8vW",
             "glpat-xY7zK2mN9pQ4rS6tU8vW"),
            ("my PIN is 4821", "4821"), ("the wifi password is sunflower", "sunflower")])
        spread = places(rt, fake_model, "glpat-xY7zK2mN9pQ4rS6tU8vW")
        assert spread["messages"] and spread["messages_fts"] and spread["model_calls"]
        # summaries, the context file and the log are redacted whatever the setting says
        assert spread["sessions"] == spread["context_file"] == spread["hermes.log"] == 0
    finally:
        rt.close()


async def test_the_reply_says_once_that_a_secret_was_removed(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    try:
        agent = Agent(rt.memory)
        session = rt.memory.sessions.create("owner", "terminal")
        fake_model.reply("Sure.")
        result = await agent.turn(
            "owner", session.id,
            "my PIN is 4821, and the key is sk-proj-Xa81kQ9vLmN2pR7sT4uW6yZ0bC3dE5fG8hJ1a1f3"
        ).run()
        assert result.text.startswith("Sure.")
        assert result.text.count("removed from memory") == 1
        assert "[redacted PIN]" in result.text and "[redacted openai key …a1f3]" in result.text
        sent = json.dumps(fake_model.last.messages)
        assert "4821" not in sent and "Xa81kQ9" not in sent
        fake_model.reply("Hello again.")
        again = await agent.turn("owner", session.id, "thanks").run()
        assert "removed from memory" not in again.text
    finally:
        rt.close()


async def test_a_failed_turn_still_says_a_secret_was_removed(fake_model, clock, monkeypatch):
    monkeypatch.delenv("HERMES_MODEL__NAME")
    rt = Runtime(load_settings(), clock=clock)
    try:
        agent = Agent(rt.memory)
        session = rt.memory.sessions.create("owner", "terminal")
        result = await agent.turn("owner", session.id, "my PIN is 4821").run()
        assert result.error and "removed from memory" in result.error
    finally:
        rt.close()


async def test_a_tool_result_quoting_an_old_secret_reaches_the_model_redacted(
        fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    try:
        old = SessionStore(rt.db, clock=rt.clock, redact_secrets=False)  # an older Hermes
        earlier = old.create("owner", "terminal")
        old.append("owner", earlier.id, "user", "deploy with glpat-xY7zK2mN9pQ4rS6tU8vW today")
        old.close("owner", earlier.id)
        agent = Agent(rt.memory)
        session = rt.memory.sessions.create("owner", "terminal")
        fake_model.tool_call("session_search", {"action": "search", "query": "deploy"})
        fake_model.reply("You deployed with a token.")
        await agent.turn("owner", session.id, "how did I deploy last time?").run()
        tool_messages = [m for m in fake_model.last.messages if m.get("role") == "tool"]
        assert tool_messages and "deploy" in tool_messages[0]["content"]
        assert "glpat-xY7zK2mN9pQ4rS6tU8vW" not in json.dumps(fake_model.last.messages)
    finally:
        rt.close()


# Issue 30's pass: four secrets pasted the ways people paste them, each phrasing a message of its
# own, followed through every place (12 kinds, counted by places()).
PASTED = {
    "sk-proj-Xa81kQ9vLmN2pR7sT4uW6yZ0bC3dE5fG8hJ1a1f3": [
        "here is my OpenAI key: sk-proj-Xa81kQ9vLmN2pR7sT4uW6yZ0bC3dE5fG8hJ1a1f3",
        "OPENAI_API_KEY=sk-proj-Xa81kQ9vLmN2pR7sT4uW6yZ0bC3dE5fG8hJ1a1f3 in the .env"],
    "AKIAIOSFODNN7EXAMPLE": [
        "the AWS access key is AKIAIOSFODNN7EXAMPLE for the backup bucket",
        "aws_access_key_id = AKIAIOSFODNN7EXAMPLE"],
    "Tr0ub4dor&3": [
        "db password is Tr0ub4dor&3, the wifi password is correcthorsebatterystaple",
        "the staging database password Tr0ub4dor&3 (postgres user)",
        "pw: Tr0ub4dor&3",
        "connect with postgres://app:Tr0ub4dor&3@db.internal/app"],
    "correcthorsebatterystaple": [
        "the wifi password is correcthorsebatterystaple, guest network too",
        "wifi passphrase correcthorsebatterystaple",
        "the db password is hunter22 and the wifi password is correcthorsebatterystaple"],
}


async def test_the_passes_four_pasted_secrets_reach_none_of_the_twelve_places(
        fake_model, clock, logged):
    rt = Runtime(load_settings(), clock=clock)
    try:
        agent = Agent(rt.memory)
        planted = [(text, secret) for secret, texts in PASTED.items() for text in texts]
        await plant_everything(rt, agent, fake_model, planted)
        kinds = set()
        leaks = {}
        for secret in PASTED:
            spread = places(rt, fake_model, secret)
            kinds |= set(spread)
            if any(spread.values()):
                leaks[secret] = {k: v for k, v in spread.items() if v}
        assert len(kinds) == 12
        assert leaks == {}
    finally:
        rt.close()
