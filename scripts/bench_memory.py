"""Benchmark the fact store (tier 2) at N = 1k, 10k, 100k, and side by side with the peer.

    python scripts/bench_memory.py            # N = 1k, 10k, 100k; peer at 2k
    python scripts/bench_memory.py --quick    # N = 1k, 5k; peer at 500
    python scripts/bench_memory.py --no-peer

What is measured, per N, on synthetic facts with entities (people, projects, tools):
- add p50/p99: ``FactStore.add`` with dedup and near-duplicate merge, one transaction per call,
  timed on the last ``--samples`` adds (3% of them exact re-adds, which merge).
- search p50/p99 (limit 10), over a mix of queries: tool + object, full names, ticket numbers,
  and natural questions that fall back from strict to the OR of content words.
- probe p50 (limit 10) and probe precision@10 against the generator's ground truth; reason p50
  over (person, project) pairs (limit 20).
- database bytes per fact (file size after a WAL checkpoint / N): facts, FTS index, entities,
  links and history.

Loading: to make 100k feasible in minutes, the first N - samples facts are added through the very
same ``FactStore.add`` (dedup, merge, entities, history) but grouped 5,000 to a transaction; only
the commit per call is saved. The timed adds that follow each commit on their own.

The peer is hermes-agent 0.19.0 (PyPI), its ``MemoryStore`` and ``FactRetriever``. It is installed
with ``--no-deps`` plus numpy and pyyaml into a throwaway venv under the cache directory, and
driven through a subprocess running that venv's python: it is never imported into Hermes. Its
insert is O(N) per category, so it runs at N up to 2k, on the same facts, queries and entities.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hermes.clock import FakeClock  # noqa: E402
from hermes.config import FactsConfig  # noqa: E402
from hermes.memory.facts.store import FactStore  # noqa: E402
from hermes.store.db import connect, write_transaction  # noqa: E402

PEER_VERSION = "0.19.0"
FIRST = """Alice Bob Carol David Erin Frank Grace Henry Irene Jamal Kira Liam Mona Nikhil Olga
Pedro Quinn Rosa Sven Tara Umar Vera Wen Xavier Yara Zoltan Amara Boris Chiara Dmitri Elena Femi
Gustav Hana Ivan Jonas Keiko Lars Maya Noor Oscar Priya Rafael Sofia Tomas Uma Viktor Wanda
Yusuf Zara Anika Bruno Celine Diego Esther Felix Greta Hugo Ines Joel""".split()  # noqa: SIM905
LAST = """Johnson Martinez Nguyen Okafor Schultz Castillo Lindqvist Adeyemi Kowalski Whitaker
Tanaka Moreau Rossi Novak Haddad Petrov Silva Jensen Kim Osei Laine Varga Dubois Costa Murphy
Ivanova Becker Sato Fischer Almeida Horvat Nakamura Svensson Mensah Keller Romero Yilmaz Ortiz
Kaplan Brandt Fontaine Morales Weber Leone Sandoval Bauer Quintero Lund Rahman Novotny Pereira
Hayes Ahmed Berg Cruz Duarte Engel Farah Gallo Holm""".split()  # noqa: SIM905
STARS = """Atlas Borealis Cygnus Dorado Eridanus Fornax Gemini Hydra Indus Lyra Mensa Norma
Orion Pavo Pyxis Sagitta Scutum Taurus Vela Volans Aquila Carina Cetus Corvus Crater Draco Lepus
Lupus Musca Octans Perseus Pictor Puppis Sextans Tucana Ursa Virgo Ara Antlia Apus Caelum
Columba Crux Delphinus Equuleus Grus Hercules Horologium Lacerta Leo Libra Lynx Monoceros
Ophiuchus Pegasus Phoenix Reticulum Sculptor Serpens Triangulum Vulpecula Andromeda Aries
Bootes Cancer Capricorn Centaurus Cepheus Chamaeleon Circinus Coma Corona Auriga Camelopardalis
Canis Cassiopeia""".split()  # noqa: SIM905
TECH = """redis kafka postgres kubernetes terraform python graphql grpc clickhouse rust nginx
ansible prometheus grafana elasticsearch rabbitmq mongodb cassandra spark airflow flink dbt
snowflake bigquery vault consul nomad envoy istio linkerd jenkins gitlab argocd helm pulumi
docker podman containerd etcd zookeeper minio ceph sqlite duckdb pandas numpy pytorch jax
fastapi django flask""".split()  # noqa: SIM905
VERBS = """maintains reviewed migrated benchmarked deployed debugged documented refactored
upgraded monitored rewrote tuned""".split()  # noqa: SIM905
OBJECTS = "service cluster pipeline dashboard migration runbook config alerts".split()  # noqa: SIM905
CATEGORIES = ["project", "tool", "general", "user_pref"]


@dataclass
class Corpus:
    contents: list[str] = field(default_factory=list)
    entities: list[list[str]] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    tags: list[list[str]] = field(default_factory=list)
    people: list[str] = field(default_factory=list)
    projects: list[str] = field(default_factory=list)


def make_corpus(n: int, seed: int = 7) -> Corpus:
    """N synthetic facts; entity pools grow with N so each person has ~25 facts."""
    rng = random.Random(seed)
    people = [f"{f} {last}" for last in LAST for f in FIRST]
    rng.shuffle(people)
    corpus = Corpus(people=people[: min(len(people), max(20, n // 25))],
                    projects=[f"Project {s}" for s in STARS[: min(len(STARS), max(5, n // 200))]])
    for i in range(n):
        if i > 50 and rng.random() < 0.03:  # an exact re-add in other case: merges
            j = rng.randrange(i)
            corpus.contents.append(corpus.contents[j].lower())
            corpus.entities.append(list(corpus.entities[j]))
            corpus.categories.append(corpus.categories[j])
            corpus.tags.append(list(corpus.tags[j]))
            continue
        p, p2 = rng.sample(corpus.people, 2)
        project = rng.choice(corpus.projects)
        tech, tech2 = rng.sample(TECH, 2)
        obj, verb = rng.choice(OBJECTS), rng.choice(VERBS)
        shape = rng.random()
        if shape < 0.5:
            content = f"{p} {verb} the {tech} {obj} for {project} (ticket {i})."
            names = [p, tech, project]
        elif shape < 0.7:
            content = f"{p} prefers {tech} over {tech2} for {obj} work, noted on day {i}."
            names = [p, tech, tech2]
        elif shape < 0.9:
            content = f"{p} and {p2} paired on the {project} {obj} using {tech}, session {i}."
            names = [p, p2, project, tech]
        else:
            content = f"{project} moved its {obj} to {tech} in release {i // 100}.{i % 100}.0."
            names = [project, tech]
        corpus.contents.append(content)
        corpus.entities.append(names)
        corpus.categories.append(CATEGORIES[i % len(CATEGORIES)])
        corpus.tags.append([obj])
    return corpus


def make_queries(corpus: Corpus, count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    queries = []
    for k in range(count):
        kind = k % 4
        if kind == 0:
            queries.append(f"{rng.choice(TECH)} {rng.choice(OBJECTS)}")
        elif kind == 1:
            queries.append(rng.choice(corpus.people))
        elif kind == 2:
            queries.append(f"ticket {rng.randrange(len(corpus.contents))}")
        else:
            queries.append(f"who {rng.choice(VERBS)} the {rng.choice(TECH)} {rng.choice(OBJECTS)}?")
    return queries


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1000


def p50(values: list[float]) -> float:
    return statistics.median(values) * 1000


def precision_at_10(results: list[str], entity: str, truth: dict[str, set[str]]) -> float:
    """Share of returned facts whose generated entities include ``entity``."""
    if not results:
        return 0.0
    return sum(entity in truth.get(c.casefold(), set()) for c in results) / len(results)


def truth_of(corpus: Corpus, n: int) -> dict[str, set[str]]:
    truth: dict[str, set[str]] = {}
    for content, names in zip(corpus.contents[:n], corpus.entities[:n], strict=True):
        truth.setdefault(content.casefold(), set()).update(names)
    return truth


def bench_hermes(corpus: Corpus, n: int, samples: int, queries: list[str], probes: list[str],
                 workdir: Path) -> dict:
    path = workdir / f"hermes-{n}.db"
    db = connect(path)
    clock = FakeClock()
    store = FactStore(db, FactsConfig(), clock)
    samples = min(samples, n)
    bulk = n - samples
    started = time.perf_counter()
    for start in range(0, bulk, 5000):
        with write_transaction(db):
            for i in range(start, min(bulk, start + 5000)):
                clock.advance(seconds=1)
                store.add("owner", corpus.contents[i], entities=corpus.entities[i],
                          category=corpus.categories[i], tags=corpus.tags[i])
    load_seconds = time.perf_counter() - started
    add_times, add_cpu, merged = [], [], 0
    for i in range(bulk, n):
        clock.advance(seconds=1)
        t0, c0 = time.perf_counter(), time.process_time()
        result = store.add("owner", corpus.contents[i], entities=corpus.entities[i],
                           category=corpus.categories[i], tags=corpus.tags[i])
        add_times.append(time.perf_counter() - t0)
        add_cpu.append(time.process_time() - c0)
        merged += result.status == "merged"
    search_times, search_cpu, empty = [], [], 0
    for query in queries:
        t0, c0 = time.perf_counter(), time.process_time()
        found = store.search("owner", query, limit=10)
        search_times.append(time.perf_counter() - t0)
        search_cpu.append(time.process_time() - c0)
        empty += not found
    truth = truth_of(corpus, n)
    probe_times, precisions = [], []
    for entity in probes:
        t0 = time.perf_counter()
        found = store.probe("owner", entity, limit=10)
        probe_times.append(time.perf_counter() - t0)
        precisions.append(precision_at_10([f.content for f in found], entity, truth))
    # exactness: an unlimited probe returns every linked fact
    complete = all(
        len(store.probe("owner", e)) == len({c for c, names in truth.items() if e in names})
        for e in probes[:5]
    )
    # reason over a person and a project that some fact links (the usual question: "what
    # connects Alice and Project Atlas?"), and over random pairs, which mostly need a path
    rng = random.Random(3)
    linked = [names for names in corpus.entities[:n] if names[-1].startswith("Project")]
    reason_times, path_times = [], []
    for _ in range(len(probes)):
        names = rng.choice(linked)
        t0 = time.perf_counter()
        store.reason("owner", [names[0], names[-1]], limit=20)
        reason_times.append(time.perf_counter() - t0)
        pair = [rng.choice(corpus.people), rng.choice(corpus.projects)]
        t0 = time.perf_counter()
        store.reason("owner", pair, limit=20)
        path_times.append(time.perf_counter() - t0)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    rows = db.execute("SELECT count(*) FROM facts").fetchone()[0]
    db.conn.close()
    size = path.stat().st_size
    return {
        "n": n, "rows": rows, "load_s": round(load_seconds, 1), "timed_adds": len(add_times),
        "timed_merged": merged,
        "add_p50_ms": p50(add_times), "add_p99_ms": pct(add_times, 0.99),
        "add_cpu_p50_ms": p50(add_cpu), "search_cpu_p50_ms": p50(search_cpu),
        "reason_path_p50_ms": p50(path_times),
        "search_p50_ms": p50(search_times), "search_p99_ms": pct(search_times, 0.99),
        "search_empty": empty, "probe_p50_ms": p50(probe_times),
        "probe_p_at_10": statistics.mean(precisions), "probe_complete": complete,
        "reason_p50_ms": p50(reason_times), "bytes_per_fact": size / n,
    }


# -- the peer, in its own venv --------------------------------------------------------------

PEER_DRIVER = textwrap.dedent(
    """
    import json, logging, os, sys, tempfile, time
    from pathlib import Path
    spec = json.loads(Path(sys.argv[1]).read_text())
    tmp = Path(tempfile.mkdtemp(prefix="peer-bench-"))
    os.environ["HERMES_HOME"] = str(tmp / "home")   # before the imports: read at import time
    from plugins.memory.holographic.store import MemoryStore
    from plugins.memory.holographic.retrieval import FactRetriever
    logging.getLogger("plugins.memory.holographic.holographic").setLevel(logging.ERROR)
    store = MemoryStore(db_path=tmp / "facts.db", default_trust=0.5)
    retriever = FactRetriever(store)
    add = []
    for content, category, tags in spec["facts"]:
        t0 = time.perf_counter()
        store.add_fact(content, category=category, tags=tags)
        add.append(time.perf_counter() - t0)
    search, search_empty, search_errors = [], 0, 0
    for query in spec["queries"]:
        t0 = time.perf_counter()
        try:
            found = retriever.search(query, limit=10)
        except Exception:
            found, search_errors = [], search_errors + 1
        search.append(time.perf_counter() - t0)
        search_empty += not found
    probe, probe_results = [], []
    for entity in spec["probes"]:
        t0 = time.perf_counter()
        found = retriever.probe(entity, limit=10)
        probe.append(time.perf_counter() - t0)
        probe_results.append([f["content"] for f in found])
    related, related_results = [], []
    for entity in spec["probes"]:
        t0 = time.perf_counter()
        found = retriever.related(entity, limit=10)
        related.append(time.perf_counter() - t0)
        related_results.append([f["content"] for f in found])
    store.close()
    size = (tmp / "facts.db").stat().st_size
    print(json.dumps({"add": add, "search": search, "search_empty": search_empty,
                      "search_errors": search_errors, "probe": probe,
                      "probe_results": probe_results, "related": related,
                      "related_results": related_results, "bytes": size}))
    """
)


def peer_python(cache: Path) -> Path:
    """The peer's venv python, created on first use (pip --no-deps + numpy, pyyaml)."""
    venv = cache / f"peer-hermes-agent-{PEER_VERSION}"
    python = venv / "bin" / "python"
    if python.exists():
        return python
    print(f"creating the peer venv in {venv} ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # pip lists every dependency the peer declares but --no-deps left out: expected, so its
    # output is shown only when an install fails.
    for args in (["--no-deps", f"hermes-agent=={PEER_VERSION}"], ["numpy", "pyyaml"]):
        done = subprocess.run([*pip, *args], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"installing the peer failed:\n{done.stdout}{done.stderr}")
    return python


def bench_peer(python: Path, corpus: Corpus, n: int, queries: list[str], probes: list[str],
               workdir: Path) -> dict:
    spec = {
        "facts": [[c, cat, " ".join(t)] for c, cat, t in
                  zip(corpus.contents[:n], corpus.categories[:n], corpus.tags[:n], strict=True)],
        "queries": queries, "probes": probes,
    }
    spec_path = workdir / "peer-spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HERMES_", "PYTHON"))}
    completed = subprocess.run([str(python), "-c", PEER_DRIVER, str(spec_path)],
                               capture_output=True, text=True, env=env, cwd=workdir, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"peer driver failed:\n{completed.stderr[-3000:]}")
    out = json.loads(completed.stdout.strip().splitlines()[-1])
    truth = truth_of(corpus, n)
    return {
        "n": n,
        "add_p50_ms": p50(out["add"]), "add_p99_ms": pct(out["add"], 0.99),
        "add_last100_mean_ms": statistics.mean(out["add"][-100:]) * 1000,
        "search_p50_ms": p50(out["search"]), "search_p99_ms": pct(out["search"], 0.99),
        "search_empty": out["search_empty"], "search_errors": out["search_errors"],
        "probe_p50_ms": p50(out["probe"]),
        "probe_p_at_10": statistics.mean(precision_at_10(r, e, truth) for r, e in
                                         zip(out["probe_results"], probes, strict=True)),
        "related_p50_ms": p50(out["related"]),
        "related_p_at_10": statistics.mean(precision_at_10(r, e, truth) for r, e in
                                           zip(out["related_results"], probes, strict=True)),
        "bytes_per_fact": out["bytes"] / n,
    }


# -- output ---------------------------------------------------------------------------------


def print_scaling(rows: list[dict]) -> None:
    print("\nHermes fact store (ms wall clock; cpu = process CPU time; probe limit 10, reason "
          "limit 20; reason* = random pairs, mostly via a path)")
    header = (f"{'N':>8} {'add p50':>8} {'(cpu)':>6} {'add p99':>8} {'search p50':>10} "
              f"{'(cpu)':>6} {'search p99':>10} {'probe p50':>9} {'reason p50':>10} "
              f"{'reason*':>8} {'P@10':>5} {'bytes/fact':>10}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['n']:>8,} {r['add_p50_ms']:>8.3f} {r['add_cpu_p50_ms']:>6.2f} "
              f"{r['add_p99_ms']:>8.3f} {r['search_p50_ms']:>10.3f} "
              f"{r['search_cpu_p50_ms']:>6.2f} {r['search_p99_ms']:>10.3f} "
              f"{r['probe_p50_ms']:>9.3f} {r['reason_p50_ms']:>10.3f} "
              f"{r['reason_path_p50_ms']:>8.3f} {r['probe_p_at_10']:>5.2f} "
              f"{r['bytes_per_fact']:>10,.0f}")
    last = rows[-1]
    goals = [("add p50 <= 2 ms", last["add_p50_ms"] <= 2),
             ("search p50 <= 2 ms", last["search_p50_ms"] <= 2),
             ("probe p50 <= 2 ms", last["probe_p50_ms"] <= 2),
             ("probe P@10 = 1.0", last["probe_p_at_10"] == 1.0),
             ("unlimited probe returns every linked fact", last["probe_complete"])]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"goals at N = {last['n']:,}: " + "; ".join(
        f"{name}: {'met' if ok else 'MISSED'}" for name, ok in goals))


def print_peer(ours: dict, peer: dict) -> None:
    print(f"\nSide by side at N = {ours['n']:,}, same facts and queries "
          f"(peer: hermes-agent {PEER_VERSION} MemoryStore + FactRetriever)")
    header = f"{'':<22} {'hermes':>10} {'peer':>10} {'peer/hermes':>12}"
    print(header)
    print("-" * len(header))
    for label, key in [("add p50 (ms)", "add_p50_ms"), ("add p99 (ms)", "add_p99_ms"),
                       ("search p50 (ms)", "search_p50_ms"),
                       ("search p99 (ms)", "search_p99_ms"), ("probe p50 (ms)", "probe_p50_ms"),
                       ("bytes per fact", "bytes_per_fact")]:
        ratio = peer[key] / ours[key] if ours[key] else float("inf")
        print(f"{label:<22} {ours[key]:>10.3f} {peer[key]:>10.3f} {ratio:>11.1f}x")
    print(f"{'probe P@10':<22} {ours['probe_p_at_10']:>10.2f} {peer['probe_p_at_10']:>10.2f}")
    print(f"{'searches with no hit':<22} {ours['search_empty']:>10} {peer['search_empty']:>10}")
    print(f"peer extras: related() p50 {peer['related_p50_ms']:.1f} ms, P@10 "
          f"{peer['related_p_at_10']:.2f}; add mean over its last 100 inserts "
          f"{peer['add_last100_mean_ms']:.1f} ms; search errors {peer['search_errors']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--quick", action="store_true", help="N = 1k, 5k; peer at 500")
    parser.add_argument("--samples", type=int, default=300, help="timed adds per N")
    parser.add_argument("--queries", type=int, default=200, help="search queries per N")
    parser.add_argument("--probes", type=int, default=50, help="probe/reason calls per N")
    parser.add_argument("--peer-n", type=int, default=2000)
    parser.add_argument("--peer-probes", type=int, default=5,
                        help="peer probe is O(N) and slow: entities probed on both sides")
    parser.add_argument("--no-peer", action="store_true")
    parser.add_argument("--cache", type=Path,
                        default=Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
                        / "hermes-bench")
    parser.add_argument("--out", type=Path, default=Path("bench-results/memory.json"))
    args = parser.parse_args()
    sizes = [1000, 5000] if args.quick else [int(s) for s in args.sizes.split(",")]
    peer_n = 500 if args.quick else args.peer_n
    results: dict = {"sizes": [], "peer": None}
    with tempfile.TemporaryDirectory(prefix="hermes-bench-") as tmp:
        workdir = Path(tmp)
        for n in sizes:
            corpus = make_corpus(n)
            queries = make_queries(corpus, args.queries)
            probes = random.Random(5).sample(corpus.people, min(args.probes, len(corpus.people)))
            print(f"N = {n:,} ...", flush=True)
            results["sizes"].append(bench_hermes(corpus, n, args.samples, queries, probes,
                                                 workdir))
        print_scaling(results["sizes"])
        if not args.no_peer:
            corpus = make_corpus(peer_n)
            queries = make_queries(corpus, min(args.queries, 100))
            probes = random.Random(5).sample(corpus.people, args.peer_probes)
            ours = bench_hermes(corpus, peer_n, peer_n, queries, probes, workdir)
            print(f"\npeer at N = {peer_n:,} (its insert is O(N); this takes a while) ...",
                  flush=True)
            peer = bench_peer(peer_python(args.cache), corpus, peer_n, queries, probes, workdir)
            results["peer"] = {"hermes": ours, "peer": peer}
            print_peer(ours, peer)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
