"""`hermes tools`: the tools the model can call, listed and called from the command line.

A tool is written once (``register_tools``, hermes.agent.tool_registry.Tool): the model calls it
in a chat, an MCP client when it opts in (``mcp=True``), and this command, through the same
:class:`~hermes.agent.tools.ToolBox` (the same checks, errors and JSON)."""

from __future__ import annotations

import json

import typer

from hermes.cli import JsonOption, UserOption, runtime
from hermes.cli.output import echo, emit_json
from hermes.errors import HermesError

app = typer.Typer(no_args_is_help=True,
                  help="The tools the model can call: list them, or call one yourself.")


@app.command("list")
def list_tools(as_json: bool = JsonOption) -> None:
    """Every registered tool (the built-in memory tools and the plugins'), and where else it is
    offered (mcp: to MCP clients too)."""
    from hermes import plugins

    tools = plugins.loaded().tools.tools()
    if as_json:
        emit_json([{"name": t.name, "description": t.description, "writes": t.writes,
                    "mcp": t.mcp, "parameters": t.parameters} for t in tools])
        return
    for tool in tools:
        where = " (mcp too)" if tool.mcp else ""
        echo(f"{tool.name}{where}: {' '.join(tool.description.split())}")


@app.command()
def call(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="The tool's name (hermes tools list)."),
    arguments: str = typer.Argument("{}", help="Its arguments, a JSON object."),
    user: str = UserOption,
) -> None:
    """Call a tool as the model would, for a user, and print its JSON result (an error result
    exits 1)."""
    from hermes.agent.llm import ToolCall
    from hermes.agent.tools import ToolBox

    rt = runtime(ctx)
    box = ToolBox(rt.memory, rt.user(user), embed_writes=True)  # no vector job runs here
    outcome = box.run(ToolCall("cli", name, arguments))
    if not outcome.ok:
        raise HermesError(json.loads(outcome.content).get("error", outcome.content))
    echo(outcome.content)
