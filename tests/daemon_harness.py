"""Run the real `hermes` command line with the scripted model as provider ``fake``.

For tests that start Hermes in a subprocess: ``python -m tests.daemon_harness run --no-repl``.
Replies come, in order, from the JSON list in ``HERMES_TEST_REPLIES`` (a string is a reply, an
object ``{"tool": name, "args": {...}}`` a tool call). ``<<stall>>`` inside a reply: the stream
stops there until SIGUSR1 (what came before it is on screen meanwhile); each stall reached adds
a line to the file ``HERMES_TEST_STALLS`` names.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

from tests.fakellm import Block, Reply, ScriptedLLM, _chunk, _pieces, installed

HOLD = "<<hold>>"
STALL = "<<stall>>"


class SignalRelease:
    """Stands in for a Block's event: waits, on the running loop, for SIGUSR1 from the test."""

    def __init__(self, announce: bool = True) -> None:
        self.announce = announce

    async def wait(self) -> None:
        arrived = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, arrived.set)
        if self.announce:
            print("harness: model call held", file=sys.stderr, flush=True)
        elif os.environ.get("HERMES_TEST_STALLS"):   # (a terminal's screen is not for this)
            with open(os.environ["HERMES_TEST_STALLS"], "a", encoding="utf-8") as out:
                out.write("stalled\n")
        await arrived.wait()


class HarnessLLM(ScriptedLLM):
    """The scripted model, with replies that stall mid-stream until SIGUSR1."""

    async def _agen(self, step, request):  # type: ignore[no-untyped-def]
        if isinstance(step, Reply) and STALL in step.text:
            *parts, rest = step.text.split(STALL)
            for part in parts:
                for piece in _pieces(part, 4):
                    yield _chunk(text=piece)
                await SignalRelease(announce=False).wait()
            step = Reply(text=rest, chunk_size=step.chunk_size)
        for chunk in self._chunks(step, request):
            yield chunk


def main() -> None:
    fake = HarnessLLM()
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
