"""A turn's query embedding, started on a worker thread while the turn's SQL runs.

Embedding the new message is the largest single cost of a turn's recall (MiniLM: ~5 ms of one
core), and nothing before the scan by meaning needs it: the fact side's word counts and bm25,
the past-message gate. onnxruntime releases the GIL while the model runs and sqlite3 releases it
while a statement steps, so the two overlap on a second core: the prompt starts a
:class:`QueryAhead` first, the fact scan takes its vector (``FactVectors.similarity``), and the
prompt waits for it before past-message search, whose ``embed_query`` of the same text is then
served from the model's cache of recent queries (hermes.memory.embeddings).

It pays only on a free core. On a 2-core machine already busy (load 2-4, scripts/bench_turn.py,
the same 150-200 messages interleaved in one process, the prompts identical) it saved no wall
time and cost 0.3-1.1 ms more CPU p50 (two threads slow each other, and the worker waits for
the GIL to finish its vector), so a turn overlaps only when the machine's 1-minute load leaves a
core free (:func:`core_free`).

A failure on the worker is one log line: the turn recalls facts and past messages by their
words (hermes.memory.sessions.past_messages' ``words_only``), never an error. A turn that
embeds in turn (no core free) goes through the same object (``overlap=False``), so the same
failure gives the same prompt and the same line whatever the machine's load.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from hermes.memory.embeddings.embedders import Embedder

log = logging.getLogger(__name__)
T = TypeVar("T")

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _worker() -> ThreadPoolExecutor:
    # One thread for the process: the model embeds one text at a time anyway (its own lock).
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hermes-query")
        return _pool


def core_free(load: float | None = None, cores: int | None = None) -> bool:
    """Whether a second core is likely free for the worker: two cores or more, and the
    1-minute load average (``os.getloadavg``, a few microseconds) at most the cores less one."""
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # not available on this system: in turn, as before
            return False
    if cores is None:
        cores = os.cpu_count() or 1
    return cores >= 2 and load <= cores - 1


class QueryEmbeddingFailed(Exception):
    """The worker could not embed the query (said once in the log by :class:`QueryAhead`)."""


class QueryAhead:
    """``embedder.embed_query(text)``, computing on the worker from the moment it is made."""

    def __init__(self, embedder: Embedder, text: str, *, overlap: bool = True) -> None:
        self.text = text
        self._embedder = embedder
        # overlap=False: embedded in turn at the first use (where the scan used to embed it),
        # so that a failure is met as the worker's is, whatever the load
        self._future: Future[Any] | None = (
            _worker().submit(embedder.embed_query, text) if overlap else None)
        self._said = False

    def vector(self) -> Any:
        """The query's vector, waiting for the worker if it is still computing. Raises
        QueryEmbeddingFailed when it failed (logged once)."""
        if self._future is None:
            self._future = Future()
            try:
                self._future.set_result(self._embedder.embed_query(self.text))
            except Exception as exc:  # noqa: BLE001 - held as the worker's future holds it
                self._future.set_exception(exc)
        try:
            return self._future.result()
        except Exception as exc:  # noqa: BLE001 - any model failure: logged, recall by words
            if not self._said:
                self._said = True
                log.warning("query embedding failed (%s: %s): this turn recalls facts and past "
                            "messages by their words", type(exc).__name__, exc)
            raise QueryEmbeddingFailed(str(exc)) from None

    def then(self, work: Callable[[Any], T]) -> Future[T] | None:
        """``work(vector)`` on the worker right after the embedding (the same thread, so in
        that order) while the turn's SQL still runs here; None when the turn does not overlap
        (the caller then does the work in turn). Its future raises what the embedding raised,
        or what ``work`` did."""
        embedding = self._future
        if embedding is None:
            return None
        return _worker().submit(lambda: work(embedding.result()))

    def ok(self) -> bool:
        """Wait for the worker; whether the vector is there (a failure logged once)."""
        try:
            self.vector()
        except QueryEmbeddingFailed:
            return False
        return True
