"""Prompt caching (issue 14): how much of each request is a prefix of the previous one.

    python scripts/bench_prompt_cache.py

A scripted 40-turn conversation through the real Agent, the model faked at litellm's boundary
(tests/fakellm.py): tool calls in some turns, memory and fact writes mid-session, one
compression (a small context window), a /new (a new session) at turn 30. Per turn: input
tokens (characters / 4), tokens identical to the previous request's prefix, the running share.
Estimated input cost at Anthropic's cache prices (write 1.25x, read 0.1x of the base price).
Not done yet: the old layout side by side (see the note of issue 14).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def common_prefix_chars(a: list[dict], b: list[dict]) -> int:
    total = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            sx, sy = str(x.get("content") or ""), str(y.get("content") or "")
            n = 0
            while n < min(len(sx), len(sy)) and sx[n] == sy[n]:
                n += 1
            return total + n
        total += len(str(x.get("content") or "")) + len(str(x.get("tool_calls") or ""))
    return total


def size(messages: list[dict]) -> int:
    return sum(len(str(m.get("content") or "")) + len(str(m.get("tool_calls") or ""))
               for m in messages)


async def run() -> None:
    home = Path(tempfile.mkdtemp(prefix="bench-cache-"))
    os.environ["HERMES_HOME"] = str(home)
    os.environ["HERMES_MODEL__NAME"] = "fake/scripted"
    from hermes.agent.turn import Agent
    from hermes.clock import FakeClock
    from hermes.config import load_settings
    from hermes.memory.basic import BasicMemory
    from hermes.memory.facts.store import FactStore
    from hermes.memory.sessions.store import SessionStore
    from hermes.runtime import Runtime
    from tests.fakellm import ScriptedLLM, installed

    fake = ScriptedLLM()
    with installed(fake, context_window=9000):
        rt = Runtime(load_settings(), clock=FakeClock())
        basic = BasicMemory(rt.db, clock=rt.clock)
        for i in range(40):
            basic.add("owner", f"Entry {i}: the user's home lab detail number {i}, kept dense")
        facts = FactStore.from_runtime(rt)
        for i in range(60):
            facts.add("owner", f"Project Kestrel component {i} runs on host node{i}")
        agent = Agent(rt)
        store = SessionStore.from_runtime(rt)
        session = store.create("owner", "terminal").id
        rows = []
        previous = None
        for turn in range(1, 41):
            if turn == 30:
                session = store.create("owner", "terminal").id   # /new
                previous = None
            if turn % 7 == 3:
                fake.tool_call("facts", {"action": "search", "query": f"node{turn}"})
            if turn == 12:
                fake.tool_call("memory", {"action": "add", "text": "Prefers metric units"})
            if turn == 18:
                fake.tool_call("facts", {"action": "add", "content": "The NAS has 4 disks"})
            fake.reply(f"Answer {turn}: " + "some explanation of the component. " * 6)
            before = len(fake.requests)
            result = await agent.turn("owner", session, f"Question {turn} about Kestrel "
                                      f"component {turn % 13} and node{turn}?").run()
            for request in fake.requests[before:]:
                if request.messages and request.messages[0]["content"].startswith("Condense"):
                    continue
                tokens = size(request.messages) // 4
                same = common_prefix_chars(previous, request.messages) // 4 if previous else 0
                rows.append((turn, tokens, same, result.compressed))
                previous = request.messages
            rt.clock.advance(minutes=3)
    total = sum(r[1] for r in rows)
    cached = sum(r[2] for r in rows)
    print(f"{'turn':>4} {'input tok':>10} {'prefix tok':>11} {'share':>6}")
    for turn, tokens, same, compressed in rows:
        print(f"{turn:>4} {tokens:>10,} {same:>11,} {same / tokens:>6.0%}"
              + ("  (compressed)" if compressed else ""))
    later = [r for r in rows if r[0] >= 2 and not r[3] and r[0] != 30]
    share = sum(r[2] for r in later) / sum(r[1] for r in later)
    # Anthropic: cache read 0.1x, cache write 1.25x of the base input price; uncached = write.
    cost = sum(0.1 * r[2] + 1.25 * (r[1] - r[2]) for r in rows)
    print(f"\nrequests {len(rows)}, input tokens {total:,}, prefix of previous {cached:,} "
          f"({cached / total:.0%}); turns 2-40 without compression and /new: {share:.1%}")
    print(f"estimated input cost at Anthropic cache prices: {cost / total:.3f}x of uncached")


if __name__ == "__main__":
    asyncio.run(run())
