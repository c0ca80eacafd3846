"""Benchmark learning's related facts (issue 31): does a later message reach the fact it changes?

    nice -n 10 python scripts/bench_related.py [--limit 15] [--rounds 3]

Extraction shows its model "existing facts that may be related" (``FactStore.related``, the
first MAX_RELATED_FACTS = 15), and consolidation checks merges and contradictions against
them: a fact missing there is never updated and stays beside its contradiction. The set
(scripts/bench_related_data.py, 149 pairs written for this, none from LoCoMo) pairs a stored
fact with a later message that changes, retires or confirms it, mostly in other words ("Our
dog passed away" / "The user has a beagle named Biscuit"); 24 of the messages are long (a
change said in passing among other news). All the stored facts and 102 other facts of the same
person are in one home, embedded by the default model (MiniLM); for each message the related
facts are asked for, as the extraction worker asks (the run's user text).

Reported: how often the stored fact is among the related facts, words and entities only (the
rule before issue 31) and fused with the fact vectors (now), by kind, for the long messages,
and for the short ones "diluted" (each said in passing inside a long message of other news,
bench_related_data.AROUND: a long text's vector mostly means its bulk); and the CPU time of one
``related`` call in each arm, interleaved over ``--rounds`` passes (time.process_time), with the
message's embedding cached (a one-turn run: the turn embedded the same text for recall) and
uncached (a run of several messages embeds their joined text once).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_related_data import AROUND, FILLER, PAIRS  # noqa: E402

from hermes.clock import FakeClock  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402

USER = "bench"
LONG = 250      # a message longer than this is reported on its own line as well


def build(home: Path) -> tuple[Runtime, dict[str, int]]:
    rt = Runtime(load_settings(home=home, environ={}), clock=FakeClock("2026-11-29T12:00:00+00:00"))
    facts = rt.memory.facts
    ids: dict[str, int] = {}
    for text in [*FILLER, *(fact for _, fact, _ in PAIRS)]:
        ids[text] = facts.add(USER, text).id
    # another user's facts, the same texts: never related for this user
    for text in [fact for _, fact, _ in PAIRS][:20]:
        facts.add("other", text)
    assert facts.vectors is not None, "fact vectors are off: nothing to compare"
    facts.vectors.index(USER)
    facts.vectors.index("other")
    return rt, ids


def diluted() -> list[tuple[str, str, str]]:
    """The short pairs again, each message said in passing inside a long one (AROUND)."""
    return [(kind, fact, f"{AROUND[n % len(AROUND)][0]} {message} {AROUND[n % len(AROUND)][1]}")
            for n, (kind, fact, message) in enumerate(p for p in PAIRS if len(p[2]) <= LONG)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limit", type=int, default=15, help="related facts shown (15)")
    parser.add_argument("--rounds", type=int, default=3, help="timing passes (3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rt, ids = build(Path(tmp))
        facts = rt.memory.facts
        embedder = facts.vectors.embedder  # type: ignore[union-attr]
        hits: dict[tuple[str, str], list[bool]] = defaultdict(list)   # (set, arm) -> hit
        missed: list[str] = []
        for name, pairs in (("as said", PAIRS), ("diluted", diluted())):
            for kind, fact, message in pairs:
                for arm in ("words", "fused"):
                    related = facts.related(USER, message, limit=args.limit,
                                            by_meaning=arm == "fused")
                    assert all(f.user == USER for f in related)
                    hit = ids[fact] in {f.id for f in related}
                    hits[name, arm].append(hit)
                    if name == "as said":
                        hits[kind, arm].append(hit)
                        if len(message) > LONG:
                            hits[f"> {LONG} chars", arm].append(hit)
                    if arm == "fused" and not hit:
                        missed.append(f"  [{name}, {kind}] {message!r} -> {fact!r}")
        timings: dict[tuple[str, str], list[float]] = defaultdict(list)
        for _ in range(args.rounds):
            for name, pairs in (("as said", PAIRS), ("diluted", diluted())):
                for _, _, message in pairs:
                    for arm in ("words", "fused cached", "fused uncached"):
                        if arm == "fused uncached":
                            embedder.__dict__.pop("_recent", None)
                        elif arm == "fused cached":
                            embedder.embed_query(message)
                        started = time.process_time()
                        facts.related(USER, message, limit=args.limit,
                                      by_meaning=arm != "words")
                        timings[name, arm].append((time.process_time() - started) * 1000)
        load = os.getloadavg()[0]
        rt.close()
    print(f"related facts on {len(PAIRS)} pairs, {len(FILLER) + len(PAIRS)} facts of one user, "
          f"first {args.limit} shown; model {embedder.model_id}")
    print(f"{'pairs':<16} {'n':>4} {'words+entities':>15} {'+ meaning':>10}")
    for row in ("change", "retire", "confirm", f"> {LONG} chars", "as said", "diluted"):
        words, fused = hits[row, "words"], hits[row, "fused"]
        print(f"{row:<16} {len(words):>4} {sum(words) / len(words):>15.3f} "
              f"{sum(fused) / len(fused):>10.3f}")
    print(f"\nCPU ms per related() call, {args.rounds} interleaved passes (1-min load {load:.1f})")
    for (name, arm), values in timings.items():
        ordered = sorted(values)
        print(f"  {name:<8} {arm:<15} p50 {statistics.median(values):6.2f}  "
              f"p90 {ordered[int(len(ordered) * 0.9)]:6.2f}  mean {statistics.mean(values):6.2f}")
    if missed:
        print(f"\nmissed with meaning ({len(missed)}):")
        print("\n".join(missed))


if __name__ == "__main__":
    main()
