"""ONNX's protobuf wire format, read and written field by field (no ``onnx`` package, 30 MB
more to install): the nodes, tensors and graph of a model, as :mod:`.minilm_graph` rewrites
MiniLM's and :mod:`.int8_weights` gives its weights as uint8. The fields nobody changes are
copied byte for byte."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

MS_DOMAIN = "com.microsoft"

# TensorProto.DataType
FLOAT, UINT8, INT8, INT32, INT64 = 1, 2, 3, 6, 7
# AttributeProto.AttributeType
ATTR_INT = 2
VARINT, I64, LEN, I32 = 0, 1, 2, 5


class GraphMismatch(ValueError):
    """The ONNX file is not the int8-weights graph this module knows how to rewrite."""


# -- protobuf wire format ---------------------------------------------------------------------


def read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise GraphMismatch("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


@dataclass
class WireField:
    number: int
    wire: int
    value: int | memoryview  # an int for varints, the payload's bytes for the rest
    raw: memoryview  # key and payload, to copy an unchanged field as it was


def wire_fields(buf: memoryview) -> list[WireField]:
    out: list[WireField] = []
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: int | memoryview
        if wire == VARINT:
            value, pos = read_varint(buf, pos)
        elif wire == LEN:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == I64:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == I32:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise GraphMismatch(f"unsupported wire type {wire}")
        if pos > len(buf):
            raise GraphMismatch("truncated field")
        out.append(WireField(number, wire, value, buf[start:pos]))
    return out


def wire_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def wire_key(number: int, wire: int) -> bytes:
    return wire_varint(number << 3 | wire)


def wire_bytes(number: int, data: bytes) -> bytes:
    return wire_key(number, LEN) + wire_varint(len(data)) + data


def wire_int(number: int, value: int) -> bytes:
    return wire_key(number, VARINT) + wire_varint(value)


def wire_text(f: WireField) -> str:
    assert isinstance(f.value, memoryview)
    return bytes(f.value).decode()


# -- the parts of ONNX's messages used here ---------------------------------------------------
# ModelProto: graph 7, opset_import 8 (domain 1, version 2). GraphProto: node 1, initializer 5.
# NodeProto: input 1, output 2, name 3, op_type 4, attribute 5, domain 7.
# AttributeProto: name 1, i 3, type 20. TensorProto: dims 1, data_type 2, name 8.
# GraphProto's output 12 is a ValueInfoProto: name 1.


@dataclass
class Node:
    inputs: list[str]
    outputs: list[str]
    op_type: str
    domain: str
    raw: bytes

    @classmethod
    def parse(cls, raw: memoryview) -> Node:
        inputs, outputs, op_type, domain = [], [], "", ""
        for f in wire_fields(raw):
            if f.number == 1:
                inputs.append(wire_text(f))
            elif f.number == 2:
                outputs.append(wire_text(f))
            elif f.number == 4:
                op_type = wire_text(f)
            elif f.number == 7:
                domain = wire_text(f)
        return cls(inputs, outputs, op_type, domain, bytes(raw))


def make_node(op_type: str, inputs: list[str], outputs: list[str], name: str, *,
          domain: str = "", **attributes: int) -> Node:
    raw = b"".join(wire_bytes(1, i.encode()) for i in inputs)
    raw += b"".join(wire_bytes(2, o.encode()) for o in outputs)
    raw += wire_bytes(3, name.encode()) + wire_bytes(4, op_type.encode())
    for key, value in attributes.items():
        raw += wire_bytes(5, wire_bytes(1, key.encode()) + wire_int(3, value)
                          + wire_int(20, ATTR_INT))
    if domain:
        raw += wire_bytes(7, domain.encode())
    return Node(inputs, outputs, op_type, domain, raw)


@dataclass
class Tensor:
    name: str
    dims: list[int]
    data_type: int
    raw_data: memoryview | None = None  # TensorProto.raw_data (9): a view, never a copy

    def scalar(self) -> float | None:
        """The value of a one-element float32 or int64 tensor stored as raw data, else None."""
        raw = self.raw_data
        if raw is not None and self.data_type == FLOAT and len(raw) == 4:
            return float(struct.unpack("<f", raw)[0])
        if raw is not None and self.data_type == INT64 and len(raw) == 8:
            return float(struct.unpack("<q", raw)[0])
        return None

    def data(self, itemsize: int) -> memoryview | None:
        """The raw data when it holds every element (``itemsize`` bytes each), else None."""
        count = 1
        for dim in self.dims:
            count *= dim
        raw = self.raw_data
        return raw if raw is not None and len(raw) == count * itemsize else None


def read_tensor(raw: memoryview) -> Tensor:
    name, dims, data_type = "", [], 0
    raw_data: memoryview | None = None
    for f in wire_fields(raw):
        if f.number == 1:
            if isinstance(f.value, int):
                dims.append(f.value)
            else:  # packed
                pos = 0
                while pos < len(f.value):
                    dim, pos = read_varint(f.value, pos)
                    dims.append(dim)
        elif f.number == 2:
            assert isinstance(f.value, int)
            data_type = f.value
        elif f.number == 8:
            name = wire_text(f)
        elif f.number == 9 and isinstance(f.value, memoryview):
            raw_data = f.value
    return Tensor(name, dims, data_type, raw_data)


@dataclass
class Graph:
    fields: list[WireField]
    nodes: list[Node] = field(default_factory=list)
    tensors: dict[str, Tensor] = field(default_factory=dict)
    tensor_of_field: dict[int, str] = field(default_factory=dict)  # id(field) -> tensor name
    outputs: set[str] = field(default_factory=set)
    added: dict[str, bytes] = field(default_factory=dict)  # new initializers (TensorProto)



def make_initializer(name: str, dims: list[int], data_type: int, data: bytes) -> bytes:
    """A TensorProto: dims, type, name, raw data (little-endian, as ONNX stores it)."""
    return (b"".join(wire_int(1, d) for d in dims) + wire_int(2, data_type)
            + wire_bytes(8, name.encode()) + wire_bytes(9, data))
