"""The date words are English only (hermes.memory.sessions.timewords, words.dates.time_spans, the
facts' time spans): a question in another language ranks exactly as it would with no temporal
part at all, by session search and by the fact store; a short month form alone ("Jan", "mar")
is a name or a word, not a month."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hermes.config import FactsConfig
from hermes.memory.facts import vectors as fact_vectors
from hermes.memory.facts.store import FactStore
from hermes.memory.facts.vectors import FactVectors
from hermes.memory.sessions import search
from hermes.memory.sessions.store import SessionStore
from hermes.memory.words import dates
from tests.test_fact_vectors import ToyEmbedder

QUESTIONS = [
    "¿Qué dijimos del mar con Marta?",          # Spanish: "mar" is the sea, not March
    "¿Cuándo fuimos al mar con Marta?",         # and "cuándo" asks when
    "Was hat Jan über das Meer gesagt?",        # German: Jan is a person
    "Quand sommes-nous allés à la mer avec Marta ?",
    "Did Jan say anything about the sea?",      # English: Jan alone is a name too
]


def without_the_temporal_part(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dates, "time_spans", lambda *a, **k: [])
    monkeypatch.setattr(fact_vectors, "time_spans", lambda *a, **k: [])
    monkeypatch.setattr(search, "asks_when", lambda text: False)


def test_short_month_forms_need_their_year_or_in_before_them() -> None:
    now = datetime(2026, 11, 29, tzinfo=UTC)
    for text in ("¿Qué dijimos del mar?", "Did Jan call?", "Was hat Jan gesagt?", "dec"):
        assert dates.time_spans(text, now) == [], text
    for text, start in (("a trip in Mar 2023", "2023-03-01"), ("dec 2024", "2024-12-01"),
                        ("on Jan 5, 2024", "2024-01-05"), ("since Jan, 2025", "2025-01-01")):
        assert [s.start.date().isoformat() for s in dates.time_spans(text, now)] == [start]
    assert len(dates.time_spans("back in Jan", now)) > 1  # every year: still a month
    assert len(dates.time_spans("in March", now)) > 1


def session_ranking(store: SessionStore, question: str) -> list[tuple[int, float]]:
    return [(h.message.id, round(h.score, 9)) for h in store.search_messages(
        "owner", question, limit=10)]


def test_session_search_in_another_language_ranks_as_without_the_temporal_part(
        db, clock, monkeypatch):
    store = SessionStore(db, clock=clock)
    said = {}
    # The same words at different times: in January and March (what the mis-read "Jan" and
    # "mar" would lift), and in June; the best word match is the June one.
    for when, lines in (("2025-01-10T10:00:00+00:00", ["el mar con Marta", "Jan und das Meer"]),
                        ("2025-03-12T10:00:00+00:00", ["mar", "Jan sagte Meer", "la mer",
                                                       "Jan and the sea"]),
                        ("2025-06-20T10:00:00+00:00", ["el mar, el mar con Marta y Marta",
                                                       "Jan, Jan: das Meer, das Meer",
                                                       "à la mer, la mer avec Marta",
                                                       "Jan said the sea, the sea was calm"])):
        clock.set(when)
        session = store.create("owner", "discord")
        for line in lines:
            clock.advance(minutes=1)
            said[store.append("owner", session.id, "user", line, speaker="someone").id] = line
        bobs = store.create("bob", "discord")
        store.append("bob", bobs.id, "user", "el mar con Marta, Jan und das Meer, the sea")
    clock.set("2026-11-29T12:00:00+00:00")
    before = {q: session_ranking(store, q) for q in QUESTIONS}
    assert all(before.values())
    assert all(mid in said for ranking in before.values() for mid, _ in ranking)  # mine only
    without_the_temporal_part(monkeypatch)
    assert {q: session_ranking(store, q) for q in QUESTIONS} == before


def fact_ranking(facts: FactStore, question: str) -> list[tuple[int, float]]:
    return [(f.id, round(f.score, 9)) for f in facts.search("owner", question)]


def test_fact_search_in_another_language_ranks_as_without_the_temporal_part(
        db, clock, monkeypatch):
    facts = FactStore(db, FactsConfig(), clock, vectors=FactVectors(db, ToyEmbedder()))
    mine = set()
    for text, said in (("Marta loves the mar in Cadiz", "2025-03-12T10:00:00Z"),
                       ("Marta swims in the mar every summer", "2025-06-20T10:00:00Z"),
                       ("Jan sails on the Meer", "2025-01-10T10:00:00Z"),
                       ("Jan bought a boat for the Meer", "2025-06-20T10:00:00Z"),
                       ("Marta and Jan went to the mer and the sea", "2025-01-11T10:00:00Z")):
        mine.add(facts.add("owner", text, valid_from=said).fact.id)
    facts.add("bob", "Marta and Jan: the mar, the Meer, the sea", valid_from="2025-03-12T10:00:00Z")
    facts.vectors.index("owner")
    facts.vectors.index("bob")
    before = {q: fact_ranking(facts, q) for q in QUESTIONS}
    assert all(before.values())
    assert {fid for ranking in before.values() for fid, _ in ranking} <= mine
    without_the_temporal_part(monkeypatch)
    assert {q: fact_ranking(facts, q) for q in QUESTIONS} == before
