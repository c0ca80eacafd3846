"""A plugin for the tests whose every hook fails (see tests/test_plugins.py): its tool hook
registers a tool and then raises, its front-end and command hooks raise, and its embedding
model takes a name that is already the built-in's. Hermes must name it and carry on."""

from __future__ import annotations

from hermes.agent.tool_registry import Tool
from hermes.hookspecs import hookimpl


@hookimpl
def register_tools(register):  # type: ignore[no-untyped-def]
    register(Tool("half_done", "Registered before the hook raised.", {}, lambda box, args: {}))
    raise RuntimeError("the faulty plugin's tools are broken")


@hookimpl
def register_frontends(register):  # type: ignore[no-untyped-def]
    raise KeyError("faulty front-end")


@hookimpl
def register_commands(cli):  # type: ignore[no-untyped-def]
    @cli.command(name="faulty-hello")
    def hello() -> None:
        """Never reached: the hook raises after adding it."""
    raise ImportError("No module named 'faulty_dependency'")


@hookimpl
def register_embedding_models(register):  # type: ignore[no-untyped-def]
    register("e5", lambda: None)  # the built-in's name: refused
