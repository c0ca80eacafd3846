"""Session search by words only (no model): a question that asks when lifts the candidates
that name a time (search._time_named_first, hermes.memory.sessions.timewords)."""

from hermes.memory.sessions import search
from hermes.memory.sessions.store import SessionStore
from tests.histories import say


def test_words_only_a_when_question_puts_the_message_naming_a_time_first(db, clock):
    store = SessionStore(db, clock=clock)
    assert store.vectors is None
    (dated,) = say(store, clock, "owner", "we went to the dentist yesterday")
    (undated,) = say(store, clock, "owner", "we went to the dentist together")
    say(store, clock, "bob", "the dentist on Monday, last week, the dentist")
    # by words a tie, the newer (undated) first; asked when, the dated one
    assert [h.message.id for h in store.search_messages("owner", "did we see the dentist?")
            ] == [undated, dated]
    hits = store.search_messages("owner", "when did we see the dentist?")
    assert [h.message.id for h in hits] == [dated, undated]
    assert hits[0].parts["temporal"] > 0 and "temporal" not in hits[1].parts
    assert store.search("owner", "when did we see the dentist?")[0].match.id == dated
    # another user's messages never become candidates
    assert {h.message.id for h in store.search_messages("owner", "when was the dentist?",
                                                        limit=20)} == {dated, undated}


def test_words_only_without_the_lift_the_word_ranking_stands(db, clock, monkeypatch):
    store = SessionStore(db, clock=clock)
    (dated,) = say(store, clock, "owner", "we went to the dentist yesterday")
    (undated,) = say(store, clock, "owner", "we went to the dentist together")
    monkeypatch.setattr(search, "WORDS_TEMPORAL", 0.0)
    assert [h.message.id for h in store.search_messages("owner", "when did we see the dentist?")
            ] == [undated, dated]

