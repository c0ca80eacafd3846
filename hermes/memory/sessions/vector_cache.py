"""A long history's message vectors as a process holds them (int8 rows, cells, session
windows), to and from the file hermes.memory.vectors.file keeps under ``<home>/cache/vectors/``
(hermes.memory.sessions.vectors decides when), and the checks that a mapped file is this
database's: the change log reaches back to it, and sampled rows hold the database's vectors.
"""

from __future__ import annotations

from typing import Any

import sqlite_utils

from hermes.memory.sessions.held_vectors import Matrix
from hermes.memory.sessions.semantic import _np, _Windows
from hermes.memory.vectors import cells as vector_cells
from hermes.memory.vectors import file as vector_file
from hermes.memory.vectors.matrix import Int8Rows, changes_since, last_change, mended

SAMPLES = 16  # rows of a mapped file compared with the database (a file of another database)


def restored(db: sqlite_utils.Database, found: vector_file.Mapped) -> tuple[Matrix, _Windows]:
    """The matrix and windows a mapped file holds (vector_file.Unusable: it does not fit the
    database's cells, or its arrays do not fit each other, or an array or number this code
    reads is not there: a file of an older layout under the same FORMAT)."""
    try:
        return _restored(db, found)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise vector_file.Unusable(f"layout damaged ({type(exc).__name__}: {exc})") from None


def _restored(db: sqlite_utils.Database, found: vector_file.Mapped
              ) -> tuple[Matrix, _Windows]:
    meta, a = found.meta, found.arrays
    n, places = len(a["ids"]), len(a["scale"])
    storage = Int8Rows(a["codes"], a["scale"],
                       (found.room["codes"], found.room["scale"], [places]))
    version = int(meta.get("version", 0))
    centroids = vector_cells.load(db, "message", meta["user"], meta["model"])
    if (centroids.version if centroids is not None else 0) != version:
        raise vector_file.Unusable("clustered again since")
    per_row = ("prev", "next", "norm") + (("pos", "cell", "gone") if version else ())
    if (len(a["codes"]) != places or any(len(a[k]) != n for k in per_row)
            or (len(a["row_of"]) != places if version else places != n)):
        raise vector_file.Unusable("layout damaged")
    windows = _Windows(n, a["prev"], a["next"], a["norm"],
                       dict(zip(a["sessions"].tolist(), a["last"].tolist(), strict=True)))
    if not version:
        return Matrix(a["ids"], storage, int(meta["seq"])), windows
    assert centroids is not None
    if centroids.vectors.shape[1] != a["codes"].shape[1]:
        raise vector_file.Unusable("another dimension")
    index = vector_cells.CellIndex.restored(centroids, storage, a, meta)
    return Matrix(a["ids"], None, int(meta["seq"]), index), windows


def check(db: sqlite_utils.Database, model: str, user: str, matrix: Matrix) -> None:
    """A file of this user's current history: the change log still reaches back to it, and
    sampled rows the log says are unchanged hold the database's vectors (a home restored
    from a backup, another database copied in: not used)."""
    np = _np()
    if matrix.seq > last_change(db, "message", user, model):
        raise vector_file.Unusable("newer than the database")
    changes = changes_since(db, "message", user, model, matrix.seq)
    if changes.gap:
        raise vector_file.Unusable("older than the change log")
    n = len(matrix.ids)
    rows = np.unique(np.linspace(0, n - 1, min(n, SAMPLES)).astype(np.int64)) if n else []
    changed, gone = set(changes.ids), matrix.gone()
    rows = np.array([r for r in rows if int(matrix.ids[r]) not in changed
                     and (gone is None or not gone[r])], np.int64)
    if not len(rows):
        return
    wanted = [int(matrix.ids[r]) for r in rows]
    stored = dict(db.execute(
        "SELECT message_id, vector FROM message_vectors WHERE user = ? AND model = ? "
        f"AND message_id IN ({','.join('?' * len(wanted))})",
        [user, model, *wanted]).fetchall())
    if set(stored) != set(wanted):
        raise vector_file.Unusable("rows the database does not have")
    held = matrix.dequantized(rows)
    blobs = [stored[m] for m in wanted]
    if mended(blobs, 2 * held.shape[1]):
        raise vector_file.Unusable("rows of another size (damaged)")
    truth = (np.frombuffer(b"".join(blobs), dtype=np.float16)
             .reshape(len(wanted), -1).astype(np.float32))
    if not np.allclose(held, truth, atol=0.02):
        raise vector_file.Unusable("rows that differ from the database's")


def layout(user: str, model: str, matrix: Matrix,
           windows: _Windows) -> tuple[dict[str, Any], dict[str, Any]]:
    """(arrays, header fields) of what a process holds, for vector_file.save."""
    np = _np()
    storage = matrix.cells.storage if matrix.cells is not None else matrix.rows
    assert storage is not None
    last = sorted(windows.last_of_session.items())
    arrays = {"ids": matrix.ids, "codes": storage.codes, "scale": storage.scale,
              "prev": windows.prev, "next": windows.next, "norm": windows.norm,
              "sessions": np.array([s for s, _ in last], np.int64),
              "last": np.array([r for _, r in last], np.int64)}
    meta: dict[str, Any] = {"kind": "message", "user": user,
                            "model": model, "seq": matrix.seq,
                            "version": matrix.cells.centroids.version if matrix.cells else 0}
    if matrix.cells is not None:
        cell_arrays, numbers = matrix.cells.layout()
        arrays.update(cell_arrays)
        meta.update(numbers)
    meta["checked"] = sorted(set(arrays) - {"codes", "scale"})
    return arrays, meta
