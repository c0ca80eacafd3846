"""Run the real `hermes` command line with the scripted model as provider ``fake``.

For tests that start Hermes in a subprocess: ``python -m tests.daemon_harness run --no-repl``.
Replies come, in order, from the JSON list in ``HERMES_TEST_REPLIES`` (a string is a reply, an
object ``{"tool": name, "args": {...}}`` a tool call).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from tests.fakellm import Block, ScriptedLLM, installed

HOLD = "<<hold>>"


class SignalRelease:
    """Stands in for a Block's event: waits, on the running loop, for SIGUSR1 from the test."""

    async def wait(self) -> None:
        arrived = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, arrived.set)
        print("harness: model call held", file=sys.stderr, flush=True)
        await arrived.wait()


def main() -> None:
    fake = ScriptedLLM()
    for text in json.loads(os.environ.get("HERMES_TEST_REPLIES", "[]")):
        if text == HOLD:     # this model call waits for SIGUSR1, then takes the next reply
            fake.script.append(Block(SignalRelease()))  # type: ignore[arg-type]
        elif isinstance(text, dict):  # {"tool": name, "args": {...}}: the model calls a tool
            fake.tool_call(text["tool"], text.get("args") or {})
        else:
            fake.reply(text)
    os.environ["HERMES_MODEL__NAME"] = "fake/scripted"
    with installed(fake):
        from hermes.cli import main as hermes_main

        hermes_main()


if __name__ == "__main__":
    main()
