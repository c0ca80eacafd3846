"""Cells: a coarse index (IVF) so that a search by meaning over a long history scans a few
per cent of the vectors instead of all of them.

Once a user has IVF_MIN vectors of one kind (message or fact) and model, the vector writer
(``MessageVectors.index``, ``FactVectors.index``: the daemon's vector job, ``hermes sessions
index``) clusters them (spherical k-means on a sample, about sqrt(n) cells) and stores the
centroids in ``vector_cells`` and each vector's cell in its row (``cell``, migration m023);
vectors written afterwards get their cell when written. It clusters again when the count has
grown GROWTH-fold. A search scores the cells' centroids, then only the vectors of the nearest
cells (about SCAN_ROWS of them) and the few vectors without a cell yet. The candidates it finds
are approximate (scripts/bench_vectors.py measures how many of the exact nearest it returns);
the cosines of the messages the word ranking found are always exact (read by id).

A stored cell is ``version * VERSION_STEP + cell``: a vector clustered under older centroids
(while the writer is re-clustering) is read as having no cell, so it is scanned, never lost.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from hermes.memory.vectors.matrix import Int8Rows
from hermes.store.db import write_transaction

log = logging.getLogger(__name__)

IVF_MIN = 32_768  # below this, every vector is scanned (about 4 ms of one core with int8 rows)
SCAN_ROWS = 16_384  # vectors a search scans at most, about, in the nearest cells
GROWTH = 4  # cluster again once the count has grown this many times since the last clustering
VERSION_STEP = 1 << 20  # cells per version at most (sqrt of a trillion vectors)
TRAIN_PER_CELL = 40  # sample size per cell for k-means
ITERATIONS = 8
CHUNK = 32_768

# kind -> (vector table, its id column)
TABLES = {"message": ("message_vectors", "message_id"), "fact": ("fact_vectors", "fact_id")}


def _np() -> Any:
    import numpy as np

    return np


@dataclass
class Centroids:
    version: int
    vectors: Any  # numpy float32 (cells, dim)

    def decode(self, stored: Any) -> Any:
        """Stored cells (None: no cell) -> int32 cell of this version, -1 for none or another
        version's."""
        np = _np()
        raw = np.array([-1 if s is None else s for s in stored], dtype=np.int64)
        cell = raw - self.version * VERSION_STEP
        return np.where((raw >= 0) & (cell >= 0) & (cell < VERSION_STEP), cell, -1
                        ).astype(np.int32)

    def assign(self, vectors: Any) -> Any:
        """The stored cell (with its version) of each float32 vector."""
        np = _np()
        return (np.argmax(vectors @ self.vectors.T, axis=1).astype(np.int64)
                + self.version * VERSION_STEP)


def load(db: sqlite_utils.Database, kind: str, user: str, model: str) -> Centroids | None:
    """``user``'s centroids for this kind and model, or None (not clustered: scan them all)."""
    np = _np()
    row = db.execute("SELECT version, dim, centroids FROM vector_cells WHERE kind = ? "
                     "AND user = ? AND model = ?", [kind, user, model]).fetchone()
    if row is None:
        return None
    return Centroids(int(row[0]), np.frombuffer(row[2], dtype=np.float32).reshape(-1, row[1]))


def version(db: sqlite_utils.Database, kind: str, user: str, model: str) -> int:
    """The current centroids' version (0: none), a cheap look for a process holding cells."""
    row = db.execute("SELECT version FROM vector_cells WHERE kind = ? AND user = ? AND model = ?",
                     [kind, user, model]).fetchone()
    return int(row[0]) if row else 0


def maybe_cluster(db: sqlite_utils.Database, kind: str, user: str, model: str,
                  vectors_of: Callable[[list[Any]], Any], *, seed: int = 0,
                  store_cells: bool = True) -> bool:
    """Cluster ``user``'s vectors of this kind and model when there are enough of them and
    none were clustered yet, or their count has grown GROWTH-fold since. ``vectors_of(rows)``
    turns rows of (id, vector blob[, context blob]) as read here into float32 vectors (the
    blend a search scores). Returns whether it clustered. Writes in chunks: searches go on.
    ``store_cells``: write each vector's cell (messages); facts are few, and a process
    computes their cells when it loads them."""
    np = _np()
    table, id_column = TABLES[kind]
    count = int(db.execute(f"SELECT count(*) FROM {table} WHERE user = ? AND model = ?",
                           [user, model]).fetchone()[0])
    if count < IVF_MIN:
        return False
    done = db.execute("SELECT version, trained_on FROM vector_cells WHERE kind = ? AND user = ? "
                      "AND model = ?", [kind, user, model]).fetchone()
    if done is not None and count < GROWTH * int(done[1]):
        return False
    cells = max(16, min(VERSION_STEP - 1, round(math.sqrt(count))))
    rng = np.random.default_rng(seed)
    columns = "vector, context_vector" if kind == "fact" else "vector"
    # A sample by rowid: every k-th row, without reading the rest.
    step = max(1, count // (TRAIN_PER_CELL * cells))
    sample_rows = db.execute(
        f"SELECT {id_column}, {columns} FROM {table} WHERE user = ? AND model = ? "
        f"AND rowid % ? = 0", [user, model, step]).fetchall()
    sample = vectors_of(sample_rows)
    centroids = _kmeans(sample, min(cells, len(sample)), rng)
    new = Centroids((int(done[0]) if done else 0) + 1, centroids)
    # Every vector's new cell first, then the centroids: until they are written, searches use
    # the old ones (a new cell reads as none of theirs: scanned); then each process reloads.
    for ids, vectors in _chunks(db, kind, user, model, vectors_of) if store_cells else ():
        with write_transaction(db):
            db.conn.executemany(
                f"UPDATE {table} SET cell = ? WHERE {id_column} = ? AND model = ? AND user = ?",
                [(int(c), int(i), model, user)
                 for c, i in zip(new.assign(vectors), ids, strict=True)])
    with write_transaction(db):
        db.execute("INSERT OR REPLACE INTO vector_cells (kind, user, model, version, dim, "
                   "trained_on, centroids) VALUES (?, ?, ?, ?, ?, ?, ?)",
                   [kind, user, model, new.version, centroids.shape[1], count,
                    centroids.astype(np.float32).tobytes()])
    return True


def _chunks(db: sqlite_utils.Database, kind: str, user: str, model: str,
            vectors_of: Callable[[list[Any]], Any]) -> Iterator[tuple[list[int], Any]]:
    table, id_column = TABLES[kind]
    columns = "vector, context_vector" if kind == "fact" else "vector"
    last = -1
    while True:
        rows = db.execute(
            f"SELECT {id_column}, {columns} FROM {table} WHERE user = ? AND model = ? "
            f"AND {id_column} > ? ORDER BY {id_column} LIMIT ?",
            [user, model, last, CHUNK]).fetchall()
        if not rows:
            return
        last = int(rows[-1][0])
        yield [int(r[0]) for r in rows], vectors_of(rows)


def rounded_query(query: Any) -> tuple[Any, float]:
    """``query`` rounded to int8 codes (1, dim) times one step, for :func:`rounded_cosines`."""
    np = _np()
    query = np.asarray(query, dtype=np.float32)
    step = max(float(np.abs(query).max()) / 127.0, 1e-12)
    return np.rint(query / step).astype(np.int8).reshape(1, -1), step


def rounded_cosines(storage: Int8Rows, rounded: tuple[Any, float], at: Any) -> Any:
    """Cosines of a :func:`rounded_query` to the storage rows ``at`` (a slice: read in place;
    an index array: gathered first): one SIMD integer product (simsimd; numpy has none: its
    einsum converts each int8 code to float32 first, 7x slower: 2.5 ms against 0.35 ms for
    16k MiniLM rows). Within about 0.001 of the float query's cosine (a step of the query is
    1/127 of its largest component): to find candidates; a search scores what it keeps with
    the exact cosine (:meth:`Int8Rows.cosines`)."""
    np = _np()
    codes, step = rounded
    simsimd = _simsimd()
    if simsimd is None:  # the same integers (exact in float32: |dot| <= 384 * 127 * 128)
        dots = (storage.codes[at].astype(np.float32) @ codes[0].astype(np.float32)
                ).astype(np.float64)[None]  # float64, as simsimd returns them
    else:
        dots = np.asarray(simsimd.cdist(codes, storage.codes[at], metric="dot"))
    return (dots[0] * step).astype(np.float32) * storage.scale[at]


_SIMSIMD: list[Any] = []  # [the module, or None when it cannot be imported]


def _simsimd() -> Any:
    """simsimd, or None (said once in the log) when an install predates the dependency (a
    `git pull` without `pip install -e .`): the scan then multiplies in numpy, slower, the
    same cosines, instead of failing every search of a long history."""
    if not _SIMSIMD:
        module: Any = None
        try:
            import simsimd as module
        except ImportError as exc:
            log.warning("simsimd cannot be imported (%s): the cells' scan multiplies in numpy, "
                        "slower; `pip install -e .` installs it", exc)
        _SIMSIMD.append(module)
    return _SIMSIMD[0]


def _kmeans(sample: Any, cells: int, rng: Any) -> Any:
    """Spherical k-means: unit centroids, each vector to the centroid of highest cosine."""
    np = _np()
    centroids = sample[rng.choice(len(sample), cells, replace=False)].copy()
    for _ in range(ITERATIONS):
        nearest = np.argmax(sample @ centroids.T, axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, nearest, sample)
        norms = np.linalg.norm(sums, axis=1)
        empty = norms < 1e-9
        centroids[~empty] = sums[~empty] / norms[~empty, None]
        if empty.any():  # an empty cell restarts at a random vector
            centroids[empty] = sample[rng.choice(len(sample), int(empty.sum()))]
    return centroids.astype(np.float32)


class CellIndex:
    """Rows stored cell by cell, so a search reads each probed cell as one contiguous block
    (no gather of scattered rows). The owner's row ``r`` (messages: id order) is stored at
    ``pos[r]``; ``row_of`` maps back. Rows added since the index was built sit at the end and
    are always scanned, as are rows without a cell; past a quarter of SCAN_ROWS of them, the
    index is built again."""

    def __init__(self, centroids: Centroids, rows: Int8Rows, cell: Any) -> None:
        self._lay_out(centroids, cell)
        self.storage = rows.take(self.row_of)

    @classmethod
    def empty(cls, centroids: Centroids, cell: Any, dim: int) -> CellIndex:
        """An index for rows with these cells, its storage to be filled (``storage.put`` at
        ``pos``): a long history is read straight into place, never held twice."""
        index = object.__new__(cls)
        index._lay_out(centroids, cell)
        index.storage = Int8Rows.allocated(len(index.row_of), dim)
        return index

    @classmethod
    def restored(cls, centroids: Centroids, storage: Int8Rows, arrays: dict[str, Any],
                 numbers: dict[str, Any]) -> CellIndex:
        """An index as :meth:`layout` described it (hermes.memory.vectors.file: a process maps
        what another saved), rows appended or changed since its build included."""
        index = object.__new__(cls)
        index.centroids, index.storage = centroids, storage
        index.row_of, index.pos, index.cell = arrays["row_of"], arrays["pos"], arrays["cell"]
        index.bounds, index.gone = arrays["bounds"], arrays["gone"].astype(bool)
        index.first, index.built = int(numbers["first"]), int(numbers["built"])
        index.holes = bool(numbers["holes"])
        return index

    def layout(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """(arrays, numbers) that :meth:`restored` builds this index again from, storage
        aside."""
        np = _np()
        return ({"row_of": self.row_of, "pos": self.pos, "cell": self.cell,
                 "bounds": self.bounds, "gone": self.gone.view(np.uint8)},
                {"first": self.first, "built": self.built, "holes": self.holes})

    def _copy(self) -> CellIndex:
        grown = object.__new__(CellIndex)
        grown.__dict__.update(self.__dict__)
        return grown

    def changed(self, replaced: Any, rows: Int8Rows, cells: Any, dropped: Any) -> CellIndex:
        """This index with the vectors of owner rows ``replaced`` (ascending) replaced by
        ``rows`` (their decoded ``cells``) and owner rows ``dropped`` left without one (they
        keep their place: :attr:`gone`), without a rebuild: a row whose cell is the same is
        written over in its place; another's old place is emptied (a hole: never a scan's
        result) and the row joins the rows added since the build (always scanned). The
        storage is written in place; the small arrays are copied (a search under way keeps
        its own)."""
        np = _np()
        replaced = np.asarray(replaced, dtype=np.int64)
        dropped = np.asarray(dropped, dtype=np.int64)
        cells = np.asarray(cells, dtype=np.int32)
        grown = self._copy()
        grown.row_of, grown.pos = self.row_of.copy(), self.pos.copy()
        grown.cell, grown.gone = self.cell.copy(), self.gone.copy()
        same = (cells == self.cell[replaced]) & ~self.gone[replaced]
        if same.any():
            self.storage.put(self.pos[replaced[same]], rows.take(np.flatnonzero(same)))
        moved = replaced[~same]
        emptied = np.concatenate([moved[~self.gone[moved]], dropped[~self.gone[dropped]]])
        if len(emptied):
            slots = self.pos[emptied]
            self.storage.put(slots, Int8Rows.allocated(len(slots), self.storage.codes.shape[1]))
            grown.row_of[slots] = -1
            grown.holes = True
        if len(moved):
            start = len(self.storage)
            grown.storage = self.storage.appended(rows.take(np.flatnonzero(~same)))
            grown.row_of = np.concatenate([grown.row_of, moved])
            grown.pos[moved] = np.arange(start, start + len(moved), dtype=np.int64)
            grown.cell[moved] = cells[~same]
        grown.gone[dropped] = True
        grown.gone[replaced] = False
        return grown

    def _lay_out(self, centroids: Centroids, cell: Any) -> None:
        np = _np()
        self.centroids = centroids
        order = np.argsort(cell, kind="stable").astype(np.int64)
        self.row_of = order
        self.pos = np.empty(len(order), np.int64)
        self.pos[order] = np.arange(len(order), dtype=np.int64)
        self.cell = np.asarray(cell, dtype=np.int32)  # per owner row
        ordered = self.cell[order]
        self.first = int(np.searchsorted(ordered, 0))  # rows of -1 (no cell) come first
        self.bounds = self.first + np.searchsorted(
            ordered[self.first :], np.arange(len(centroids.vectors) + 1))
        self.built = len(order)
        # Owner rows without a vector (dropped since the build: :meth:`changed`), and whether
        # row_of has holes (-1: a place emptied by a change, never a scan's result)
        self.gone = np.zeros(len(order), bool)
        self.holes = False

    def __len__(self) -> int:
        """Places in the storage (the owner's rows, and places a change emptied)."""
        return len(self.row_of)

    def appended(self, rows: Int8Rows, cells: Any) -> CellIndex:
        """This index with owner rows appended (their stored ``cells``, decoded)."""
        np = _np()
        cell = np.concatenate([self.cell, np.asarray(cells, dtype=np.int32)])
        m = len(rows)
        gone = np.concatenate([self.gone, np.zeros(m, bool)])
        if len(self) + m - self.built > SCAN_ROWS // 4:
            rebuilt = CellIndex(self.centroids, self.owner_rows().appended(rows), cell)
            if gone.any():  # their (zero) vectors are no scan's result
                rebuilt.gone, rebuilt.holes = gone, True
                rebuilt.row_of[rebuilt.pos[gone]] = -1
            return rebuilt
        grown = self._copy()
        owners, slots = len(self.pos), len(self)
        grown.storage = self.storage.appended(rows)
        grown.row_of = np.concatenate([self.row_of,
                                       np.arange(owners, owners + m, dtype=np.int64)])
        grown.pos = np.concatenate([self.pos, np.arange(slots, slots + m, dtype=np.int64)])
        grown.cell, grown.gone = cell, gone
        return grown

    def owner_rows(self) -> Int8Rows:
        """The rows in the owner's order (for a rebuild)."""
        return self.storage.take(self.pos)

    def cosines(self, query: Any, rows: Any) -> Any:
        return self.storage.cosines(query, self.pos[rows])

    def dequantized(self, rows: Any) -> Any:
        return self.storage.dequantized(self.pos[rows])

    def rounded_cosines(self, rounded: tuple[Any, float], rows: Any) -> Any:
        """:func:`rounded_cosines` of owner rows (to find candidates among them)."""
        return rounded_cosines(self.storage, rounded, self.pos[rows])

    def scan(self, query: Any, scan: int | None = None, *,
             rounded: bool = False) -> tuple[Any, Any]:
        """(owner rows, their cosines) for the cells nearest ``query`` (about ``scan`` rows,
        SCAN_ROWS by default), the rows without a cell and the rows added since the build.
        ``rounded``: the cosines are :func:`rounded_cosines` (the query rounded to int8,
        7x faster): to find candidates, not to score them."""
        np = _np()
        scan = scan or SCAN_ROWS
        cells = len(self.centroids.vectors)
        per_cell = max((self.built - self.first) / max(cells, 1), 1.0)
        probes = max(1, min(cells, math.ceil(scan / per_cell)))
        near = np.argpartition(-(self.centroids.vectors @ query), probes - 1)[:probes]
        spans = [(0, self.first), (self.built, len(self))]
        spans += [(int(self.bounds[c]), int(self.bounds[c + 1])) for c in near]
        spans = [(a, b) for a, b in spans if b > a]
        if not spans:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        at = np.concatenate([np.arange(a, b, dtype=np.int64) for a, b in spans])
        if rounded:
            codes = rounded_query(query)
            cosines = np.concatenate([rounded_cosines(self.storage, codes, slice(a, b))
                                      for a, b in spans])
        else:
            cosines = np.concatenate([self.storage.cosines(query, slice(a, b))
                                      for a, b in spans])
        rows = self.row_of[at]
        if self.holes:
            kept = rows >= 0
            return rows[kept], cosines[kept]
        return rows, cosines
