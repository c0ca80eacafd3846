"""One user's message vectors as a process holds them (:class:`Matrix`: int8 rows in id order, or
cell by cell once clustered), and the cosines of one query to them that read only the cells
nearest it (:class:`ProbedSimilarities`). hermes.memory.sessions.vectors loads, updates and
caches these; hermes.memory.sessions.semantic scores with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hermes.memory.sessions.semantic import Similarities, _np
from hermes.memory.vectors import cells as vector_cells
from hermes.memory.vectors.cells import CellIndex
from hermes.memory.vectors.matrix import Int8Rows

# With cells, the windows nearest a query are looked for around its nearest this-many messages.
WINDOW_SEEDS = 400
# The nearest k messages (windows) are the exact best of the best 2k + this many found with the
# query rounded to int8 (vector_cells.rounded_cosines: a near tie could swap).
RESCORE_MARGIN = 16


@dataclass
class Matrix:
    """One user's message vectors as this process holds them: int8 rows in id order, or,
    once the user's vectors are clustered, stored cell by cell (``cells``)."""

    ids: Any  # numpy int64 array of message ids, ascending
    rows: Int8Rows | None  # one row per id (None: held by ``cells``)
    seq: int  # the newest vector_changes entry applied
    cells: CellIndex | None = None  # the coarse index, once the user's vectors are clustered

    def cosines(self, query: Any) -> Any:
        """float32 cosine of ``query`` to every row."""
        if self.cells is None:
            assert self.rows is not None
            return self.rows.cosines(query)
        np = _np()
        cosines, rows = self.cells.storage.cosines(query), self.cells.row_of
        if not self.cells.holes:
            out = np.empty(len(self.ids), np.float32)
            out[rows] = cosines
            return out
        out = np.zeros(len(self.ids), np.float32)  # a row without a vector: 0
        kept = rows >= 0
        out[rows[kept]] = cosines[kept]
        return out

    def gone(self) -> Any:
        """Which rows have lost their vector since the layout was built (None: none can)."""
        return self.cells.gone if self.cells is not None else None

    def cosines_at(self, query: Any, rows: Any) -> Any:
        """float32 cosines of ``query`` to these rows."""
        if self.cells is None:
            assert self.rows is not None
            return self.rows.cosines(query, rows)
        return self.cells.cosines(query, rows)

    def dequantized(self, rows: Any) -> Any:
        """The float32 vectors of these rows."""
        if self.cells is None:
            assert self.rows is not None
            return self.rows.dequantized(rows)
        return self.cells.dequantized(rows)

    def id_rows(self) -> Int8Rows:
        """Every row in id order."""
        if self.cells is None:
            assert self.rows is not None
            return self.rows
        return self.cells.owner_rows()

    def probed(self, query: Any, prev: Any, nxt: Any, norm: Any) -> ProbedSimilarities:
        """A search's similarities when the vectors have cells: only the nearest cells'
        vectors are scanned (``prev``/``nxt``/``norm``: the session windows of the rows, as
        hermes.memory.sessions.semantic derives them)."""
        return ProbedSimilarities(self, query, prev, nxt, norm)


class ProbedSimilarities(Similarities):
    """The cosines of one query to a user's messages and their windows, computed only where
    needed: the nearest messages and windows among the vectors of the cells nearest the query,
    and exact cosines of any message asked for by id (``message`` and ``window``, every
    row's cosines in the full scan, stay empty: use :meth:`nearest` and :meth:`of`)."""

    def __init__(self, matrix: Matrix, query: Any, prev: Any, nxt: Any, norm: Any) -> None:
        assert matrix.cells is not None
        np = _np()
        empty = np.zeros(0, np.float32)
        super().__init__(matrix.ids, empty, empty)
        self._matrix, self._query, self._cells = matrix, query, matrix.cells
        self._prev, self._next, self._norm = prev, nxt, norm
        self._scanned, self._cosines = matrix.cells.scan(query, rounded=True)  # to find
        self._rounded = vector_cells.rounded_query(query)
        self._gone = matrix.cells.gone  # rows whose vector was dropped since the build

    def _cos(self, rows: Any, exact: bool = True) -> Any:
        """Cosines of these rows (exact, or with the query rounded: to find candidates); 0
        for -1 (no neighbour)."""
        np = _np()
        out = np.zeros(len(rows), np.float32)
        real = rows >= 0
        if real.any():
            out[real] = (self._matrix.cosines_at(self._query, rows[real]) if exact else
                         self._cells.rounded_cosines(self._rounded, rows[real]))
        return out

    def _window(self, rows: Any, exact: bool = True) -> Any:
        """The window cosines of these rows: each row of the three read once."""
        np = _np()
        three = np.concatenate([rows, self._prev[rows], self._next[rows]])
        each, where = np.unique(three, return_inverse=True)
        cosines = self._cos(each, exact)[where].reshape(3, len(rows))
        return cosines.sum(axis=0) / self._norm[rows]

    def nearest(self, k: int) -> list[int]:
        """The ``k`` nearest messages and the ``k`` nearest windows among the scanned cells
        (message ids, messages first)."""
        found = dict.fromkeys(self.nearest_messages(k))
        found.update(dict.fromkeys(self.nearest_windows(k)))
        return list(found)

    def nearest_messages(self, k: int) -> list[int]:
        if k <= 0 or not len(self._scanned):
            return []
        # The scan's (query rounded) best, with a margin, ordered by their exact cosines
        near = self._scanned[top_k(self._cosines, 2 * k + RESCORE_MARGIN)]
        return [int(self.ids[row]) for row in near[top_k(self._cos(near), k)]]

    def nearest_windows(self, k: int) -> list[int]:
        """A window is a candidate when one of its three messages is among the nearest
        WINDOW_SEEDS scanned messages (a strong window holds at least one strong message)."""
        np = _np()
        if k <= 0 or not len(self._scanned):
            return []
        near = self._scanned[top_k(self._cosines, max(WINDOW_SEEDS, k))]
        centres = np.unique(np.concatenate([near, self._prev[near], self._next[near]]))
        centres = centres[centres >= 0]
        centres = centres[~self._gone[centres]]
        # The best by the rounded query, with a margin, ordered by their exact cosines
        near = centres[top_k(self._window(centres, exact=False), 2 * k + RESCORE_MARGIN)]
        return [int(self.ids[row]) for row in near[top_k(self._window(near), k)]]

    def of(self, message_ids: Sequence[int]) -> tuple[Any, Any]:
        """(message cosines, window cosines) of these messages, exact; NaN for one without a
        vector."""
        np = _np()
        wanted = np.asarray(message_ids, dtype=np.int64)
        at = np.clip(np.searchsorted(self.ids, wanted), 0, max(len(self.ids) - 1, 0))
        present = self.ids[at] == wanted if len(self.ids) else np.zeros(len(wanted), bool)
        present &= ~self._gone[at]  # its vector dropped: as none yet
        message = np.full(len(wanted), np.nan, np.float32)
        window = np.full(len(wanted), np.nan, np.float32)
        rows = at[present]
        if len(rows):
            message[present] = self._cos(rows)
            window[present] = self._window(rows)
        return message, window


def top_k(values: Any, k: int) -> Any:
    """Indices of the ``k`` largest values, largest first."""
    np = _np()
    k = min(k, len(values))
    if k <= 0:
        return np.zeros(0, np.int64)
    best = np.argpartition(-values, k - 1)[:k]
    return best[np.argsort(-values[best], kind="stable")]
