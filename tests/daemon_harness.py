"""Run the real `hermes` command line with the scripted model as provider ``fake``.

For tests that start Hermes in a subprocess: ``python -m tests.daemon_harness run --no-repl``.
Replies come, in order, from the JSON list in ``HERMES_TEST_REPLIES``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from tests.fakellm import Block, ScriptedLLM, installed

HOLD = "<<hold>>"


def held(request: Any) -> Block:
    """A model call that waits until the test sends SIGUSR1 (then takes the next reply)."""
    release = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, release.set)
    print("harness: model call held", file=sys.stderr, flush=True)
    return Block(release)


def main() -> None:
    fake = ScriptedLLM()
    for text in json.loads(os.environ.get("HERMES_TEST_REPLIES", "[]")):
        if text == HOLD:
            fake.respond(held)
        else:
            fake.reply(text)
    os.environ["HERMES_MODEL__NAME"] = "fake/scripted"
    with installed(fake):
        from hermes.cli import main as hermes_main

        hermes_main()


if __name__ == "__main__":
    main()
