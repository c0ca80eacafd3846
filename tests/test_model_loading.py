"""Loading the embedding model: in the background while a command starts (Embedders.preload),
and where it is kept (its cache directory in the home)."""

from __future__ import annotations

import logging
import threading

import pytest

from hermes.errors import HermesError
from hermes.memory.embeddings import embedders as embeddings
from hermes.memory.embeddings.embedders import Embedders
from tests.conftest import WordsEmbedder


class Gated(WordsEmbedder):
    """A model whose loading waits for the test, and says in which thread it ran."""

    model_id = "toy-gated"
    built: list[str] = []
    started = threading.Event()
    release = threading.Event()
    fail = False

    def __init__(self) -> None:
        Gated.built.append(threading.current_thread().name)
        Gated.started.set()
        assert Gated.release.wait(10)
        if Gated.fail:
            raise RuntimeError("the model file is damaged")


@pytest.fixture
def gated(monkeypatch):
    Gated.built, Gated.fail = [], False
    Gated.started, Gated.release = threading.Event(), threading.Event()
    monkeypatch.setitem(embeddings.MODELS, "minilm", Gated)
    return Gated


def test_a_preload_loads_the_model_in_the_background_once(gated):
    models = Embedders()
    models.preload("minilm")  # returns while the model is still loading
    assert gated.started.wait(10)
    assert gated.built == ["hermes-load-minilm"]
    models.preload("minilm")  # already under way: nothing more
    gated.release.set()
    model = models.get("minilm")  # waits for the load under way, does not start another
    assert isinstance(model, Gated) and models.get("minilm") is model
    assert gated.built == ["hermes-load-minilm"]


def test_two_threads_asking_at_once_share_one_load(gated):
    models = Embedders()
    got = []
    first = threading.Thread(target=lambda: got.append(models.get("minilm")))
    first.start()
    assert gated.started.wait(10)  # the first is loading; the second asks meanwhile
    second = threading.Thread(target=lambda: got.append(models.get("minilm")))
    second.start()
    gated.release.set()
    first.join(10)
    second.join(10)
    assert len(got) == 2 and got[0] is got[1] and len(gated.built) == 1


def test_a_preload_that_fails_is_met_again_by_whoever_needs_the_model(gated, db, caplog):
    from hermes.memory.sessions.vectors import session_vectors_for

    gated.fail = True
    gated.release.set()
    models = Embedders()
    models.preload("minilm")
    with caplog.at_level(logging.WARNING):
        assert session_vectors_for(db, models, "minilm") is None  # words only, as without
    said = [r.getMessage() for r in caplog.records if "words only" in r.getMessage()]
    assert len(said) == 1 and "the model file is damaged" in said[0]
    with pytest.raises(HermesError, match="could not load"):
        models.get("minilm")


def test_a_model_is_given_the_homes_cache_directory_when_it_takes_one(tmp_path, monkeypatch,
                                                                      rt):
    seen = []

    class Caching(WordsEmbedder):
        def __init__(self, cache_dir=None):
            seen.append(cache_dir)

    monkeypatch.setitem(embeddings.MODELS, "minilm", Caching)
    rt.memory.embedders.get("minilm")
    Embedders().get("minilm")  # no home: nothing to keep files in
    assert seen == [rt.settings.home_path / "cache", None]
    monkeypatch.setitem(embeddings.MODELS, "minilm", WordsEmbedder)  # takes none: not given
    assert isinstance(Embedders(tmp_path).get("minilm"), WordsEmbedder)


def test_a_new_users_hermes_ask_answers_before_loading_the_model(cli, fake_model, gated,
                                                                 monkeypatch, rt):
    monkeypatch.setenv("HERMES_SESSIONS__EMBEDDINGS", "true")
    gated.release.set()
    replies_at_load = []

    def recording(self):
        Gated.built.append(threading.current_thread().name)
        replies_at_load.append(len(fake_model.requests))

    monkeypatch.setattr(Gated, "__init__", recording)
    fake_model.reply("Paris.")
    result = cli("ask", "capital of France?")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "Paris.\n"
    # nothing of theirs embedded yet: the reply came first, then the model, in this thread
    assert replies_at_load[0] >= 1 and gated.built == ["MainThread"]
    embedded = rt.db.execute("SELECT count(*) FROM message_vectors WHERE user = 'owner' "
                             "AND model = 'toy-gated'").fetchone()[0]
    assert embedded == 2  # the question and the answer: the next turn has them
    # the next ask: this user has vectors, so the model loads in the background at once
    gated.built.clear()
    fake_model.reply("Still Paris.")
    assert cli("ask", "and now?").exit_code == 0
    assert gated.built == ["hermes-load-minilm"]


def test_hermes_ask_with_words_only_loads_no_model(cli, fake_model, gated):
    gated.release.set()
    fake_model.reply("Paris.")
    assert cli("ask", "capital of France?").exit_code == 0
    assert gated.built == []


class Ready(WordsEmbedder):
    """A model that can say its id without loading (as MiniLM can, from its saved graph)."""

    model_id = "toy-ready"
    built = 0
    done = threading.Event()

    def __init__(self, cache_dir=None):
        Ready.built += 1
        Ready.done.set()

    @staticmethod
    def ready(cache_dir):
        return "toy-ready" if (cache_dir / "ok").exists() else None


@pytest.fixture
def ready(monkeypatch, rt):
    Ready.built, Ready.done = 0, threading.Event()
    monkeypatch.setitem(embeddings.MODELS, "minilm", Ready)
    monkeypatch.setenv("HERMES_SESSIONS__EMBEDDINGS", "true")
    cache = rt.settings.home_path / "cache"
    cache.mkdir(parents=True)
    (cache / "ok").write_text("", encoding="utf-8")
    return cache


def test_a_model_that_can_wait_loads_when_it_first_embeds(ready, db, clock):
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.vectors import session_vectors_for

    models = Embedders(ready)
    model = models.get("minilm")
    assert isinstance(model, embeddings.Deferred) and model.model_id == "toy-ready"
    vectors = session_vectors_for(db, models, "minilm")
    store = SessionStore(db, clock=clock, vectors=vectors)
    session = store.create("owner", "terminal")
    assert Ready.built == 0  # built the stores, read nothing by meaning: no model
    store.append("owner", session.id, "user", "my car is a blue tesla")
    assert vectors.nearest("owner", "vehicle", 3)  # embeds the message, then the query
    assert Ready.built == 1 and model.loaded
    (ready / "ok").unlink()  # no saved graph for the files installed now: loaded at once
    assert isinstance(Embedders(ready).get("minilm"), Ready) and Ready.built == 2


def test_commands_that_never_embed_load_no_model(cli, ready):
    assert cli("facts", "add", "The user drives a Tesla").exit_code == 0
    built = Ready.built  # `facts add` embeds the fact it wrote
    for command in (["facts", "list"], ["facts", "show", "1"], ["sessions", "list"]):
        result = cli(*command)
        assert result.exit_code == 0, result.stderr
    assert Ready.built == built
    assert cli("facts", "search", "car").exit_code == 0
    assert Ready.built == built + 1  # a search by meaning loads it


def test_a_deferred_load_that_fails_is_one_error_not_a_retry_per_call(monkeypatch):
    calls = []

    def build():
        calls.append(1)
        raise HermesError("The embedding model 'x' is installed but could not load (...)")

    model = embeddings.Deferred("x", build, "toy-x")
    for _ in range(2):
        with pytest.raises(HermesError, match="could not load"):
            model.embed(["a"])
    assert calls == [1] and model.model_id == "toy-x"


def test_a_preload_loads_a_model_that_could_wait_too(ready):
    models = Embedders(ready)
    models.preload("minilm")
    assert Ready.done.wait(10)  # loaded in the background, before anything embeds
    model = models.get("minilm")
    assert isinstance(model, embeddings.Deferred) and model.loaded and Ready.built == 1


async def test_the_daemon_loads_the_model_at_start_not_on_the_first_reply(rt, gated,
                                                                          monkeypatch):
    from hermes.agent import llm
    from hermes.daemon import Daemon

    monkeypatch.setattr(llm, "load_litellm", lambda: None)
    gated.release.set()
    Daemon(rt)._preload()  # words only (the tests' config): no model
    assert gated.built == []
    rt.settings.sessions.embeddings = True
    Daemon(rt)._preload()
    assert gated.started.wait(10) and gated.built == ["hermes-load-minilm"]


def test_has_vectors_counts_only_the_users_own(db, clock):
    from hermes.memory.embeddings.embedders import has_vectors
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.vectors import MessageVectors

    store = SessionStore(db, clock=clock)
    for user in ("alice", "bob"):
        store.append(user, store.create(user, "terminal").id, "user", f"{user} says hello")
    assert not has_vectors(db, "alice") and not has_vectors(db, "bob")
    MessageVectors(db, WordsEmbedder()).index("bob")
    assert has_vectors(db, "bob") and not has_vectors(db, "alice")  # bob's are not alice's
    from hermes.config import FactsConfig
    from hermes.memory.facts.store import FactStore
    from hermes.memory.facts.vectors import FactVectors

    FactStore(db, FactsConfig(), clock).add("alice", "Alice owns a bike")
    FactVectors(db, WordsEmbedder()).index("alice")
    assert has_vectors(db, "alice")


def test_a_model_that_cannot_load_after_the_reply_is_one_line(cli, fake_model, gated,
                                                              monkeypatch, caplog):
    monkeypatch.setenv("HERMES_SESSIONS__EMBEDDINGS", "true")
    gated.fail = True
    gated.release.set()
    fake_model.reply("Paris.")
    with caplog.at_level(logging.WARNING):
        result = cli("ask", "capital of France?")
    assert result.exit_code == 0 and result.stdout == "Paris.\n"
    said = [r.getMessage() for r in caplog.records if "words only" in r.getMessage()]
    assert len(said) == 1 and "the model file is damaged" in said[0]


def seed(rt, user: str, fact: str) -> None:
    """A fact written without a model (a store of the home's memory would load one at once),
    then recall by meaning on."""
    from hermes.memory.facts.store import FactStore

    FactStore(rt.db, rt.settings.facts, rt.clock).add(user, fact)
    rt.settings.sessions.embeddings = True


async def test_the_mcp_server_loads_the_model_at_start_not_on_the_first_search(rt, gated):
    """Through the SDK's own client (streamable HTTP on the ASGI app; stdio builds the same
    server): the model is loading before any request, and the first search does not load it."""
    from tests.test_mcp_server import client, data, http_client, http_server

    seed(rt, "alice", "Alice drives a blue Tesla")
    async with http_server(rt, "alice") as (app, token):
        assert gated.started.wait(10)          # loading at start, before any client asked
        assert gated.built == ["hermes-load-minilm"]
        gated.release.set()
        async with http_client(app, token) as http:
            from mcp.client.streamable_http import streamable_http_client

            transport = streamable_http_client("http://127.0.0.1:8765/mcp", http_client=http)
            async with client(transport) as mcp:
                found = data(await mcp.call_tool("facts_search", {"query": "Tesla"}))
    assert found["facts"][0]["content"] == "Alice drives a blue Tesla"
    assert gated.built == ["hermes-load-minilm"]   # the search used the preloaded one


async def test_the_web_panel_loads_the_model_at_start_not_on_the_first_search(rt, gated):
    """Through the ASGI app (`hermes web` and `hermes run` both build it)."""
    from hermes.frontends.web.app import WebContext
    from tests.web_client import Panel

    seed(rt, "owner", "The user drives a blue Tesla")
    panel = Panel(WebContext(rt.memory))
    try:
        assert gated.started.wait(10)          # loading once the app is built
        assert gated.built == ["hermes-load-minilm"]
        gated.release.set()
        await panel.login()
        page = await panel.get("/facts?q=Tesla")
        assert page.status_code == 200 and "drives a blue Tesla" in page.text
    finally:
        await panel.close()
    assert gated.built == ["hermes-load-minilm"]


async def test_words_only_servers_load_no_model(rt, gated):
    from hermes.frontends import mcp_server
    from hermes.frontends.web.app import WebContext
    from tests.web_client import Panel

    gated.release.set()
    mcp_server.build_server(rt.memory, "alice")
    await Panel(WebContext(rt.memory)).close()
    assert not gated.started.wait(0.2) and gated.built == []
