"""An embedding model's optimised ONNX graph, saved in the home so that later loads skip the work.

Each load of MiniLM used to rewrite its graph (:mod:`.minilm_graph`: 23 ms of CPU
and a 23 MB copy of the file) and have onnxruntime optimise the result (fusions, constant
folding: another ~25 ms, and ~40 MB more at the peak), in every ``hermes ask`` and search.
The first load now asks onnxruntime to write the graph it optimised
(``SessionOptions.optimized_model_filepath``) to ``<home>/cache/``; every later load reads that
file with graph optimisation off. It is the graph onnxruntime would have built, run by the same
kernels: the vectors are the same bit for bit, so the model id does not change.

The file is saved at onnxruntime's *extended* level, not *all*: *all* adds layout changes for
the CPU it runs on (onnxruntime warns that such a file is for that machine only), which a
transformer does not use (the same vectors, the same speed), and a home can move to another
machine.

A cache file is named by the model id and a key over what it was built from: the shipped
file's and onnxruntime's package's path, size and modification time (as Python's own ``.pyc``
files know their source), and :data:`FORMAT` (raised when the rewrite or the way it is saved
changes). Another model, another version of the package or of onnxruntime is another file,
never this one. Next to it, a small JSON file holds the key and the SHA-256 of the graph; a file
that is missing, cut short, altered or refused by onnxruntime is built again, with one log line,
never a traceback. A home that cannot be written runs the model as before (one log line): the
cache only saves time. The JSON also tells, without loading anything, that the model loaded in
this home before (:meth:`GraphCache.recorded`): hermes.memory.embeddings then loads it only when
it first embeds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import mmap
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes.home import FILE_MODE, make_private_dirs, private_opener

log = logging.getLogger(__name__)

# Raise when embeddings.minilm_graph's rewrite or the saving below changes: the old files
# then stop matching (and are removed when the new one is saved).
# 2: attention, GELU and biases fused (minilm_graph._fused); 3: query, key and value in one
# product, and no SkipLayerNormalization (MiniLM's DISABLED_FUSIONS); 4: the weights as uint8
# (int8_weights.unsigned_weights: exact sums on a CPU without VNNI)
FORMAT = 4


@dataclass(frozen=True)
class GraphCache:
    """Where one model's optimised graph is kept, for one shipped file."""

    directory: Path
    model_id: str
    source: Path  # the shipped model file the graph is built from
    engine: str  # which onnxruntime install optimised it (file_identity of its package)

    def key(self) -> str:
        parts = [self.model_id, str(FORMAT), self.engine, file_identity(self.source)]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]

    def path(self, key: str) -> Path:
        return self.directory / f"{self.model_id}-{key}.onnx"

    def recorded(self) -> bool:
        """Whether a graph was saved for the files installed now (it loaded here before),
        without reading the graph: the JSON beside it names this key."""
        try:
            meta = json.loads(self.path(self.key()).with_suffix(".json").read_text("utf-8"))
        except (OSError, ValueError):
            return False
        return isinstance(meta, dict) and meta.get("key") == self.key()

    def lookup(self, key: str) -> tuple[Path | None, str]:
        """The cached graph when it is there and whole; else None and why not ("" when it was
        never built)."""
        graph, meta = self.path(key), self.path(key).with_suffix(".json")
        if not graph.exists() and not meta.exists():
            return None, ""
        try:
            recorded = json.loads(meta.read_text(encoding="utf-8"))
            if not isinstance(recorded, dict) or recorded.get("key") != key:
                return None, f"{meta.name} does not describe it"
            if _sha256(graph) != recorded.get("sha256"):
                return None, "its checksum does not match (cut short or altered)"
        except (OSError, ValueError) as exc:
            return None, f"{type(exc).__name__}: {exc}"
        return graph, ""

    def save(self, key: str, built: Path) -> None:
        """Keep ``built`` (onnxruntime's output, in the cache directory) as this key's graph,
        and remove this model's graphs of other keys. Written under temporary names and renamed:
        a process that reads the cache meanwhile sees the old state or the new one."""
        graph = self.path(key)
        meta = {"key": key, "model_id": self.model_id, "sha256": _sha256(built),
                "source": str(self.source)}
        meta_temp = built.with_suffix(".json")
        with open(meta_temp, "w", encoding="utf-8", opener=private_opener) as out:
            out.write(json.dumps(meta))
        os.chmod(built, FILE_MODE)  # onnxruntime wrote it with the umask's mode
        os.replace(built, graph)
        os.replace(meta_temp, graph.with_suffix(".json"))
        for old in self.directory.glob(f"{self.model_id}-*"):
            # exactly this model's (another model's id may start with this one's)
            if old.stem.rsplit("-", 1)[0] == self.model_id and old.stem != graph.stem:
                old.unlink(missing_ok=True)


def file_identity(path: Path) -> str:
    """A file as Python's own ``.pyc`` files know their source: path, size, modification time
    (a reinstalled or upgraded package is another identity)."""
    stat = path.stat()
    return f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def _sha256(path: Path) -> str:
    # Read through a memory map: the pages are the page cache's, not a copy on the heap.
    with open(path, "rb") as file:
        if os.fstat(file.fileno()).st_size == 0:
            return hashlib.sha256().hexdigest()
        with mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return hashlib.sha256(mapped).hexdigest()


def cached_session(ort: Any, cache: GraphCache | None, options: Any,
                   build: Callable[[], bytes], *, name: str = "the model",
                   disabled_optimizers: Sequence[str] = ()) -> Any:
    """An onnxruntime session of the graph ``build()`` returns, through the cache when given.

    ``options`` are the session's other settings (threads, arena); this sets the graph
    optimisation level. ``build`` is called only when the cache has no usable graph, and may
    raise to refuse (the caller's fallback); an error of onnxruntime on a freshly built graph is
    the caller's to handle too. Problems of the cache itself are one log line each.
    ``disabled_optimizers``: onnxruntime's fusions not to apply when it optimises the built
    graph (the saved graph is then without them too)."""
    key, problem = None, ""
    if cache is not None:
        try:
            key = cache.key()
            graph, problem = cache.lookup(key)
        except OSError as exc:  # the shipped file itself went missing: build() will say so
            graph, problem = None, f"{type(exc).__name__}: {exc}"
        if graph is not None:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            try:
                return ort.InferenceSession(str(graph), sess_options=options,
                                            providers=["CPUExecutionProvider"])
            except Exception as exc:  # onnxruntime's own errors: a file it cannot run
                problem = "onnxruntime refused it: " + (str(exc).splitlines() or [""])[0][:200]
        if problem:
            log.warning("%s: the cached graph %s is not usable (%s); building it again",
                        name, cache.path(key or "?"), problem)
    model = build()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    disabled = list(disabled_optimizers)
    if cache is None or key is None:
        return ort.InferenceSession(model, sess_options=options,
                                    providers=["CPUExecutionProvider"],
                                    disabled_optimizers=disabled)
    temp = cache.directory / f".{cache.path(key).stem}.{os.getpid()}.tmp"
    try:
        make_private_dirs(cache.directory)  # 0700, whatever the umask
        if not os.access(cache.directory, os.W_OK):
            raise PermissionError(f"{cache.directory} is not writable")
    except OSError as exc:
        _cannot_keep(name, cache, exc)
        return ort.InferenceSession(model, sess_options=options,
                                    providers=["CPUExecutionProvider"],
                                    disabled_optimizers=disabled)
    options.optimized_model_filepath = str(temp)
    try:
        session = ort.InferenceSession(model, sess_options=options,
                                       providers=["CPUExecutionProvider"],
                                       disabled_optimizers=disabled)
    except Exception as exc:
        # Either onnxruntime refused the graph (the caller's fallback) or it could not write
        # the optimised file (a full disk: "Protobuf serialization failed"), which must not
        # pass for a refusal: MiniLM would switch to its float32 graph, another model id, and
        # every stored vector would go unused. Without the file: a refusal raises again.
        _remove(temp)
        options.optimized_model_filepath = ""
        session = ort.InferenceSession(model, sess_options=options,
                                       providers=["CPUExecutionProvider"],
                                       disabled_optimizers=disabled)
        _cannot_keep(name, cache, exc)
        return session
    try:
        cache.save(key, temp)
    except OSError as exc:  # a full disk: this process runs on, later ones optimise again
        temp.unlink(missing_ok=True)
        _cannot_keep(name, cache, exc)
        return session
    if not problem:  # a rebuild was said above: one line
        log.info("%s: optimised graph saved to %s (later loads start from it)", name,
                 cache.path(key))
    return session


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):  # not a file (or already gone): nothing of ours
        path.unlink(missing_ok=True)


def _cannot_keep(name: str, cache: GraphCache, exc: Exception) -> None:
    why = (str(exc).splitlines() or [""])[0][:200]
    log.warning("%s: cannot keep its optimised graph in %s (%s); it is optimised at each load",
                name, cache.directory, why)
