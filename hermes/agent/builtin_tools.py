"""Default plugin: the built-in memory tools, registered through the ``register_tools`` hook
like any third-party tool (see hermes.agent.tools.BUILTIN_TOOLS)."""

from __future__ import annotations

from collections.abc import Callable

from hermes.agent.tool_registry import Tool
from hermes.hookspecs import hookimpl


@hookimpl
def register_tools(register: Callable[[Tool], None]) -> None:
    from hermes.agent.tools import BUILTIN_TOOLS

    for tool in BUILTIN_TOOLS:
        register(tool)
