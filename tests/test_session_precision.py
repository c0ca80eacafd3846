"""What a search shows: a conversation found by meaning alone must be close in meaning, and
each hit says what it matched (words, meaning, both), on every path (the grouped search behind
the CLI and the model's tool, the CLI's words, JSON, past messages in the prompt)."""

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.sessions import semantic  # noqa: E402
from hermes.memory.sessions.past_messages import recall_past_messages  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from tests.histories import say  # noqa: E402
from tests.test_embeddings import ToyEmbedder  # noqa: E402


@pytest.fixture
def store(db, clock):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))


def home(store, clock):
    """A car, a greeting and a city, each a conversation of its own (the toy model reads
    "car"/"automobile"/"vehicle" as one concept; a greeting or a city means nothing to it)."""
    car = say(store, clock, "owner", "my car is blue", "nice!")
    hello = say(store, clock, "owner", "hello there", "hi!")
    lisbon = say(store, clock, "owner", "we loved Lisbon", "the trams are great")
    say(store, clock, "bob", "my automobile is red")
    return car, hello, lisbon


def test_a_conversation_neither_word_nor_meaning_found_is_not_listed(store, clock):
    car, hello, lisbon = home(store, clock)
    hits = store.search("owner", "automobile colour", limit=5)
    assert [h.match.id for h in hits] == [car[0]]
    assert hits[0].matched == "meaning" and hits[0].to_json()["matched"] == "meaning"
    # A word in common lists a conversation whatever its meaning, and says so.
    hits = store.search("owner", "automobile trams", limit=5)
    by_message = {h.match.id: h.matched for h in hits}
    assert by_message[car[0]] == "meaning" and by_message[lisbon[1]] == "words"
    assert hello[0] not in by_message and hello[1] not in by_message


def test_every_candidate_by_meaning_is_listed_when_the_share_is_off(store, clock, monkeypatch):
    # The line the test above guards: with no share of the best asked of a match by meaning,
    # the greeting and the city come back (the toy's cosines for them are far from 0).
    car, hello, lisbon = home(store, clock)
    monkeypatch.setattr(semantic, "DEFAULT_SEMANTIC", semantic.SemanticParams(shown_share=0.0))
    listed = {h.match.id for h in store.search("owner", "automobile colour", limit=5)}
    assert car[0] in listed and listed & {*hello, *lisbon}


def test_search_messages_says_what_each_matched_and_keeps_the_fill_ins(store, clock):
    car, hello, lisbon = home(store, clock)
    hits = store.search_messages("owner", "automobile trams", limit=10)
    matched = {h.message.id: h.matched for h in hits}
    assert matched[car[0]] == "meaning" and matched[lisbon[1]] == "words"
    assert matched.get(hello[0]) == ""  # ranked below, for whoever wants the whole order
    assert hits[0].to_json()["matched"] in ("words", "meaning", "both")


def test_past_messages_show_nothing_rather_than_noise(store, clock):
    car, hello, lisbon = home(store, clock)
    current = store.create("owner", "discord")
    (postman,) = say(store, clock, "owner", "the postman came at noon")
    # "postman" was said before (the gate lets the message search); the car is close in
    # meaning; the greeting and Lisbon are neither and stay out, though 4 excerpts were asked.
    shown = recall_past_messages(store, "owner", "the postman asked which automobile I drive",
                                 budget=4000, limit=4, exclude_session=current.id)
    assert {e.match_id for e in shown} == {car[0], postman}


def test_the_cli_says_what_a_hit_matched(cli, db, clock):
    from hermes.cli.sessions import _how
    from hermes.memory.sessions.records import SearchHit, Session

    session = Session(1, "owner", "terminal", None, None, None, "", "", None, 2, None)

    def hit(matched, mode="loose", snippet="**car**", matched_in=("messages",)):
        return SearchHit(session, 1.0, None, snippet, [], mode, list(matched_in), [], matched)

    # every hit says it, one holding all the words too (review rev5: it said nothing)
    assert _how(hit("words", mode="strict")) == ", words"
    assert _how(hit("both", mode="strict")) == ", words, by meaning"
    assert _how(hit("words")) == ", any word"
    assert _how(hit("both")) == ", any word, by meaning"
    assert _how(hit("meaning", snippet="my car")) == ", by meaning"
    assert _how(hit("facts", snippet="keys", matched_in=("messages", "facts"))) \
        == ", through a fact"


def test_a_hit_whose_line_holds_none_of_the_words_says_they_are_nearby(store, clock):
    # "tomato" showed the assistant's answer to the question that holds the word (the answer
    # is lifted by the question's score), labelled as a word match with no word in the line
    # (review rev5 P6): the words are in the turns around it.
    question, answer = say(store, clock, "owner", "Which tomato variety should I pick?",
                           "Maskotka stays small and does fine in pots.")
    (hit,) = store.search("owner", "tomato", limit=5)
    assert hit.match.id == answer and "**" not in hit.snippet
    assert hit.found_by == "words nearby"
    (hit,) = store.search("owner", "Maskotka pots", limit=5)
    assert hit.match.id == answer and hit.found_by == "words"  # its own words


class HubEmbedder(ToyEmbedder):
    """A small model's habit: a greeting is close to any short query (MiniLM puts "hello
    there" at 0.29 to "my car", over its floor). Here a line holding one of ``hubs`` is the
    car's concept."""

    hubs: tuple[str, ...] = ("hello", "help")

    def embed(self, texts):
        out = super().embed(texts)
        for i, text in enumerate(texts):
            if any(word in text.lower() for word in self.hubs):
                out[i] = super().embed(["car"])[0]
        return out


def test_a_greeting_is_no_match_by_meaning_nor_is_its_answer(db, clock, monkeypatch):
    from hermes.memory.sessions import search

    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, HubEmbedder()))
    hello = say(store, clock, "owner", "hello there", "hi! what shall we plan?")
    # an assistant's small talk is a hub too (review rev3 F7), never a match by meaning
    say(store, clock, "owner", "hey", "Hi! How can I help today?")
    say(store, clock, "owner", "we loved Lisbon", "the trams are great")
    say(store, clock, "bob", "my automobile is red")
    assert store.search("owner", "automobile colour", limit=5) == []  # nothing rather than noise
    matched = {h.message.id: h.matched for h in store.search_messages("owner",
                                                                        "automobile colour")}
    assert matched[hello[0]] == "" and matched[hello[1]] == ""
    # a conversation about it is still found by meaning
    car = say(store, clock, "owner", "my car is blue", "nice!")
    assert [h.match.id for h in store.search("owner", "automobile colour", limit=5)] == [car[0]]
    # the lines this guards: the greeting's answer is close through the greeting's window ...
    monkeypatch.setattr(search, "_next_to", lambda db, user, ids: set())
    listed = [h.match.id for h in store.search("owner", "automobile colour", limit=5)]
    assert hello[1] in listed
    # ... and the greeting itself
    monkeypatch.setattr(search, "is_chatter", lambda text: False)
    listed = [h.match.id for h in store.search("owner", "automobile colour", limit=5)]
    assert hello[0] in listed


def test_chatter_is_only_greetings_thanks_and_stopwords():
    from hermes.memory.words.substance import is_chatter

    assert is_chatter("hello there") and is_chatter("Ok, thanks!") and is_chatter("Hi!")
    assert not is_chatter("my car") and not is_chatter("I need help with my taxes today")
    # an assistant's side of small talk (review rev3 F7: the hub of a small home's noise)
    assert is_chatter("Hi! How can I help today?")
    assert is_chatter("Great, let me know if you need anything else.")
    assert is_chatter("You're welcome! Let me know if you have more questions.")
    assert not is_chatter("") and not is_chatter("你好") and not is_chatter("🙂")


def test_the_turns_next_to_a_greeting_are_read_for_its_user_only(store, clock, db):
    from hermes.memory.sessions.search import _next_to

    mine = say(store, clock, "owner", "hello there", "hi! how can I help?", "about my car")
    theirs = say(store, clock, "bob", "hello", "hi bob")
    assert _next_to(db, "owner", {mine[1]}) == {mine[0], mine[2]}
    assert _next_to(db, "owner", {theirs[0]}) == set()
    assert _next_to(db, "bob", {theirs[0]}) == {theirs[1]}


async def test_the_web_panel_says_what_each_hit_matched_and_marks_only_its_words(
        monkeypatch, clock):
    # Review rev5: the panel's search showed no label, and lit the whole matched line alike
    # for a word match and a match by meaning. Now each hit says what it matched, as the CLI
    # does, and only the query's words in the line are marked.
    import re

    from hermes.config import load_settings
    from hermes.frontends.web.app import WebContext
    from hermes.memory.embeddings import embedders
    from hermes.runtime import Runtime
    from tests.web_client import Panel

    monkeypatch.setitem(embedders.MODELS, "minilm", ToyEmbedder)
    monkeypatch.setenv("HERMES_SESSIONS__EMBEDDINGS", "true")
    rt = Runtime(load_settings(), clock=clock)
    car, hello, lisbon = home(rt.memory.sessions, clock)
    panel = await Panel(WebContext(rt.memory)).login()
    try:
        page = (await panel.get("/sessions", params={"q": "automobile trams"})).text
    finally:
        await panel.close()
        rt.close()
    hits = re.findall(r'<li class="hit">(.*?)</ul>', page, re.S)
    assert len(hits) == 2 and "hello there" not in page
    by_title = {("car" if "my car is blue" in h else "lisbon"): h for h in hits}
    assert '<span class="found">by meaning</span>' in by_title["car"]
    assert "<mark>" not in by_title["car"]  # no word of the query in it: nothing lit
    assert '<span class="found">any word</span>' in by_title["lisbon"]
    assert "the <mark>trams</mark> are great" in by_title["lisbon"]
    assert page.count("<mark>") == 1


async def test_the_web_panel_marks_a_cjk_match_inside_its_run(rt, clock):
    # CJK has no word breaks: the run a LIKE search found is marked where it stands in the
    # line, not only as a whole word (it was never marked).
    from hermes.frontends.web.app import WebContext
    from tests.web_client import Panel

    say(rt.memory.sessions, clock, "owner", "我们去了京都旅行")
    panel = await Panel(WebContext(rt.memory)).login()
    try:
        page = (await panel.get("/sessions", params={"q": "京都"})).text
    finally:
        await panel.close()
    assert "我们去了<mark>京都</mark>旅行" in page

class SmallTalkHubEmbedder(HubEmbedder):
    """MiniLM puts "nothing really, just saying hi" at 0.21 to "my car" (rev5 P5): here each
    line of that small talk is the car's concept."""

    hubs = ("saying", "hear")


def test_small_talk_that_says_nothing_is_no_match_by_meaning(db, clock):
    from hermes.memory.words.substance import is_chatter

    assert is_chatter("nothing really, just saying hi")
    assert is_chatter("Nice to hear from you. Have a good day!")
    assert not is_chatter("nothing works on my car") and not is_chatter("we hear the sea")
    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, SmallTalkHubEmbedder()))
    say(store, clock, "owner", "nothing really, just saying hi",
        "Nice to hear from you. Have a good day!")
    say(store, clock, "owner", "we loved Lisbon", "the trams are great")
    assert store.search("owner", "my car", limit=5) == []  # nothing rather than noise
    car = say(store, clock, "owner", "my automobile is blue", "nice!")
    assert [h.match.id for h in store.search("owner", "my car", limit=5)] == [car[0]]
