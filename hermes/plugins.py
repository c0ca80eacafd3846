"""Plugin loading: one pluggy manager, the ``hermes`` entry-point group, the default plugins.

Following simonw/llm's ``llm/plugins.py``: third-party plugins come from entry points
(``[project.entry-points.hermes] name = "module"``) and Hermes's own built-ins are registered
the same way, as default plugins. :class:`Plugins` is the one registry of a process: the
manager, and the tools, front-ends and embedding models the hooks registered, each collected
when first asked (:func:`loaded`), so the commands that need no plugin (``hermes memory show``,
``hermes mcp``'s start) import nothing more than they did without plugins.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from importlib import metadata
from typing import TYPE_CHECKING, Any

import pluggy
from pydantic import BaseModel

from hermes import hookspecs
from hermes.errors import HermesError

if TYPE_CHECKING:
    from hermes.agent.tool_registry import ToolRegistry
    from hermes.frontends.base import FrontendFactory

ENTRY_POINT_GROUP = "hermes"
DEFAULT_PLUGINS = (
    "hermes.agent.builtin_tools",
    "hermes.frontends.builtin",
    "hermes.memory.embeddings.models",
)

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


def takes_any_target(target: str) -> bool:
    return bool(target)


@dataclass
class RegisteredFrontend:
    factory: FrontendFactory
    # Which ``<name>:<target>`` a cron job may deliver to (``accepts("")`` for a bare
    # ``<name>``); None: not a delivery target.
    accepts: Callable[[str], bool] | None = takes_any_target
    # How a delivery to it is written, for the error that lists them (``discord:<channel id>``).
    deliver_form: str = ""
    # Its section of config.yaml (under its name), validated as the built-in sections are.
    config: type[BaseModel] | None = None


# Delivery prefixes the cron runner owns itself.
RESERVED_TARGETS = ("file",)


class Frontends:
    """The registered front-ends, in the order ``hermes run`` builds and starts them (the
    built-ins first). A front-end's name is its cron delivery prefix, its sessions' source,
    the kind of its identities (``<name>:<id>``) and its config section's key."""

    def __init__(self) -> None:
        self.entries: dict[str, RegisteredFrontend] = {}

    def register(self, name: str, factory: FrontendFactory, *,
                 accepts: Callable[[str], bool] | None = takes_any_target,
                 deliver_form: str | None = None,
                 config: type[BaseModel] | None = None) -> None:
        """``accepts`` says which targets after ``name:`` a cron job may use (``""`` for
        ``name`` alone; None: the front-end takes no deliveries); ``deliver_form`` is how one is
        written in the error that lists them (default ``name:<target>``); ``config``, a
        pydantic model: the front-end's section of config.yaml, read with
        ``settings.section(name)``."""
        if not name or ":" in name or not name.isidentifier():
            raise ValueError(f"register_frontends: {name!r} is not a usable delivery prefix")
        if name in self.entries or name in RESERVED_TARGETS:
            raise ValueError(f"register_frontends: a front-end is already named {name!r}")
        self.entries[name] = RegisteredFrontend(factory, accepts,
                                                deliver_form or f"{name}:<target>", config)

    def factories(self) -> dict[str, FrontendFactory]:
        return {name: entry.factory for name, entry in self.entries.items()}

    def accepts(self, kind: str, target: str) -> bool:
        """Does the front-end registered as ``kind`` take cron deliveries to ``kind:target``
        (``target`` "" for ``kind`` alone)? Each front-end judges its own targets."""
        entry = self.entries.get(kind)
        return entry is not None and entry.accepts is not None and bool(entry.accepts(target))

    def delivery_forms(self) -> list[str]:
        """How each front-end that takes deliveries is written (``discord:<channel id>``)."""
        return [e.deliver_form for e in self.entries.values() if e.accepts is not None]

    def sources(self, builtin: tuple[str, ...]) -> tuple[str, ...]:
        """The session sources: the built-in ones and every registered front-end's name."""
        return builtin + tuple(name for name in self.entries if name not in builtin)

    def config_sections(self) -> dict[str, type[BaseModel]]:
        """The config sections the front-ends declared, by key."""
        return {name: e.config for name, e in self.entries.items() if e.config is not None}


class Plugins:
    """The plugins of this process and everything they registered: the pluggy manager (entry
    points, then the default plugins), the tools, the front-ends, the embedding models, and the
    plugins that failed. Each is collected from its hook once, when first asked."""

    def __init__(self) -> None:
        self.failures: list[PluginFailure] = []

    @cached_property
    def manager(self) -> pluggy.PluginManager:
        pm = pluggy.PluginManager("hermes")
        pm.add_hookspecs(hookspecs)
        self._load_entry_points(pm)
        for name in DEFAULT_PLUGINS:
            pm.register(importlib.import_module(name), name)
        return pm

    def _load_entry_points(self, pm: pluggy.PluginManager) -> None:
        # pluggy's load_setuptools_entrypoints, one plugin at a time: a plugin that raises
        # while importing or registering is recorded and skipped (simonw/llm issue #1280: one
        # broken plugin there stops every `llm` command).
        for dist in list(metadata.distributions()):
            for ep in dist.entry_points:
                if (ep.group != ENTRY_POINT_GROUP or pm.has_plugin(ep.name)
                        or pm.is_blocked(ep.name)):
                    continue
                try:
                    pm.register(ep.load(), name=ep.name)
                except Exception as exc:
                    self._failed(ep.name, "load", exc)

    def _failed(self, name: str, stage: str, exc: BaseException) -> None:
        failure = PluginFailure(name, stage, f"{type(exc).__name__}: {exc}")
        self.failures.append(failure)
        # One line where the person is: stderr (the terminal, a service's journal), and the
        # log file with the traceback; not again on the daemon's console.
        log.warning("%s", failure.line(), exc_info=exc, extra={"file_only": True})
        sys.stderr.write(f"Warning: {failure.line()}\n")

    def names(self) -> list[str]:
        """The loaded plugins' names (entry-point names and the default plugins' modules)."""
        return sorted(name for name, _ in self.manager.list_name_plugin() if name)

    def hook_impls(self, hook: str) -> list[tuple[str, Callable[..., Any]]]:
        """``(plugin name, function)`` of every implementation of ``hook``, in pluggy's call
        order (the last registered first: the default plugins, then the entry points)."""
        caller = getattr(self.manager.hook, hook)
        return [(impl.plugin_name, impl.function) for impl in reversed(caller.get_hookimpls())
                if not (impl.hookwrapper or impl.wrapper)]

    @contextmanager
    def guarded(self, name: str, hook: str) -> Iterator[None]:
        """Run a plugin's hook: an exception from a third-party plugin is recorded as its
        failure and the hook carries on with the next plugin. A default plugin's is a bug and
        propagates."""
        if name in DEFAULT_PLUGINS:
            yield
            return
        try:
            yield
        except Exception as exc:
            self._failed(name, hook, exc)

    def call_registering(self, hook: str, register: Callable[..., None]) -> None:
        """Call every plugin's ``hook(register)``. A plugin's registrations are made only when
        its hook returns (one that raises registers nothing), and a registration refused (a
        name already taken) is that plugin's failure, which ends its registrations, not the
        others'."""
        for name, function in self.hook_impls(hook):
            if name in DEFAULT_PLUGINS:
                function(register=register)
                continue
            calls = _Recorded()
            with self.guarded(name, hook):
                function(register=calls)
                for args, kwargs in calls:
                    register(*args, **kwargs)

    @cached_property
    def tools(self) -> ToolRegistry:
        """Every plugin's tools (the built-in ones lead the list the model sees)."""
        from hermes.agent.tool_registry import ToolRegistry

        registry = ToolRegistry()
        # pluggy calls the last registered plugin first: the default plugins (registered after
        # the entry points), so the built-in tools lead.
        self.call_registering("register_tools", registry.register)
        return registry

    @cached_property
    def frontends(self) -> Frontends:
        registry = Frontends()
        self.call_registering("register_frontends", registry.register)
        return registry

    @cached_property
    def embedding_models(self) -> dict[str, Callable[[], Any]]:
        """Every registered embedding model's factory by name (the built-ins first).
        ``factory()`` builds the model (hermes.memory.embeddings.embedders.Embedder)."""
        found: dict[str, Callable[[], Any]] = {}

        def register(name: str, factory: Callable[[], Any]) -> None:
            if not isinstance(name, str) or not name.strip():
                raise HermesError(f"register_embedding_models: {name!r} is not a model name")
            if name in found:
                raise HermesError(f"register_embedding_models: a model is already named "
                                  f"{name!r}")
            found[name] = factory

        self.call_registering("register_embedding_models", register)
        return found


class _Recorded(list[tuple[tuple[Any, ...], dict[str, Any]]]):
    """A ``register`` that keeps its calls, to be made once the hook has returned."""

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.append((args, kwargs))


_loaded: Plugins | None = None


def loaded() -> Plugins:
    """This process's plugins: loaded at the first question (so the commands that need none
    import nothing more), then asked by everything that needs a tool, a front-end or a model."""
    global _loaded
    if _loaded is None:
        _loaded = Plugins()
    return _loaded


def reset() -> None:
    """Forget the loaded plugins (tests that install one; the next question loads them)."""
    global _loaded
    _loaded = None
