"""Ranked message recall (hermes.memory.sessions.rerank) through SessionStore.search_messages."""

from datetime import UTC, datetime

import pytest

from hermes.errors import QueryError
from hermes.memory.sessions import rerank
from hermes.memory.sessions.store import SessionStore
from hermes.memory.words import dates


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock)


def chat(store, clock, user, lines, *, started_at=None, title=None):
    """A session of ``lines`` ("speaker: text"), one minute apart."""
    if started_at:
        clock.set(started_at)
    session = store.create(user, "discord", title=title)
    ids = []
    for line in lines:
        clock.advance(minutes=1)
        speaker, text = line.split(": ", 1)
        ids.append(store.append(user, session.id, "user", text, speaker=speaker).id)
    return session, ids


def contents(hits):
    return [h.message.content for h in hits]


def test_question_words_do_not_outrank_the_subject(store, clock):
    chat(store, clock, "owner", [
        "ana: What kind of music would you like to hear?",
        "ben: Anything really, what kind do you like?",
        "ana: I bought a cello last week",
    ])
    hits = store.search_messages("owner", "What kind of instrument would Ana like? a cello?")
    assert contents(hits)[0] == "I bought a cello last week"


def test_stemming_matches_other_forms(store, clock):
    chat(store, clock, "owner", ["ana: I have been running every morning", "ben: nice"])
    assert contents(store.search_messages("owner", "when did she run?"))[0] == \
        "I have been running every morning"


def test_an_answer_is_found_through_the_question_it_answers(store, clock):
    _, ids = chat(store, clock, "owner", [
        "ben: Where did you go for your holiday in the end?",
        "ana: Lisbon! The tiles were beautiful.",
        "ben: I need a new phone charger.",
        "ana: The shop on the corner sells them.",
    ])
    hits = store.search_messages("owner", "holiday destination", limit=4)
    by_id = {h.message.id: h for h in hits}
    # The reply shares no word with the query, yet comes right after the matching question.
    assert ids[1] in by_id and "neighbours" in by_id[ids[1]].parts
    # Both come back, the answer first: the question holds the word, the answer what was asked.
    assert contents(hits)[:2] == ["Lisbon! The tiles were beautiful.",
                                  "Where did you go for your holiday in the end?"]
    assert ids[3] not in by_id or by_id[ids[3]].score < by_id[ids[1]].score


def test_the_answer_outranks_the_question_that_shares_the_query_words(store, clock):
    _, ids = chat(store, clock, "owner", [
        "jon: What's your favourite style of dance?",
        "gina: Contemporary, it is so expressive and graceful.",
        "jon: Mine is hip hop, I love the energy.",
    ])
    chat(store, clock, "owner", ["jon: The studio floor needs a new coat of varnish."])
    hits = store.search_messages("owner", "What is Gina's favourite dance style?", limit=3)
    by_id = {h.message.id: h for h in hits}
    # The question holds the query's words, the answer only the speaker's name: asking is not
    # telling, and the turn after a question is its answer.
    assert hits[0].message.id == ids[1]
    assert by_id[ids[0]].parts["bm25"] > by_id[ids[1]].parts.get("bm25", 0)
    assert ids[2] not in by_id or by_id[ids[2]].score < by_id[ids[1]].score


def test_a_question_is_demoted_only_against_statements(store, clock):
    # A question alone still comes back: demoting is not dropping.
    _, ids = chat(store, clock, "owner", ["ana: Has anyone seen my umbrella?"])
    assert [h.message.id for h in store.search_messages("owner", "umbrella")] == ids


def test_a_possessive_names_the_person(store, clock):
    _, ids = chat(store, clock, "owner", [
        "ben: The cake was lovely.",
        "ana: My birthday is on the third of May.",
    ])
    # "Ana's" is about Ana: her own words count, whoever wrote the name how.
    hits = store.search_messages("owner", "When is Ana's birthday?")
    assert hits[0].message.id == ids[1] and "speaker" in hits[0].parts


def test_neighbours_stay_inside_their_session(store, clock):
    # The only match ends session one; the next message by id opens session two. Its score must
    # not leak across the boundary: the opener of session two is no neighbour of the match.
    _, first = chat(store, clock, "owner", ["ana: ok", "ben: the garden needs watering"])
    _, second = chat(store, clock, "owner", ["ben: unrelated start", "ana: tea later"])
    hits = store.search_messages("owner", "garden", limit=10)
    by_id = {h.message.id: h for h in hits}
    assert second[0] not in by_id
    assert by_id[first[0]].parts["neighbours"] == pytest.approx(
        rerank.DEFAULT_PARAMS.neighbour_back * by_id[first[1]].parts["bm25"])


def test_neighbours_stay_inside_their_session_looking_back(store, clock):
    # The only match opens session two; the message before it by id ends session one, and gets
    # no share of the match: looking back stops at the session's start too.
    _, first = chat(store, clock, "owner", ["ana: ok", "ben: unrelated end"])
    _, second = chat(store, clock, "owner", ["ben: does the garden need watering?",
                                             "ana: tea later"])
    hits = store.search_messages("owner", "garden", limit=10)
    by_id = {h.message.id: h for h in hits}
    assert first[1] not in by_id
    # the question's answer gets its share (of the question's score before demotion)
    p = rerank.DEFAULT_PARAMS
    assert by_id[second[1]].parts["neighbours"] == pytest.approx(
        p.answer * by_id[second[0]].parts["bm25"] / p.question)


def test_a_statement_passes_nothing_to_the_turn_after_it(store, clock):
    # "tea later" follows a statement that matches: it is no answer, and gets no share of it
    # (the turn before a match, which the match may answer, still does).
    _, ids = chat(store, clock, "owner", ["ana: any news?", "ben: the garden needs watering",
                                          "ana: tea later"])
    by_id = {h.message.id: h for h in store.search_messages("owner", "garden", limit=10)}
    assert ids[2] not in by_id
    assert by_id[ids[0]].parts["neighbours"] > 0


def test_a_message_in_a_session_about_the_topic_ranks_higher(store, clock):
    _, on_topic = chat(store, clock, "owner", [
        "ana: the sourdough starter is bubbling",
        "ben: feed the sourdough twice a day",
        "ana: my sourdough loaf finally rose",
    ])
    _, passing = chat(store, clock, "owner", [
        "ana: taxes are due",
        "ana: my sourdough loaf finally rose",
        "ben: the car needs new tyres",
    ])
    hits = store.search_messages("owner", "did the sourdough loaf rise?", limit=2)
    assert [h.message.id for h in hits] == [on_topic[2], passing[1]]
    assert hits[0].parts["session"] > hits[1].parts["session"]


def test_a_date_in_the_query_prefers_what_was_said_then(store, clock):
    chat(store, clock, "owner", ["ana: we cooked a big curry tonight"],
         started_at="2024-03-10T18:00:00+00:00")
    chat(store, clock, "owner", ["ana: we cooked a big curry tonight"],
         started_at="2024-06-10T18:00:00+00:00")
    chat(store, clock, "owner", ["ana: we cooked a big curry tonight"],
         started_at="2024-09-10T18:00:00+00:00")
    for query, month in [("what did we cook in June 2024?", "06"),
                         ("what did we cook in March?", "03"),
                         ("what did we cook on 10 September, 2024", "09")]:
        hits = store.search_messages("owner", query, limit=3)
        assert hits[0].message.created_at[5:7] == month, query
        assert hits[0].parts["date"] > 0


def test_time_spans_read_dates_and_leave_the_verb_may_alone():
    now = datetime(2026, 11, 29, tzinfo=UTC)

    def spans(text):
        return [(s.start.date().isoformat(), s.end.date().isoformat())
                for s in dates.time_spans(text, now)]

    assert spans("what happened on October 13, 2023?") == [("2023-10-13", "2023-10-14")]
    assert spans("what happened on 8 May, 2023?") == [("2023-05-08", "2023-05-09")]
    assert spans("the trip in July 2022") == [("2022-07-01", "2022-08-01")]
    assert spans("what did she do in 2021") == [("2021-01-01", "2022-01-01")]
    assert ("2025-05-01", "2025-06-01") in spans("plans in May")
    assert spans("you may be right") == []
    assert spans("nothing dated here") == []
    assert spans("what happened last month") == [("2026-10-01", "2026-11-01")]
    assert spans("and yesterday?") == [("2026-11-28", "2026-11-29")]


def test_a_date_beyond_the_calendar_is_words_not_an_error(store, clock):
    """datetime's range ends at years 1 and 9999: such a "date" is searched as words (it was a
    ValueError or OverflowError out of the search: `hermes sessions search`, the tools)."""
    chat(store, clock, "owner", ["ana: we cooked a lot in January and in December"])
    for query in ("what did we cook in January 0000", "cooked in December 9999",
                  "we cooked on December 30, 9999", "cooked on 31 December 9999"):
        assert contents(store.search_messages("owner", query)), query
    assert dates.time_spans("in December 9998")[0].end.year == 9999  # the last one read


def test_title_or_summary_alone_brings_the_session(store, clock, db):
    session, ids = chat(store, clock, "owner", ["ana: hello", "ben: hi"])
    store.set_summary("owner", session.id, title="Planning the Kilimanjaro climb")
    hits = store.search_messages("owner", "kilimanjaro")
    assert [h.message.id for h in hits] == [ids[0]]
    assert "title/summary" in hits[0].parts


def test_only_the_users_own_messages(store, clock):
    chat(store, clock, "alice", ["alice: my passport number is in the drawer"])
    chat(store, clock, "bob", ["bob: my passport expired"])
    assert contents(store.search_messages("bob", "passport")) == ["my passport expired"]
    assert store.search_messages("carol", "passport") == []


def test_source_filter(store, clock):
    session = store.create("owner", "cron")
    store.append("owner", session.id, "assistant", "weather report: rain")
    chat(store, clock, "owner", ["ana: rain again today"])
    assert contents(store.search_messages("owner", "rain", source="cron")) == [
        "weather report: rain"]


def test_cjk_and_empty_queries(store, clock):
    chat(store, clock, "owner", ["ana: 我喜欢东京的拉面", "ben: ok"])
    assert contents(store.search_messages("owner", "东京"))[0] == "我喜欢东京的拉面"
    for bad in ("", "   ", "?!"):
        with pytest.raises(QueryError):
            store.search_messages("owner", bad)


def test_operators_are_only_ever_literal(store, clock):
    chat(store, clock, "owner", ['ana: NEAR(a b) "quoted" col:value -x ^y NOT'])
    for query in ['NEAR(a b)', '"quoted', "col:value", "-x", "^y", "NOT"]:
        assert store.search_messages("owner", query), query
    with pytest.raises(QueryError):
        store.search_messages("owner", "*")


def test_a_named_person_prefers_what_they_said(store, clock):
    _, ids = chat(store, clock, "owner", [
        "ben: my new cat keeps me up at night",
        "ana: I adopted a cat called Bailey last month",
        "ben: cats are great",
    ])
    hits = store.search_messages("owner", "What cat does Ana have?", limit=3)
    assert hits[0].message.id == ids[1] and hits[0].parts["speaker"] > 0
    # Without the name, the message with the most matching words wins as before.
    assert "speaker" not in store.search_messages("owner", "which cat", limit=1)[0].parts


def test_a_named_person_is_a_hint_not_a_trump(store, clock):
    # The question names Ana, but Ben said the answer: his clearly better match must stay first
    # (a boost as large as LoCoMo's fit, 0.5, put Ana's weaker match above it).
    _, answer = chat(store, clock, "owner", [
        "ben: I booked the flights to Lisbon for our holiday", "ben: it was cheap too",
        "ana: nice one"])
    _, weaker = chat(store, clock, "owner", [
        "ana: holiday flights are so expensive now", "ben: true", "ana: the trains are too"])
    chat(store, clock, "owner", ["ana: my sister called", "ben: how is she",
                                 "ana: fine, the kids are loud"])
    hits = store.search_messages("owner", "Where did Ana book holiday flights to?", limit=3)
    assert [h.message.id for h in hits[:2]] == [answer[0], weaker[0]]
    assert hits[1].parts["speaker"] > 0  # Ana's own words still get the hint


def test_another_name_of_an_entity_finds_the_message(store, clock, db, settings):
    from hermes.memory.facts.entities import EntityStore

    _, ids = chat(store, clock, "owner", ["ana: we finally moved the database to PostgreSQL 17",
                                          "ben: and the backups?"])
    chat(store, clock, "bob", ["bob: PostgreSQL is great"])
    query = "when did we upgrade postgres?"
    assert ids[0] not in [h.message.id for h in store.search_messages("owner", query)]
    EntityStore(db, settings.facts).add_alias("owner", "PostgreSQL", "Postgres")
    hits = store.search_messages("owner", query)
    assert hits[0].message.id == ids[0]
    assert store.search("owner", query)[0].match.id == ids[0]
    # bob has no such alias, and never sees owner's messages
    assert store.search_messages("bob", query) == []
