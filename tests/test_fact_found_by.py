"""Why each fact was found, said to every reader of a fact search, not only to `hermes facts
search`'s person: MCP's facts_search and the model's facts tool carry ``found_by`` (the query's
words the fact holds, those only in its conversation, its closeness in meaning), so an MCP
client or the model can tell a fact that holds the words from one that is merely near
(review rev5: "Kyoto" listed "I grow Maskotka tomatoes on my balcony" at MiniLM 0.29, with
nothing to say it shared no word). The toy model of tests/test_fact_vectors.py stands in."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("numpy")

from hermes.agent.llm import ToolCall  # noqa: E402
from hermes.agent.tools import ToolBox  # noqa: E402
from hermes.frontends.mcp_server import MemoryTools  # noqa: E402
from hermes.memory.embeddings import embedders as embeddings  # noqa: E402
from tests.test_fact_vectors import ToyEmbedder  # noqa: E402


@pytest.fixture
def by_meaning(config_file, monkeypatch):
    config_file.write_text("sessions:\n  embeddings: true\n", encoding="utf-8")
    monkeypatch.setitem(embeddings.MODELS, "minilm", ToyEmbedder)


def test_mcp_and_the_tool_say_why_each_fact_was_found(by_meaning, cli, rt):
    tesla = cli("facts", "add", "The user owns a Tesla Model 3", "--json").json()["id"]
    wash = cli("facts", "add", "The user washes the car on Sundays", "--json").json()["id"]
    cli("facts", "add", "--user", "bob", "Bob drives an automobile to work")
    query = "which car do I drive?"
    mcp = MemoryTools(rt.memory, "owner").facts_search(query)["facts"]
    tool = json.loads(ToolBox(rt.memory, "owner").run(ToolCall("1", "facts", json.dumps(
        {"action": "search", "query": query}))).content)["facts"]
    for found in (mcp, tool):
        why = {f["id"]: f["found_by"] for f in found}
        assert set(why) == {tesla, wash}  # bob's never
        assert why[wash].startswith("words car") and "meaning" in why[wash]
        assert why[tesla].startswith("meaning")  # no word of the query in it


def test_the_chat_commands_say_what_each_result_matched(by_meaning, cli, rt):
    # /search and /sessions search in the REPL and on Discord (hermes.frontends.commands)
    # listed results with nothing to tell a word match from a neighbour in meaning.
    from hermes.frontends.commands import MemoryCommands
    from hermes.memory.operations import Scope
    from tests.histories import say

    tesla = cli("facts", "add", "The user owns a Tesla Model 3", "--json").json()["id"]
    say(rt.memory.sessions, rt.clock, "owner", "my car is blue")
    commands, scope = MemoryCommands(rt.memory), Scope("owner")
    facts = commands.search(scope, "which car do I drive?")
    assert f"[{tesla}] The user owns a Tesla Model 3 (meaning " in facts
    found = commands.session_search(scope, "automobile colour")
    assert found.endswith("(by meaning)") and found.count("\n") == 0


async def test_the_web_panels_fact_search_says_why_each_was_found(by_meaning, cli, rt):
    from hermes.frontends.web.app import WebContext
    from tests.web_client import Panel

    cli("facts", "add", "The user owns a Tesla Model 3")
    cli("facts", "add", "The user washes the car on Sundays")
    panel = await Panel(WebContext(rt.memory)).login()
    try:
        page = (await panel.get("/facts", params={"q": "which car do I drive?"})).text
        listing = (await panel.get("/facts")).text
    finally:
        await panel.close()
    assert '<span class="found">meaning ' in page  # the Tesla: no word of the query
    assert '<span class="found">words car; meaning ' in page
    assert 'class="found"' not in listing  # a list is not a search: nothing to say


def test_a_fact_search_with_no_words_is_one_line_everywhere(rt):
    # `hermes facts search 🍅` and every session search said "Nothing to search for ... it has
    # no words."; MCP's facts_search and the model's facts tool answered an empty list, as if
    # nothing matched (review rev5).
    from hermes.errors import QueryError

    line = "Nothing to search for in '🍅': it has no words."
    with pytest.raises(QueryError, match=line):
        MemoryTools(rt.memory, "owner").facts_search("🍅")
    tool = json.loads(ToolBox(rt.memory, "owner").run(ToolCall("1", "facts", json.dumps(
        {"action": "search", "query": "🍅"}))).content)
    assert tool == {"error": line}
