"""What an embedding model costs: indexing rate, query embedding, resident memory, install size.

    taskset -c 0 python scripts/bench_embeddings.py               # minilm and e5, 2 conversations
    taskset -c 0 python scripts/bench_embeddings.py --models minilm --conversations 10
    python scripts/bench_embeddings.py --data /path/to/locomo10.json --json-out results.json

The budget of issue 13 (semantic recall on by default only if it is cheap enough) is about one
core's CPU time, so every figure is this process's CPU time (``time.process_time``), which a
busy machine inflates less than the wall clock; pin the process to one core with ``taskset -c 0``
(each model runs with one thread). Per model, in a fresh process each (resident memory is the
process's, so models are never measured side by side):

* indexing: LoCoMo conversations imported through ``import_sessions`` (what ``hermes sessions
  import`` does), then ``MessageVectors.index`` per user, the path of ``hermes sessions index``
  and of the daemon's background job (the backlog in length order, batches, float16 rows written
  to ``message_vectors``): messages per CPU second, best of ``--repeat`` runs;
* query: ``embed_query`` of LoCoMo questions with its per-turn cache emptied, p50 / p99 CPU, and
  for MiniLM by stage (tokenizer, session.run, pooling; ``query_stages``). The
  whole session-search query (bm25 + the re-scoring + this embedding) is measured by
  ``bench_locomo.py --embeddings MODEL``;
* RSS: before the model, once loaded, after indexing (VmRSS, VmHWM the peak);
* install: the packages of the model's extra that the rest of the install would not bring
  anyway (MiniLM's are default dependencies: still counted), summed from their installed files
  (``importlib.metadata``).

LoCoMo is CC BY-NC 4.0 and stays outside the repository (see ``locomo_data.py``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import locomo_data as data  # noqa: E402

# sessions.embedding_model -> the extra that installs it (pyproject.toml)
EXTRAS = {"minilm": "embeddings-minilm", "e5": "embeddings"}
QUERIES = 300


def _memory() -> dict[str, int]:
    """VmRSS and VmHWM of this process, MB."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) // 1024
    return out


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(names: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo += [_name(r) for r in dist.requires or [] if "extra ==" not in r]
    return seen


def install_size(extra: str) -> tuple[int, list[tuple[str, int]]]:
    """MB the extra's packages take beyond what the rest of ``pip install hermes`` brings
    (their installed files), and the packages with their MB, largest first."""
    requires = metadata.distribution("hermes").requires or []
    wanted = {_name(r) for r in requires if re.search(rf"extra == ['\"]{extra}['\"]", r)}
    # The base install without the model's own packages (MiniLM's are default dependencies:
    # what they bring is still the model's cost)
    base = _closure({_name(r) for r in requires if "extra ==" not in r} - wanted)
    added = sorted(_closure(wanted) - base)
    sizes = []
    for name in added:
        files = metadata.distribution(name).files or []
        sizes.append((name, sum(f.size or 0 for f in files) // 2**20))
    sizes.sort(key=lambda s: -s[1])
    return sum(s for _, s in sizes), sizes


def measure(model: str, conversations: int, repeat: int, path: str | None) -> dict:
    from hermes.clock import FakeClock
    from hermes.memory.embeddings.embedders import Embedders
    from hermes.memory.sessions.store import SessionStore
    from hermes.memory.sessions.transcripts import import_sessions
    from hermes.memory.sessions.vectors import MessageVectors
    from hermes.store.db import connect

    convs, _ = data.load(path)
    convs = convs[:conversations]
    before = _memory()["VmRSS"]
    start = time.process_time()
    embedder = Embedders().get(model)
    load_cpu = time.process_time() - start
    loaded = _memory()["VmRSS"]
    rates = []
    messages = 0
    for _ in range(repeat):
        home = Path(tempfile.mkdtemp(prefix="hermes-bench-embeddings-"))
        db = connect(home / "hermes.db")
        cpu = 0.0
        messages = 0
        for conv in convs:
            store = SessionStore(db, clock=FakeClock(conv.sessions[-1].started_at
                                                     + timedelta(days=1)))
            import_sessions(store, conv.sample_id, data.to_import_lines(conv))
            vectors = MessageVectors(db, embedder)
            start = time.process_time()
            messages += vectors.index(conv.sample_id)
            cpu += time.process_time() - start
        rates.append(messages / cpu)
        db.conn.close()
    indexed = _memory()
    questions = [q.question for c in convs for q in c.questions][:QUERIES]
    times = []
    for question in questions:
        embedder.__dict__.pop("_recent", None)  # the per-turn cache would answer instead
        start = time.process_time()
        embedder.embed_query(question)
        times.append(time.process_time() - start)
    times.sort()
    stages = query_stages(embedder, questions)
    size, packages = install_size(EXTRAS[model]) if model in EXTRAS else (0, [])
    return {
        "model": model, "model_id": embedder.model_id, "messages": messages,
        "indexing_per_s": max(rates), "indexing_runs": rates,
        "query_p50_ms": statistics.median(times) * 1000,
        "query_p99_ms": times[min(len(times) - 1, int(len(times) * 0.99))] * 1000,
        "load_cpu_s": load_cpu, "query_stages": stages,
        "rss_before_mb": before, "rss_loaded_mb": loaded, "rss_indexed_mb": indexed["VmRSS"],
        "rss_peak_mb": indexed["VmHWM"], "install_mb": size, "packages": packages,
    }


def query_stages(embedder, questions: list[str]) -> dict[str, float] | None:
    """MiniLM's query embedding by stage, CPU ms p50 over ``questions``: the tokenizer, the
    graph (session.run), the pooling around it (mean, L2 norm); and the tokens' p50. None
    for a model without those parts (e5 runs in one C call)."""
    import numpy as np

    model = getattr(embedder, "load", lambda: embedder)()
    tokenizer, session = getattr(model, "_tokenizer", None), getattr(model, "_session", None)
    if tokenizer is None or session is None:
        return None
    names = {i.name for i in session.get_inputs()}
    parts: dict[str, list[float]] = {"tokenizer": [], "session.run": [], "pooling": []}
    tokens = []
    for question in questions:
        a = time.process_time()
        ids = np.array([tokenizer.encode(question).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        b = time.process_time()
        hidden = session.run(None, feeds)[0][0]
        c = time.process_time()
        pooled = hidden.mean(axis=0)
        pooled / max(float(np.linalg.norm(pooled)), 1e-12)
        d = time.process_time()
        for part, cpu in zip(parts, (b - a, c - b, d - c), strict=True):
            parts[part].append(cpu * 1000)
        tokens.append(ids.shape[1])
    out = {part: statistics.median(cpu) for part, cpu in parts.items()}
    out["tokens_p50"] = statistics.median(tokens)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=["minilm", "e5"])
    parser.add_argument("--conversations", type=int, default=2,
                        help="LoCoMo conversations to index (2: about 790 messages)")
    parser.add_argument("--repeat", type=int, default=3, help="indexing runs; the best counts")
    parser.add_argument("--data", help="path to locomo10.json (default: ../shared/bench/)")
    parser.add_argument("--json-out", help="write the results here as JSON")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process: one model
    args = parser.parse_args()
    try:
        data.load(args.data)
    except data.DataMissing as exc:
        raise SystemExit(f"bench_embeddings: {exc}") from None
    if args.one:
        print(json.dumps(measure(args.one, args.conversations, args.repeat, args.data)))
        return
    results = []
    for model in args.models:
        command = [sys.executable, __file__, "--one", model, "--conversations",
                   str(args.conversations), "--repeat", str(args.repeat)]
        if args.data:
            command += ["--data", args.data]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            print(f"{model}: failed\n{done.stderr.strip()}", file=sys.stderr)
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    print("| model | indexing (msg/s CPU, best of runs) | query embedding p50 / p99 (ms CPU) "
          "| RSS before / loaded / after indexing (peak) | install (MB) |")
    print("|---|---|---|---|---|")
    for r in results:
        print(f"| {r['model']} ({r['model_id']}) | {r['indexing_per_s']:.0f} "
              f"({', '.join(f'{x:.0f}' for x in r['indexing_runs'])}; {r['messages']} msgs) "
              f"| {r['query_p50_ms']:.1f} / {r['query_p99_ms']:.1f} "
              f"| {r['rss_before_mb']} / {r['rss_loaded_mb']} / {r['rss_indexed_mb']} "
              f"({r['rss_peak_mb']}) MB | {r['install_mb']} "
              f"({', '.join(f'{n} {s}' for n, s in r['packages'][:5])}) |")
    for r in results:
        if r.get("query_stages"):
            st = r["query_stages"]
            print(f"{r['model']} query embedding by stage (CPU ms p50, {st['tokens_p50']:.0f} "
                  f"tokens p50): tokenizer {st['tokenizer']:.3f}, session.run "
                  f"{st['session.run']:.3f}, pooling {st['pooling']:.3f}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
