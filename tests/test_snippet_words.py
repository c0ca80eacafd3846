"""The snippet of a message FTS5 did not match (found by meaning, or through a fact, sharing no
word with the query; hermes.memory.sessions.bm25.manual_snippet) highlights whole query words
only, never a stopword and never letters inside a word: a highlight says "this word matched",
and here none did. A CJK query, matched by LIKE inside words, keeps its substring highlights."""

import pytest

from hermes.memory.sessions.bm25 import HIGHLIGHT, manual_snippet
from hermes.store.fts import build_match


def test_a_highlight_is_a_whole_query_word():
    plan = build_match("What car do I drive?")
    assert manual_snippet("Finally picked up the keys", plan) == "Finally picked up the keys"
    assert manual_snippet("We drove; the drive was long", plan) == (
        f"We drove; the {HIGHLIGHT[0]}drive{HIGHLIGHT[1]} was long")
    cjk = manual_snippet("东京タワーに行きたい", build_match("タワー"))
    assert f"东京{HIGHLIGHT[0]}タワ" in cjk


def test_a_message_found_by_meaning_alone_shows_no_word_as_matched(db, clock):
    pytest.importorskip("numpy")
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.vectors import MessageVectors
    from tests.histories import say
    from tests.test_embeddings import ToyEmbedder

    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))
    (car,) = say(store, clock, "owner", "my car is blue")
    say(store, clock, "owner", "rain all day")
    hits = store.search("owner", "what is the automobile color")
    found = next(h for h in hits if h.match is not None and h.match.id == car)
    assert HIGHLIGHT[0] not in found.snippet  # "is" is no match: a stopword, found by meaning
