"""Session search (SessionStore.search_messages, and the grouped SessionStore.search that the CLI,
the session_search tool, MCP and the web panel call): when the all-words round finds fewer than
asked for, the any-word round fills the rest below them."""

import pytest

from hermes.memory.sessions.store import SessionStore


def home(store, clock):
    """One of the owner's conversations holds every word of "what has Melanie painted?", two
    others only some (one of them "painting", the same stem); bob's holds them all."""
    clock.set("2025-05-01T10:00:00+00:00")
    every = store.create("owner", "discord")
    all_words = store.append("owner", every.id, "user", "what has Melanie painted? a lake",
                             speaker="Caroline").id
    clock.set("2025-05-02T10:00:00+00:00")
    bobs = store.create("bob", "discord")
    store.append("bob", bobs.id, "user", "what has Melanie painted lately?", speaker="bob")
    clock.set("2025-05-03T10:00:00+00:00")
    sunset = store.create("owner", "discord")
    painting = store.append("owner", sunset.id, "user", "Melanie showed me her painting of a "
                            "sunset", speaker="Caroline").id
    clock.set("2025-05-04T10:00:00+00:00")
    other = store.create("owner", "discord")
    store.append("owner", other.id, "user", "the weather was lovely", speaker="Caroline")
    clock.set("2025-06-01T10:00:00+00:00")
    return all_words, painting


def make_store(db, clock, with_model: bool) -> SessionStore:
    """Words only, or with the toy model's vectors (the meaning score in the any-word round)."""
    vectors = None
    if with_model:
        pytest.importorskip("numpy")
        from hermes.memory.sessions.vectors import MessageVectors
        from tests.test_embeddings import ToyEmbedder

        vectors = MessageVectors(db, ToyEmbedder())
    return SessionStore(db, clock=clock, vectors=vectors)


@pytest.mark.parametrize("with_model", [False, True])
def test_fewer_all_word_matches_than_asked_are_followed_by_the_any_word_ones(
        db, clock, with_model):
    store = make_store(db, clock, with_model)
    all_words, painting = home(store, clock)
    hits = store.search_messages("owner", "what has Melanie painted?", limit=5)
    assert [h.message.id for h in hits][:2] == [all_words, painting]
    assert [h.mode for h in hits][:2] == ["strict", "loose"]
    # bob's conversation holds every word too: never found for the owner
    assert {h.session.user for h in hits} == {"owner"}
    assert len({h.message.id for h in hits}) == len(hits)  # nothing twice
    # as many as asked for from the all-words round: no second round
    assert [h.message.id for h in store.search_messages(
        "owner", "what has Melanie painted?", limit=1)] == [all_words]


@pytest.mark.parametrize("with_model", [False, True])
def test_the_grouped_search_fills_the_same_way(db, clock, with_model):
    store = make_store(db, clock, with_model)
    all_words, painting = home(store, clock)
    hits = store.search("owner", "what has Melanie painted?", limit=5)
    assert [h.match.id for h in hits][:2] == [all_words, painting]
    assert [h.mode for h in hits][:2] == ["strict", "loose"]
    assert {h.session.user for h in hits} == {"owner"}  # bob's never
    assert len({h.session.id for h in hits}) == len(hits)  # a conversation once
    assert [h.match.id for h in store.search("owner", "what has Melanie painted?",
                                             limit=1)] == [all_words]
