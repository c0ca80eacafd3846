"""Session search's prompt profile (hermes.memory.sessions.search.SearchProfile,
past_messages.PROMPT_PROFILE): past messages in the prompt read fewer candidates than the CLI's
search, find the same best message, and stay scoped."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.sessions import past_messages  # noqa: E402
from hermes.memory.sessions.past_messages import PROMPT_PROFILE, recall_past_messages  # noqa: E402
from hermes.memory.sessions.search import FULL_SEARCH, SearchProfile  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from tests.test_embeddings import ToyEmbedder  # noqa: E402


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))


def chat(store, clock, user, speaker, *pairs):
    session = store.create(user, "discord")
    ids = []
    for asked, answered in pairs:
        clock.advance(minutes=1)
        ids.append(store.append(user, session.id, "user", asked, speaker=speaker).id)
        clock.advance(minutes=1)
        ids.append(store.append(user, session.id, "assistant", answered).id)
    return session, ids


def garden_history(store, clock, user="owner", n=80):
    """``n`` sessions about the garden hose (every one a bm25 candidate for "garden hose"),
    one of them about the car's hose too; returns that one's message id."""
    for i in range(n):
        chat(store, clock, user, "Ana", (f"the garden hose number {i} leaked again", "Fixed."))
    _, (car, _) = chat(store, clock, user, "Ana",
                       ("the garden hose in the car boot is blue", "Noted."))
    for i in range(n):
        chat(store, clock, user, "Ana", (f"watered the garden with hose {n + i}", "Good."))
    return car


def test_the_prompt_profile_reads_fewer_candidates_and_finds_the_same_best_message(
        store, clock):
    car = garden_history(store, clock)
    query = "which garden hose is in the car?"
    full = store.search_messages("owner", query, limit=1000, any_word=True, meaning=query)
    shallow = store.search_messages("owner", query, limit=1000, any_word=True, meaning=query,
                                    profile=PROMPT_PROFILE)
    assert full[0].message.id == shallow[0].message.id == car
    # Fewer candidates read, so fewer ranked: the profile is applied, not ignored.
    assert len(shallow) < len(full)
    assert {h.message.id for h in shallow} <= {h.message.id for h in full}
    # The prompt shows the same best excerpt with the profile as with the full search.
    shown = recall_past_messages(store, "owner", query, budget=2000)
    assert shown[0].match_id == car


def test_a_deeper_profile_ranks_more_and_none_is_the_full_search(store, clock):
    garden_history(store, clock, n=40)
    query = "garden hose"
    tiny = SearchProfile(candidates=5, pool=5, extra=2)
    counts = [len(store.search_messages("owner", query, limit=1000, any_word=True,
                                        profile=p)) for p in (tiny, PROMPT_PROFILE, FULL_SEARCH)]
    assert counts[0] < counts[1] <= counts[2]
    assert store.search_messages("owner", query, limit=1000, any_word=True) == \
        store.search_messages("owner", query, limit=1000, any_word=True, profile=SearchProfile())


def test_another_users_messages_are_never_read_or_shown_under_the_profile(
        store, clock, monkeypatch):
    garden_history(store, clock, user="owner", n=40)
    # Bob's messages match better, by words and by meaning, and are newer.
    _, bobs = chat(store, clock, "bob", "Bob", *[
        (f"garden hose car automobile vehicle {i}", "garden hose car") for i in range(40)])
    asked: list[str] = []
    real = MessageVectors.matrix

    def matrix(self, user):  # which user's vectors the search reads
        asked.append(user)
        return real(self, user)

    monkeypatch.setattr(MessageVectors, "matrix", matrix)
    query = "which garden hose is in the car?"
    shown = recall_past_messages(store, "owner", query, budget=4000, limit=8)
    assert shown and set(asked) == {"owner"}
    assert not {m.id for e in shown for m in e.messages} & set(bobs)
    hits = store.search_messages("owner", query, limit=1000, any_word=True,
                                 profile=PROMPT_PROFILE)
    assert hits and not {h.message.id for h in hits} & set(bobs)
    assert recall_past_messages(store, "carol", query, budget=4000) == []


def test_the_prompt_uses_the_prompt_profile(store, clock, monkeypatch):
    garden_history(store, clock, n=40)
    seen: list[SearchProfile] = []
    real = store.searcher.search_messages

    def search_messages(*args, **kwargs):
        seen.append(kwargs["profile"])
        return real(*args, **kwargs)

    monkeypatch.setattr(store.searcher, "search_messages", search_messages)
    recall_past_messages(store, "owner", "garden hose", budget=2000)
    assert seen == [past_messages.PROMPT_PROFILE] and seen[0] != FULL_SEARCH


def test_the_prompt_never_shows_a_turn_under_the_floor_in_a_word_matchs_stead():
    # A list a person reads may (SemanticParams.in_place_of_words); the prompt's past
    # messages show nothing under the model's floor of meaning rather than a guess.
    from hermes.memory.sessions import semantic

    assert FULL_SEARCH.semantic_params().in_place_of_words \
        == semantic.DEFAULT_SEMANTIC.in_place_of_words > 0
    assert PROMPT_PROFILE.semantic_params().in_place_of_words == 0
    assert PROMPT_PROFILE.semantic_params().pool == 20  # the profile's other knobs kept
    # and meaning beyond words measured against the best five word matches, as before
    assert PROMPT_PROFILE.semantic_params().beyond_pool == 5
    assert FULL_SEARCH.semantic_params().beyond_pool == semantic.DEFAULT_SEMANTIC.beyond_pool
