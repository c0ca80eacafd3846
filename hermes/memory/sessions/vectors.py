"""Message vectors: every message's embedding, stored per model in ``message_vectors`` and held
in memory per user, so a query costs one matrix-vector product (hermes.memory.embeddings has
the models; hermes.memory.sessions.semantic re-scores session search with these vectors).

Vectors are stored as float16 blobs (768 bytes a message with MiniLM). Messages are embedded
lazily: in the background by ``hermes run``, all at once by ``hermes sessions index``, and the
newest few (INLINE_INDEX) before a search. A long history is also kept, as this process holds
it, in a file under ``<home>/cache/vectors/`` that the next process maps instead of reading
SQLite (hermes.memory.vectors.file; :meth:`MessageVectors.windows_built`). What a process holds
and how a query reads it is hermes.memory.sessions.held_vectors.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import sqlite_utils

from hermes.clock import Clock, SystemClock
from hermes.errors import HermesError
from hermes.home import make_private_dirs
from hermes.memory.embeddings.embedders import DEFAULT_MODEL, Embedder, Embedders, message_text
from hermes.memory.sessions import semantic, vector_cache
from hermes.memory.sessions.held_vectors import Matrix, top_k
from hermes.memory.sessions.semantic import (  # _np: numpy, imported when used
    _np,
    _Windows,
)
from hermes.memory.vectors import cells as vector_cells
from hermes.memory.vectors import file as vector_file
from hermes.memory.vectors.cells import CellIndex
from hermes.memory.vectors.matrix import (
    SCAN_CHUNK,
    Int8Rows,
    changes_since,
    last_change,
    mended,
    model_size,
    read_snapshot,
    usual_size,
)
from hermes.memory.vectors.store import VectorStore

log = logging.getLogger(__name__)
# Cache directories this process found unable to take a file (said once each).
_cannot_keep: set[Path] = set()

INDEX_BATCH = 32
# A search embeds at most this many new messages itself (about 2 s with e5 on one core).
INLINE_INDEX = 32
# Message vectors kept from an embedding ahead (MessageVectors.embed_ahead) until a search takes
# them: a turn's new messages, a few turns' worth
AHEAD_KEPT = 4 * INLINE_INDEX
# A user's vectors are kept in a file under <home>/cache/vectors from this many (fewer are read
# out of SQLite in a few tens of ms); written again once this many of their rows changed since.
CACHE_MIN = 20_000
REFRESH = 4_096
# How often a process holding a user's file marks it in use again (vector_file.IN_USE: a day)
RENEW_LEASE = 3_600.0


class MessageVectors(VectorStore):
    """Message vectors of one database, indexed lazily and searched by cosine similarity."""

    def __init__(self, db: sqlite_utils.Database, embedder: Embedder,
                 cache_dir: Path | None = None, clock: Clock | None = None) -> None:
        super().__init__(db, embedder)
        # <home>/cache: long histories are kept there between processes (None: never)
        self.cache_dir = cache_dir
        # When this process last said it uses each user's file (vector_file.mark_used): a
        # file in use is never removed by a process of another model.
        self.clock: Clock = clock or SystemClock()
        self._leased: dict[str, float] = {}
        # Per user, how many rows changed since the file this process holds (or mapped) was
        # written; no entry: this process's state is not in a file yet.
        self._behind: dict[str, int] = {}
        self._cache: dict[str, Matrix] = {}
        self._lock = threading.Lock()
        # Per user, the session windows that search by meaning derives from the matrix
        # (sessions/semantic.py), kept with the vectors they were built from.
        self.windows: dict[str, Any] = {}
        # Per user, messages whose vectors another write dropped (an edit, a redaction, a
        # deletion): the next search re-embeds those that still exist (a few at a time).
        self._dropped: dict[str, set[int]] = {}
        # Vectors of message texts embedded ahead of the search that indexes them
        # (:meth:`embed_ahead`, on a worker thread), taken by that search instead of embedding
        self._ahead: dict[str, Any] = {}
        self._ahead_lock = threading.Lock()

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
        damaged = sorted(self._damaged.get(user, ()))
        again = f" OR m.id IN ({','.join(str(m) for m in damaged)})" if damaged else ""
        rows = self.db.execute(
            "SELECT m.id, m.speaker, m.content FROM messages m WHERE m.user = ? AND m.id > ? "
            f"{among}AND (NOT EXISTS "
            f"(SELECT 1 FROM message_vectors v WHERE v.message_id = m.id AND v.model = ?){again}) "
            "AND m.role IN ('user', 'assistant') ORDER BY m.id DESC LIMIT ?",
            [user, after, *(only or ()), self.embedder.model_id,
             -1 if limit is None else limit],
        ).fetchall()
        # By length: each batch holds messages of about the same size (less padding).
        rows.sort(key=lambda r: len(r[2] or ""))

        def values_of(chunk: Sequence[Any]) -> list[tuple[Any, ...]]:
            vectors = self._embedded([message_text(r[1], r[2]) for r in chunk])
            centroids = vector_cells.load(self.db, "message", user, self.embedder.model_id)
            cells: list[int | None] = ([int(c) for c in centroids.assign(vectors)]
                                       if centroids else [None] * len(chunk))
            return [(r[0], user, self.embedder.model_id,
                     vectors[i].astype(self._np.float16).tobytes(), cells[i])
                    for i, r in enumerate(chunk)]

        done = self._write_batches(
            user, rows, INDEX_BATCH, values_of,
            "INSERT OR REPLACE INTO message_vectors (message_id, user, model, vector, cell) "
            "VALUES (?, ?, ?, ?, ?)", stop=stop, progress=progress)
        if limit is None and only is None and not after and not (stop is not None and stop()):
            # The background passes (never a search): cluster a long history (vector_cells),
            # and bring its file up to date for the next process (vector_file)
            clustered = vector_cells.maybe_cluster(self.db, "message", user,
                                                   self.embedder.model_id, _float32_of)
            if done or clustered:
                self.keep_file(user)
        return done

    def pending(self, user: str) -> list[str]:
        """The texts a search (:meth:`matrix`) would embed now: the user's newest messages
        without a vector, at most INLINE_INDEX of them (a turn embeds them ahead, off the
        event loop: :meth:`embed_ahead`)."""
        rows = self.db.execute(
            "SELECT m.speaker, m.content FROM messages m WHERE m.user = ? AND m.id > "
            "(SELECT coalesce(max(message_id), 0) FROM message_vectors WHERE user = ? AND "
            "model = ?) AND m.role IN ('user', 'assistant') AND NOT EXISTS (SELECT 1 FROM "
            "message_vectors v WHERE v.message_id = m.id AND v.model = ?) "
            "ORDER BY m.id DESC LIMIT ?",
            [user, user, self.embedder.model_id, self.embedder.model_id, INLINE_INDEX],
        ).fetchall()
        return [message_text(speaker, content) for speaker, content in rows]

    def embed_ahead(self, texts: Sequence[str]) -> None:
        """Embed ``texts`` now (a worker thread: no database here) for the search that indexes
        them next; kept for AHEAD_KEPT texts at most."""
        if not texts:
            return
        vectors = self.embedder.embed(list(texts))
        with self._ahead_lock:
            for text, vector in zip(texts, vectors, strict=True):
                self._ahead.pop(text, None)
                self._ahead[text] = vector
            while len(self._ahead) > AHEAD_KEPT:
                self._ahead.pop(next(iter(self._ahead)))

    def _embedded(self, texts: list[str]) -> Any:
        """The vectors of ``texts``: those embedded ahead taken, the others embedded here."""
        with self._ahead_lock:
            found = {t: self._ahead.pop(t) for t in texts if t in self._ahead}
        if not found:
            return self.embedder.embed(texts)
        missing = [t for t in texts if t not in found]
        computed = iter(self.embedder.embed(missing)) if missing else iter(())
        return self._np.stack([found[t] if t in found else next(computed) for t in texts])

    def keep_file(self, user: str) -> bool:
        """Bring the user's file under ``<home>/cache/vectors/`` up to date now (the
        background passes, after new vectors or a clustering: the next process then maps it
        instead of building it). Nothing without a cache directory or for a short history.
        Returns whether the history was long enough to keep."""
        if self.cache_dir is None:
            return False
        count = self.db.execute("SELECT count(*) FROM message_vectors WHERE user = ? AND "
                                "model = ?", [user, self.embedder.model_id]).fetchone()[0]
        if count < CACHE_MIN or not self._can_keep(user, count):
            return False
        matrix = self._matrix(user)
        self.windows_built(user, matrix, semantic._windows_of(self, user, matrix))
        return True

    def _can_keep(self, user: str, count: int) -> bool:
        """Whether the cache directory can take a file of ``count`` vectors, asked before the
        history is loaded for it: a cache that cannot (a full disk, a read-only directory, a
        file where the directory goes) would otherwise cost each background pass a load of
        every vector (12 s CPU and 900 MB at 900k), every time, for a save that fails. Said
        once a process per directory; searches still try their own saves, as before."""
        folder = self._file(user).parent
        try:
            make_private_dirs(folder)  # 0700, whatever the umask
            writable = os.access(folder, os.W_OK)
            free = shutil.disk_usage(folder).free
        except OSError as exc:
            problem = exc.strerror or str(exc)
        else:
            row = self.db.execute("SELECT length(vector) FROM message_vectors WHERE user = ? "
                                  "AND model = ? LIMIT 1", [user, self.embedder.model_id]
                                  ).fetchone()
            need = count * ((row[0] // 2) if row else 0)  # its int8 rows alone, at the least
            if writable and free >= need:
                return True
            problem = ("not writable" if not writable
                       else f"{free:,} bytes free, its vectors need {need:,} or more")
        if folder not in _cannot_keep:
            _cannot_keep.add(folder)
            log.warning("the background pass keeps no vector file in %s (%s): a new process "
                        "reads the vectors from the database", folder, problem)
        return False

    def _matrix(self, user: str) -> Matrix:
        """The user's vectors: loaded once, then kept in step with every change logged since
        (hermes.memory.vectors.matrix): new vectors, and vectors replaced or dropped by any
        process (an edited, redacted or deleted message)."""
        model = self.embedder.model_id
        with self._lock:
            self._renew(user)
            cached = self._cache.get(user)
            if cached is None and self.cache_dir is not None:
                cached = self._mapped(user)
            changes = (changes_since(self.db, "message", user, model, cached.seq)
                       if cached is not None else None)
            if (cached is not None and changes is not None and not changes.gap
                    and _version(cached) == vector_cells.version(self.db, "message", user,
                                                                 model)):
                if not changes.ids:
                    cached.seq = changes.through  # seen: pruning past it is no gap
                    self._cache[user] = cached
                    return cached
                matrix = self._updated(user, cached, changes.ids, changes.through)
                if user not in self.windows:  # rebuilt, not appended to: save it whole
                    self._behind.pop(user, None)
                elif user in self._behind:
                    self._behind[user] += len(changes.ids)
            else:
                matrix = self._load(user)
                self.windows.pop(user, None)
                self._behind.pop(user, None)
            self._cache[user] = matrix
            return matrix

    def _renew(self, user: str) -> None:
        """Mark the user's file in use again, at most once every RENEW_LEASE seconds, while
        this process holds it (a daemon maps it once and searches it for days)."""
        last = self._leased.get(user)
        now = self.clock.now().timestamp()
        if last is not None and now - last >= RENEW_LEASE:
            vector_file.mark_used(self._file(user), now)
            self._leased[user] = now

    def _lease(self, user: str) -> None:
        """This process holds the user's file from now on (mapped or just saved): mark it in
        use, and remove the user's files of other models that nobody used for a day."""
        assert self.cache_dir is not None
        now = self.clock.now().timestamp()
        path = self._file(user)
        vector_file.mark_used(path, now)
        self._leased[user] = now
        old = vector_file.remove_other_models(self.cache_dir, "message", user,
                                              self.embedder.model_id, now=now)
        if old:  # sessions.embedding_model changed: the old model's file is not read again
            log.info("removed %d vector file(s) of %s's other embedding models from %s "
                     "(unused for a day)", old, user, path.parent)

    def _file(self, user: str) -> Path:
        assert self.cache_dir is not None
        return vector_file.path_for(self.cache_dir, "message", user, self.embedder.model_id)

    def _mapped(self, user: str) -> Matrix | None:
        """The user's vectors as the last process that saved them held them, mapped from their
        file, with their session windows (None: no usable file; a damaged, stale or foreign
        one is said in one log line, and replaced once the windows are built again)."""
        path = self._file(user)
        try:
            found = vector_file.load(path, "message", user, self.embedder.model_id)
            if found is None:
                return None
            matrix, windows = vector_cache.restored(self.db, found)
            vector_cache.check(self.db, self.embedder.model_id, user, matrix)
        except vector_file.Unusable as exc:
            log.warning("vector cache %s not used (%s): reading the vectors from the database",
                        path, exc)
            return None
        self.windows[user] = windows
        self._behind[user] = 0
        self._lease(user)
        return matrix

    def windows_built(self, user: str, matrix: Matrix, windows: _Windows) -> None:
        """Told by hermes.memory.sessions.semantic when it has built or extended ``matrix``'s
        session windows: a long history whose file is missing or REFRESH rows behind is saved
        (rows, cells, windows) and mapped back, so that this process holds it as the next one
        will, in pages the kernel can share and drop. A full disk: one log line, and the
        vectors stay in memory (tried again REFRESH changes later)."""
        if self.cache_dir is None or len(matrix.ids) < CACHE_MIN:
            return
        with self._lock:
            if (self._cache.get(user) is not matrix or windows.rows != len(matrix.ids)
                    or self._behind.get(user, REFRESH) < REFRESH):
                return
            path = self._file(user)
            arrays, meta = vector_cache.layout(user, self.embedder.model_id, matrix, windows)
            room = max(len(matrix.ids) // 8, 1024)
            try:
                vector_file.save(path, meta, arrays, {"codes": room, "scale": room})
                found = vector_file.load(path, "message", user, self.embedder.model_id)
                assert found is not None
                mapped, mapped_windows = vector_cache.restored(self.db, found)
            except (OSError, vector_file.Unusable) as exc:
                log.warning("could not keep the vectors in %s (%s): they stay in memory", path,
                            exc)
                self._behind[user] = 0
                return
            self._lease(user)
            mapped.seq = matrix.seq
            self._cache[user] = mapped
            self.windows[user] = mapped_windows
            self._behind[user] = 0

    def _load(self, user: str) -> Matrix:
        """Every vector of ``user`` for this model, with their cells when the user's vectors
        are clustered, in one read snapshot and two passes: the ids (and cells) first, then
        the vectors, in chunks, each written straight into its place (never all the blobs, nor
        a second copy of the matrix, at once)."""
        np = self._np
        model = self.embedder.model_id
        with read_snapshot(self.db):
            seq = last_change(self.db, "message", user, model)
            centroids = vector_cells.load(self.db, "message", user, model)
            listed = self.db.execute(
                "SELECT message_id, cell, length(vector) FROM message_vectors WHERE user = ? "
                "AND model = ? ORDER BY message_id", [user, model]).fetchall()
            if not listed:
                return Matrix(np.zeros(0, np.int64), Int8Rows.empty(), seq)
            size = listed[0][2]
            if any(r[2] != size for r in listed):  # a damaged row: left out, embedded again
                size = model_size(self.embedder, [r[2] for r in listed])
                self._left_out(user, [r[0] for r in listed if r[2] != size])
                listed = [r for r in listed if r[2] == size]
            ids = np.array([r[0] for r in listed], dtype=np.int64)
            if not len(ids):
                return Matrix(ids, Int8Rows.empty(), seq)
            dim = size // 2
            index = (CellIndex.empty(centroids, centroids.decode([r[1] for r in listed]), dim)
                     if centroids is not None else None)
            del listed
            held = index.storage if index is not None else Int8Rows.allocated(len(ids), dim)
            cursor = self.db.execute(
                "SELECT vector FROM message_vectors WHERE user = ? AND model = ? "
                "AND length(vector) = ? ORDER BY message_id", [user, model, size])
            done = 0
            while batch := cursor.fetchmany(SCAN_CHUNK):
                at = slice(done, done + len(batch))
                held.put(index.pos[at] if index is not None else at,
                         Int8Rows.from_float16([r[0] for r in batch], dim))
                done += len(batch)
        if index is not None:
            return Matrix(ids, None, seq, index)
        return Matrix(ids, held, seq)

    def _updated(self, user: str, cached: Matrix, changed: list[int], seq: int) -> Matrix:
        """``cached`` with the rows of ``changed`` messages read again (the user's own): new
        messages past the last row are appended (session windows extend); anything else (a
        vector replaced or dropped, one written for an older message) rebuilds the matrix in id
        order and its windows."""
        np = self._np
        found: dict[int, bytes] = {}
        stored_cell: dict[int, int | None] = {}
        for start in range(0, len(changed), 500):
            chunk = changed[start : start + 500]
            for mid, blob, cell in self.db.execute(
                    "SELECT message_id, vector, cell FROM message_vectors WHERE user = ? "
                    f"AND model = ? AND message_id IN ({','.join('?' * len(chunk))})",
                    [user, self.embedder.model_id, *chunk]).fetchall():
                found[mid], stored_cell[mid] = blob, cell
        size = (2 * cached.id_rows().codes.shape[1] if len(cached.ids)
                else model_size(self.embedder, [len(b) for b in found.values()]))
        wrong = [m for m, blob in found.items() if len(blob) != size]
        if wrong:  # a damaged row: as if it had no vector
            self._left_out(user, wrong)
            for m in wrong:
                del found[m]
        index = cached.cells
        new_ids = sorted(found)
        new_rows = Int8Rows.from_float16([found[m] for m in new_ids])
        new_cells = (index.centroids.decode([stored_cell[m] for m in new_ids])
                     if index is not None else None)
        gone = [m for m in changed if m not in found]
        if gone:
            self._dropped.setdefault(user, set()).update(gone)
        last = int(cached.ids[-1]) if len(cached.ids) else 0
        held = _held(cached.ids, changed)
        if index is not None and held and not [m for m in new_ids if m < last and m not in held]:
            return self._changed_in_place(user, cached, found, stored_cell, held, seq)
        ids = np.concatenate([cached.ids, np.array(new_ids, dtype=np.int64)])
        if all(m > last for m in changed) and not gone:  # new messages: appended
            if index is not None:
                return Matrix(ids, None, seq, index.appended(new_rows, new_cells))
            assert cached.rows is not None
            return Matrix(ids, cached.rows.appended(new_rows), seq)
        keep = ~np.isin(cached.ids, np.array(changed, dtype=np.int64))
        if index is not None:
            keep &= ~index.gone
        ids = np.concatenate([cached.ids[keep], np.array(new_ids, dtype=np.int64)])
        rows = Int8Rows.concatenated([cached.id_rows().take(keep), new_rows])
        order = np.argsort(ids, kind="stable")
        self.windows.pop(user, None)
        if index is None:
            return Matrix(ids[order], rows.take(order), seq)
        cells = np.concatenate([index.cell[keep], new_cells])[order]
        return Matrix(ids[order], None, seq,
                       CellIndex(index.centroids, rows.take(order), cells))

    def _changed_in_place(self, user: str, cached: Matrix, found: dict[int, bytes],
                          stored_cell: dict[int, int | None], held: dict[int, int],
                          seq: int) -> Matrix:
        """A clustered history whose changed vectors all belong to messages it holds (an
        edit, a redaction, a deletion, a re-embedding) or come after them (new messages):
        changed in place (vector_cells.CellIndex.changed), the windows around them measured
        again, instead of a rebuild of every row and window (seconds at 1M). A message whose
        vector was dropped keeps its row, without a vector, until it is embedded again."""
        np = self._np
        index = cached.cells
        assert index is not None
        replaced = np.array(sorted(r for m, r in held.items() if m in found), np.int64)
        dropped = np.array(sorted(r for m, r in held.items() if m not in found), np.int64)
        ids = cached.ids
        blobs = [found[int(ids[r])] for r in replaced]
        rows = (Int8Rows.from_float16(blobs) if blobs
                else Int8Rows.empty(index.storage.codes.shape[1]))
        cells = index.centroids.decode([stored_cell[int(ids[r])] for r in replaced])
        matrix = Matrix(ids, None, seq, index.changed(replaced, rows, cells, dropped))
        windows = self.windows.get(user)
        if windows is not None and windows.rows == len(ids):
            touched = np.concatenate([replaced, dropped])
            around = np.unique(np.concatenate([touched, windows.prev[touched],
                                               windows.next[touched]]))
            around = around[around >= 0]
            norm = windows.norm.copy()
            norm[around] = semantic._window_norms(matrix, windows.prev, windows.next, around)
            self.windows[user] = _Windows(windows.rows, windows.prev, windows.next, norm,
                                          windows.last_of_session)
        else:
            self.windows.pop(user, None)
        later = sorted(m for m in found if m > int(ids[-1]))
        if later:
            assert matrix.cells is not None
            matrix = Matrix(np.concatenate([ids, np.array(later, np.int64)]), None, seq,
                             matrix.cells.appended(
                                 Int8Rows.from_float16([found[m] for m in later]),
                                 index.centroids.decode([stored_cell[m] for m in later])))
        return matrix

    def _left_out(self, user: str, message_ids: list[int]) -> None:
        """Stored vectors of the wrong size (damaged or hand-edited rows): their messages are
        found by their words only, and embedded again (a few by each search, the rest by the
        background pass or ``hermes sessions index``). Said once in the log."""
        known = self._damaged.setdefault(user, set())
        new = set(message_ids) - known
        if new:
            log.warning("%d stored message vector(s) of %s have the wrong size (a damaged row): "
                        "found by their words only until embedded again", len(new), user)
        known.update(new)
        self._dropped.setdefault(user, set()).update(new)

    def matrix(self, user: str) -> Matrix:
        """The user's vectors (theirs only), after embedding at most INLINE_INDEX new messages,
        the newest since the last one with a vector (see :meth:`nearest`)."""
        newest = self.db.execute(
            "SELECT coalesce(max(message_id), 0) FROM message_vectors WHERE user = ? AND model = ?",
            [user, self.embedder.model_id]).fetchone()[0]
        self.index(user, limit=INLINE_INDEX, after=newest)
        matrix = self._matrix(user)
        dropped = self._dropped.get(user)
        if dropped:
            # the newest few this search; the rest stay for the next ones (forgetting them
            # left a bulk edit unembedded until a background pass, and a home without a
            # daemon has none)
            batch = sorted(dropped)[-INLINE_INDEX:]
            dropped.difference_update(batch)
            if not dropped:
                del self._dropped[user]
            if self.index(user, only=batch):
                matrix = self._matrix(user)  # edited since they were embedded: as they read
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
        query_vector = self.embedder.embed_query(query)
        if matrix.cells is not None:  # the nearest cells' vectors only
            rows, scores = matrix.cells.scan(query_vector)
        else:
            rows, scores = None, matrix.cosines(query_vector)
        top = top_k(scores, k)
        at = top if rows is None else rows[top]
        return [(int(matrix.ids[i]), float(scores[j])) for i, j in zip(at, top, strict=True)]


def _held(ids: Any, wanted: Sequence[int]) -> dict[int, int]:
    """Which of ``wanted`` are among ``ids`` (ascending), with their rows."""
    np = _np()
    if not len(ids) or not wanted:
        return {}
    asked = np.asarray(wanted, dtype=np.int64)
    at = np.clip(np.searchsorted(ids, asked), 0, len(ids) - 1)
    hit = ids[at] == asked
    return {int(m): int(r) for m, r in zip(asked[hit], at[hit], strict=True)}


def _version(matrix: Matrix) -> int:
    return matrix.cells.centroids.version if matrix.cells is not None else 0


def _float32_of(rows: list[Any]) -> Any:
    """float32 vectors of (message_id, float16 blob) rows (a damaged blob: a zero vector)."""
    np = _np()
    blobs = [r[1] for r in rows]
    mended(blobs, usual_size(blobs))
    return (np.frombuffer(b"".join(blobs), dtype=np.float16)
            .reshape(len(rows), -1).astype(np.float32))


def session_vectors_for(db: sqlite_utils.Database, embedders: Embedders,
                        model: str = DEFAULT_MODEL) -> MessageVectors | None:
    """The MessageVectors of a connection for one model, or None (session search by words only)
    when the model's extra is not installed or its engine cannot load: said once in the log
    (once per ``embedders``, the home's memory) with how to install it, never an error, since
    messages are always found by their words. (``hermes sessions index``, which exists only to
    embed, loads the model itself and says so as an error.)"""
    try:
        return MessageVectors(db, embedders.get(model), cache_dir=embedders.cache_dir)
    except HermesError as exc:
        if embedders.first_failure(f"sessions:{model}"):
            log.warning("session search by meaning is off, words only: %s", exc)
        return None
