"""The ``Tool`` record and the registry the turn engine's :class:`ToolBox` dispatches through.

A tool is one registration: its name, the description and JSON schema the model sees, its
handler and whether it writes memory (a write counts toward the three failed writes that stop
the model). Tools arrive through the ``register_tools`` plugin hook (the registry of a process is
``hermes.plugins.loaded().tools``); Hermes's own are the default plugin
:mod:`hermes.agent.builtin_tools`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hermes.agent.tools import ToolBox


@dataclass
class ToolResult:
    """What a handler returns when it wants to say more than its value: whether it wrote
    memory, and the facts it showed the model (for feedback). A plain value means neither."""

    value: Any
    wrote: bool = False
    fact_ids: list[int] = field(default_factory=list)


Handler = Callable[["ToolBox", dict[str, Any]], Any]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]  # the JSON schema of the arguments object
    handler: Handler            # handler(toolbox, args): the toolbox gives .user and the stores
    # Whether a call writes memory; with write_actions, only calls whose "action" is one of them.
    writes: bool = False
    write_actions: frozenset[str] = frozenset()
    # Offered to MCP clients too (`hermes mcp`; a tool that writes only with --write). Opt-in:
    # a tool written for the model in a chat is not always one for another program's model.
    mcp: bool = False

    def schema(self) -> dict[str, Any]:
        """The tool as litellm's ``tools=`` list wants it."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}

    def is_write(self, args: dict[str, Any]) -> bool:
        if not self.writes:
            return False
        return not self.write_actions or args.get("action") in self.write_actions


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(self, tool: Tool) -> None:
        if not isinstance(tool, Tool):
            raise TypeError(f"register_tools: expected a Tool, got {type(tool).__name__}")
        if tool.name in self._tools:
            raise ValueError(f"register_tools: two tools are named {tool.name!r}")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def tools(self) -> tuple[Tool, ...]:
        return tuple(self._tools.values())

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in self._tools.values()]
