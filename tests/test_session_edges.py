"""Session search on what a real home holds: a session whose start time cannot be read, one
that starts in the future, a question naming an impossible or a far date, a home of one session,
fewer matches than asked for. Each answers (no traceback), by words only and with the model."""

import pytest

from hermes.memory.sessions.store import SessionStore


def make_store(db, clock, with_model):
    vectors = None
    if with_model:
        pytest.importorskip("numpy")
        from hermes.memory.sessions.vectors import MessageVectors
        from tests.test_embeddings import ToyEmbedder

        vectors = MessageVectors(db, ToyEmbedder())
    return SessionStore(db, clock=clock, vectors=vectors)


def said(store, clock, user, when, text):
    clock.set(when)
    session = store.create(user, "discord")
    return session, store.append(user, session.id, "user", text, speaker="someone").id


MODELS = pytest.mark.parametrize("with_model", [False, True], ids=["words", "model"])


@MODELS
def test_a_start_time_that_cannot_be_read_is_no_date_and_no_error(db, clock, with_model):
    store = make_store(db, clock, with_model)
    broken, in_broken = said(store, clock, "owner", "2025-03-05T10:00:00+00:00",
                             "we talked about the dentist")
    march, in_march = said(store, clock, "owner", "2025-03-10T10:00:00+00:00",
                           "we talked about the dentist")
    clock.set("2025-07-01T10:00:00+00:00")
    # An imported or hand-edited row: the column is NOT NULL, but may hold anything.
    db.execute("UPDATE sessions SET started_at = 'last tuesday' WHERE id = ?", [broken.id])
    hits = store.search_messages("owner", "what did we say about the dentist in March 2025?")
    parts = {h.message.id: h.parts for h in hits}
    assert set(parts) == {in_broken, in_march}
    assert parts[in_march]["session date"] > 0 and "session date" not in parts[in_broken]
    db.execute("UPDATE sessions SET started_at = '' WHERE id = ?", [broken.id])
    assert {h.message.id for h in store.search_messages(
        "owner", "the dentist in March 2025")} == {in_broken, in_march}


@MODELS
def test_a_session_that_starts_in_the_future_is_found_and_lifted_only_for_its_time(
        db, clock, with_model):
    store = make_store(db, clock, with_model)
    _, later = said(store, clock, "owner", "2031-03-05T10:00:00+00:00",
                    "the dentist moved the appointment")
    _, now = said(store, clock, "owner", "2025-03-05T10:00:00+00:00",
                  "the dentist moved the appointment")
    clock.set("2025-07-01T10:00:00+00:00")  # the clock is behind the first session's start
    hits = store.search_messages("owner", "when did the dentist move the appointment in "
                                 "March 2025?")
    assert [h.message.id for h in hits] == [now, later]
    assert "session date" in hits[0].parts and "session date" not in hits[1].parts


@MODELS
@pytest.mark.parametrize("question", [
    "what did the dentist say on February 30?", "the dentist on 31 February 2024",
    "the dentist on February 30, 2025", "the dentist on December 31, 9998",
    "the dentist in 2099", "the dentist in January 0001", "the dentist on May 99, 2025",
    "the dentist in 99999999999999999999999 May",
])
def test_an_impossible_or_far_date_lifts_nothing(db, clock, with_model, question):
    store = make_store(db, clock, with_model)
    _, first = said(store, clock, "owner", "2025-02-28T10:00:00+00:00", "the dentist called")
    _, second = said(store, clock, "owner", "2025-03-01T10:00:00+00:00", "the dentist called")
    clock.set("2025-07-01T10:00:00+00:00")
    hits = store.search_messages("owner", question)
    assert {h.message.id for h in hits} == {first, second}
    assert not any("session date" in h.parts for h in hits)
    assert store.search("owner", question)


@MODELS
def test_a_home_of_one_session_answers_a_named_time_without_a_lift(db, clock, with_model):
    store = make_store(db, clock, with_model)
    session, only = said(store, clock, "owner", "2025-03-05T10:00:00+00:00",
                         "the dentist called about the crown")
    also = store.append("owner", session.id, "user", "the dentist again", speaker="me").id
    _, bobs = said(store, clock, "bob", "2025-03-06T10:00:00+00:00", "the dentist called")
    clock.set("2025-07-01T10:00:00+00:00")
    hits = store.search_messages("owner", "what did the dentist say in March 2025?")
    # one conversation: nothing to put before another, its score stands
    assert {h.message.id for h in hits} == {only, also}
    assert not any("session date" in h.parts for h in hits)
    assert [h.session.id for h in store.search("owner", "the dentist in March 2025")] == [
        session.id]
    assert bobs not in {h.message.id for h in store.search_messages("owner", "dentist called")}


@MODELS
def test_fewer_matches_than_asked_for_are_all_returned_once(db, clock, with_model):
    store = make_store(db, clock, with_model)
    _, a = said(store, clock, "owner", "2025-03-05T10:00:00+00:00", "the dentist called")
    _, b = said(store, clock, "owner", "2025-03-06T10:00:00+00:00", "the dentist again")
    said(store, clock, "bob", "2025-03-07T10:00:00+00:00", "the dentist called")
    clock.set("2025-07-01T10:00:00+00:00")
    for question in ("the dentist called", "the dentist in March 2025"):
        hits = store.search_messages("owner", question, limit=10)
        assert sorted(h.message.id for h in hits) == sorted({a, b})
        assert len(store.search("owner", question, limit=5)) <= 2
