"""Benchmark: learning from a 200+ turn conversation through the real turn engine.

    /work/venv/bin/python scripts/bench_extraction.py [--reply-ms 40] [--extract-ms 300]

The conversation (scripts/bench_extraction_data.py) mixes small talk, questions, statements
about the user, paraphrased repeats, explicit "remember" requests and corrections. It runs
twice on fresh homes, with extraction on (fast lane + background worker attached to the Agent)
and off. The model is a scripted litellm provider with simulated latency: chat replies stream
after ``--reply-ms``; extraction calls answer after ``--extract-ms`` with what a competent model
would return (creates; updates by the temporary number shown in the prompt, when the old fact
is shown; or a plain create that contradicts the old fact, for consolidation to resolve).

Measured:
- extraction model calls per user turn (goal <= 0.6) and on small-talk turns (goal 0);
- reply latency with extraction on vs off (goal: ratio <= 1.05), with the ratio of each off run
  and the on run beside it (the spread), and the CPU time the event loop's thread spends during
  each reply (sleeps and other processes drop out of it); and learning's own work on the loop,
  measured in the on runs themselves (extraction's task steps, callbacks), since the difference
  of two runs moves with the machine's load by more than that work;
- final active facts vs distinct true facts: duplicates, stale contradicted facts, missing.

Prints tables and writes bench-results/extraction.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_extraction_data import Turn, build  # noqa: E402
from rapidfuzz import fuzz  # noqa: E402

from hermes.clock import FakeClock  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.learn.fastlane import detect  # noqa: E402

EXTRACT_MARK = "You maintain the long-term memory"
_USER_LINE = re.compile(r"^\[[^\]]*\] user \([^)]*\): (.*)$", re.M)
_FACT_LINE = re.compile(r"^(\d+)\. (.+?) \[", re.M)


class Script:
    """What the scripted extraction model knows: user text -> the action it returns."""

    def __init__(self, turns: list[Turn]) -> None:
        self.by_text = {t.text: t for t in turns}
        self.current: dict[str, str] = {}   # key -> content the model believes is current
        self.calls: list[list[str]] = []    # kinds of the user turns in each extraction call
        self.updates_by_number = 0
        self.updates_fallback = 0

    def extraction(self, system: str, conversation: str) -> str:
        shown = {content: int(number) for number, content in _FACT_LINE.findall(system)}
        texts = _USER_LINE.findall(conversation)
        self.calls.append([self.by_text[t].kind if t in self.by_text else "?" for t in texts])
        actions: list[dict[str, Any]] = []
        for text in texts:
            turn = self.by_text.get(text)
            if turn is None or turn.key is None or turn.kind == "remember":
                continue
            if turn.mode in ("update", "delete") and turn.kind == "correction":
                old = self.current.get(turn.key)
                number = shown.get(old) if old else None
                if number is None:
                    # The model was not shown the old fact: it can only state the new value.
                    self.updates_fallback += 1
                    if turn.content:
                        actions.append(_create(turn))
                elif turn.mode == "update":
                    self.updates_by_number += 1
                    actions.append({"action": "update", "number": number,
                                    "content": turn.content})
                else:
                    self.updates_by_number += 1
                    actions.append({"action": "delete", "number": number,
                                    "reason": turn.reason})
            else:
                actions.append(_create(turn))
            if turn.content and turn.kind != "paraphrase":
                # (a restatement merges into the fact as first worded)
                self.current[turn.key] = turn.content
        # a real model would talk around it now and then
        return "Here are the actions:\n```json\n" + json.dumps(actions, indent=1) + "\n```"


class Oracle:
    """Writes the true facts of each turn straight to the store (the baseline without
    extraction still has the memory an extracting run would have), with their vectors, as the
    daemon's vector job would embed them: without, the baseline recalled by words only while
    the extracting run (its worker embeds what it writes) recalled by meaning too, and the
    ratio counted the cost of fact vectors as extraction's."""

    def __init__(self, facts: Any) -> None:
        self.facts = facts
        self.ids: dict[str, int] = {}

    def apply(self, turn: Turn) -> None:
        if turn.kind == "remember":
            (found,) = detect(turn.text)
            self.ids[turn.text] = self.facts.add("owner", found.content).id
        elif turn.kind in ("statement", "mixed") and turn.key and turn.content:
            self.ids[turn.key] = self.facts.add("owner", turn.content,
                                                entities=turn.entities or None).id
        elif turn.kind == "correction" and turn.key in self.ids:
            if turn.mode == "delete":
                self.facts.forget("owner", self.ids.pop(turn.key), reason=turn.reason)
            elif turn.content:
                self.ids[turn.key] = self.facts.update("owner", self.ids[turn.key],
                                                       turn.content).id
        if self.facts.vectors is not None:
            self.facts.vectors.index("owner")


class LoopSplit:
    """The event loop's CPU time (``time.thread_time``) by what ran: steps of extraction's tasks
    (named ``extract:*``), callbacks that are no task's step (executor results, timers), and
    everything else (the turns). Measured directly in one run, so extraction's share needs no
    difference of two runs (which the machine's load moves by more than the share itself)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {"extract": 0.0, "callbacks": 0.0, "turns": 0.0}
        self._saved: Any = None

    def __enter__(self) -> LoopSplit:
        import asyncio.events

        handle = asyncio.events.Handle
        self._saved = run = handle._run
        split = self

        def timed(h: Any) -> None:
            started = time.thread_time()
            try:
                run(h)
            finally:
                owner = getattr(h._callback, "__self__", None)
                kind = ("callbacks" if not isinstance(owner, asyncio.Task) else
                        "extract" if owner.get_name().startswith("extract:") else "turns")
                split.ms[kind] += (time.thread_time() - started) * 1000

        handle._run = timed
        return self

    def __exit__(self, *exc: object) -> None:
        import asyncio.events

        asyncio.events.Handle._run = self._saved


def _create(turn: Turn) -> dict[str, Any]:
    return {"action": "create", "content": turn.content, "type": "semantic",
            "category": "general", "entities": turn.entities, "tags": [], "importance": 0.6}


def install_model(script: Script, reply_s: float, extract_s: float) -> Any:
    from tests.fakellm import Reply, ScriptedLLM, installed

    class BenchLLM(ScriptedLLM):
        def _take(self, request: Any) -> Any:
            if EXTRACT_MARK in request.system:
                return Reply(text=script.extraction(request.system,
                                                    request.messages[-1]["content"]))
            return Reply(text="Noted. Here is a short, helpful answer.", chunk_size=8)

        async def acompletion(self, *args: Any, **kw: Any) -> Any:
            request = self._record(kw, stream=False)
            step = self._take(request)
            await asyncio.sleep(extract_s if EXTRACT_MARK in request.system else reply_s)
            return self._response(step)

        def astreaming(self, *args: Any, **kw: Any) -> Any:  # type: ignore[override]
            request = self._record(kw, stream=True)
            step = self._take(request)

            async def slow() -> Any:
                await asyncio.sleep(reply_s)
                for chunk in self._chunks(step):
                    yield chunk

            return slow()

    fake = BenchLLM()
    return installed(fake), fake


async def run_conversation(turns: list[Turn], *, extraction: bool, reply_s: float,
                           extract_s: float, home: Path, think_s: float = 0.0) -> dict[str, Any]:
    from hermes.agent.turn import Agent
    from hermes.learn.stats import extraction_stats
    from hermes.learn.worker import ExtractionWorker
    from hermes.runtime import Runtime

    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.yaml"
    config.write_text("", encoding="utf-8")
    settings = load_settings(environ={
        "HERMES_HOME": str(home), "HERMES_CONFIG": str(config),
        "HERMES_MODEL__NAME": "fake/scripted",
        "HERMES_EXTRACTION__ENABLED": "true" if extraction else "false",
    })
    clock = FakeClock("2026-11-29T08:00:00+00:00")
    rt = Runtime(settings, clock=clock)
    script = Script(turns)
    context, fake = install_model(script, reply_s, extract_s)
    latencies: list[float] = []
    loop_cpu: list[float] = []   # CPU time of the event loop's thread during each reply
    with context:
        agent = Agent(rt.memory)
        worker = None
        if extraction:
            worker = ExtractionWorker(rt.memory)
            worker.attach(agent)
        session = rt.memory.sessions.create("owner", "terminal")
        oracle = Oracle(rt.memory.facts)
        split = LoopSplit().__enter__()
        for turn in turns:
            clock.advance(minutes=2)
            started, cpu_started = time.perf_counter(), time.thread_time()
            result = await agent.turn("owner", session.id, turn.text).run()
            latencies.append(time.perf_counter() - started)
            loop_cpu.append(time.thread_time() - cpu_started)
            assert result.error is None, result.error
            if not extraction:
                # Off: the same facts appear at the same turns, written outside the timed
                # part, so both modes recall from a store of the same size and the ratio
                # measures extraction's overhead, not the cost of having memory.
                oracle.apply(turn)
            if think_s:
                await asyncio.sleep(think_s)   # the user reading and typing
        split.__exit__()
        drain_started = time.perf_counter()
        if worker is not None:
            await worker.drain()
        drain_s = time.perf_counter() - drain_started
    facts = rt.memory.facts
    active = facts.list_facts("owner", limit=10_000)
    stats = extraction_stats(rt.memory, "owner").to_json()
    rt.close()
    return {"latencies": latencies, "loop_cpu": loop_cpu, "drain_s": drain_s,
            "split": {k: v / len(turns) for k, v in split.ms.items()},
            "active": [f.content for f in active], "stats": stats, "script": script,
            "requests": len(fake.requests)}


def truth(turns: list[Turn]) -> tuple[dict[str, str], set[str]]:
    """The true facts at the end (key -> content) and every content that is no longer true."""
    current: dict[str, str] = {}
    stale: set[str] = set()
    for turn in turns:
        if turn.kind == "remember":
            (found,) = detect(turn.text)
            current[turn.key or turn.text] = found.content
        elif turn.kind in ("statement", "mixed") and turn.key and turn.content:
            current[turn.key] = turn.content
        elif turn.kind == "correction" and turn.key:
            if turn.key in current:
                stale.add(current[turn.key])
            if turn.mode == "delete":
                current.pop(turn.key, None)
            elif turn.content:
                current[turn.key] = turn.content
    return current, stale - set(current.values())


def score(active: list[str], current: dict[str, str], stale: set[str]) -> dict[str, Any]:
    covered: dict[str, int] = {}
    stale_active, unexpected = [], []
    for content in active:
        best_key, best = None, 0.0
        for key, true_content in current.items():
            similarity = fuzz.token_set_ratio(content, true_content)
            if similarity > best:
                best_key, best = key, similarity
        best_stale = max((fuzz.token_set_ratio(content, s) for s in stale), default=0)
        if best_stale > best and best_stale >= 85:
            stale_active.append(content)
        elif best_key is not None and best >= 85:
            covered[best_key] = covered.get(best_key, 0) + 1
        else:
            unexpected.append(content)
    return {
        "active_facts": len(active),
        "distinct_true_facts": len(current),
        "true_facts_found": len(covered),
        "missing": sorted(set(current) - set(covered)),
        "duplicates": sum(n - 1 for n in covered.values()),
        "stale_active": stale_active,
        "unexpected": unexpected,
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reply-ms", type=float, default=40.0,
                        help="simulated latency of a chat reply (default 40)")
    parser.add_argument("--extract-ms", type=float, default=300.0,
                        help="simulated latency of an extraction call (default 300)")
    parser.add_argument("--think-ms", type=float, default=0.0,
                        help="pause between a reply and the next message (default 0: the "
                        "worst case, extraction competes with back-to-back replies)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=2,
                        help="runs of each mode, interleaved off/on/on/off... (default 2)")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    turns = build(args.seed)
    kinds = {k: sum(1 for t in turns if t.kind == k) for k in dict.fromkeys(t.kind for t in turns)}
    reply_s, extract_s = args.reply_ms / 1000, args.extract_ms / 1000

    # Interleaved (off, on, on, off, ...) after a warm-up, so that import and cache warm-up
    # and machine noise fall on both modes alike.
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run_conversation(turns[:20], extraction=True, reply_s=reply_s,
                                     extract_s=extract_s, home=Path(tmp) / "warmup"))
        for index in range(args.rounds * 2):
            mode = (index % 4) in (1, 2)
            runs[mode].append(asyncio.run(run_conversation(
                turns, extraction=mode, reply_s=reply_s, extract_s=extract_s,
                home=Path(tmp) / f"run{index}", think_s=args.think_ms / 1000)))
    # Each off run with the on run beside it (off, on, on, off, ...): the spread of the ratio.
    pairs = [(runs[False][i], runs[True][i]) for i in range(args.rounds)]
    pair_ratios = [statistics.mean(b["latencies"]) / statistics.mean(a["latencies"])
                   for a, b in pairs]
    on, off = runs[True][0], runs[False][0]
    on["latencies"] = [x for r in runs[True] for x in r["latencies"]]
    off["latencies"] = [x for r in runs[False] for x in r["latencies"]]
    on["loop_cpu"] = [x for r in runs[True] for x in r["loop_cpu"]]
    off["loop_cpu"] = [x for r in runs[False] for x in r["loop_cpu"]]
    cpu_on, cpu_off = statistics.mean(on["loop_cpu"]), statistics.mean(off["loop_cpu"])
    kinds_of_work = ("extract", "callbacks", "turns")
    split_on = {k: statistics.mean(r["split"][k] for r in runs[True]) for k in kinds_of_work}
    split_off = {k: statistics.mean(r["split"][k] for r in runs[False]) for k in kinds_of_work}

    script: Script = on["script"]
    calls = len(script.calls)
    small_talk_calls = sum(1 for c in script.calls if c and all(k == "small_talk" for k in c))
    per_kind: dict[str, int] = {}
    for kinds_in_call in script.calls:
        for kind in set(kinds_in_call):
            per_kind[kind] = per_kind.get(kind, 0) + 1
    current, stale = truth(turns)
    quality = score(on["active"], current, stale)
    mean_on, mean_off = statistics.mean(on["latencies"]), statistics.mean(off["latencies"])
    p50_on, p50_off = statistics.median(on["latencies"]), statistics.median(off["latencies"])
    p95_on, p95_off = pct(on["latencies"], 0.95), pct(off["latencies"], 0.95)

    print(f"Conversation: {len(turns)} user turns "
          + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    print(f"Simulated latency: reply {args.reply_ms:.0f} ms, extraction call "
          f"{args.extract_ms:.0f} ms; user think time {args.think_ms:.0f} ms\n")
    print("Extraction model calls")
    print(f"  total                     {calls}")
    print(f"  per user turn             {calls / len(turns):.3f}   (goal <= 0.6)")
    print(f"  on small-talk-only turns  {small_talk_calls}       (goal 0)")
    print("  turns of each kind that reached the model: "
          + ", ".join(f"{k} {per_kind.get(k, 0)}/{n}" for k, n in kinds.items()))
    print(f"  skips by reason           {on['stats']['skips']}")
    print(f"  corrections the model could target by number: {script.updates_by_number}; "
          f"could not (old fact not shown, sent as a plain create): {script.updates_fallback}")
    print("  (the other corrections are scripted as plain creates on purpose)\n")
    print(f"Reply latency (ms), {args.rounds} runs of each mode   off      on    ratio")
    print(f"  mean                                 {mean_off * 1000:7.1f} {mean_on * 1000:7.1f}  "
          f"{mean_on / mean_off:6.3f}   (goal <= 1.05)")
    print(f"  p50                                  {p50_off * 1000:7.1f} {p50_on * 1000:7.1f}  "
          f"{p50_on / p50_off:6.3f}")
    print(f"  p95                                  {p95_off * 1000:7.1f} {p95_on * 1000:7.1f}  "
          f"{p95_on / p95_off:6.3f}")
    print(f"  event-loop CPU per reply, mean     {cpu_off * 1000:7.1f} {cpu_on * 1000:7.1f}  "
          f"{cpu_on / cpu_off:6.3f}   (load-independent: the loop's own work)")
    print("  ratio of means, each off run with the on run beside it: "
          + ", ".join(f"{r:.3f}" for r in pair_ratios))
    print(f"  learning's own work on the loop per reply (during the conversation, measured in "
          f"the on runs): extraction tasks {split_on['extract']:.2f} ms, "
          f"callbacks {split_on['callbacks']:.2f} ms "
          f"(off: {split_off['callbacks']:.2f}); the turns themselves "
          f"{split_on['turns']:.2f} ms (off: {split_off['turns']:.2f})")
    print(f"  extraction backlog drained {on['drain_s'] * 1000:.0f} ms after the last reply\n")
    print("Facts at the end")
    print(f"  active facts              {quality['active_facts']}")
    print(f"  distinct true facts       {quality['distinct_true_facts']}")
    print(f"  true facts found          {quality['true_facts_found']}")
    print(f"  duplicates                {quality['duplicates']}")
    print(f"  stale contradicted active {len(quality['stale_active'])}")
    print(f"  unexpected                {len(quality['unexpected'])}")
    print(f"  store: {on['stats']['created']} created, {on['stats']['merged']} merged, "
          f"{on['stats']['superseded']} superseded, {on['stats']['forgotten']} forgotten, "
          f"{on['stats']['fast_lane']} via the fast lane")
    for label in ("missing", "stale_active", "unexpected"):
        if quality[label]:
            print(f"  {label}: {quality[label]}")

    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    (out / f"extraction-think{args.think_ms:.0f}.json").write_text(json.dumps({
        "turns": len(turns), "kinds": kinds, "reply_ms": args.reply_ms,
        "extract_ms": args.extract_ms, "think_ms": args.think_ms, "extraction_calls": calls,
        "calls_per_turn": calls / len(turns), "small_talk_calls": small_talk_calls,
        "calls_by_kind": per_kind, "skips": on["stats"]["skips"],
        "latency_ms": {"off": {"mean": mean_off * 1000, "p50": p50_off * 1000,
                               "p95": p95_off * 1000},
                       "on": {"mean": mean_on * 1000, "p50": p50_on * 1000,
                              "p95": p95_on * 1000}},
        "latency_ratio_mean": mean_on / mean_off,
        "loop_cpu_ms": {"off": cpu_off * 1000, "on": cpu_on * 1000},
        "loop_cpu_ratio_mean": cpu_on / cpu_off, "latency_ratio_per_pair": pair_ratios,
        "loop_split_ms": {"on": split_on, "off": split_off}, "quality": quality,
        "stats": on["stats"],
    }, indent=2, ensure_ascii=False), encoding="utf-8")
    print(f"\nWrote {out / f'extraction-think{args.think_ms:.0f}.json'}")


if __name__ == "__main__":
    main()
