"""Message vectors: every message's embedding, stored per model in ``message_vectors`` and held
in memory per user, so a query costs one matrix-vector product (hermes.memory.embeddings has
the models; hermes.memory.sessions.semantic re-scores session search with these vectors).

Vectors are stored as float16 blobs (768 bytes a message with MiniLM). Messages are embedded
lazily: in the background by ``hermes run``, all at once by ``hermes sessions index``, and the
newest few (INLINE_INDEX) before a search.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from hermes.errors import HermesError
from hermes.memory.embeddings import DEFAULT_MODEL, Embedder, Embedders, message_text
from hermes.store.db import write_transaction

log = logging.getLogger(__name__)

INDEX_BATCH = 32
# A search embeds at most this many new messages itself (about 2 s with e5 on one core).
INLINE_INDEX = 32


@dataclass
class _Matrix:
    ids: Any  # numpy int64 array of message ids
    vectors: Any  # numpy float32 matrix, one row per id
    through: int  # highest message id covered


class MessageVectors:
    """Message vectors of one database, indexed lazily and searched by cosine similarity."""

    def __init__(self, db: sqlite_utils.Database, embedder: Embedder) -> None:
        import numpy as np

        self._np = np
        self.db = db
        self.embedder = embedder
        self._cache: dict[str, _Matrix] = {}
        self._lock = threading.Lock()
        # Per user, the session windows that search by meaning derives from the matrix
        # (sessions/semantic.py), kept with the vectors they were built from.
        self.windows: dict[str, Any] = {}

    def index(self, user: str, *, stop: Callable[[], bool] | None = None,
              limit: int | None = None,
              progress: Callable[[int, int], None] | None = None, after: int = 0) -> int:
        """Embed the user's messages that have no vector for this model yet (the newest
        ``limit`` of them when given). Returns how many. ``stop`` is asked between batches:
        when it says so, what is done so far is kept. ``progress(done, total)`` is told after
        each batch (``hermes sessions index`` draws its bar with it). ``after``: only messages
        with a larger id (a search looks only past the newest vector: a walk of the index from
        there, where looking for gaps in a long history costs a scan of it)."""
        rows = self.db.execute(
            "SELECT m.id, m.speaker, m.content FROM messages m WHERE m.user = ? AND m.id > ? "
            "AND NOT EXISTS "
            "(SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model = ?) "
            "AND m.role IN ('user', 'assistant') ORDER BY m.id DESC LIMIT ?",
            [user, after, self.embedder.model_id, -1 if limit is None else limit],
        ).fetchall()
        # By length: each batch holds messages of about the same size (less padding).
        rows.sort(key=lambda r: len(r[2] or ""))
        done = 0
        if progress is not None:
            progress(0, len(rows))
        for start in range(0, len(rows), INDEX_BATCH):
            if stop is not None and stop():
                break
            chunk = rows[start : start + INDEX_BATCH]
            vectors = self.embedder.embed([message_text(r[1], r[2]) for r in chunk])
            with write_transaction(self.db):
                self.db.conn.executemany(
                    "INSERT OR REPLACE INTO message_vectors (message_id, user, model, vector) "
                    "VALUES (?, ?, ?, ?)",
                    [(r[0], user, self.embedder.model_id,
                      vectors[i].astype(self._np.float16).tobytes())
                     for i, r in enumerate(chunk)],
                )
            done += len(chunk)
            if progress is not None:
                progress(done, len(rows))
        return done

    def _matrix(self, user: str) -> _Matrix:
        np = self._np
        with self._lock:
            cached = self._cache.get(user)
            through = cached.through if cached else 0
            rows = self.db.execute(
                "SELECT message_id, vector FROM message_vectors WHERE user = ? AND model = ? "
                "AND message_id > ? ORDER BY message_id",
                [user, self.embedder.model_id, through],
            ).fetchall()
            if cached is not None and not rows:
                return cached
            ids = np.array([r[0] for r in rows], dtype=np.int64)
            vectors = (np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16)
                       .reshape(len(rows), -1).astype(np.float32)) if rows else None
            if cached is not None and vectors is not None:
                ids = np.concatenate([cached.ids, ids])
                vectors = np.vstack([cached.vectors, vectors])
            elif vectors is None:
                vectors = np.zeros((0, 1), dtype=np.float32)
            matrix = _Matrix(ids, vectors, int(ids[-1]) if len(ids) else 0)
            self._cache[user] = matrix
            return matrix

    def matrix(self, user: str) -> _Matrix:
        """The user's vectors (theirs only), after embedding at most INLINE_INDEX new messages,
        the newest since the last one with a vector (see :meth:`nearest`)."""
        newest = self.db.execute(
            "SELECT coalesce(max(message_id), 0) FROM message_vectors WHERE user = ? AND model = ?",
            [user, self.embedder.model_id]).fetchone()[0]
        self.index(user, limit=INLINE_INDEX, after=newest)
        return self._matrix(user)

    def nearest(self, user: str, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` messages most similar to ``query``: (message id, cosine), best first.

        Messages deleted since they were indexed are dropped by the caller's join. At most
        INLINE_INDEX new messages (the newest) are embedded here, so a search never stalls on a
        backlog: ``hermes run`` embeds the rest in the background, ``hermes sessions index``
        all at once."""
        matrix = self.matrix(user)
        if not len(matrix.ids):
            return []
        np = self._np
        query_vector = self.embedder.embed_query(query)
        scores = matrix.vectors @ query_vector
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top])]
        return [(int(matrix.ids[i]), float(scores[i])) for i in top]


def session_vectors_for(db: sqlite_utils.Database, embedders: Embedders,
                        model: str = DEFAULT_MODEL) -> MessageVectors | None:
    """The MessageVectors of a connection for one model, or None (session search by words only)
    when the model's extra is not installed or its engine cannot load: said once in the log
    (once per ``embedders``, the home's memory) with how to install it, never an error, since
    messages are always found by their words. (``hermes sessions index``, which exists only to
    embed, loads the model itself and says so as an error.)"""
    try:
        return MessageVectors(db, embedders.get(model))
    except HermesError as exc:
        if embedders.first_failure(f"sessions:{model}"):
            log.warning("session search by meaning is off, words only: %s", exc)
        return None
