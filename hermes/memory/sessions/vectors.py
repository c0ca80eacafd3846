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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlite_utils

from hermes.errors import HermesError
from hermes.memory.embeddings import DEFAULT_MODEL, Embedder, Embedders, message_text
from hermes.memory.vector_matrix import Int8Rows, changes_since, last_change, prune_changes
from hermes.store.db import write_transaction

log = logging.getLogger(__name__)

INDEX_BATCH = 32
# A search embeds at most this many new messages itself (about 2 s with e5 on one core).
INLINE_INDEX = 32


@dataclass
class _Matrix:
    """One user's message vectors as this process holds them."""

    ids: Any  # numpy int64 array of message ids, ascending
    rows: Int8Rows  # one row per id
    seq: int  # the newest vector_changes entry applied

    def cosines(self, query: Any) -> Any:
        """float32 cosine of ``query`` to every row."""
        return self.rows.cosines(query)

    def dequantized(self, rows: Any) -> Any:
        """The float32 vectors of these rows."""
        return self.rows.dequantized(rows)


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
        # Per user, messages whose vectors another write dropped (an edit, a redaction, a
        # deletion): the next search re-embeds those that still exist (a few at a time).
        self._dropped: dict[str, set[int]] = {}

    def index(self, user: str, *, stop: Callable[[], bool] | None = None,
              limit: int | None = None,
              progress: Callable[[int, int], None] | None = None, after: int = 0,
              only: Sequence[int] | None = None) -> int:
        """Embed the user's messages that have no vector for this model yet (the newest
        ``limit`` of them when given). Returns how many. ``stop`` is asked between batches:
        when it says so, what is done so far is kept. ``progress(done, total)`` is told after
        each batch (``hermes sessions index`` draws its bar with it). ``after``: only messages
        with a larger id (a search looks only past the newest vector: a walk of the index from
        there, where looking for gaps in a long history costs a scan of it). ``only``: only
        these messages (a search re-embeds the few whose vectors an edit dropped)."""
        among = f"AND m.id IN ({','.join('?' * len(only))}) " if only else ""
        rows = self.db.execute(
            "SELECT m.id, m.speaker, m.content FROM messages m WHERE m.user = ? AND m.id > ? "
            f"{among}AND NOT EXISTS "
            "(SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model = ?) "
            "AND m.role IN ('user', 'assistant') ORDER BY m.id DESC LIMIT ?",
            [user, after, *(only or ()), self.embedder.model_id,
             -1 if limit is None else limit],
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
                prune_changes(self.db)
            done += len(chunk)
            if progress is not None:
                progress(done, len(rows))
        return done

    def _matrix(self, user: str) -> _Matrix:
        """The user's vectors: loaded once, then kept in step with every change logged since
        (hermes.memory.vector_matrix): new vectors, and vectors replaced or dropped by any
        process (an edited, redacted or deleted message)."""
        np = self._np
        model = self.embedder.model_id
        with self._lock:
            cached = self._cache.get(user)
            changes = (changes_since(self.db, "message", user, model, cached.seq)
                       if cached is not None else None)
            if cached is not None and changes is not None and not changes.gap:
                if not changes.ids:
                    return cached
                matrix = self._updated(user, cached, changes.ids, changes.through)
            else:
                seq = last_change(self.db, "message", user, model)
                found = self.db.execute(
                    "SELECT message_id, vector FROM message_vectors WHERE user = ? AND model = ? "
                    "ORDER BY message_id", [user, model]).fetchall()
                matrix = _Matrix(np.array([r[0] for r in found], dtype=np.int64),
                                 Int8Rows.from_float16([r[1] for r in found]), seq)
                self.windows.pop(user, None)
            self._cache[user] = matrix
            return matrix

    def _updated(self, user: str, cached: _Matrix, changed: list[int], seq: int) -> _Matrix:
        """``cached`` with the rows of ``changed`` messages read again (the user's own): new
        messages past the last row are appended (session windows extend); anything else (a
        vector replaced or dropped, one written for an older message) rebuilds the matrix in id
        order and its windows."""
        np = self._np
        found: dict[int, bytes] = {}
        for start in range(0, len(changed), 500):
            chunk = changed[start : start + 500]
            found.update(self.db.execute(
                "SELECT message_id, vector FROM message_vectors WHERE user = ? AND model = ? "
                f"AND message_id IN ({','.join('?' * len(chunk))})",
                [user, self.embedder.model_id, *chunk]).fetchall())
        gone = [m for m in changed if m not in found]
        if gone:
            self._dropped.setdefault(user, set()).update(gone)
        last = int(cached.ids[-1]) if len(cached.ids) else 0
        new_ids = sorted(found)
        if all(m > last for m in changed) and len(found) == len(changed):
            ids = np.concatenate([cached.ids, np.array(new_ids, dtype=np.int64)])
            rows = Int8Rows.concatenated([cached.rows,
                                          Int8Rows.from_float16([found[m] for m in new_ids])])
            return _Matrix(ids, rows, seq)
        keep = ~np.isin(cached.ids, np.array(changed, dtype=np.int64))
        ids = np.concatenate([cached.ids[keep], np.array(new_ids, dtype=np.int64)])
        rows = Int8Rows.concatenated([cached.rows.take(keep),
                                      Int8Rows.from_float16([found[m] for m in new_ids])])
        order = np.argsort(ids, kind="stable")
        self.windows.pop(user, None)
        return _Matrix(ids[order], rows.take(order), seq)

    def matrix(self, user: str) -> _Matrix:
        """The user's vectors (theirs only), after embedding at most INLINE_INDEX new messages,
        the newest since the last one with a vector (see :meth:`nearest`)."""
        newest = self.db.execute(
            "SELECT coalesce(max(message_id), 0) FROM message_vectors WHERE user = ? AND model = ?",
            [user, self.embedder.model_id]).fetchone()[0]
        self.index(user, limit=INLINE_INDEX, after=newest)
        matrix = self._matrix(user)
        dropped = self._dropped.pop(user, None)
        if dropped and self.index(user, only=sorted(dropped)[-INLINE_INDEX:]):
            matrix = self._matrix(user)  # edited since they were embedded: as they now read
        return matrix

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
        scores = matrix.cosines(self.embedder.embed_query(query))
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
