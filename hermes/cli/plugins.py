"""`hermes plugins`: the plugins loaded from the ``hermes`` entry-point group, and what they add."""

from __future__ import annotations

from typing import Any

import typer

from hermes.cli import JsonOption
from hermes.cli.output import echo, emit_json


def plugins(ctx: typer.Context, as_json: bool = JsonOption) -> None:
    """The loaded plugins (entry points and the built-in default plugins), the hooks each
    implements, and the tools, front-ends and embedding models they register; a plugin that
    failed to load, or whose hook raised, is listed as failed with the error."""
    from hermes.plugins import DEFAULT_PLUGINS, loaded

    registry = loaded()
    pm = registry.manager
    found: list[dict[str, Any]] = []
    for name, plugin in sorted(pm.list_name_plugin(), key=lambda item: str(item[0])):
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or [])
        found.append({"name": name, "default": name in DEFAULT_PLUGINS, "hooks": hooks})
    tools = list(registry.tools.names())
    frontends = list(registry.frontends.entries)
    models = list(registry.embedding_models)
    group = ctx.find_root().command
    load_commands = getattr(group, "_load_plugin_commands", None)
    if load_commands is not None:  # every hook is called once, so each failure shows here
        load_commands()
    failed = [{"name": f.name, "stage": f.stage, "error": f.error} for f in registry.failures]
    if as_json:
        emit_json({"plugins": found, "tools": tools, "frontends": frontends,
                   "embedding_models": models, "failed": failed})
        return
    for plugin in found:
        kind = " (built-in)" if plugin["default"] else ""
        echo(f"{plugin['name']}{kind}: {', '.join(plugin['hooks']) or 'no hooks'}")
    for failure in failed:
        where = "did not load" if failure["stage"] == "load" else f"raised in {failure['stage']}"
        echo(f"{failure['name']}: FAILED, {where}: {failure['error']}")
    echo(f"tools: {', '.join(tools)}")
    echo(f"front-ends: {', '.join(frontends) or 'none'}")
    echo(f"embedding models: {', '.join(models) or 'none'}")
