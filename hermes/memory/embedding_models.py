"""Hermes's own embedding models, ``e5`` and ``minilm`` (:mod:`hermes.memory.embeddings`),
registered as a default plugin through ``register_embedding_models``, the hook a plugin uses
to add its own; ``sessions.embedding_model`` names any of them. Nothing heavy is imported
here: a model's engine loads when the model is first built."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hermes.config import BUILTIN_EMBEDDING_MODELS as BUILTIN
from hermes.hookspecs import hookimpl

if TYPE_CHECKING:
    from hermes.memory.embeddings import Embedder


def _builtin(name: str, cache_dir: Path | None = None) -> Embedder:
    from hermes.memory import embeddings

    return embeddings.build_model(embeddings.MODELS[name], cache_dir)


@hookimpl
def register_embedding_models(register: Callable[[str, Callable[[], Embedder]], None]) -> None:
    for name in BUILTIN:
        register(name, functools.partial(_builtin, name))
