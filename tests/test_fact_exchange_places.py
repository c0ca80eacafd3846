"""A fact marked shareable is repeated in a shared place, not the private conversation it was
learned from (review rev6): the words of its exchange (m018) find it, and ``found_by`` quotes
them, only where that conversation may be read. docs/discord.md: in a channel Hermes will not
"use, recall, search or quote" anything learned in a DM."""

from __future__ import annotations

import pytest

from hermes.memory.facts.matched import why_found
from hermes.memory.place import Place

HERE = Place.discord_channel(10, 20)


def test_a_shareable_facts_private_exchange_is_not_searched_in_a_channel(rt):
    memory = rt.memory
    dm = memory.sessions.create("alice", "discord")
    said = memory.sessions.append("alice", dm.id, "user",
                                  "after the divorce I moved to Lisbon")
    lisbon = memory.facts.add("alice", "The user lives in Lisbon", shared=1,
                              source_session_id=dm.id, source_message_ids=[said.id]).fact
    # in private, the exchange's words find it and say so
    (mine,) = memory.facts.search("alice", "divorce", min_trust=0.0, explain=True)
    assert mine.id == lisbon.id and "divorce" in (why_found(mine) or "")
    # in the channel, the fact itself is shown; what was said in the DM neither finds it nor
    # is quoted
    assert [f.id for f in memory.facts.search("alice", "Lisbon", min_trust=0.0,
                                              place=HERE)] == [lisbon.id]
    assert memory.facts.search("alice", "divorce", min_trust=0.0, place=HERE,
                               explain=True) == []
    (shown,) = memory.facts.search("alice", "Lisbon divorce", min_trust=0.0, place=HERE,
                                   explain=True)
    assert "divorce" not in (why_found(shown) or "")


def test_by_meaning_too(config_file, monkeypatch, settings, clock):
    """The same with fact vectors on (the hybrid: bm25's words fused with meaning)."""
    pytest.importorskip("numpy")
    from hermes.memory.embeddings import embedders as embeddings
    from hermes.runtime import Runtime
    from tests.test_fact_vectors import ToyEmbedder

    config_file.write_text("sessions:\n  embeddings: true\n", encoding="utf-8")
    monkeypatch.setitem(embeddings.MODELS, "minilm", ToyEmbedder)
    from hermes.config import load_settings

    runtime = Runtime(load_settings(), clock=clock)
    try:
        test_a_shareable_facts_private_exchange_is_not_searched_in_a_channel(runtime)
    finally:
        runtime.close()
