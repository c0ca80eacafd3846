"""Plugin loading: one pluggy manager, the ``hermes`` entry-point group, the default plugins.

Following simonw/llm's ``llm/plugins.py``: third-party plugins come from entry points
(``[project.entry-points.hermes] name = "module"``) and Hermes's own built-ins are registered
the same way, as default plugins. Loading is lazy (the first :func:`manager` call), so the
commands that need no plugin (``hermes memory show``, ``hermes mcp``'s start) import nothing
more than they did without plugins.
"""

from __future__ import annotations

import importlib

import pluggy

from hermes import hookspecs
from hermes.errors import HermesError

ENTRY_POINT_GROUP = "hermes"
DEFAULT_PLUGINS = (
    "hermes.agent.builtin_tools",
    "hermes.frontends.builtin",
)

_manager: pluggy.PluginManager | None = None


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
