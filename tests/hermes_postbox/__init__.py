"""A Hermes plugin for the tests, loaded through the ``hermes`` entry-point group (see
tests/test_plugins.py, which writes its dist-info): a ``count_words`` tool (offered to MCP
clients too), a ``postbox``
front-end that writes what happens to it into ``<home>/postbox.txt`` (its own config section
``postbox: {file: ...}`` names another file), a command, and a toy
embedding model ``toy`` (words hashed into 16 dimensions)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

from hermes.agent.tool_registry import Tool
from hermes.config import Section
from hermes.hookspecs import hookimpl


def count_words(box: Any, args: dict[str, Any]) -> dict[str, Any]:
    return {"words": len(str(args.get("text") or "").split()), "user": box.user}


@hookimpl
def register_tools(register):  # type: ignore[no-untyped-def]
    # Offered to MCP clients as well (mcp=True).
    register(Tool("count_words", "Count the words of text.",
                  {"type": "object", "properties": {"text": {"type": "string",
                                                             "description": "Any text."}},
                   "required": ["text"]},
                  count_words, mcp=True))


class PostboxConfig(Section):
    """The plugin's own section of config.yaml (``postbox:``), validated as Hermes's are."""

    file: str = "postbox.txt"  # under the home


class Postbox:
    source = "postbox"

    def __init__(self, ctx: Any) -> None:
        settings = ctx.memory.settings
        self.path: Path = settings.home_path / settings.section("postbox").file

    def _write(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    async def start(self) -> bool:
        self._write("started")
        return True

    async def stop(self) -> None:
        self._write("stopped")

    async def deliver(self, job: Any, target: str, text: str) -> None:
        self._write(f"{job.name} -> {target}: {text}")


@hookimpl
def register_frontends(register):  # type: ignore[no-untyped-def]
    # Boxes have one-word names: the front-end judges the targets a cron job may name.
    register("postbox", Postbox, accepts=str.isidentifier, deliver_form="postbox:<box name>",
             config=PostboxConfig)


@hookimpl
def register_commands(cli):  # type: ignore[no-untyped-def]
    @cli.command(name="postbox-hello")
    def hello() -> None:
        """Say hello from the test plugin."""
        print("hello from the postbox plugin")


class ToyEmbedder:
    model_id = "postbox-toy-16"
    dims = 16

    def embed(self, texts: Any) -> Any:
        import numpy as np

        out = np.full((len(texts), self.dims), 0.01, dtype=np.float32)
        for row, text in enumerate(texts):
            for word in str(text).lower().split():
                out[row, zlib.crc32(word.encode()) % self.dims] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text: str) -> Any:
        return self.embed([text])[0]


@hookimpl
def register_embedding_models(register):  # type: ignore[no-untyped-def]
    register("toy", ToyEmbedder)
