"""Whom a message speaks of (hermes.memory.sessions.disclosure) in session search by meaning:
the message that tells something of its speaker before the answer that speaks to them."""

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.sessions import semantic  # noqa: E402
from hermes.memory.sessions.disclosure import speaks_of_self  # noqa: E402
from hermes.memory.sessions.rerank import RankedMessage  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from tests.test_embeddings import ToyEmbedder  # noqa: E402


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))


def say(store, clock, user, *lines):
    session = store.create(user, "discord")
    ids = []
    for line in lines:
        clock.advance(minutes=1)
        ids.append(store.append(user, session.id, "user", line, speaker="someone").id)
    return ids


def test_what_speaks_of_its_speaker_and_what_speaks_to_the_listener():
    assert speaks_of_self("I went to Lisbon with my sister") == 1
    assert speaks_of_self("We're moving; our flat is too small") == 1
    assert speaks_of_self("Wow, your photos are amazing! How was your flight?") == -1
    assert speaks_of_self("I'm glad you liked it, you deserve it") == -1  # 1 self, 2 listener
    assert speaks_of_self("I told you my plan") == 1
    assert speaks_of_self("I think you are right") == 0  # as much of both
    assert speaks_of_self("The museum opens at nine.") == 0
    # words that only start like one ("mine" is, "mind" and "myth" are not; "yours" is)
    assert speaks_of_self("mind the myth of youth") == 0
    # only the start of a long message is read
    assert speaks_of_self("the log: " + "x " * 600 + "I I I my my") == 0


def test_a_message_telling_of_its_speaker_comes_before_the_answer_speaking_to_them():
    # Same words, meaning and length; the newer (2) wins a tie.
    ranked = [RankedMessage(2, 20, 1.0, {"bm25": 1.0}), RankedMessage(1, 10, 1.0, {"bm25": 1.0})]
    sims = semantic.Similarities(np.array([1, 2]), np.array([0.5, 0.5], np.float32),
                                 np.array([0.5, 0.5], np.float32))
    out = semantic.rerank_by_meaning(ranked, sims, limit=2, voices={1: 1, 2: -1})
    assert [r.message_id for r in out] == [1, 2]
    assert out[0].parts["of self"] > 0 > out[1].parts["of self"]
    assert [r.message_id for r in semantic.rerank_by_meaning(
        ranked, sims, limit=2, voices={1: 1, 2: -1},
        params=semantic.SemanticParams(of_self=0.0))] == [2, 1]
    # nothing known of them: no such part
    assert "of self" not in semantic.rerank_by_meaning(ranked, sims, limit=2)[0].parts


def test_search_prefers_the_trip_told_to_the_trip_answered(store, clock, db):
    # The answer is newer (it wins a tie) and holds the same words and as many characters.
    (told,) = say(store, clock, "owner", "my trip to Lisbon: I loved the tiles there")
    (answer,) = say(store, clock, "owner", "your trip to Lisbon: you loved the tiles, yes")
    say(store, clock, "bob", "I took my trip to Lisbon, I loved the tiles")
    hits = store.search_messages("owner", "what about the trip to Lisbon and the tiles")
    assert [h.message.id for h in hits] == [told, answer]  # another user's: never a candidate
    assert hits[0].parts["of self"] > 0 > hits[1].parts["of self"]


def test_without_the_model_words_alone_and_no_such_part(db, clock):
    words_only = SessionStore(db, clock=clock)
    (told,) = say(words_only, clock, "owner", "my trip to Lisbon: I loved the tiles there")
    (answer,) = say(words_only, clock, "owner", "your trip to Lisbon: you loved the tiles, yes")
    hits = words_only.search_messages("owner", "what about the trip to Lisbon and the tiles")
    assert {h.message.id for h in hits} == {told, answer}
    assert all("of self" not in h.parts for h in hits)
