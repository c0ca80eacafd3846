"""Past conversations in the prompt (memory.sessions.past_messages): the best few matching past
messages from other sessions, with neighbours, date and title, within a character budget."""

from __future__ import annotations

import pytest

from hermes.agent.turn import Agent
from hermes.config import load_settings
from hermes.memory.sessions import past_messages
from hermes.memory.sessions.past_messages import recall_past_messages
from hermes.runtime import Runtime


@pytest.fixture
def agent(fake_model, clock):
    rt = Runtime(load_settings(), clock=clock)
    yield Agent(rt.memory)
    rt.close()


@pytest.fixture
def store(agent):
    return agent.memory.sessions


def chat(store, clock, user, title, *pairs):
    session = store.create(user, "discord", title=title)
    for asked, answered in pairs:
        clock.advance(minutes=1)
        store.append(user, session.id, "user", asked)
        clock.advance(minutes=1)
        store.append(user, session.id, "assistant", answered)
    return session


def recalled(system: str) -> str:
    if "<recalled_conversations>" not in system:
        return ""
    return system.split("<recalled_conversations>")[1].split("</recalled_conversations>")[0]


async def test_a_turn_shows_the_matching_past_message_with_its_neighbours_date_and_title(
        agent, fake_model, store, clock):
    chat(store, clock, "owner", "Holiday planning",
         ("where should we go in spring?", "Lisbon is lovely in April."),
         ("ok, book the flights to Lisbon", "Booked: TAP 1234, 12 April."),
         ("thanks", "Have fun!"))
    clock.advance(days=3)
    now = store.create("owner", "terminal")
    fake_model.reply("TAP 1234.")
    result = await agent.turn("owner", now.id, "which flight number for Lisbon again?").run()
    shown = recalled(fake_model.last.tail)
    assert "[2026-11-29 · Holiday planning]" in shown
    assert "> the user: ok, book the flights to Lisbon" in shown  # the match, marked
    assert "  Hermes: Booked: TAP 1234, 12 April." in shown  # its answer, after it
    assert "which flight number" not in shown  # never the message being answered
    prompt = agent.prompts.build("owner", "which flight number for Lisbon again?",
                                 store.messages("owner", now.id), first_turn=False)
    assert prompt.shown_messages and result.assistant_message_id


async def test_nothing_is_recalled_for_small_talk_or_the_current_conversation(
        agent, fake_model, store, clock):
    session = chat(store, clock, "owner", None, ("the tiles in Porto were blue", "Azulejos!"))
    fake_model.reply("ok").reply("ok")
    await agent.turn("owner", session.id, "what colour were the Porto tiles?").run()
    assert recalled(fake_model.last.tail) == ""  # only this session holds it
    other = store.create("owner", "terminal")
    await agent.turn("owner", other.id, "ok!").run()
    assert recalled(fake_model.last.tail) == ""


def test_excerpts_fit_the_budget_and_the_best_partial_match_is_found(store, clock):
    for n in range(6):
        chat(store, clock, "owner", f"Garden {n}",
             (f"the greenhouse tomatoes batch {n} " + "very " * 40 + "red", "Nice."))
    chat(store, clock, "owner", "Pipeline", ("Alice maintains the Kestrel pipeline", "Noted."))
    found = recall_past_messages(store, "owner", "Kestrel pipeline in Zanzibar greenhouse?",
                                 budget=600, limit=3)
    assert sum(len(e.text) + 1 for e in found) <= 600
    assert any("Kestrel" in e.text for e in found)
    assert recall_past_messages(store, "owner", "greenhouse", budget=0) == []


def test_another_users_past_messages_are_never_recalled(store, clock):
    chat(store, clock, "bob", "Bob's secrets", ("my bank PIN hint is the kestrel", "Noted."))
    chat(store, clock, "owner", "Birds", ("a kestrel on the fence", "Lovely."))
    found = recall_past_messages(store, "owner", "the kestrel?", budget=2000)
    assert found and all(m.session_id != 1 for e in found for m in e.messages)
    assert all("PIN" not in e.text for e in found)
    assert recall_past_messages(store, "carol", "the kestrel?", budget=2000) == []


def test_session_search_can_leave_out_the_conversation_in_progress(store, clock):
    old = chat(store, clock, "owner", None, ("the boiler code is E119", "Call the plumber."))
    now = chat(store, clock, "owner", None, ("what was the boiler code E119 about?", "..."))
    hits = store.search_messages("owner", "boiler code E119", exclude_session=now.id)
    assert hits and all(h.session.id == old.id for h in hits)


async def test_an_excerpt_shown_earlier_in_the_conversation_is_not_repeated(
        agent, fake_model, store, clock):
    chat(store, clock, "owner", "Boiler", ("the boiler code is E119", "Call the plumber."))
    now = store.create("owner", "terminal")
    fake_model.reply("E119.").reply("Still E119.")
    await agent.turn("owner", now.id, "what was the boiler code?").run()
    assert "E119" in recalled(fake_model.last.tail)
    await agent.turn("owner", now.id, "and the boiler code again?").run()
    assert recalled(fake_model.last.tail) == ""  # it is still there, one turn up
    assert "the boiler code is E119" in fake_model.last.prompt


def test_the_words_searched_for_are_the_rarest_in_this_users_messages(store, clock):
    """The term count behind the turn's search is this user's: a word only another user wrote
    is not searched for, and rarity is counted in this user's messages."""
    from hermes.memory.sessions.past_messages import selective_query
    from hermes.store.fts import build_match

    chat(store, clock, "owner", None, ("the kestrel nests by the greenhouse", "Nice."),
         ("the greenhouse door sticks", "Oil it."))
    chat(store, clock, "bob", None, *[(f"zanzibar kestrel trip {n}", "ok") for n in range(4)])
    plan = build_match("kestrel greenhouse zanzibar")
    assert selective_query(store, "owner", plan) == '"kestrel" "greenhouse"'
    assert selective_query(store, "bob", plan) == '"kestrel" "zanzibar"'  # a tie: in order
    assert selective_query(store, "carol", plan) == ""


def test_a_term_count_counts_only_this_users_messages(store, clock):
    chat(store, clock, "owner", None, ("a kestrel on the fence", "Lovely."))
    chat(store, clock, "bob", None, ("kestrel kestrel", "ok"), ("another kestrel", "ok"))
    assert store.term_count("owner", '"kestrel"', cap=1000) == (1, 3)
    assert store.term_count("bob", '"kestrel"', cap=1000) == (2, 3)
    assert store.term_count("carol", '"kestrel"', cap=1000) == (0, 3)
    # The scan stops at the cap; a word that common is not searched for, so whose its
    # matches are is not read (0)
    assert store.term_count("owner", '"kestrel"', cap=2) == (0, 2)
    assert store.term_count("owner", '"kestrel"', cap=3) == (0, 3)
    assert store.term_count("owner", '"kestrel"', cap=4) == (1, 3)


def test_a_secret_cut_by_the_line_cap_is_redacted_whole_not_shown_in_part(store, clock):
    # A message stored before redaction existed (or with sessions.redact_secrets off) holds a
    # secret where the line cap would cut it: the part left must not escape the redaction.
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    store.redact_secrets = False
    padding = "x" * (past_messages.LINE_CHARS - 40)  # the cap falls inside the token
    chat(store, clock, "owner", "Deploy", (padding + " the kestrel deploy token is " + token,
                                           "Noted."))
    store.redact_secrets = True
    (excerpt,) = recall_past_messages(store, "owner", "kestrel deploy?", budget=2000)
    assert "[redacted" in excerpt.text
    assert token[:12] not in excerpt.text


def test_a_secret_in_a_session_title_is_redacted_in_the_excerpt(store, clock):
    # Titles come from summaries and importers; an excerpt shows its session's title.
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    chat(store, clock, "owner", f"token {token}", ("the kestrel deploy is friday", "Noted."))
    (excerpt,) = recall_past_messages(store, "owner", "kestrel deploy?", budget=2000)
    assert "[redacted" in excerpt.text.splitlines()[0]
    assert token[:12] not in excerpt.text


def test_a_failing_search_recalls_nothing_and_says_so_once_in_the_log(store, clock, caplog):
    chat(store, clock, "owner", "Birds", ("a kestrel on the fence", "Lovely."))
    assert recall_past_messages(store, "owner", "the kestrel?", budget=2000)
    past_messages._reported.clear()
    store.db.execute("DROP TABLE messages_fts")  # a broken index: every search fails the same
    with caplog.at_level("WARNING", logger="hermes.memory.sessions.past_messages"):
        assert recall_past_messages(store, "owner", "the kestrel?", budget=2000) == []
        assert recall_past_messages(store, "owner", "the kestrel again?", budget=2000) == []
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("past_messages")]
    assert len(lines) == 1 and "OperationalError" in lines[0], lines
    assert "\n" not in lines[0] and not caplog.records[0].exc_info


def test_a_match_too_long_for_what_is_left_is_passed_over_for_one_that_fits(store, clock):
    # Three matches; the budget holds the first with its neighbours and the third alone: the
    # second, longer even alone, is passed over (its neighbours never read) for the third.
    chat(store, clock, "owner", "A", ("before", "ok"),
         ("kestrel kestrel nest " + "y " * 40, "yes"), ("after", "fine"))
    chat(store, clock, "owner", "B", ("kestrel, kestrel! " * 12 + "long " * 40, "hm"))
    chat(store, clock, "owner", "C", ("one kestrel " + "x " * 20, "cool"))
    full = recall_past_messages(store, "owner", "kestrel?", budget=4000, limit=3)
    assert [e.session.title for e in full] == ["B", "A", "C"]
    first = len(full[0].text) + 1
    alone = len(past_messages.render(full[2].session, full[2].messages[:1], full[2].match_id)) + 1
    found = recall_past_messages(store, "owner", "kestrel?", budget=first + alone, limit=3)
    assert [e.session.title for e in found] == ["B", "C"]
    assert found[1].text.endswith("> the user: one kestrel" + " x" * 20)  # without its answer
    assert sum(len(e.text) + 1 for e in found) <= first + alone


def test_a_users_count_of_a_word_stops_at_its_cap_and_past_it_the_index_orders(
        store, clock, monkeypatch):
    from hermes.memory.sessions.past_messages import selective_query
    from hermes.store.fts import build_match

    chat(store, clock, "bob", None, ("kestrel kestrel", "ok"), ("another kestrel", "ok"))
    assert store.term_count("bob", '"kestrel"', cap=1000, mine_cap=1) == (1, 2)
    monkeypatch.setattr(past_messages, "MINE_CAP", 2)
    chat(store, clock, "owner", None, *[(f"alpha note {n}", "ok") for n in range(3)],
         *[(f"beta note {n}", "ok") for n in range(4)], ("gamma once", "ok"))
    # gamma is rarest (1); alpha and beta both reach the cap (2): the index's count decides
    assert selective_query(store, "owner", build_match("beta alpha gamma")) == (
        '"gamma" "alpha" "beta"')


def test_a_word_found_common_stays_common_for_a_while_then_is_counted_again(
        store, clock, monkeypatch):
    from hermes.memory.sessions.past_messages import selective_query
    from hermes.store.fts import build_match

    monkeypatch.setattr(past_messages, "COMMON_MESSAGES", 3)
    session = chat(store, clock, "owner", None, *[(f"kestrel sighting {n}", "ok")
                                                   for n in range(3)])
    plan = build_match("kestrel")
    assert selective_query(store, "owner", plan) == ""  # in 3 messages: too common to search
    gone = [m.id for m in store.messages("owner", session.id) if "kestrel" in m.content][:2]
    store.db.execute(f"DELETE FROM messages WHERE id IN ({gone[0]}, {gone[1]})")
    assert selective_query(store, "owner", plan) == ""  # remembered, not recounted
    clock.advance(seconds=past_messages.COMMON_SECONDS + 1)
    assert selective_query(store, "owner", plan) == '"kestrel"'


def test_a_secret_across_the_title_cut_or_in_a_speaker_never_reaches_the_excerpt(store, clock):
    # A title as an importer stored it (unredacted), with a token where the cut at 80 falls;
    # a speaker name as an importer stored it (speakers are not redacted on the way in).
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    chat(store, clock, "owner", "x" * 70 + " " + token, ("the kestrel deploy is friday", "Ok."))
    other = store.create("owner", "discord", title="Birds")
    store.append("owner", other.id, "user", "a kestrel deploy again", speaker=f"sk-{token}")
    excerpts = recall_past_messages(store, "owner", "kestrel deploy?", budget=4000)
    shown = "\n".join(e.text for e in excerpts)
    assert len(excerpts) == 2 and shown.count("[redacted") == 2, shown
    assert token[:8] not in shown and "ghp_" not in shown


def test_each_excerpt_carries_its_own_sessions_title(store, clock):
    # Titles are redacted once per session in a call: each excerpt still shows its own.
    for title in ("Kestrel watching", "Fence repairs", "Kestrel nest box"):
        chat(store, clock, "owner", title, (f"the kestrel again, {title.lower()}", "Noted."),
             ("and then?", "Nothing more."))
    found = recall_past_messages(store, "owner", "the kestrel?", budget=2000, limit=3)
    assert len(found) == 3
    for excerpt in found:
        assert excerpt.text.splitlines()[0].endswith(f"· {excerpt.session.title}]")


def test_the_message_being_answered_does_not_open_the_gate(db, clock):
    """A turn records the message it answers before the prompt is built: its own words are not
    "said before" (rev5 P1: every message opened the gate, "summarise the plot of Hamlet"
    recalled the tomatoes)."""
    np = pytest.importorskip("numpy")  # noqa: F841 (the toy embedder's)
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.vectors import MessageVectors
    from tests.histories import say
    from tests.test_embeddings import ToyEmbedder

    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, ToyEmbedder()))
    say(store, clock, "owner", "we loved Lisbon", "the trams are great")
    text = "summarise the plot of Hamlet"  # no word of it was ever said before
    current = store.create("owner", "terminal")
    assert recall_past_messages(store, "owner", text, budget=4000, limit=4,
                                exclude_session=current.id) == []
    store.append("owner", current.id, "user", text)  # as a turn records it, first
    assert recall_past_messages(store, "owner", text, budget=4000, limit=4,
                                exclude_session=current.id) == []


def test_the_words_of_the_conversation_in_progress_are_not_counted_as_said_before(
        store, clock):
    """Words only the conversation in progress holds neither open the gate nor crowd out the
    words said before in the selective query (by words: "getting" replaced by the message's
    own words)."""
    from hermes.memory.sessions.past_messages import counted_terms
    from hermes.store.fts import build_match

    chat(store, clock, "owner", None, ("the kestrel nests by the greenhouse", "Nice."))
    chat(store, clock, "bob", None, ("zanzibar quokka", "ok"))
    current = store.create("owner", "terminal")
    text = "the kestrel and the quokka of zanzibar"
    store.append("owner", current.id, "user", text)
    assert store.term_count("owner", '"quokka"', cap=1000) == (1, 2)
    assert store.term_count("owner", '"quokka"', cap=1000,
                            exclude_session=current.id) == (0, 2)
    assert store.term_count("bob", '"quokka"', cap=1000, exclude_session=current.id) == (1, 2)
    counted, missing = counted_terms(store, "owner", build_match(text), current.id)
    assert [term.fts for *_, term in counted] == ['"kestrel"'] and missing == 2
    hits = recall_past_messages(store, "owner", "the kestrel and the greenhouse", budget=4000,
                                exclude_session=current.id)
    assert [h.match_id for h in hits] and all(h.session.id != current.id for h in hits)
