"""Plugin loading: one pluggy manager, the ``hermes`` entry-point group, the default plugins.

Following simonw/llm's ``llm/plugins.py``: third-party plugins come from entry points
(``[project.entry-points.hermes] name = "module"``) and Hermes's own built-ins are registered
the same way, as default plugins. Loading is lazy (the first :func:`manager` call), so the
commands that need no plugin (``hermes memory show``, ``hermes mcp``'s start) import nothing
more than they did without plugins.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from typing import Any

import pluggy

from hermes import hookspecs
from hermes.errors import HermesError

ENTRY_POINT_GROUP = "hermes"
DEFAULT_PLUGINS = (
    "hermes.agent.builtin_tools",
    "hermes.frontends.builtin",
    "hermes.memory.embeddings.models",
)

_manager: pluggy.PluginManager | None = None
_embedding_models: dict[str, Callable[[], Any]] | None = None
_failures: list[PluginFailure] = []

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PluginFailure:
    """A plugin that did not load (``stage`` "load") or whose hook raised (the hook's name)."""

    name: str
    stage: str
    error: str

    def line(self) -> str:
        where = "failed to load" if self.stage == "load" else f"failed in {self.stage}"
        return (f"Hermes plugin {self.name!r} {where} ({self.error}); it is skipped, the "
                "rest of Hermes works. Fix or uninstall it (`hermes plugins` lists it).")


def _failed(name: str, stage: str, exc: BaseException) -> None:
    failure = PluginFailure(name, stage, f"{type(exc).__name__}: {exc}")
    _failures.append(failure)
    # One line where the person is: stderr (the terminal, a service's journal), and the log
    # file with the traceback; not again on the daemon's console.
    log.warning("%s", failure.line(), exc_info=exc, extra={"file_only": True})
    sys.stderr.write(f"Warning: {failure.line()}\n")


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    # pluggy's load_setuptools_entrypoints, one plugin at a time: a plugin that raises while
    # importing or registering is recorded and skipped (simonw/llm issue #1280: one broken
    # plugin there stops every `llm` command).
    for dist in list(metadata.distributions()):
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP or pm.has_plugin(ep.name) or pm.is_blocked(ep.name):
                continue
            try:
                pm.register(ep.load(), name=ep.name)
            except Exception as exc:
                _failed(ep.name, "load", exc)


def manager() -> pluggy.PluginManager:
    """The plugin manager with the entry-point plugins and the default plugins loaded (once)."""
    global _manager
    if _manager is None:
        pm = pluggy.PluginManager("hermes")
        pm.add_hookspecs(hookspecs)
        _failures.clear()
        _load_entry_points(pm)
        for name in DEFAULT_PLUGINS:
            pm.register(importlib.import_module(name), name)
        _manager = pm
    return _manager


def failures() -> list[PluginFailure]:
    """The plugins that failed to load, or whose hook raised, in this process."""
    manager()
    return list(_failures)


def hook_impls(hook: str) -> list[tuple[str, Callable[..., Any]]]:
    """``(plugin name, function)`` of every implementation of ``hook``, in pluggy's call
    order (the last registered first: the default plugins, then the entry points)."""
    caller = getattr(manager().hook, hook)
    return [(impl.plugin_name, impl.function) for impl in reversed(caller.get_hookimpls())
            if not (impl.hookwrapper or impl.wrapper)]


@contextmanager
def guarded(name: str, hook: str) -> Iterator[None]:
    """Run a plugin's hook: an exception from a third-party plugin is recorded as its failure
    and the hook carries on with the next plugin. A default plugin's is a bug and propagates."""
    if name in DEFAULT_PLUGINS:
        yield
        return
    try:
        yield
    except Exception as exc:
        _failed(name, hook, exc)


class _Recorded(list[tuple[tuple[Any, ...], dict[str, Any]]]):
    """A ``register`` that keeps its calls, to be made once the hook has returned."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.append((args, kwargs))


def call_registering(hook: str, register: Callable[..., None]) -> None:
    """Call every plugin's ``hook(register)``. A plugin's registrations are made only when its
    hook returns (one that raises registers nothing), and a registration refused (a name
    already taken) is that plugin's failure, which ends its registrations, not the others'."""
    for name, function in hook_impls(hook):
        if name in DEFAULT_PLUGINS:
            function(register=register)
            continue
        calls = _Recorded()
        with guarded(name, hook):
            function(register=calls)
            for args, kwargs in calls:
                register(*args, **kwargs)


def plugin_names() -> list[str]:
    """The loaded plugins' names (entry-point names and the default plugins' modules)."""
    pm = manager()
    return sorted(name for name, _ in pm.list_name_plugin() if name)


def embedding_models() -> dict[str, Callable[[], Any]]:
    """Every registered embedding model's factory by name (the built-ins first), collected
    once per process. ``factory()`` builds the model (hermes.memory.embeddings.embedders.
    Embedder)."""
    global _embedding_models
    if _embedding_models is None:
        found: dict[str, Callable[[], Any]] = {}

        def register(name: str, factory: Callable[[], Any]) -> None:
            if not isinstance(name, str) or not name.strip():
                raise HermesError(f"register_embedding_models: {name!r} is not a model name")
            if name in found:
                raise HermesError(f"register_embedding_models: a model is already named {name!r}")
            found[name] = factory

        call_registering("register_embedding_models", register)
        _embedding_models = found
    return _embedding_models
