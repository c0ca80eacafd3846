"""Vectors held in memory for search by meaning, and the change log that keeps them true.

Message and fact vectors are stored in SQLite as float16 blobs (the source of truth). A process
that searches holds each user's vectors in memory as int8 rows with one float32 scale each
(:class:`Int8Rows`): 388 bytes a MiniLM vector where float32 took 1,536, and a cosine within
~0.002 of the float32 one (the rows are L2-normalised, so an int8 step is at most 1/127 of the
row's largest component).

Every write of a vector (a new one, a re-embedded one, one dropped because its message was
edited, redacted or deleted) is logged in ``vector_changes`` by triggers (migration m022):
:func:`changes_since` tells a process which of a user's rows changed since it last looked, so a
process never serves a vector another process has replaced or dropped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlite_utils

# The log keeps about this many of its newest rows (pruned by the vector writers); a process
# whose last look is older than the pruned part reloads the user's vectors from their table.
KEEP_CHANGES = 100_000
# Rows scored at once by a full scan (bounds the int32 temporary: 32k x 384 x 4 bytes = 48 MB
# would be the float32 copy; the int8 one is a quarter of that).
SCAN_CHUNK = 32_768


def _np() -> Any:
    import numpy as np

    return np


@dataclass
class Int8Rows:
    """Unit vectors as int8 codes times a per-row scale (``vector ~= codes[i] * scale[i]``)."""

    codes: Any  # numpy int8 (n, dim)
    scale: Any  # numpy float32 (n,)
    # Room to grow (appended): the arrays codes and scale are the start of, and how many rows
    # of them are taken (shared by every view of the same buffer).
    _room: tuple[Any, Any, list[int]] | None = field(default=None, repr=False, compare=False)

    def appended(self, other: Int8Rows) -> Int8Rows:
        """These rows, then ``other``'s: written into spare room at the end of this object's
        buffer when it has some (this object never reads past its own rows, so it stays
        valid), else into a new buffer with room for an eighth more. A new message costs a
        copy of its own row, not of the whole matrix."""
        np = _np()
        n, m = len(self), len(other)
        if not m:
            return self
        room = self._room
        if room is None or room[2][0] != n or len(room[1]) < n + m or (
                n and room[0].shape[1] != other.codes.shape[1]):
            size = n + max(m, n // 8, 1024)
            dim = other.codes.shape[1]
            codes, scale = np.empty((size, dim), np.int8), np.empty(size, np.float32)
            codes[:n], scale[:n] = self.codes, self.scale
            room = (codes, scale, [n])
        codes, scale, taken = room
        codes[n : n + m], scale[n : n + m] = other.codes, other.scale
        taken[0] = n + m
        return Int8Rows(codes[: n + m], scale[: n + m], room)

    @classmethod
    def quantized(cls, vectors: Any) -> Int8Rows:
        np = _np()
        vectors = np.asarray(vectors)
        if vectors.ndim != 2:
            vectors = vectors.reshape(len(vectors), -1)
        out = cls(np.empty(vectors.shape, np.int8), np.empty(len(vectors), np.float32))
        _quantize_into(vectors, out)
        return out

    @classmethod
    def from_float16(cls, blobs: Sequence[bytes], dim: int | None = None) -> Int8Rows:
        """Rows from stored float16 blobs, converted in chunks (never a float32 copy of all)
        straight into their place."""
        np = _np()
        if not blobs:
            return cls.empty(dim or 1)
        dim = dim or usual_size(blobs) // 2 or 1
        if not all(len(b) == 2 * dim for b in blobs):  # a damaged row: a zero vector
            blobs = list(blobs)
            mended(blobs, 2 * dim)
        out = cls(np.empty((len(blobs), dim), np.int8), np.empty(len(blobs), np.float32))
        for start in range(0, len(blobs), SCAN_CHUNK):
            chunk = blobs[start : start + SCAN_CHUNK]
            _quantize_into(np.frombuffer(b"".join(chunk), dtype=np.float16)
                           .reshape(len(chunk), dim),
                           Int8Rows(out.codes[start : start + len(chunk)],
                                    out.scale[start : start + len(chunk)]))
        return out

    @classmethod
    def allocated(cls, n: int, dim: int) -> Int8Rows:
        """``n`` rows to fill with :meth:`put`."""
        np = _np()
        return cls(np.zeros((n, dim), np.int8), np.zeros(n, np.float32))

    def put(self, at: Any, rows: Int8Rows) -> None:
        """Write ``rows`` at these positions (an index array or slice)."""
        self.codes[at] = rows.codes
        self.scale[at] = rows.scale

    @classmethod
    def empty(cls, dim: int = 1) -> Int8Rows:
        np = _np()
        return cls(np.zeros((0, dim), np.int8), np.zeros(0, np.float32))

    @classmethod
    def concatenated(cls, parts: Sequence[Int8Rows]) -> Int8Rows:
        np = _np()
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty()
        if len(parts) == 1:
            return parts[0]
        return cls(np.concatenate([p.codes for p in parts]),
                   np.concatenate([p.scale for p in parts]))

    def __len__(self) -> int:
        return len(self.scale)

    @property
    def nbytes(self) -> int:
        return int(self.codes.nbytes + self.scale.nbytes)

    def take(self, rows: Any) -> Int8Rows:
        return Int8Rows(self.codes[rows], self.scale[rows])

    def dequantized(self, rows: Any) -> Any:
        """The float32 vectors of these rows (an index array or slice)."""
        np = _np()
        return self.codes[rows].astype(np.float32) * self.scale[rows][:, None]

    def cosines(self, query: Any, rows: Any = None) -> Any:
        """float32 cosines of ``query`` (a unit vector) to every row, or to ``rows``. einsum
        reads the int8 codes as they are (numpy's ``@`` would first copy them to float32: ~3x
        slower; numpy has no fast float16 product at all)."""
        np = _np()
        query = np.asarray(query, dtype=np.float32)
        if rows is not None:
            return (np.einsum("ij,j->i", self.codes[rows], query, dtype=np.float32)
                    * self.scale[rows])
        out = np.empty(len(self), np.float32)
        for start in range(0, len(self), SCAN_CHUNK):
            end = start + SCAN_CHUNK
            out[start:end] = (np.einsum("ij,j->i", self.codes[start:end], query,
                                        dtype=np.float32) * self.scale[start:end])
        return out


# Rows quantized at once: their float32 copy and its temporaries stay in the CPU's cache (1.5
# MB for MiniLM) instead of streaming 50 MB temporaries through memory several times (a 900k
# history loads ~1.8x faster; the codes are the same to the bit).
QUANT_BLOCK = 1024


def usual_size(blobs: Sequence[bytes | None]) -> int:
    """The byte size most of these stored vectors have (a model's vectors are all one size;
    float16, so even), or 0 when none is. A damaged or hand-edited row is the odd one out."""
    sizes = Counter(len(b) for b in blobs if b and not len(b) % 2)
    return sizes.most_common(1)[0][0] if sizes else 0


def model_size(embedder: Any, sizes: Sequence[int]) -> int:
    """The byte size of ``embedder``'s stored vectors, of which ``sizes`` should all be: when
    they are not (a damaged row), the model says (one query embedded: a row count cannot break
    a tie), else the size most of them have."""
    if not sizes or all(n == sizes[0] for n in sizes):
        return sizes[0] if sizes else 0
    try:
        return 2 * len(embedder.embed_query("size"))
    except Exception:  # noqa: BLE001 - the model cannot say: the usual size
        counted = Counter(n for n in sizes if n and not n % 2)
        return counted.most_common(1)[0][0] if counted else 0


def mended(blobs: list[bytes], size: int) -> list[int]:
    """Replace each blob that is not ``size`` bytes (a damaged row: a vector no model wrote)
    with a zero vector, in place, so the rest decode as one matrix; returns their positions. A
    zero vector's cosine to any query is 0: the row is found by its words only until it is
    embedded again."""
    if all(len(b) == size for b in blobs):
        return []
    wrong = [i for i, b in enumerate(blobs) if len(b) != size]
    zero = bytes(size)
    for i in wrong:
        blobs[i] = zero
    return wrong


def _quantize_into(vectors: Any, out: Int8Rows) -> None:
    """Write the int8 codes and scales of ``vectors`` (float16 or float32 rows, unit length)
    into ``out`` (as many rows): scale = the row's largest magnitude / 127, codes = the row /
    scale, rounded."""
    np = _np()
    dim = vectors.shape[1] if vectors.ndim == 2 else 0
    buf = np.empty((min(QUANT_BLOCK, len(vectors)), dim), np.float32)
    spare = np.empty_like(buf)
    for begin in range(0, len(vectors), QUANT_BLOCK):
        part = vectors[begin : begin + QUANT_BLOCK]
        x = buf[: len(part)]
        x[...] = part
        scale = np.abs(x, out=spare[: len(part)]).max(axis=1)
        scale /= np.float32(127.0)
        np.maximum(scale, np.float32(1e-12), out=scale)
        np.divide(x, scale[:, None], out=x)
        np.rint(x, out=x)
        out.codes[begin : begin + len(part)] = x
        out.scale[begin : begin + len(part)] = scale


@contextmanager
def read_snapshot(db: sqlite_utils.Database) -> Iterator[None]:
    """Reads that must see one state of the database (WAL: a read transaction), e.g. a
    long history read in two passes. Inside an open transaction, that one."""
    conn = db.conn
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def last_change(db: sqlite_utils.Database, kind: str, user: str, model: str) -> int:
    """The newest change logged (0: none), read before the rows themselves: a change made in
    between is read again, never missed. The log's newest entry, whoever it is for: a user's
    own newest entry may lie before the part of the log since pruned (their vectors have not
    changed for a while), and a process holding that would find a gap, and reload all of the
    user's vectors, on every search. ``kind``, ``user`` and ``model`` say whose vectors the
    caller is about to read."""
    row = db.execute("SELECT coalesce(max(seq), 0) FROM vector_changes").fetchone()
    return int(row[0])


@dataclass
class Changes:
    through: int  # the newest change read (the log's newest then, whoever it was for)
    ids: list[int]  # the item ids whose vectors changed (each once)
    gap: bool  # part of the log past ``since`` was pruned: reload everything


def changes_since(db: sqlite_utils.Database, kind: str, user: str, model: str,
                  since: int) -> Changes:
    """The ids of ``user``'s items (``kind``: message | fact) whose vector for ``model`` was
    written, replaced or deleted after change ``since`` (``user``'s rows only)."""
    through = last_change(db, kind, user, model)
    rows = db.execute(
        "SELECT item_id FROM vector_changes WHERE user = ? AND model = ? AND kind = ? "
        "AND seq > ? AND seq <= ? ORDER BY seq", [user, model, kind, since, through]).fetchall()
    pruned = db.execute("SELECT coalesce(max(through), 0) FROM vector_changes_pruned"
                        ).fetchone()[0]
    return Changes(max(through, since), list(dict.fromkeys(int(r[0]) for r in rows)),
                   int(pruned) > since)


def prune_changes(db: sqlite_utils.Database, keep: int = KEEP_CHANGES) -> int:
    """Drop the log's oldest rows, keeping about ``keep`` (called by the vector writers inside
    their write transaction, in steps of a tenth of ``keep`` so that most writes delete
    nothing). Returns the rows dropped."""
    newest = db.execute("SELECT coalesce(max(seq), 0) FROM vector_changes").fetchone()[0]
    pruned = db.execute("SELECT coalesce(max(through), 0) FROM vector_changes_pruned"
                        ).fetchone()[0]
    cut = int(newest) - keep
    if cut - int(pruned) < max(keep // 10, 1):
        return 0
    dropped = db.execute("DELETE FROM vector_changes WHERE seq <= ?", [cut]).rowcount
    db.execute("INSERT OR REPLACE INTO vector_changes_pruned (id, through) VALUES (1, ?)", [cut])
    return int(dropped)
