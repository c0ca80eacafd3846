"""What the fact vectors and the message vectors have in common: one class.

A :class:`VectorStore` holds the vectors of one database for one embedding model (the facts'
table or the messages'): it knows the rows whose stored vector is damaged (left out of search,
embedded again by the next index), and writes new vectors the one way both tiers do (in
batches, each in one write transaction that also prunes the change log, asking ``stop`` between
batches and telling ``progress`` after each). What a row's vectors are, and how a user's
vectors are held for search, are the tier's (hermes.memory.facts.vectors.FactVectors,
hermes.memory.sessions.vectors.MessageVectors)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import sqlite_utils

from hermes.memory.vectors.matrix import prune_changes
from hermes.store.db import write_transaction

if TYPE_CHECKING:
    from hermes.memory.embeddings.embedders import Embedder


class VectorStore:
    """The vectors of one database for one embedding model."""

    def __init__(self, db: sqlite_utils.Database, embedder: Embedder) -> None:
        import numpy as np

        self._np = np
        self.db = db
        self.embedder = embedder
        # Per user, rows whose stored vector is not a vector this model wrote (a damaged or
        # hand-edited row): left out of search by meaning, embedded again by the next index.
        self._damaged: dict[str, set[int]] = {}

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    def _write_batches(self, user: str, rows: Sequence[Sequence[Any]], batch: int,
                       values_of: Callable[[Sequence[Sequence[Any]]], Iterable[Sequence[Any]]],
                       insert: str, *, stop: Callable[[], bool] | None = None,
                       progress: Callable[[int, int], None] | None = None) -> int:
        """Embed ``rows`` (each row's id first) ``batch`` at a time and write them:
        ``values_of(chunk)`` gives the ``insert`` statement's values. Returns how many."""
        done = 0
        if progress is not None:
            progress(0, len(rows))
        for start in range(0, len(rows), batch):
            if stop is not None and stop():
                break
            chunk = rows[start : start + batch]
            values = list(values_of(chunk))
            with write_transaction(self.db):
                self.db.conn.executemany(insert, values)
                prune_changes(self.db)
            done += len(chunk)
            self._damaged.get(user, set()).difference_update(r[0] for r in chunk)
            if progress is not None:
                progress(done, len(rows))
        return done
