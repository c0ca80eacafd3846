"""Stress: how long one extraction output holds the write lock, and how long a concurrent
writer waits meanwhile (issue 11, part 3).

    python scripts/stress_extraction.py [--quick] [--time-limit 300]

Each scenario parses a crafted model output with the run's caps (``parse_actions``, as the
worker does), applies it with ``consolidate`` in bounded transactions (``BoundedWrites``, as
the worker does), and meanwhile a second thread on its own connection (another process, in
effect: ``hermes facts add``) adds a fact every 20 ms and records how long each add took.
Reported: the longest hold of the write lock by the run (ms), the longest wait of the
concurrent writer (ms), the facts written, and the run's notes. The "one transaction" rows
apply the same output the way runs were written before (everything in one transaction), for
comparison. An extraction-output corpus (malformed, nested, surrogates, caps) is parsed too:
0 exceptions other than ParseError expected.

Writes bench-results/stress_extraction.json. Timings are wall clock on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.clock import FakeClock  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.learn.consolidate import consolidate  # noqa: E402
from hermes.learn.parse import ParseError, parse_actions  # noqa: E402
from hermes.memory.facts.store import FactStore  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402
from hermes.store.db import BoundedWrites, connect  # noqa: E402


def creates(count: int) -> list[dict[str, Any]]:
    return [{"action": "create", "content": f"Server number {i} in rack {i % 40} runs Debian",
             "entities": [f"Server {i}"], "tags": ["infra"]} for i in range(count)]


def wide(entities: int) -> list[dict[str, Any]]:
    return [{"action": "create", "content": "Project Atlas depends on many services",
             "entities": [f"Service {i}" for i in range(entities)]}]


class Writer(threading.Thread):
    """Another process's `hermes facts add`, every 20 ms, on its own connection."""

    def __init__(self, home: Path) -> None:
        super().__init__(daemon=True)
        self.home = home
        self.stop = threading.Event()
        self.waits: list[float] = []
        self.errors: list[str] = []

    def run(self) -> None:
        settings = load_settings(home=self.home)
        db = connect(settings.db_path)
        facts = FactStore(db, settings.facts, clock=FakeClock("2026-11-29T12:00:00+00:00"))
        n = 0
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                facts.add("bob", f"Concurrent note {n} about the garden")
            except Exception as exc:  # noqa: BLE001 - counted, that is the figure
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self.waits.append(time.monotonic() - started)
            n += 1
            time.sleep(0.02)
        db.close()


def scenario(name: str, output: list[dict[str, Any]], *, caps: dict[str, int],
             one_transaction: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = load_settings(home=home)
        settings.facts.max_entities_per_fact = caps.get("max_entities", 20)
        rt = Runtime(settings, clock=FakeClock("2026-11-29T12:00:00+00:00"))
        facts = rt.memory.facts
        writer = Writer(home)
        writer.start()
        time.sleep(0.1)
        started = time.monotonic()
        parsed = parse_actions(json.dumps(output), max_actions=caps.get("max_actions", 50),
                               max_entities=caps.get("max_entities", 20))
        writes = BoundedWrites(rt.db, budget=float("inf") if one_transaction else 0.05)
        with writes:
            result = consolidate(facts, "owner", parsed.actions, {}, session_id=None,
                                 message_ids=[], writes=writes)
        elapsed = time.monotonic() - started
        time.sleep(0.1)
        writer.stop.set()
        writer.join()
        rt.close()
    row = {
        "scenario": name, "actions_kept": len(parsed.actions), "created": result.created,
        "merged": result.merged, "transactions": writes.transactions,
        "max_lock_hold_ms": round(writes.longest * 1000, 1),
        "concurrent_max_wait_ms": round(max(writer.waits) * 1000, 1),
        "concurrent_adds": len(writer.waits), "concurrent_errors": len(writer.errors),
        "run_s": round(elapsed, 2), "notes": parsed.skipped[:2],
    }
    print(f"{name:<44} kept {row['actions_kept']:>5}  txns {row['transactions']:>4}  "
          f"max hold {row['max_lock_hold_ms']:>8.1f} ms  writer max wait "
          f"{row['concurrent_max_wait_ms']:>8.1f} ms  errors {row['concurrent_errors']}  "
          f"({row['run_s']} s)", flush=True)
    return row


def output_corpus() -> list[str]:
    """Malformed and hostile extraction outputs."""
    good = json.dumps(creates(3))
    corpus = [
        good, "```json\n" + good + "\n```", "Sure! " + good + " Hope that helps.", good[:-5],
        "[" * 50_000, "{" * 50_000, "[" * 50_000 + "]" * 50_000, '[{"a":' * 10_000,
        json.dumps([{"action": "create", "content": "Likes \ud800 tea"}]),
        '[{"action": "create", "content": "x \\ud83e y"}]', "", "null", "42", '"text"',
        json.dumps(creates(5000)), json.dumps(wide(10_000)),
        json.dumps([{"action": "create", "content": "x" * 100_000}]),
        json.dumps([{"action": "update", "number": 10**30, "content": "x"}]),
        json.dumps([{"action": "create", "content": {"nested": ["x"] * 1000}}]),
        "[" + ",".join(["{}"] * 100_000) + "]", "\x00" * 1000, "\ufeff" + good,
    ]
    for cut in range(1, len(good), max(1, len(good) // 40)):
        corpus.append(good[:cut])
    return corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Smaller outputs (seconds).")
    parser.add_argument("--time-limit", type=float, default=600.0,
                        help="Stop starting new scenarios after this many seconds.")
    args = parser.parse_args()
    deadline = time.monotonic() + args.time_limit
    big = 300 if args.quick else 2000
    many = 1000 if args.quick else 10_000
    plans = [
        (f"{big:,} creates, default caps", creates(big), {}),
        (f"{big:,} creates, cap raised to {big:,}", creates(big), {"max_actions": big}),
        (f"{big:,} creates, cap raised, one transaction", creates(big), {"max_actions": big},
         True),
        (f"{many:,} entities on one fact, default caps", wide(many), {}),
        (f"{many:,} entities, cap raised to {many:,}", wide(many), {"max_entities": many}),
    ]
    rows = []
    for plan in plans:
        if time.monotonic() > deadline:
            print("time limit reached; remaining scenarios skipped")
            break
        name, output, caps, *one = plan
        rows.append(scenario(name, output, caps=caps, one_transaction=bool(one)))
    exceptions = 0
    parse_errors = 0
    corpus = output_corpus()
    worst = 0.0
    for raw in corpus:
        started = time.process_time()
        try:
            parse_actions(raw)
        except ParseError:
            parse_errors += 1
        except Exception as exc:  # noqa: BLE001 - counted, that is the figure
            exceptions += 1
            print(f"  exception on {raw[:40]!r}: {type(exc).__name__}: {exc}")
        worst = max(worst, time.process_time() - started)
    print(f"extraction-output corpus: {len(corpus)} outputs, {parse_errors} ParseError (run "
          f"recorded for retry), {exceptions} other exceptions, slowest parse "
          f"{worst * 1000:.0f} ms CPU")
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "stress_extraction.json").write_text(json.dumps({
        "scenarios": rows, "corpus": {"outputs": len(corpus), "parse_errors": parse_errors,
                                      "exceptions": exceptions, "slowest_ms": worst * 1000},
    }, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
