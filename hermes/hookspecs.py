"""The hooks a Hermes plugin can implement (pluggy, as simonw/llm's ``llm/hookspecs.py``).

A plugin is a module with functions marked ``@hookimpl`` and named after these specs; it is
found through the ``hermes`` entry-point group (see :mod:`hermes.plugins`). The built-in tools
arrive through the same hooks, from Hermes's own default plugins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from pluggy import HookimplMarker, HookspecMarker

if TYPE_CHECKING:  # the records a hook registers; named for the type checker only
    import typer
    from pydantic import BaseModel

    from hermes.agent.tool_registry import Tool
    from hermes.frontends.base import FrontendFactory
    from hermes.memory.embeddings.embedders import Embedder

    class RegisterFrontend(Protocol):
        """What ``register_frontends`` is called with (``hermes.plugins.Frontends.register``)."""

        def __call__(self, name: str, factory: FrontendFactory, *,
                     accepts: Callable[[str], bool] | None = ...,
                     deliver_form: str | None = ...,
                     config: type[BaseModel] | None = ...) -> None: ...

hookspec = HookspecMarker("hermes")
hookimpl = HookimplMarker("hermes")


@hookspec
def register_tools(register: Callable[[Tool], None]) -> None:
    """Register tools the model can call: ``register(Tool(...))`` (hermes.agent.tool_registry)."""


@hookspec
def register_frontends(register: RegisterFrontend) -> None:
    """Register front-ends ``hermes run`` starts: ``register(name, factory)``, where
    ``factory(FrontendContext)`` returns a :class:`hermes.frontends.base.Frontend` (or None to
    stay off) and ``name`` is its cron delivery prefix, its sessions' source and the key of its
    config section (``config``: a pydantic model, read back with ``settings.section(name)``);
    ``accepts(target)`` judges a job's target for it, and ``deliver_form`` is how one is
    written in errors."""


@hookspec
def register_commands(cli: typer.Typer) -> None:
    """Register additional CLI commands on ``cli``, a Typer app (``@cli.command()``,
    ``cli.add_typer(...)``), e.g. ``hermes mycommand ...``."""


@hookspec
def register_embedding_models(register: Callable[[str, Callable[[], Embedder]], None]) -> None:
    """Register embedding models: ``register(name, factory)``, ``factory()`` returning an
    embedder with the interface of hermes.memory.embeddings' built-in ones. A factory with a
    ``cache_dir`` parameter is given the home's cache directory (``<home>/cache``), where it
    may keep what it builds once (Hermes's MiniLM keeps its optimised graph there)."""
