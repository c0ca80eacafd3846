"""Session search's session-level stage (hermes.memory.sessions.session_rank): a question that
names a time lifts the conversations held then, by words only and with the model."""

import pytest

from hermes.memory.sessions import session_rank
from hermes.memory.sessions.rerank import RankedMessage
from hermes.memory.sessions.store import SessionStore
from hermes.memory.words.dates import time_spans


def home(store, clock):
    """Three of the owner's conversations about the dentist and one of bob's. The one that
    started in March 2025 ran on: its message was written in May, past the message ranking's
    own date part (March and 30 days after)."""
    clock.set("2025-03-30T10:00:00+00:00")
    march = store.create("owner", "discord")
    bobs = store.create("bob", "discord")
    clock.set("2025-05-15T10:00:00+00:00")
    in_march = store.append("owner", march.id, "user", "we talked about the dentist",
                            speaker="someone").id
    store.append("bob", bobs.id, "user", "the dentist, the dentist", speaker="bob")
    clock.set("2025-05-16T10:00:00+00:00")
    may = store.create("owner", "discord")
    in_may = store.append("owner", may.id, "user", "we talked about the dentist",
                          speaker="someone").id
    clock.set("2025-06-01T10:00:00+00:00")
    june = store.create("owner", "discord")
    store.append("owner", june.id, "user", "the dentist? no, the bakery, the bakery on the "
                 "corner, with the long queue, the one we liked before the move",
                 speaker="someone")
    clock.set("2025-07-01T10:00:00+00:00")
    return march, bobs, in_march, in_may


def test_words_only_the_conversation_held_in_the_named_month_comes_first(db, clock):
    store = SessionStore(db, clock=clock)
    assert store.vectors is None
    march, _, in_march, in_may = home(store, clock)
    # No time named: a tie by words, the newer first.
    assert [h.message.id for h in store.search_messages("owner", "the dentist")][:2] == [
        in_may, in_march]
    hits = store.search_messages("owner", "what did we say about the dentist in March 2025?")
    assert [h.message.id for h in hits][:2] == [in_march, in_may]
    assert hits[0].parts["session date"] > 0 and "session date" not in hits[1].parts
    assert store.search("owner", "the dentist in March 2025")[0].session.id == march.id
    # bob's conversation of March holds the words too: never a candidate, never lifted
    assert {h.session.user for h in store.search_messages(
        "owner", "the dentist in March 2025", limit=20)} == {"owner"}


def test_without_the_stage_the_message_ranking_stands(db, clock, monkeypatch):
    store = SessionStore(db, clock=clock)
    _, _, in_march, in_may = home(store, clock)
    monkeypatch.setattr(session_rank, "DATE_IN", 0.0)
    monkeypatch.setattr(session_rank, "DATE_AFTER", 0.0)
    assert [h.message.id for h in store.search_messages(
        "owner", "what did we say about the dentist in March 2025?")][:2] == [in_may, in_march]


def test_another_users_sessions_are_never_read(db, clock):
    store = SessionStore(db, clock=clock)
    march, bobs, _, _ = home(store, clock)
    assert set(session_rank.session_starts(db, "owner", [march.id, bobs.id])) == {march.id}
    # a ranking that somehow held bob's session (ids guessed): no lift for it
    spans = time_spans("in March 2025")
    ranked = [RankedMessage(1, march.id, 2.0), RankedMessage(2, bobs.id, 1.5),
              RankedMessage(3, 999, 1.0)]
    out = session_rank.by_session_date(db, "owner", ranked, spans)
    assert [r.session_id for r in out] == [march.id, bobs.id, 999]
    assert "session date" not in out[1].parts and out[0].parts["session date"] > 0


def test_a_start_after_the_span_counts_half_and_no_span_changes_nothing(db, clock):
    store = SessionStore(db, clock=clock)
    march, _, _, _ = home(store, clock)
    ranked = [RankedMessage(1, 7, 2.0), RankedMessage(2, march.id, 1.0),
              RankedMessage(3, 8, 0.5)]
    assert session_rank.by_session_date(db, "owner", ranked, []) == ranked
    inside = session_rank.by_session_date(db, "owner", ranked, time_spans("in March 2025"))
    after = session_rank.by_session_date(db, "owner", ranked, time_spans("in February 2025"))
    lift = {r.message_id: r.parts.get("session date", 0) for r in inside}[2]
    assert {r.message_id: r.parts.get("session date", 0) for r in after}[2] == lift / 2
    assert session_rank.by_session_date(db, "owner", ranked, time_spans("in June 2024")) \
        == ranked


def test_with_the_model_the_stage_runs_after_the_meaning_score(db, clock):
    pytest.importorskip("numpy")
    from hermes.memory.sessions.vectors import MessageVectors
    from tests.test_embeddings import ToyEmbedder

    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))
    march, _, in_march, in_may = home(store, clock)
    hits = store.search_messages("owner", "what did we say about the dentist in March 2025?")
    assert "length" in hits[0].parts  # re-scored by meaning first (its length part)
    assert [h.message.id for h in hits][:2] == [in_march, in_may]
    assert hits[0].parts["session date"] > 0
    assert {h.session.user for h in hits} == {"owner"}
    # the same question without its month: the newer conversation first, nothing lifted
    hits = store.search_messages("owner", "what did we say about the dentist?")
    assert [h.message.id for h in hits][:2] == [in_may, in_march]
    assert not any("session date" in h.parts for h in hits)
