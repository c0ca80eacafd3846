"""The meaning query turns a speaker's name into "you" (hermes.memory.sessions.semantic.
meaning_text) only where the word is written as a name: a speaker is often the home's own user,
whose display name can be an everyday word ("Will", "May", a Discord name "the_real_bob"), and
cron's prompts are spoken by "cron". Such a word in a question stays as written, and the turn
embeds the message once (fact recall's embedding, served again), not a second, mangled text."""

import pytest

pytest.importorskip("numpy")

from hermes.memory.sessions import semantic  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from tests.histories import say  # noqa: E402
from tests.test_session_semantic import RecordingEmbedder  # noqa: E402


def test_an_everyday_word_that_is_a_speakers_name_stays(db, clock):
    store = SessionStore(db, clock=clock)
    (will,) = say(store, clock, "owner", "the forecast says rain", speaker="Will")
    (bob,) = say(store, clock, "owner", "lunch at noon", speaker="the_real_bob")
    (cron,) = say(store, clock, "owner", "summarise the backups", speaker="cron")
    ids = [will, bob, cron]
    for text in ["what will the weather be on Monday?", "Will I need an umbrella?",
                 "what is the plan for lunch?", "what did the cron job say about backups?",
                 "What Is The Plan For Lunch?"]:
        assert semantic.meaning_text(db, "owner", text, ids) == text
    # written as names, they are still the one spoken to
    assert semantic.meaning_text(db, "owner", "what did Will say about rain?", ids) == (
        "what did you say about rain?")
    assert semantic.meaning_text(db, "owner", "Bob's lunch?", ids) == "your lunch?"
    assert semantic.meaning_text(db, "owner", "is it late? Will said so", ids) == (
        "is it late? Will said so")


def test_a_turn_of_a_user_called_will_embeds_its_message_once(db, clock):
    embedder = RecordingEmbedder()
    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, embedder))
    say(store, clock, "owner", "the forecast says rain on Monday", speaker="Will")
    question = "what will the weather be on Monday?"
    store.search_messages("owner", question, any_word=True, meaning=question)
    assert embedder.queries == [question]
