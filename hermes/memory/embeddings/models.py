"""Hermes's own embedding models, ``e5`` and ``minilm`` (:mod:`hermes.memory.embeddings`),
registered as a default plugin through ``register_embedding_models``, the hook a plugin uses
to add its own; ``sessions.embedding_model`` names any of them. Nothing heavy is imported
here: a model's engine loads when the model is first built."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hermes.config import BUILTIN_EMBEDDING_MODELS as BUILTIN
from hermes.hookspecs import hookimpl

if TYPE_CHECKING:
    from hermes.memory.embeddings.embedders import Embedder


class _Builtin:
    """The factory of one built-in model: the class in hermes.memory.embeddings.MODELS."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, cache_dir: Path | None = None) -> Embedder:
        from hermes.memory.embeddings import embedders as embeddings

        return embeddings.build_model(embeddings.MODELS[self.name], cache_dir)

    def ready(self, cache_dir: Path) -> str | None:
        """The model's id when it can load later without a doubt (see embeddings.Deferred)."""
        from hermes.memory.embeddings import embedders as embeddings

        ready = getattr(embeddings.MODELS[self.name], "ready", None)
        return ready(cache_dir) if ready is not None else None


@hookimpl
def register_embedding_models(register: Callable[[str, Callable[[], Embedder]], None]) -> None:
    for name in BUILTIN:
        register(name, _Builtin(name))
