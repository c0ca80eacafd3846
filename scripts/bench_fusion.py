"""What issue 35's fusion costs a turn: prompt assembly with the meaning stage as it is and as it
was before (words trusted wholly, no lead for meaning beyond them, the nearest joining from the
model's whole floor), each message assembled both ways in alternating order in one process (a
paired A/B on one machine state), on scripts/bench_turn.py's home.

    python scripts/bench_turn.py --home DIR --no-startup --configs words --runs 20   # build it
    OMP_NUM_THREADS=1 nice -n 10 python scripts/bench_fusion.py --home DIR --runs 300

Prints CPU p50 / p90 of a later turn's assembly both ways, the median paired difference, and
how many prompts came out the same. (Recall is bench_locomo's: this home's vectors are
synthetic, its figures are a cost measure.)
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_turn  # noqa: E402
from bench_locomo import BEFORE_35, semantic_params  # noqa: E402

from hermes.agent.prompt import PromptBuilder  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, required=True, help="bench_turn.py's home")
    parser.add_argument("--runs", type=int, default=300, help="messages, each assembled twice")
    args = parser.parse_args(argv)
    if not (args.home / "bench-meta.json").exists():
        raise SystemExit(f"{args.home} is not a bench_turn.py home: build it first (see --help)")
    import json

    meta = json.loads((args.home / "bench-meta.json").read_text())
    session_id = meta["current_session"]
    rng = random.Random(11)
    vocab = bench_turn.vocabulary(random.Random(7), words=meta.get("words", "letters"))
    queries = [bench_turn.question(rng, vocab, rng.choice(bench_turn.TOPICS))
               for _ in range(args.runs)]
    rt = Runtime(load_settings(home=args.home, environ={}))
    builder = PromptBuilder(rt.memory)
    store = rt.memory.sessions
    user = bench_turn.USER
    conversation = builder.start(user, store.messages(user, session_id))

    def assemble(query: str) -> tuple[float, tuple]:
        started = time.process_time()
        unsent = store.messages(user, session_id, after_id=conversation.through)
        prompt = builder.compose(user, query, conversation,
                                 [*unsent, bench_turn.as_message(query)])
        spent = (time.process_time() - started) * 1000
        conversation.shown_facts.clear()
        conversation.shown_messages.clear()
        return spent, (tuple(f.id for f in prompt.shown_facts), tuple(prompt.shown_messages))

    for query in queries[:5]:  # warm the page cache and the vectors, both ways
        assemble(query)
        with semantic_params(**BEFORE_35):
            assemble(query)
    load = os.getloadavg()[0]
    now, before, same = [], [], 0
    for n, query in enumerate(queries):
        if n % 2:
            with semantic_params(**BEFORE_35):
                b, shown_b = assemble(query)
            a, shown_a = assemble(query)
        else:
            a, shown_a = assemble(query)
            with semantic_params(**BEFORE_35):
                b, shown_b = assemble(query)
        now.append(a)
        before.append(b)
        same += shown_a == shown_b
    rt.close()

    def p(values: list[float], q: float) -> float:
        return sorted(values)[min(len(values) - 1, int(q * (len(values) - 1)))]

    print(f"{args.runs} later turns, each assembled both ways in alternating order "
          f"(load {load:.1f} -> {os.getloadavg()[0]:.1f}):")
    print(f"  now:    CPU p50 {statistics.median(now):.2f} ms, p90 {p(now, 0.9):.2f} ms")
    print(f"  before: CPU p50 {statistics.median(before):.2f} ms, p90 {p(before, 0.9):.2f} ms")
    paired = statistics.median(a - b for a, b in zip(now, before, strict=True))
    print(f"  median paired difference {paired:+.2f} ms; "
          f"the same facts and past messages shown in {same} of {args.runs}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
