"""A fact written by a command (``hermes facts add``/``update``, the MCP server's facts_add) is
found by meaning at once: no daemon vector job runs for a command, so the command embeds it.
The model is the toy of tests/test_fact_vectors.py, standing in for the default (MiniLM)."""

from __future__ import annotations

import pytest

pytest.importorskip("numpy")

from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from hermes.memory.embeddings import embedders as embeddings  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402, TC001
from tests.test_fact_vectors import ToyEmbedder  # noqa: E402
from tests.test_mcp_server import client, data, http_client, http_server  # noqa: E402


@pytest.fixture
def by_meaning(config_file, monkeypatch):
    """Hybrid recall on (the shipped default), with the toy model as the default model."""
    config_file.write_text("sessions:\n  embeddings: true\n", encoding="utf-8")
    monkeypatch.setitem(embeddings.MODELS, "minilm", ToyEmbedder)


def _embedded(rt: Runtime, user: str) -> set[int]:
    return {r[0] for r in rt.db.execute(
        "SELECT fact_id FROM fact_vectors WHERE user = ?", [user]).fetchall()}


def test_a_fact_added_by_the_cli_is_found_by_meaning_at_once(by_meaning, cli, rt):
    added = cli("facts", "add", "The user owns a Tesla Model 3", "--json").json()
    cli("facts", "add", "--user", "bob", "Bob washes his automobile on Sundays")
    found = cli("facts", "search", "which car do I drive?", "--json").json()
    assert [f["id"] for f in found] == [added["id"]]  # by meaning alone: no word is shared
    assert _embedded(rt, "owner") == {added["id"]}  # bob's fact is embedded for bob only
    assert len(_embedded(rt, "bob")) == 1


def test_a_fact_updated_by_the_cli_is_embedded_again(by_meaning, cli):
    first = cli("facts", "add", "The user walks to work", "--json").json()
    new = cli("facts", "update", str(first["id"]), "The user drives a Tesla to work",
              "--json").json()
    found = cli("facts", "search", "what automobile?", "--json").json()
    assert [f["id"] for f in found] == [new["id"]]


def test_a_failing_model_keeps_the_fact_and_says_one_line(by_meaning, cli, monkeypatch, caplog):
    def broken(self, texts):
        raise RuntimeError("model file unreadable")

    monkeypatch.setattr(ToyEmbedder, "embed", broken)
    result = cli("facts", "add", "The user owns a Tesla Model 3")
    assert result.exit_code == 0 and result.stdout.startswith("Created fact")
    assert [r.getMessage() for r in caplog.records if "fact vectors" in r.getMessage()] == [
        "fact vectors for owner: model file unreadable (embedded later by hermes run or "
        "hermes sessions index)"]


async def test_a_fact_added_over_mcp_is_found_by_meaning_at_once(by_meaning, rt):
    async with http_server(rt, "alice", write=True) as (app, token), \
            http_client(app, token) as http:
        transport = streamable_http_client("http://127.0.0.1:8765/mcp", http_client=http)
        async with client(transport) as mcp:
            added = data(await mcp.call_tool(
                "facts_add", {"content": "Alice owns a Tesla Model 3"}))["fact"]
            found = data(await mcp.call_tool("facts_search", {"query": "which car?"}))
    assert [f["id"] for f in found["facts"]] == [added["id"]]
    assert _embedded(rt, "alice") == {added["id"]}


def test_a_command_embeds_the_fact_it_wrote_not_the_whole_backlog(by_meaning, cli, rt):
    """A home with facts but no vectors (an upgrade to hybrid by default, an import, another
    model): `hermes facts add` embeds its own fact only. The backlog is the vector job's and
    `hermes sessions index`'s: on 1,000 such facts the add took 14 s (4 s CPU) with MiniLM."""
    old = [cli("facts", "add", f"The user visited city number {i}", "--json").json()["id"]
           for i in range(3)]
    rt.db.execute("DELETE FROM fact_vectors")
    rt.db.conn.commit()
    added = cli("facts", "add", "The user owns a Tesla Model 3", "--json").json()
    assert _embedded(rt, "owner") == {added["id"]}
    updated = cli("facts", "update", str(old[0]), "The user lives in Paris", "--json").json()
    assert _embedded(rt, "owner") == {added["id"], updated["id"]}
