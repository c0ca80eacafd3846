"""Why a conversation was found: when the home's facts lifted it (hermes.memory.sessions.
fact_evidence), its hit names them (SearchHit.learned, "facts" in matched_in), and every path
shows them alike: `hermes sessions search` ("Learned here: fact #N ...", "through a fact" when
no word of the query is in the shown match), --json, the model's session_search tool, MCP's
sessions_search and the web panel. Only the user's own facts are ever shown."""

import json

from hermes.agent.llm import ToolCall
from hermes.agent.tools import ToolBox
from hermes.frontends.mcp_server import MemoryTools
from hermes.memory.sessions import fact_evidence
from tests.test_session_facts import FACT, QUESTION, home, learn, stores


def test_a_conversation_found_through_a_fact_names_it(db, clock):
    facts, store = stores(db, clock, False)
    ids = home(store, clock)
    fact = learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    hits = {h.session.id: h for h in store.search("owner", QUESTION, limit=5)}
    tesla = hits[ids["tesla"]]
    assert tesla.learned == [(fact.id, FACT)] and "facts" in tesla.matched_in
    assert tesla.to_json()["learned"] == [{"fact_id": fact.id, "content": FACT}]
    # found by their words ("drive"), not lifted by the fact: no reason given
    assert hits[ids["lake"]].learned == [] and "facts" not in hits[ids["lake"]].matched_in
    assert store.search("owner", QUESTION, limit=5, facts=())[0].learned == []


def test_another_users_fact_is_never_shown_as_a_reason(db, clock):
    facts, store = stores(db, clock, False)
    ids = home(store, clock)
    # bob's fact citing the owner's conversation, passed to the owner's search (a caller's
    # mistake): its text is bob's memory, never shown to the owner
    bobs = learn(facts, "bob", FACT, ids["tesla"], [ids["keys"]])
    (hit,) = facts.search("bob", QUESTION, limit=5)
    assert hit.id == bobs.id
    assert fact_evidence.gather(db, "owner", [hit]).learned == {}
    assert all(h.learned == [] for h in store.search("owner", QUESTION, facts=[hit]))


def test_every_path_shows_the_reason_alike(rt, cli):
    store, facts = rt.memory.sessions, rt.memory.facts
    ids = home(store, rt.clock)
    fact = learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    shown = cli("sessions", "search", QUESTION, "--user", "owner").stdout
    first = shown.split("\n\n")[0]
    assert f"Learned here: fact #{fact.id} {FACT}" in first
    assert "through a fact" in first and "any word" not in first
    assert "Learned here" not in shown.split("\n\n")[1]  # "drive": a word matched
    as_json = json.loads(cli("sessions", "search", QUESTION, "--user", "owner",
                             "--json").stdout)
    assert as_json[0]["learned"] == [{"fact_id": fact.id, "content": FACT}]
    assert "**" not in as_json[0]["snippet"]  # no word of the question is in that turn
    tool = ToolBox(rt.memory, "owner").run(ToolCall("1", "session_search", json.dumps(
        {"action": "search", "query": QUESTION})))
    assert json.loads(tool.content)["results"][0]["learned"] == [{"fact_id": fact.id,
                                                                  "content": FACT}]
    mcp = MemoryTools(rt.memory, "owner").sessions_search(QUESTION)
    assert mcp["results"][0]["learned"] == [{"fact_id": fact.id, "content": FACT}]
    assert mcp["results"][1]["learned"] == []


async def test_the_web_panel_shows_the_reason(rt):
    from hermes.frontends.web.app import WebContext
    from tests.web_client import Panel

    store, facts = rt.memory.sessions, rt.memory.facts
    ids = home(store, rt.clock)
    fact = learn(facts, "owner", FACT, ids["tesla"], [ids["keys"]])
    panel = await Panel(WebContext(rt.memory)).login()
    try:
        page = (await panel.get("/sessions", params={"q": QUESTION})).text
    finally:
        await panel.close()
    assert f'<a href="/facts/{fact.id}">fact #{fact.id}</a> The user&#39;s new car' in page


def test_a_hit_names_its_facts_only_where_they_raised_the_shown_turn():
    evidence = fact_evidence.Evidence({1: 1.0}, {5: (1, 1.0)}, (1.0, 0.25))
    assert fact_evidence.lifted(evidence, 1, 6) and fact_evidence.lifted(evidence, 1, 5)
    assert not fact_evidence.lifted(evidence, 2, 7)
    by_meaning = fact_evidence.Evidence({1: 1.0}, {5: (1, 1.0)}, (0.0, 1.0))  # source turns only
    assert fact_evidence.lifted(by_meaning, 1, 5) and not fact_evidence.lifted(by_meaning, 1, 6)
