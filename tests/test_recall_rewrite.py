"""One budgeted query rewrite before recall for a message that refers back
(hermes.agent.recall_rewrite), through a whole turn with the scripted model."""

from __future__ import annotations

import logging

import pytest

from hermes.agent import recall_rewrite
from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.runtime import Runtime
from tests.fakellm import bad_request

ENGAGED = "My sister got engaged on a hike in the mountains."
BACK = "Remember the big news about my sibling I told you about? The date is set."


@pytest.fixture
def agent(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield Agent(rt.memory)
    rt.close()


def told_before(agent, clock):
    sessions = agent.memory.sessions
    past = sessions.create("owner", "terminal")
    sessions.append("owner", past.id, "user", ENGAGED)
    sessions.append("owner", past.id, "assistant", "Congratulations to her!")
    clock.advance(days=20)
    return sessions.create("owner", "terminal").id


def test_what_refers_back():
    for text in (BACK, "as I said, the boiler is fixed", "Like I mentioned, we moved.",
                 "the thing I told you about is sorted", "I told you about this last time",
                 "you know the plan we talked about?", "remember when we went to Porto?"):
        assert recall_rewrite.refers_back(text), text
    for text in ("what database do we use?", "I said no to the offer", "the news is great",
                 "remember to buy milk", "Remember that I use Helix. Which editor do I like?",
                 "Remember the dentist is on Friday.", ""):
        assert not recall_rewrite.refers_back(text), text


def test_remembering_out_loud_or_general_knowledge_is_not_referring_back():
    # Each cost a background call and recall searched the model's guess (review rev5): the
    # user's own memories, and what the assistant knows, are not something told before.
    for text in ("I remember when I was a kid we had a goldfish called Bubbles",
                 "Do you remember how to make pancakes?",
                 "Can you remember what the capital of Peru is?",
                 "i remember how cold that winter was"):
        assert not recall_rewrite.refers_back(text), text
    for text in ("Do you remember what I said about the boiler?", "remember how I take my tea?",
                 "Remember when our flight got cancelled?", "remember what you told me?"):
        assert recall_rewrite.refers_back(text), text


def test_a_reply_is_read_defensively():
    assert recall_rewrite.parse("```\nMy sister got engaged.\n```") == "My sister got engaged."
    assert recall_rewrite.parse('Earlier message: "My sister got engaged."') \
        == "My sister got engaged."
    assert recall_rewrite.parse("  \n ") is None and recall_rewrite.parse(None) is None
    assert len(recall_rewrite.parse("word " * 200) or "") == recall_rewrite.MAX_CHARS
    assert recall_rewrite.recall_text("hi", None) == "hi"
    assert recall_rewrite.recall_text("hi", "there") == "there"


# What models answer when they will not guess (review rev5): recall searching such a text
# instead of the message found the chit-chat, and lost what the message alone finds.
JUNK = ["I'm sorry, I can't see your earlier conversations, so I don't know what you told me.",
        "Sorry, I don't have access to previous messages.",
        "As an AI, I have no memory of past chats.",
        "I cannot know what the earlier message said without more context.",
        "Unknown.", "N/A", "none", "I don't know.", "Not sure", "?", "...",
        '{"earlier_message": ""}']


def test_a_reply_that_will_not_guess_is_no_rewrite():
    for reply in JUNK:
        assert recall_rewrite.parse(reply) is None, reply
    # what users say in their own words stays, first person, negations and all
    for said in ("I can't have dairy, I'm lactose intolerant.", "I don't drink coffee anymore.",
                 "Sorry I missed your call, my sister got engaged.", "None of us slept, the "
                 "baby was born."):
        assert recall_rewrite.parse(said) == said, said


def test_a_reply_in_json_gives_its_text():
    assert recall_rewrite.parse('```json\n{"earlier_message": "My sister got engaged."}\n```') \
        == "My sister got engaged."
    assert recall_rewrite.parse('{"text": ["My sister got engaged."]}') == "My sister got engaged."
    assert recall_rewrite.parse('["My sister got engaged."]') == "My sister got engaged."
    assert recall_rewrite.parse("{not json") == "{not json"  # kept as written


async def test_a_message_that_refers_back_recalls_through_one_rewrite(agent, fake_model, clock):
    session_id = told_before(agent, clock)
    fake_model.reply("My sister got engaged.")  # the rewrite (background model: the same here)
    fake_model.reply("How exciting!")
    result = await agent.turn("owner", session_id, BACK).run()
    assert result.error is None and result.text == "How exciting!"
    rewrite_request, reply_request = fake_model.requests
    assert recall_rewrite.PROMPT in rewrite_request.system
    assert BACK in rewrite_request.prompt and rewrite_request.tools is None
    # The reply's prompt recalled the past exchange, which shares no word with the message.
    assert "<recalled_conversations>" in reply_request.tail and ENGAGED in reply_request.tail
    assert reply_request.tail.endswith(BACK)  # what the person wrote, unchanged
    calls = agent.memory.db.execute(
        "SELECT source, count(*) FROM model_calls GROUP BY source").fetchall()
    assert dict(calls) == {"recall": 1, "chat": 1}


async def test_without_the_rewrite_the_past_exchange_is_not_recalled(agent, fake_model, clock):
    # The line the test above guards: the same turn with the rewrite off.
    agent.settings.recall_rewrite = False
    session_id = told_before(agent, clock)
    fake_model.reply("How exciting!")
    await agent.turn("owner", session_id, BACK).run()
    (request,) = fake_model.requests
    assert ENGAGED not in request.tail


async def test_a_message_that_does_not_refer_back_costs_no_call(agent, fake_model, clock):
    session_id = told_before(agent, clock)
    fake_model.reply("Sure.")
    await agent.turn("owner", session_id, "what should I cook tonight?").run()
    assert len(fake_model.requests) == 1  # a second call would fail loudly (nothing scripted)


async def test_a_failed_rewrite_recalls_by_the_message_alone(agent, fake_model, clock, caplog):
    session_id = told_before(agent, clock)
    fake_model.error(bad_request("no"))
    fake_model.reply("How exciting!")
    with caplog.at_level(logging.WARNING, logger="hermes.agent.turn"):
        result = await agent.turn("owner", session_id, BACK).run()
    assert result.error is None and result.text == "How exciting!"
    assert [r.getMessage() for r in caplog.records if "recall rewrite" in r.getMessage()] \
        and ENGAGED not in fake_model.requests[-1].tail


async def test_a_slow_rewrite_is_not_waited_for(agent, fake_model, clock):
    agent.settings.recall_rewrite_seconds = 0.05
    session_id = told_before(agent, clock)
    gate = fake_model.block()  # the rewrite call never answers in time
    fake_model.reply("My sister got engaged.")
    fake_model.reply("How exciting!")
    result = await agent.turn("owner", session_id, BACK).run()
    gate.set()
    assert result.error is None and ENGAGED not in fake_model.requests[-1].tail


async def test_a_temporary_chat_rewrites_from_its_own_turns(agent, fake_model, clock):
    from hermes.agent.turn import Transcript

    told_before(agent, clock)
    fake_model.reply("My sister got engaged.")
    fake_model.reply("How exciting!")
    result = await agent.turn("owner", -1, BACK, transcript=Transcript(-1, clock)).run()
    assert result.error is None and ENGAGED in fake_model.requests[-1].tail
    rows = agent.memory.db.execute(
        "SELECT source, session_id FROM model_calls ORDER BY id").fetchall()
    assert rows == [("recall", None), ("chat", None)]  # counted for no session


async def test_a_model_that_is_down_costs_one_call_and_no_wait(agent, fake_model, clock, caplog):
    # One budgeted call: a transient failure is not retried (a retry's backoff of 1, 2, 4 s
    # would hold the reply up to recall_rewrite_seconds each time the background model is
    # down), and the log says why, not "TimeoutError".
    from tests.fakellm import service_unavailable

    session_id = told_before(agent, clock)
    fake_model.error(service_unavailable("overloaded"))
    fake_model.reply("How exciting!")
    with caplog.at_level(logging.WARNING, logger="hermes.agent.turn"):
        result = await agent.turn("owner", session_id, BACK).run()
    assert result.error is None and result.text == "How exciting!"
    assert len(fake_model.requests) == 2 and fake_model.sleeps == []
    (line,) = [r.getMessage() for r in caplog.records if "recall rewrite" in r.getMessage()]
    assert "overloaded" in line and not any(r.exc_info for r in caplog.records)


@pytest.mark.parametrize("junk", [JUNK[0], JUNK[4]])
async def test_a_rewrite_that_will_not_guess_recalls_by_the_message(agent, fake_model, clock,
                                                                    junk):
    sessions = agent.memory.sessions
    session_id = told_before(agent, clock)
    # what recall would find were it to search the reply instead of the message
    other = sessions.create("owner", "terminal")
    said = "Sorry, I can't see the earlier conversations: unknown caller, unknown number."
    sessions.append("owner", other.id, "user", said)
    fake_model.reply(junk)
    fake_model.reply("How exciting!")
    result = await agent.turn("owner", session_id, BACK).run()
    assert result.error is None and said not in fake_model.requests[-1].tail


async def test_the_rewrite_request_is_bounded_whatever_was_pasted(agent, fake_model, clock):
    # Budgeted: a pasted page that says "as I said", after turns of pasted pages, asked the
    # background model for a one-line guess with all of it (up to the 64,000 characters of
    # the message and of each of 6 recent turns: past a small model's context, and paid for
    # in full). Review rev5.
    sessions = agent.memory.sessions
    session_id = told_before(agent, clock)
    sessions.append("owner", session_id, "user", "log line " * 1200)
    sessions.append("owner", session_id, "assistant", "noted " * 1500)
    fake_model.reply("My sister got engaged.")
    fake_model.reply("How exciting!")
    long = "As I said, " + "the build log again " * 1200
    result = await agent.turn("owner", session_id, long).run()
    assert result.error is None
    rewrite_request = fake_model.requests[0]
    assert recall_rewrite.PROMPT in rewrite_request.system
    assert len(rewrite_request.prompt) < 6000
    # the part that points back is what is sent, wherever it stands in the message
    late = "the build log " * 1000 + "as I said, the boiler is fixed. " + "more log " * 1000
    assert "as I said, the boiler is fixed." in recall_rewrite.request(late)[1]["content"]


def test_a_question_that_refers_back_is_read_within_a_sentence_of_its_words():
    # "remember the ...?" is read up to QUESTION_CHARS: unbounded, each "remember the" of a
    # pasted 64,000-character text scanned to its end (0.94 s of the event loop for
    # "remember the " x 4,900, where another user's turn waits; review rev5).
    near = "Remember the " + "very " * 40 + "race I entered?"
    far = "remember the " + "x" * (recall_rewrite.QUESTION_CHARS + 10) + "?"
    assert recall_rewrite.refers_back(near) and not recall_rewrite.refers_back(far)


def test_a_json_reply_gives_the_text_it_names_not_its_first_string():
    """A reply in JSON with more than the text (review rev6): the rewrite is the value of a key
    that names it, else the longest text; a reply cut off inside its JSON (max_tokens) gives
    the text it had begun."""
    parse = recall_rewrite.parse
    assert parse('{"confidence": "low", "rewrite": "My sister got engaged in Porto."}') \
        == "My sister got engaged in Porto."
    assert parse('{"rewrite": "Kyoto trip", "note": "guessed from the recent conversation"}') \
        == "Kyoto trip"
    assert parse('{"subject": "sister", "guess": "My sister got engaged in Porto."}') \
        == "My sister got engaged in Porto."
    assert parse('{"rewrite": "My sister got engaged in Po') == "My sister got engaged in Po"
    assert parse('```json\n{"earlier_message": "The \\"red\\" car I bought') \
        == 'The "red" car I bought'
    assert parse('{"rewrite": "Unknown"}') is None


def test_a_reply_that_will_not_guess_in_another_language_is_no_rewrite():
    """A person who writes in French gets a background reply in French (review rev6)."""
    for reply in ("Inconnu.", "Je ne sais pas.", "No lo sé.", "Desconocido", "Unbekannt.",
                  "Ich weiß es nicht.", "Non lo so.", "Não sei.", "不明", "わかりません。",
                  "不知道"):
        assert recall_rewrite.parse(reply) is None, reply
    for said in ("Je ne sais pas nager, je prends des cours.", "No lo sé explicar bien"):
        assert recall_rewrite.parse(said) == said, said


def test_remembering_out_loud_with_a_word_between_is_not_referring_back():
    """"I still remember when ..." is the person's own memory, as "I remember when ..." is
    (review rev6: only the latter was told apart)."""
    for text in ("I still remember when I was a kid we had snow every winter",
                 "I really remember how my dad cooked on Sundays",
                 "I do remember what my grandmother said about it"):
        assert not recall_rewrite.refers_back(text), text
    for text in ("So do you still remember when I told you about the boiler?",
                 "Anyway, remember when we went to Kyoto?"):
        assert recall_rewrite.refers_back(text), text
