"""Month names that are also words or names ("a march", "April called", "an august house",
"June's car"): a month only as a date, for the spans a query names (dates.time_spans) and for
the messages that name a time (timewords.names_a_time), as "may" already was."""

from datetime import UTC, datetime

import pytest

from hermes.memory.sessions.store import SessionStore
from hermes.memory.sessions.timewords import names_a_time
from hermes.memory.words import dates
from tests.histories import say

NOW = datetime(2026, 11, 29, tzinfo=UTC)


def months(text):
    return sorted({(s.start.year, s.start.month) for s in dates.time_spans(text, NOW)})


def test_a_month_that_is_also_a_word_is_a_month_only_as_a_date():
    for words in ("a march for peace", "April called", "an august house", "June's car",
                  "they march on", "may I ask"):
        assert dates.time_spans(words, NOW) == [], words
    assert (2025, 3) in months("what did we cook in March")
    assert (2025, 8) in months("the trip last August")
    assert months("March 2023") == [(2023, 3)]
    assert months("on April 5, 2024") == [(2024, 4)]
    assert (2025, 6) in months("on 5 June")
    got = months("between August and November 2023")
    assert (2023, 11) in got and (2023, 8) in got
    # the months that are no word keep their reading alone
    assert (2025, 10) in months("what happened October")


def test_a_message_names_such_a_month_only_as_a_date():
    for said in ("we went on a march downtown", "April called me", "an august institution",
                 "June's car broke", "she says june bunty"):
        assert not names_a_time(said), said
    for said in ("back in March", "on April 3rd", "last August", "June 2023", "the 5th of June",
                 "since April", "in May", "October was wet"):
        assert names_a_time(said), said


@pytest.mark.parametrize("with_model", [False, True])
def test_a_when_question_lifts_the_month_not_the_march(db, clock, with_model):
    vectors = None
    if with_model:
        pytest.importorskip("numpy")
        from hermes.memory.sessions.vectors import MessageVectors
        from tests.test_embeddings import ToyEmbedder

        vectors = MessageVectors(db, ToyEmbedder())
    store = SessionStore(db, clock=clock, vectors=vectors)
    (dated,) = say(store, clock, "owner", "we joined the protest march in March")
    (word,) = say(store, clock, "owner", "we joined the protest march downtown")
    say(store, clock, "bob", "we joined the protest march in April")
    found = store.search_messages("owner", "when did we join the protest?")
    hits = {h.message.id: h for h in found}
    assert set(hits) == {dated, word}  # another user's messages never become candidates
    assert hits[dated].parts.get("temporal", 0) > 0
    assert "temporal" not in hits[word].parts
