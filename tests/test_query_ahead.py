"""The turn's query embedding on a worker thread (hermes.memory.facts.query_ahead): the prompt is
the one the serial turn builds, the fact side's bm25 runs while the worker embeds, a failure on
the worker is one log line and recall by words, and scoping holds."""

from __future__ import annotations

import logging
import threading

import pytest

np = pytest.importorskip("numpy")

from hermes.agent import prompt as prompt_module  # noqa: E402
from hermes.agent.conversation import Conversation  # noqa: E402
from hermes.agent.prompt import PromptBuilder  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.memory.embeddings import embedders as embeddings  # noqa: E402
from hermes.memory.facts import query_ahead  # noqa: E402
from hermes.memory.facts import search as fact_search  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402
from tests.test_fact_vectors import ToyEmbedder  # noqa: E402


class ThreadNoting(ToyEmbedder):
    """The toy model, noting which thread embedded each query; it can be told to fail, or to
    wait until it is let go."""

    def __init__(self):
        super().__init__()
        self.threads: list[str] = []
        self.passage_threads: list[str] = []  # where each message text was embedded
        self.fail = False
        self.let_go: threading.Event | None = None
        self.waited_out = False

    def embed_query(self, text):
        # As the shipped models do: the last few queries remembered (one turn's fact recall
        # and past messages embed the same text).
        return embeddings._recent_query(self, text, lambda: self._compute(text))

    def embed(self, texts):
        self.passage_threads += [threading.current_thread().name] * len(texts)
        return super().embed(texts)

    def _compute(self, text):
        self.threads.append(threading.current_thread().name)
        if self.let_go is not None:
            self.waited_out = not self.let_go.wait(10)
        if self.fail:
            raise RuntimeError("onnxruntime: the session is broken")
        return super().embed_query(text)


@pytest.fixture
def toy():
    return ThreadNoting()


@pytest.fixture(autouse=True)
def overlap(monkeypatch):
    """Always on the worker here (by default only when the load leaves a core free)."""
    monkeypatch.setattr(prompt_module, "EMBED_AHEAD", True)


@pytest.fixture
def rt(clock, toy, monkeypatch):
    monkeypatch.setitem(embeddings.MODELS, embeddings.DEFAULT_MODEL, lambda: toy)
    rt = Runtime(load_settings(), clock=clock)
    rt.settings.sessions.embeddings = True
    yield rt
    rt.close()


def history(rt, clock):
    facts = rt.memory.facts
    facts.add("owner", "The user owns a Tesla Model 3")
    facts.add("owner", "The user's dog is called Biscuit")
    facts.add("owner", "The user banks with the cooperative bank")
    facts.add("bob", "Bob drives a red automobile, a Tesla too")
    store = rt.memory.sessions
    for user, said in (("owner", "I took the car to the garage, the Tesla needed tyres"),
                       ("bob", "my automobile is a car I drive every day")):
        session = store.create(user, "discord", title="Cars")
        clock.advance(minutes=1)
        store.append(user, session.id, "user", said)
        clock.advance(minutes=1)
        store.append(user, session.id, "assistant", "Good to know.")
    for user in ("owner", "bob"):
        facts.vectors.index(user)
        rt.memory.message_vectors.index(user)


def tail(rt, query):
    builder = PromptBuilder(rt.memory)
    conversation = Conversation(builder.snapshot("owner"))
    now = rt.memory.sessions.create("owner", "terminal")
    facts, excerpts = builder.recalled("owner", query, conversation, now.id)
    return [f.id for f in facts], [e.text for e in excerpts]


# The owner's past message that "what about the Tesla tyres?" finds by its words (bob's, about
# his automobile, never).
BY_WORDS = "> the user: I took the car to the garage, the Tesla needed tyres"
QUERIES = ["which automobile do I drive?", "what about the Tesla tyres?", "my pet's name?",
           "the bank?"]


def test_the_overlapped_turn_recalls_what_the_serial_turn_recalls(rt, clock, toy, monkeypatch):
    history(rt, clock)
    monkeypatch.setattr(prompt_module, "EMBED_AHEAD", False)
    serial = [tail(rt, q) for q in QUERIES]
    assert not any(name.startswith("hermes-query") for name in toy.threads)
    toy.threads.clear()
    toy._recent.clear()
    monkeypatch.setattr(prompt_module, "EMBED_AHEAD", True)
    overlapped = [tail(rt, q) for q in QUERIES]
    assert overlapped == serial
    assert serial[0][0] and serial[1][1]  # facts by meaning, a past message: something to compare
    # Each message embedded once, on the worker (past messages reuse its vector).
    assert toy.threads and all(name.startswith("hermes-query") for name in toy.threads)
    assert len(toy.threads) == len(QUERIES)


def test_fact_bm25_runs_while_the_worker_is_still_embedding(rt, clock, toy, monkeypatch):
    history(rt, clock)
    toy.let_go = threading.Event()
    original = fact_search._bm25

    def bm25_then_let_go(*args, **kwargs):
        found = original(*args, **kwargs)
        toy.let_go.set()  # the model finishes only once the words were ranked
        return found

    monkeypatch.setattr(fact_search, "_bm25", bm25_then_let_go)
    facts, _ = tail(rt, "what about the Tesla tyres?")
    assert not toy.waited_out  # had the turn waited for the vector before bm25, it would hang
    assert facts


def test_a_failing_embedding_on_the_worker_recalls_facts_by_words_with_one_log_line(
        rt, clock, toy, caplog):
    history(rt, clock)
    toy.fail = True
    with caplog.at_level(logging.WARNING):
        facts, excerpts = tail(rt, "what about the Tesla tyres?")
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "query embedding failed" in lines[0].getMessage()
    assert lines[0].name == "hermes.memory.facts.query_ahead"
    owner = {f.id: f for f in rt.memory.facts.list_facts("owner")}
    assert [owner[i].content for i in facts] == ["The user owns a Tesla Model 3"]
    assert [e.splitlines()[1] for e in excerpts] == [BY_WORDS]  # past messages by words
    assert len(toy.threads) == 1  # not tried again on this thread


def test_the_overlap_never_recalls_another_users_facts_or_messages(rt, clock, toy):
    history(rt, clock)
    bobs = {f.id for f in rt.memory.facts.list_facts("bob")}
    for query in [*QUERIES, "Bob's red automobile I drive every day"]:
        facts, excerpts = tail(rt, query)
        assert not bobs & set(facts)
        assert not any("every day" in text for text in excerpts)


def test_by_default_a_turn_overlaps_only_when_the_load_leaves_a_core_free(
        rt, clock, toy, monkeypatch):
    assert query_ahead.core_free(load=0.4, cores=2)
    assert not query_ahead.core_free(load=1.6, cores=2)  # both cores busy: in turn
    assert query_ahead.core_free(load=3.0, cores=8)
    assert not query_ahead.core_free(load=0.0, cores=1)
    history(rt, clock)
    monkeypatch.setattr(prompt_module, "EMBED_AHEAD", "auto")
    for free, query in ((False, QUERIES[0]), (True, QUERIES[1])):
        monkeypatch.setattr(query_ahead, "core_free", lambda free=free: free)
        toy.threads.clear()
        tail(rt, query)
        assert toy.threads == ["hermes-query_0" if free else "MainThread"]


@pytest.mark.parametrize("overlap", [True, False])
def test_a_failing_embedding_gives_the_same_prompt_whatever_the_load(
        rt, clock, toy, caplog, monkeypatch, overlap):
    # "auto" embeds in turn when no core is free (this machine, most of the time): a model
    # that fails at run time must then be met as on the worker, not raise out of the turn.
    history(rt, clock)
    monkeypatch.setattr(prompt_module, "EMBED_AHEAD", overlap)
    toy.fail = True
    with caplog.at_level(logging.WARNING):
        facts, excerpts = tail(rt, "what about the Tesla tyres?")
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "query embedding failed" in lines[0]
    owner = {f.id: f for f in rt.memory.facts.list_facts("owner")}
    assert [owner[i].content for i in facts] == ["The user owns a Tesla Model 3"]
    assert [e.splitlines()[1] for e in excerpts] == [BY_WORDS]
    assert len(toy.threads) == 1
    assert toy.threads[0].startswith("hermes-query") == overlap


def test_without_the_fact_side_a_failing_model_gives_past_messages_by_words_in_one_line(
        rt, clock, toy, caplog):
    # No worker (no fact recall this turn): past-message search meets the failure itself.
    history(rt, clock)
    rt.settings.agent.recall_char_budget = 0
    toy.fail = True
    with caplog.at_level(logging.WARNING):
        facts, excerpts = tail(rt, "what about the Tesla tyres?")
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "past messages recalled by their words" in lines[0].getMessage()
    assert lines[0].name == "hermes.memory.sessions.past_messages"
    assert facts == [] and [e.splitlines()[1] for e in excerpts] == [BY_WORDS]
    assert len(toy.threads) == 1  # asked once, not again by the search
    # By words, the gate is the words' own: half the words must have been said before.
    assert tail(rt, "which automobile tyres do I drive?") == ([], [])


def test_past_messages_by_words_when_told_ask_nothing_of_the_model(rt, clock, toy):
    from hermes.memory.sessions.past_messages import recall_past_messages

    history(rt, clock)
    toy.threads.clear()
    found = recall_past_messages(rt.memory.sessions, "owner", "what about the Tesla tyres?",
                                 budget=2000, words_only=True)
    assert [e.text.splitlines()[1] for e in found] == [BY_WORDS]
    assert toy.threads == []
    # With the model, one word said before is enough to search ("tyres"; "automobile" and
    # "drive" are bob's words); by words, half of them must have been said.
    query = "which automobile tyres do I drive?"
    by_meaning = recall_past_messages(rt.memory.sessions, "owner", query, budget=2000)
    assert [e.text.splitlines()[1] for e in by_meaning] == [BY_WORDS]
    assert recall_past_messages(rt.memory.sessions, "owner", query, budget=2000,
                                words_only=True) == []
    # Both said "car": the owner's words-only search reaches the owner's message, never bob's.
    mine = recall_past_messages(rt.memory.sessions, "owner", "the car?", budget=2000,
                                words_only=True)
    assert [e.text.splitlines()[1] for e in mine] == [BY_WORDS]


def test_the_fact_scan_runs_on_the_worker_after_the_embedding_when_the_turn_overlaps(
        rt, clock, toy, monkeypatch):
    # The scan of the user's fact vectors needs only the vector: the worker does it right
    # after embedding while the turn's SQL runs here, and the turn recalls what it did.
    from hermes.memory.facts import vectors as fact_vectors

    history(rt, clock)
    threads: list[str] = []
    original = fact_vectors.Similarity._scan_of

    def noting(self, query):
        threads.append(threading.current_thread().name)
        return original(self, query)

    monkeypatch.setattr(fact_vectors.Similarity, "_scan_of", noting)
    overlapped = [tail(rt, q) for q in QUERIES]
    assert len(threads) == len(QUERIES) and all(n.startswith("hermes-query") for n in threads)
    threads.clear()
    toy._recent.clear()
    monkeypatch.setattr(prompt_module, "EMBED_AHEAD", False)
    assert [tail(rt, q) for q in QUERIES] == overlapped
    assert threads == ["MainThread"] * len(QUERIES)


async def test_a_turn_embeds_off_the_event_loop_and_recalls_the_same(
        fake_model, rt, clock, toy, monkeypatch):
    """A turn's embeddings (its message as a query and as a message to index: ~0.3 s of CPU
    for 64,000 characters) are made on a worker thread before its prompt is composed on the
    event loop, which then finds them made (issue 30: another user's turn waited 170-320 ms).
    The prompt is the one composed with the embeddings made in turn, on the loop."""
    from hermes.agent.turn import Agent

    monkeypatch.setattr(prompt_module, "EMBED_AHEAD", False)  # the fact side in turn too
    history(rt, clock)
    agent = Agent(rt.memory)
    loop_thread = threading.current_thread().name
    session = rt.memory.sessions.create("owner", "terminal")
    message = "which automobile do I drive? The Tesla tyres again " + "word " * 2000
    toy.threads.clear()
    toy.passage_threads.clear()
    fake_model.reply("ok")
    ahead = await agent.turn("owner", session.id, message).run()
    assert toy.threads and toy.passage_threads  # the query and the new message, embedded
    assert loop_thread not in toy.threads + toy.passage_threads
    tail_ahead = fake_model.requests[0].tail
    assert "Tesla" in tail_ahead and "Bob" not in tail_ahead  # recalled, only the owner's
    # the facts recalled are those recalled with everything embedded in turn, on the loop
    monkeypatch.setattr(prompt_module.PromptBuilder, "embed_ahead", lambda *a: None)
    toy._recent.clear()
    fake_model.reply("ok")
    in_turn = await agent.turn("owner", rt.memory.sessions.create("owner", "terminal").id,
                               message).run()
    assert loop_thread in toy.threads  # (in turn, this time)
    assert in_turn.shown_fact_ids == ahead.shown_fact_ids != []


def test_a_query_embedded_ahead_outlives_other_users_queries_until_it_is_used(
        rt, clock, toy, monkeypatch):
    """While a turn's embeddings are made on the worker, other users' turns embed their own
    queries: the model remembers enough of them that the turn's is still there when it composes
    (with 8, a long message's query was computed again on the event loop, ~75 ms)."""
    monkeypatch.setattr(prompt_module, "EMBED_AHEAD", False)
    history(rt, clock)
    builder = PromptBuilder(rt.memory)
    query = "which automobile do I drive?"
    work = builder.embed_ahead("owner", query)
    assert work is not None
    work()
    for i in range(20):  # other users' turns meanwhile
        toy.embed_query(f"bob's question number {i}")
    toy.threads.clear()
    conversation = Conversation(builder.snapshot("owner"))
    builder.recalled("owner", query, conversation, rt.memory.sessions.create("owner", "x").id)
    assert toy.threads == []  # nothing computed in turn: the ahead vector was used
