"""MiniLM's int8 weights given to onnxruntime as uint8, on a CPU where its int8 products saturate.

hermes.memory.embeddings.minilm_graph turns each product by a shipped int8 weight into onnxruntime's
``DynamicQuantizeMatMul``: the activations quantised to uint8, multiplied by the int8 weight
in integers. Its uint8 x int8 kernel on an x86 CPU without VNNI (AVX2 or AVX-512 alone:
``vpmaddubsw``) adds two products at a time into a saturating int16, and with MiniLM's
full-range weights a pair of large products is cut at 32,767: in tests/test_minilm_graph.py's
toy a cell of 11.04 came out 6.21; on 8 real texts the vectors' cosine to the float32 graph's
was 0.972-0.995, 0.977-0.996 with exact sums. The same weight as uint8 (w + 128) with a zero
point of 128 is the same integers, and the uint8 x uint8 kernel sums them exactly, but more
slowly (an AMD EPYC with AVX2, LoCoMo's questions, one thread, load 4: session.run p50 4.66 ->
5.15 ms CPU); with VNNI the uint8 x int8 kernel is exact and the fastest. So uint8 only where
the CPU needs it (:func:`int8_products_saturate`), and the saved graph's cache key says which
(hermes.memory.embeddings).
"""

from __future__ import annotations

import platform

from hermes.memory.embeddings.onnx_wire import (
    INT8,
    MS_DOMAIN,
    UINT8,
    Graph,
    Node,
    make_initializer,
    make_node,
    read_tensor,
)

_TO_UNSIGNED = bytes((i + 128) & 0xFF for i in range(256))
_VNNI_FLAGS = frozenset({"avx512_vnni", "avx_vnni", "amx_int8"})
_X86 = ("x86_64", "amd64", "i386", "i686", "x86")
_SATURATES: list[bool] = []  # this CPU's answer, once known


def int8_products_saturate(cpuinfo: str | None = None) -> bool:
    """Whether onnxruntime's uint8 x int8 products may saturate on this CPU: an x86 one
    without VNNI, read from the flags in Linux's /proc/cpuinfo (an x86 system without that
    file counts as saturating: its sums stay exact). ``cpuinfo``: that file's text."""
    if cpuinfo is None:
        if not _SATURATES:
            if platform.machine().lower() not in _X86:
                _SATURATES.append(False)  # Arm's integer dot products do not saturate
            else:
                try:
                    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
                        text = file.read(1 << 16)  # the first processor's lines are enough
                except OSError:
                    text = ""
                _SATURATES.append(int8_products_saturate(text))
        return _SATURATES[0]
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return not (_VNNI_FLAGS & set(line.partition(":")[2].split()))
    return True


def unsigned_weights(nodes: list[Node], graph: Graph) -> list[Node]:
    """Each ``DynamicQuantizeMatMul`` by an int8 weight -> by that weight + 128 as uint8,
    with a zero point of 128 in the scale's shape (one per column)."""
    out: list[Node] = []
    for n in nodes:
        if n.op_type != "DynamicQuantizeMatMul" or len(n.inputs) < 3 or (
                len(n.inputs) > 3 and n.inputs[3]):
            out.append(n)
            continue
        weight, scale = (graph.tensors.get(name) or (
            read_tensor(memoryview(graph.added[name])) if name in graph.added else None)
            for name in n.inputs[1:3])
        data = weight.data(1) if weight is not None and weight.data_type == INT8 else None
        if data is None or weight is None or scale is None:
            out.append(n)
            continue
        name = f"{weight.name}_u8"
        if name not in graph.added:
            graph.added[name] = make_initializer(name, weight.dims, UINT8,
                                             bytes(data).translate(_TO_UNSIGNED))
            count = 1
            for dim in scale.dims:
                count *= dim
            graph.added[f"{name}_zero"] = make_initializer(f"{name}_zero", scale.dims, UINT8,
                                                       b"\x80" * count)
        out.append(make_node("DynamicQuantizeMatMul",
                         [n.inputs[0], name, n.inputs[2], f"{name}_zero", *n.inputs[4:]],
                         n.outputs, f"{n.outputs[0]}_u8", domain=MS_DOMAIN))
    return out
