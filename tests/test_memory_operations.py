"""The one set of memory operations (hermes.memory.operations): every surface reads and writes
memory through it, for the scope it is given, and shows each record in one JSON shape."""

from __future__ import annotations

import json

import pytest

from hermes.agent.llm import ToolCall
from hermes.agent.tools import ToolBox
from hermes.errors import NotFound
from hermes.frontends.mcp_server import MemoryTools
from hermes.memory.operations import MemoryOperations, Scope
from hermes.memory.operations.shapes import fact_json, message_json, session_json

ALICE, BOB = Scope("alice"), Scope("bob")


def tool(rt, user: str, name: str, **args) -> dict:
    outcome = ToolBox(rt.memory, user).run(ToolCall("1", name, json.dumps(args)))
    return json.loads(outcome.content)


def test_a_fact_has_one_shape_for_the_model_and_for_mcp(rt):
    ops = MemoryOperations(rt.memory)
    added = ops.add(ALICE, "Alice keeps the Postgres backups on the NAS",
                    entities=["Postgres", "NAS"], tags=["backups"])
    ops.add(ALICE, "Alice owns a cat", category="person")
    chat = tool(rt, "alice", "facts", action="search", query="postgres backups")
    mcp = MemoryTools(rt.memory, "alice").facts_search("postgres backups")
    # a search's fact is the fact's shape, with why it was found
    assert chat == mcp == {"facts": [{**fact_json(added.fact),
                                      "found_by": "words postgres, backups"}]}
    assert mcp["facts"][0] == {"id": added.id, "content": added.fact.content, "trust": 0.5,
                               "category": "general", "entities": ["Postgres", "NAS"],
                               "tags": ["backups"], "found_by": "words postgres, backups"}
    # probe and reason, written by either surface, give the same records too
    assert (tool(rt, "alice", "facts", action="probe", entity="NAS")
            == MemoryTools(rt.memory, "alice").facts_probe("NAS"))
    forgotten = tool(rt, "alice", "facts", action="forget", id=added.id)
    assert forgotten == {"status": "forgotten", "id": added.id}


def test_sessions_have_one_shape_and_the_model_reads_them_clipped(rt):
    store = rt.memory.sessions
    chat = store.create("alice", "terminal")
    long = "the deploy failed because of the nginx config " * 20
    store.append("alice", chat.id, "user", long)
    model = tool(rt, "alice", "session_search", action="show", session_id=chat.id)
    mcp = MemoryTools(rt.memory, "alice").sessions_show(chat.id)
    assert model.keys() == mcp.keys()
    assert model["session"].keys() == mcp["session"].keys()
    (said,) = mcp["messages"]
    assert said == message_json(store.messages("alice", chat.id)[0])
    assert said["content"] == long
    assert model["messages"][0].keys() == said.keys()
    clipped = model["messages"][0]["content"]
    assert len(clipped) == 300 and clipped.endswith("…")
    assert mcp["session"] == session_json(store.get("alice", chat.id))


def test_an_identity_is_never_shown_as_a_speaker(rt):
    store = rt.memory.sessions
    chat = store.create("alice", "terminal")
    store.append("alice", chat.id, "user", "hello", speaker="terminal:root")
    store.append("alice", chat.id, "user", "hi", speaker="Alice")
    shown = MemoryTools(rt.memory, "alice").sessions_show(chat.id)["messages"]
    assert "speaker" not in shown[0] and shown[1]["speaker"] == "Alice"


def test_every_operation_is_scoped_to_its_user(rt):
    ops = MemoryOperations(rt.memory)
    bobs = ops.add(BOB, "Bob keeps his Postgres dumps on S3", entities=["Postgres"])
    session = rt.memory.sessions.create("bob", "terminal")
    rt.memory.sessions.append("bob", session.id, "user", "where are my postgres dumps")
    ops.basic_add(BOB, "Bob likes tea")
    assert ops.search(ALICE, "postgres") == [] and ops.probe(ALICE, "Postgres") == []
    assert ops.list_facts(ALICE) == [] and ops.sessions_search(ALICE, "postgres dumps") == []
    assert ops.sessions_list(ALICE) == [] and ops.basic_entries(ALICE) == []
    for reach in (lambda: ops.get(ALICE, bobs.id), lambda: ops.rate(ALICE, bobs.id, False),
                  lambda: ops.forget(ALICE, bobs.id), lambda: ops.history(ALICE, bobs.id),
                  lambda: ops.update(ALICE, bobs.id, "Bob keeps nothing"),
                  lambda: ops.session(ALICE, session.id),
                  lambda: ops.session_messages(ALICE, session.id)):
        with pytest.raises(NotFound):
            reach()
    assert ops.get(BOB, bobs.id).active and ops.get(BOB, bobs.id).trust == 0.5
    assert [e.text for e in ops.basic_entries(BOB)] == ["Bob likes tea"]
