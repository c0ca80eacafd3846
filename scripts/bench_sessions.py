"""Benchmark session search (issue 3): import throughput, search and browse latency, database
size at 10k sessions / 1M messages, and a side-by-side with hermes-agent 0.19.0's
``hermes_state.SessionDB`` on the same messages at a size it can load.

    python scripts/bench_sessions.py            # 10k sessions x 100 messages, peer on 20k
    python scripts/bench_sessions.py --quick    # 1k x 50, peer on 5k: about a minute

The peer is installed into its own throwaway venv (bench-results/peer-venv, ``--no-deps`` plus
numpy and pyyaml) and driven through scripts/peer_sessiondb_driver.py in a subprocess; it is
never imported here. The text is synthetic but varied (topic sentences, a Zipf-distributed
vocabulary, hard strings), generated from a fixed seed; twenty "needle" sessions hold the
answers to twenty natural-language questions, placed among distractors that share their words.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hermes.memory.sessions.store import SessionStore  # noqa: E402
from hermes.memory.sessions.transcripts import import_sessions  # noqa: E402
from hermes.store.db import connect  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results"
PEER_VENV = RESULTS / "peer-venv"
PEER_PACKAGE = "hermes-agent==0.19.0"
PEER_DRIVER = ROOT / "scripts" / "peer_sessiondb_driver.py"
USER = "owner"

# (question a person would ask, the sentence that answers it). Each answer lives in one session.
NEEDLES = [
    ("how did we fix that docker networking issue?",
     "We fixed the Docker networking problem by putting both containers on a user-defined "
     "bridge network instead of the default one."),
    ("when is Maya's birthday?", "My sister Maya's birthday is on the 14th of March; she loves "
     "orchids."),
    ("what router model is at the cabin?", "The cabin router is a TP-Link Archer C7, the wifi "
     "password is on the fridge."),
    ("what did we decide about the database migration?", "Decision: migrate the Postgres "
     "database to version 16 with pg_upgrade --link on Saturday night."),
    ("what's the booking reference for the Lisbon flight?", "Flight to Lisbon leaves 07:40 from "
     "gate B12, booking reference KX9Q2T."),
    ("how do I roll back the deployment?", "To roll back, run kubectl rollout undo "
     "deployment/api-gateway and watch the pods."),
    ("how often should I feed the sourdough starter?", "Feed the sourdough starter twice a day "
     "with equal weights of rye flour and water."),
    ("alice@example.org", "Write to alice@example.org about the invoice dispute."),
    ("which version fixed the file descriptor leak?", "Pin the library to v2.3.1: v2.3.0 leaks "
     "file descriptors under load."),
    ("where is the nginx config for the blog?", "The blog's nginx config lives in "
     "/etc/nginx/sites-available/blog.conf now."),
    ("when is my dentist appointment?", "Dentist appointment moved to Thursday 15:30 with "
     "Dr. Okafor."),
    ("why does the C++ build fail?", "The C++ build fails with -Werror on GCC 14 because of a "
     "dangling-reference warning."),
    ("what tyre pressure does the car need?", "Car tyre pressure: 2.4 bar front, 2.2 bar rear."),
    ("why did we pick Hetzner for backups?", "We chose Hetzner over DigitalOcean for backups "
     "because the storage boxes are much cheaper."),
    ("what caused the nightly disk latency spikes?", "The disk latency spikes every night at "
     "02:00 were caused by the ZFS scrub."),
    ("what is my half marathon goal?", "Running goal: a half-marathon under 1:45 in April."),
    ("what happened to the tomatoes in the greenhouse?", "The greenhouse tomatoes got blight, "
     "so we sprayed copper fungicide."),
    ("state-of-the-art reranking", "The state-of-the-art approach we tried was retrieval with "
     "reranking."),
    ("东京的酒店", "我们在东京的酒店是新宿华盛顿酒店，离车站很近。"),
    ("when is the quarterly tax payment due?", "The quarterly tax payment of 1,250 euros is due "
     "on the 15th."),
]
# Keyword-style queries for latency: common and rare words, phrases, hard strings.
KEYWORD_QUERIES = [
    "docker", "postgres backup", "kubernetes rollout", '"bridge network"', "birthday present",
    "v2.3.1", "/etc/nginx/sites-available/blog.conf", "C++", "vacation Lisbon", "zfs scrub",
    "grafana dashboard", "disk usage report", "the", "deployment failed", "garden compost",
    "invoice", "what was that thing about the router", "sprint-12", "tax", "marathon training",
]

TOPICS = {
    "docker": ["the {x} container keeps restarting", "docker compose pulls the {x} image",
               "network {x} cannot reach the database", "we rebuilt the {x} image with buildx",
               "the docker network bridge drops packets from {x}"],
    "postgres": ["the postgres database {x} table is bloated", "vacuum on {x} took an hour",
                 "a migration adds the {x} column", "backup of the {x} database finished",
                 "the query planner ignores the {x} index"],
    "kubernetes": ["the {x} pod is in CrashLoopBackOff", "deployment {x} rolled out to staging",
                   "helm chart for {x} needs a bump", "ingress for {x} returns 502",
                   "the rollout of {x} was paused"],
    "travel": ["the train to {x} leaves early", "hotel near {x} looks nice",
               "passport renewal before the {x} trip", "cheap flights to {x} in spring",
               "booking for {x} confirmed"],
    "cooking": ["the {x} recipe needs more salt", "bake {x} bread at 230 degrees",
                "dinner with {x} on Friday", "the {x} soup freezes well",
                "buy flour and {x} at the market"],
    "finance": ["the {x} invoice is overdue", "tax return for {x} is filed",
                "budget for {x} went over", "the {x} subscription renews monthly",
                "payment to {x} bounced"],
    "garden": ["planted {x} seedlings in the greenhouse", "the compost heap is full of {x}",
               "water the {x} twice a week", "slugs ate the {x}", "prune the {x} in winter"],
    "fitness": ["ran 10 km along the {x} trail", "the {x} training plan is hard",
                "knee hurts after {x}", "gym session focused on {x}",
                "marathon pace for {x} is too fast"],
    "homelab": ["the {x} server fans are loud", "disk usage on {x} is at 80%",
                "the router for {x} needs a firmware update", "grafana shows {x} latency",
                "backup job for {x} ran at night"],
    "family": ["birthday present ideas for {x}", "call {x} on Sunday",
               "{x} visits next month", "the school trip for {x} costs 40 euros",
               "dentist for {x} on Tuesday"],
}
CRON_TEMPLATES = ["Backup report: {x} finished, {n} GB copied", "Disk usage report: {x} at {n}%",
                  "Daily digest: {n} new items about {x}", "Reminder: {x} is due in {n} days"]
HARD_BITS = ["bob@example.com", "https://example.com/docs?id={n}", "v{n}.{n}.0",
             "/var/log/{x}.log", "sprint-{n}", "state-of-the-art", "C#", "x86_64", "{x}-{x}"]
ROLES = ["user", "assistant"]


def _vocabulary(rng: random.Random, size: int) -> tuple[list[str], list[float]]:
    syllables = ["ka", "lo", "mi", "ne", "ra", "to", "vu", "shi", "pe", "dor", "lin", "bar",
                 "qui", "zen", "fa", "gro", "tal", "wes", "yo", "an", "el", "ost", "ric", "um"]
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    ordered = sorted(words)
    rng.shuffle(ordered)
    cumulative, total = [], 0.0
    for rank in range(len(ordered)):
        total += 1.0 / (rank + 1) ** 1.05
        cumulative.append(total)
    return ordered, cumulative


@dataclass
class Corpus:
    path: Path
    peer_path: Path
    sessions: int
    messages: int
    peer_messages: int
    needle_sessions: dict[str, str]  # question -> session external id
    seconds: float


def generate(workdir: Path, sessions: int, per_session: int, peer_sessions: int,
             seed: int = 7) -> Corpus:
    """Write the transcripts (JSON Lines), deterministic for a seed; the first ``peer_sessions``
    lines also go to the peer's file, and every needle lives in those."""
    started = time.perf_counter()
    rng = random.Random(seed)
    words, cumulative = _vocabulary(rng, 20_000)
    topics = list(TOPICS)
    base = datetime(2024, 12, 1, tzinfo=UTC)
    span = 730 * 24 * 3600
    needle_at = {(i * 7 + 3) % peer_sessions: i for i in range(len(NEEDLES))}
    needle_sessions: dict[str, str] = {}
    path, peer_path = workdir / "sessions.jsonl", workdir / "peer-sessions.jsonl"
    total = peer_total = 0
    with path.open("w", encoding="utf-8") as out, peer_path.open("w", encoding="utf-8") as peer:
        for s in range(sessions):
            external_id = f"s{s:06d}"
            source = rng.choices(["terminal", "discord", "cron", "import"], [45, 40, 10, 5])[0]
            topic = rng.choice(topics)
            when = base + timedelta(seconds=rng.randrange(span))
            count = max(2, int(rng.gauss(per_session, per_session / 4)))
            fill = rng.choices(words, cum_weights=cumulative, k=count * 14)
            msgs = []
            for m in range(count):
                x = fill[m * 14]
                if source == "cron":
                    text = rng.choice(CRON_TEMPLATES).format(x=topic + " " + x,
                                                             n=rng.randint(1, 99))
                else:
                    text = rng.choice(TOPICS[topic]).format(x=x)
                    if rng.random() < 0.35:
                        text += " and " + rng.choice(TOPICS[rng.choice(topics)]).format(x=x)
                filler = " ".join(fill[m * 14 + 1 : m * 14 + rng.randint(4, 14)])
                text = f"{text[0].upper()}{text[1:]}, {filler}."
                if rng.random() < 0.05:
                    text += " See " + rng.choice(HARD_BITS).format(x=x, n=rng.randint(1, 99))
                msgs.append({"role": "assistant" if source == "cron" else ROLES[m % 2],
                             "content": text,
                             "created_at": (when + timedelta(minutes=2 * m)).isoformat(),
                             "external_id": f"{external_id}:{m}"})
            if s in needle_at:
                question, answer = NEEDLES[needle_at[s]]
                slot = rng.randrange(1, len(msgs))
                msgs[slot] = {**msgs[slot], "role": "user" if slot % 2 == 0 else "assistant",
                              "content": answer}
                needle_sessions[question] = external_id
                source = "discord"
            record = {"source": source, "started_at": when.isoformat(), "external_id": external_id,
                      "messages": msgs}
            if rng.random() < 0.3:
                record["title"] = f"{topic} {fill[1]} {fill[2]}"
            line = json.dumps(record, ensure_ascii=False) + "\n"
            out.write(line)
            total += count
            if s < peer_sessions:
                peer.write(line)
                peer_total += count
    return Corpus(path, peer_path, sessions, total, peer_total, needle_sessions,
                  time.perf_counter() - started)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def read(path: Path):
    with path.open(encoding="utf-8") as handle:
        yield from handle


def hermes_import(db_path: Path, source: Path) -> tuple[SessionStore, float, int]:
    store = SessionStore(connect(db_path))
    started = time.perf_counter()
    report = import_sessions(store, USER, read(source))
    seconds = time.perf_counter() - started
    assert report.ok, report.errors[:3]
    return store, seconds, report.messages_added


def db_bytes(store: SessionStore, path: Path) -> int:
    store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def hermes_queries(store: SessionStore, queries: list[str], repeats: int) -> dict[str, dict]:
    results = {}
    for query in queries:
        times, hits = [], []
        for _ in range(repeats):
            t0 = time.perf_counter()
            hits = store.search(USER, query, limit=5)
            times.append((time.perf_counter() - t0) * 1000)
        results[query] = {"times_ms": times, "hits": len(hits),
                          "sessions": [h.session.external_id for h in hits],
                          "mode": hits[0].mode if hits else "none"}
    return results


def browse(store: SessionStore, repeats: int) -> list[float]:
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        if i % 3 == 0:
            store.list_sessions(USER, limit=20)
        elif i % 3 == 1:
            store.list_sessions(USER, source="cron", limit=20)
        else:
            store.list_sessions(USER, since="2026-06-01T00:00:00.000000Z", limit=50)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def ensure_peer_venv() -> Path:
    python = PEER_VENV / "bin" / "python"
    if python.exists():
        return python
    print(f"installing {PEER_PACKAGE} into {PEER_VENV} (--no-deps + numpy pyyaml) ...",
          file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "--no-deps", PEER_PACKAGE], check=True)
    subprocess.run([*pip, "numpy", "pyyaml"], check=True)
    return python


def run_peer(corpus: Corpus, queries: list[str], repeats: int, workdir: Path) -> dict:
    python = ensure_peer_venv()
    job = {"workdir": str(workdir / "peer"), "sessions_file": str(corpus.peer_path),
           "queries": queries, "repeats": repeats}
    completed = subprocess.run([str(python), str(PEER_DRIVER)], input=json.dumps(job),
                               capture_output=True, text=True, check=False, cwd=workdir)
    if completed.returncode != 0:
        raise SystemExit(f"peer driver failed:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def speed(ours: float, theirs: float) -> str:
    """Hermes's time against the peer's, as a ratio a reader does not have to invert."""
    if ours <= 0 or theirs <= 0:
        return "n/a"
    if ours <= theirs:
        return f"Hermes {theirs / ours:.1f}x faster"
    return f"Hermes {ours / theirs:.1f}x slower"


def answered(results: dict[str, dict], needles: dict[str, str]) -> tuple[int, int]:
    """(questions with any hit, questions whose answer session is among the top 5)."""
    any_hit = sum(1 for q in needles if results[q]["hits"] > 0)
    right = sum(1 for q, sid in needles.items() if sid in results[q]["sessions"][:5])
    return any_hit, right


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1k sessions x 50 messages; "
                        "the peer on 5k messages")
    parser.add_argument("--sessions", type=int, default=None)
    parser.add_argument("--per-session", type=int, default=None)
    parser.add_argument("--peer-sessions", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--no-peer", action="store_true")
    args = parser.parse_args()
    sessions = args.sessions or (1000 if args.quick else 10_000)
    per_session = args.per_session or (50 if args.quick else 100)
    peer_sessions = args.peer_sessions or (100 if args.quick else 200)
    repeats = args.repeats or (3 if args.quick else 5)
    queries = [q for q, _ in NEEDLES] + KEYWORD_QUERIES
    RESULTS.mkdir(exist_ok=True)

    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as tmp:
        workdir = Path(tmp)
        corpus = generate(workdir, sessions, per_session, peer_sessions)
        print(f"generated {corpus.sessions:,} sessions / {corpus.messages:,} messages in "
              f"{corpus.seconds:.1f} s", file=sys.stderr)

        # -- the full size, Hermes only --------------------------------------------------------
        big_path = workdir / "big" / "hermes.db"
        store, import_s, imported = hermes_import(big_path, corpus.path)
        print(f"imported in {import_s:.1f} s", file=sys.stderr)
        big = hermes_queries(store, queries, repeats)
        big_times = [t for r in big.values() for t in r["times_ms"]]
        browse_times = browse(store, 60)
        size = db_bytes(store, big_path)
        big_any, big_right = answered(big, corpus.needle_sessions)
        store.db.conn.close()

        # -- side by side on the peer's share of the same messages -----------------------------
        small_path = workdir / "small" / "hermes.db"
        small_store, small_import_s, _ = hermes_import(small_path, corpus.peer_path)
        small = hermes_queries(small_store, queries, repeats)
        small_size = db_bytes(small_store, small_path)
        small_store.db.conn.close()
        peer = None if args.no_peer else run_peer(corpus, queries, repeats, workdir)

    ours_any, ours_right = answered(small, corpus.needle_sessions)
    ours_small = [t for r in small.values() for t in r["times_ms"]]
    lines = []

    def row(label: str, value: str) -> None:
        lines.append(f"| {label} | {value} |")

    lines.append(f"Hermes at {corpus.sessions:,} sessions / {imported:,} messages")
    lines.append("")
    lines.append("| measure | value |")
    lines.append("|---|---|")
    row("import", f"{import_s:.1f} s ({imported / import_s:,.0f} messages/s)")
    row("search p50 / p99", f"{percentile(big_times, .5):.1f} ms / "
        f"{percentile(big_times, .99):.1f} ms ({len(queries)} queries x {repeats})")
    row("browse p50 / p99", f"{percentile(browse_times, .5):.2f} ms / "
        f"{percentile(browse_times, .99):.2f} ms")
    row("database size", f"{size / 1e6:,.0f} MB ({size / imported:,.0f} bytes/message)")
    row("questions answered (any hit / right session in top 5)",
        f"{big_any}/{len(NEEDLES)} / {big_right}/{len(NEEDLES)}")
    slowest = sorted(big.items(), key=lambda kv: -statistics.median(kv[1]["times_ms"]))[:3]
    row("slowest queries (median)", "; ".join(
        f"{q!r} {statistics.median(r['times_ms']):.0f} ms" for q, r in slowest))
    lines.append("")
    if peer is not None:
        peer_times = [t for r in peer["results"] for t in r["times_ms"]]
        peer_results = {r["query"]: r for r in peer["results"]}
        peer_any, peer_right = answered(peer_results, corpus.needle_sessions)
        errors = sum(1 for r in peer["results"] if r["error"])
        o50, p50 = percentile(ours_small, .5), percentile(peer_times, .5)
        o99, p99 = percentile(ours_small, .99), percentile(peer_times, .99)
        # A fair latency comparison: only the queries for which both return something.
        both = [q for q in queries if small[q]["hits"] and peer_results[q]["hits"]]
        ob = percentile([t for q in both for t in small[q]["times_ms"]], .5) if both else 0.0
        pb = percentile([t for q in both for t in peer_results[q]["times_ms"]], .5) \
            if both else 0.0
        lines.append(f"Side by side on the same {corpus.peer_messages:,} messages "
                     f"({peer_sessions} sessions)")
        lines.append("")
        lines.append("| measure | Hermes | hermes-agent 0.19.0 SessionDB | ratio |")
        lines.append("|---|---|---|---|")
        lines.append(f"| load | {small_import_s:.1f} s | {peer['load_seconds']:.1f} s | "
                     f"{speed(small_import_s, peer['load_seconds'])} |")
        lines.append(f"| search p50, all {len(queries)} queries | {o50:.2f} ms | {p50:.2f} ms | "
                     f"{speed(o50, p50)} |")
        lines.append(f"| search p99, all queries | {o99:.2f} ms | {p99:.2f} ms | "
                     f"{speed(o99, p99)} |")
        if both:
            lines.append(f"| search p50, the {len(both)} queries both answer | {ob:.2f} ms | "
                         f"{pb:.2f} ms | {speed(ob, pb)} |")
        lines.append(f"| questions with any hit | {ours_any}/{len(NEEDLES)} | "
                     f"{peer_any}/{len(NEEDLES)} | {ours_any / max(peer_any, 1):.1f}x |")
        lines.append(f"| right session in top 5 | {ours_right}/{len(NEEDLES)} | "
                     f"{peer_right}/{len(NEEDLES)} | {ours_right / max(peer_right, 1):.1f}x |")
        ours_none = sum(1 for q in queries if not small[q]["hits"])
        theirs_none = sum(1 for q in queries if not peer_results[q]["hits"])
        lines.append(f"| queries returning nothing (of {len(queries)}) | {ours_none} | "
                     f"{theirs_none} (raised: {errors}) | |")
        lines.append(f"| database size | {small_size / 1e6:.1f} MB | "
                     f"{peer['db_bytes'] / 1e6:.1f} MB | |")
        lines.append("")
        lines.append("Per question (right session in top 5): Hermes / peer")
        for question, sid in corpus.needle_sessions.items():
            ours = "yes" if sid in small[question]["sessions"][:5] else "no"
            theirs = "yes" if sid in peer_results[question]["sessions"][:5] else "no"
            lines.append(f"  {ours:3s} / {theirs:3s}  {question}")
    print("\n".join(lines))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = RESULTS / f"bench_sessions-{'quick-' if args.quick else ''}{stamp}.json"
    out.write_text(json.dumps({
        "sessions": corpus.sessions, "messages": imported, "import_seconds": import_s,
        "search_ms": {"p50": percentile(big_times, .5), "p99": percentile(big_times, .99)},
        "browse_ms": {"p50": percentile(browse_times, .5)}, "db_bytes": size,
        "queries": {q: {**r, "median_ms": statistics.median(r["times_ms"])}
                    for q, r in big.items()},
        "side_by_side": {"hermes": small, "peer": peer},
        "table": lines,
    }, indent=2, ensure_ascii=False))
    print(f"\n(wrote {out.relative_to(ROOT)})", file=sys.stderr)


if __name__ == "__main__":
    main()
