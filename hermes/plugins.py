"""Plugin loading: one pluggy manager, the ``hermes`` entry-point group, the default plugins.

Following simonw/llm's ``llm/plugins.py``: third-party plugins come from entry points
(``[project.entry-points.hermes] name = "module"``) and Hermes's own built-ins are registered
the same way, as default plugins. Loading is lazy (the first :func:`manager` call), so the
commands that need no plugin (``hermes memory show``, ``hermes mcp``'s start) import nothing
more than they did without plugins.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pluggy

from hermes import hookspecs
from hermes.errors import HermesError

ENTRY_POINT_GROUP = "hermes"
DEFAULT_PLUGINS = (
    "hermes.agent.builtin_tools",
    "hermes.frontends.builtin",
    "hermes.memory.embedding_models",
)

_manager: pluggy.PluginManager | None = None
_embedding_models: dict[str, Callable[[], Any]] | None = None


def manager() -> pluggy.PluginManager:
    """The plugin manager with the entry-point plugins and the default plugins loaded (once)."""
    global _manager
    if _manager is None:
        pm = pluggy.PluginManager("hermes")
        pm.add_hookspecs(hookspecs)
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP)
        except Exception as exc:  # an installed plugin that does not import: one clear line
            raise HermesError(
                f"A Hermes plugin (entry-point group {ENTRY_POINT_GROUP!r}) failed to load: "
                f"{type(exc).__name__}: {exc}. Fix or uninstall it; `pip list` shows what is "
                "installed.") from exc
        for name in DEFAULT_PLUGINS:
            pm.register(importlib.import_module(name), name)
        _manager = pm
    return _manager


def plugin_names() -> list[str]:
    """The loaded plugins' names (entry-point names and the default plugins' modules)."""
    pm = manager()
    return sorted(name for name, _ in pm.list_name_plugin() if name)


def embedding_models() -> dict[str, Callable[[], Any]]:
    """Every registered embedding model's factory by name (the built-ins first), collected
    once per process. ``factory()`` builds the model (see hermes.memory.embeddings.Embedder)."""
    global _embedding_models
    if _embedding_models is None:
        found: dict[str, Callable[[], Any]] = {}

        def register(name: str, factory: Callable[[], Any]) -> None:
            if not isinstance(name, str) or not name.strip():
                raise HermesError(f"register_embedding_models: {name!r} is not a model name")
            if name in found:
                raise HermesError(f"register_embedding_models: a model is already named {name!r}")
            found[name] = factory

        manager().hook.register_embedding_models(register=register)
        _embedding_models = found
    return _embedding_models
