"""Benchmark the turn engine (issue 4): prompt assembly on a large memory, `hermes ask` start-up.

    python scripts/bench_turn.py            # 100k facts, 1M messages (a few minutes to build)
    python scripts/bench_turn.py --quick    # 10k facts, 100k messages

1. **Prompt assembly**: everything a turn does before the model call, on a database holding
   N facts and M messages for the user (plus another user's rows): read the session so far,
   search the fact store for the new message, render basic memory, read the context file, build
   the messages. p50/p99 over varied messages. Goal: p50 <= 10 ms.
2. **`hermes ask` start-up**: a fresh `python -m hermes ask "..."` process on that home, stopped
   at the moment litellm starts to load (the first thing the model call needs): wall time from
   process start, CPU time, and resident memory. Goal: <= 1.5 s and <= 150 MB. Also shown: the
   same without pandas (present in the shared dev venv, absent from a clean install;
   sqlite-utils imports it when present), and with litellm loaded, for scale. On a busy
   machine the wall time inflates; the CPU time does not.

Each fact cites two messages of one of its user's sessions, as a learned fact does, so fact
search pays for the exchange text m018 indexes with it; ``--facts-without-sources`` builds the
facts of before (no exchange), on the same texts.

The text is synthetic (a Zipf-distributed vocabulary and topic sentences, fixed seed). Results
are printed as tables and written to bench-results/bench_turn.json.
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
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.agent.prompt import PromptBuilder  # noqa: E402
from hermes.clock import FakeClock, to_ts  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.memory import context as context_file  # noqa: E402
from hermes.memory.basic import BasicMemory  # noqa: E402
from hermes.memory.facts.store import content_key  # noqa: E402
from hermes.memory.sessions.store import Message  # noqa: E402
from hermes.runtime import Runtime  # noqa: E402

RESULTS = ROOT / "bench-results"
USER = "owner"
OTHER = "someone-else"
START = datetime(2026, 1, 1, tzinfo=UTC)

TOPICS = [
    "postgres database migration", "kubernetes cluster upgrade", "home lab network vlan",
    "garden shed woodwork", "sourdough starter feeding", "flight booking lisbon",
    "docker container networking", "python packaging release", "tax return paperwork",
    "marathon training plan", "grafana dashboard alerts", "family birthday presents",
    "nginx reverse proxy tls", "rust borrow checker errors", "camera firmware update",
    "budget spreadsheet categories", "backup rotation restic", "piano practice schedule",
]
FILLER = [
    "we", "should", "check", "whether", "the", "new", "setup", "still", "works", "after", "the",
    "change", "and", "note", "what", "happened", "last", "time", "so", "that", "nothing",
    "breaks", "again", "when", "we", "try", "it", "next", "week",
]


def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 10))))
    return sorted(words)


_ZIPF: list[float] = []


def zipf_words(rng: random.Random, vocab: list[str], n: int) -> list[str]:
    # Zipf's law (s = 1): the word of rank r has weight 1/r; the commonest is ~11% of draws.
    if len(_ZIPF) != len(vocab):
        total = 0.0
        _ZIPF.clear()
        for rank in range(1, len(vocab) + 1):
            total += 1 / rank
            _ZIPF.append(total)
    return rng.choices(vocab, cum_weights=_ZIPF, k=n)


def sentence(rng: random.Random, vocab: list[str], topic: str) -> str:
    """A chatty message: topic words, rarer words and everyday filler."""
    words = zipf_words(rng, vocab, 8) + rng.sample(FILLER, 6) + topic.split()
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def fact_text(rng: random.Random, vocab: list[str], topic: str, i: int) -> str:
    """A fact: a short self-contained statement about a topic (no chatter)."""
    return f"{topic.capitalize()}: {' '.join(zipf_words(rng, vocab, 6))} (note {i})."


def question(rng: random.Random, vocab: list[str], topic: str) -> str:
    """What a user asks: a couple of topic words, a few rarer words, filler, stopwords."""
    words = rng.sample(topic.split(), 2) + zipf_words(rng, vocab, 3) + rng.sample(FILLER, 4)
    rng.shuffle(words)
    return "what about the " + " ".join(words) + "?"


def build_database(home: Path, n_facts: int, n_messages: int, seed: int = 7, *,
                   sources: bool = True) -> dict:
    rng = random.Random(seed)
    vocab = vocabulary(rng)
    settings = load_settings(home=home, environ={})
    rt = Runtime(settings, clock=FakeClock("2026-11-29T12:00:00+00:00"))
    db = rt.db
    started = time.perf_counter()
    # Facts: 90% for the user, 10% for another user (scoping must hold under load). Written
    # after the messages: each cites two messages of one of its user's sessions, as a learned
    # fact does (m018 indexes their text as the fact's exchange); --facts-without-sources
    # builds facts that cite none. The same texts either way.
    rows = []
    for i in range(n_facts):
        topic = rng.choice(TOPICS)
        text = fact_text(rng, vocab, topic, i)
        ts = to_ts(START + timedelta(minutes=i))
        user = OTHER if i % 10 == 9 else USER
        rows.append((user, text, content_key(text), "general", "semantic", "[]", topic, 0.5,
                     ts, ts))
    facts_s = time.perf_counter() - started
    # Sessions of 100 messages each; the last one is the conversation under test.
    per_session = 100
    n_sessions = max(1, n_messages // per_session)
    started = time.perf_counter()
    with db.conn:
        for s in range(n_sessions):
            user = OTHER if s % 10 == 9 else USER
            ts0 = START + timedelta(hours=s)
            cursor = db.conn.execute(
                "INSERT INTO sessions (user, source, channel_key, title, started_at, "
                "last_active_at, ended_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [user, rng.choice(["discord", "terminal", "cron"]), f"bench:{s}",
                 rng.choice(TOPICS), to_ts(ts0), to_ts(ts0), to_ts(ts0 + timedelta(hours=1))])
            session_id = cursor.lastrowid
            topic = rng.choice(TOPICS)
            db.conn.executemany(
                "INSERT INTO messages (session_id, user, role, content, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                [(session_id, user, "user" if m % 2 == 0 else "assistant",
                  sentence(rng, vocab, topic), to_ts(ts0 + timedelta(seconds=m)))
                 for m in range(per_session)])
    messages_s = time.perf_counter() - started
    started = time.perf_counter()
    cite = random.Random(seed + 1)
    sessions_of = {u: [i for i, (s_user,) in enumerate(db.execute(
        "SELECT user FROM sessions ORDER BY id").fetchall()) if s_user == u] for u in (USER, OTHER)}
    cited = []
    for row in rows:
        owned = sessions_of[row[0]]
        if not sources or not owned:
            cited.append("[]")
            continue
        first = 1 + cite.choice(owned) * per_session + cite.randrange(per_session - 1)
        cited.append(json.dumps([first, first + 1]))
    with db.conn:
        db.conn.executemany(
            "INSERT INTO facts (user, content, content_key, category, kind, tags, entity_names, "
            "trust, created_at, updated_at, source_message_ids) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(*r, c) for r, c in zip(rows, cited, strict=True)])
    facts_s += time.perf_counter() - started
    store = rt.memory.sessions
    current = store.create(USER, "terminal", channel_key="bench:current")
    for m in range(20):
        store.append(USER, current.id, "user" if m % 2 == 0 else "assistant",
                     sentence(rng, vocab, rng.choice(TOPICS)))
    basic = BasicMemory(db, clock=rt.clock)
    for i in range(40):
        basic.add(USER, f"Standing preference number {i}: {sentence(rng, vocab, 'misc')}"[:180])
    context_file.write_atomic(context_file.path_for(rt, USER),
                              "# Recent context\n" + "\n".join(
                                  f"- {sentence(rng, vocab, t)}" for t in TOPICS)[:3800])
    db.execute("ANALYZE")
    rt.close()
    return {"facts": n_facts, "facts_cite_messages": sources,
            "messages": n_sessions * per_session + 20,
            "sessions": n_sessions + 1, "current_session": current.id,
            "build_facts_s": round(facts_s, 1), "build_messages_s": round(messages_s, 1),
            "db_mb": round((home / "hermes.db").stat().st_size / 1e6, 1)}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def as_message(text: str) -> Message:
    return Message(id=1 << 40, session_id=0, role="user", speaker=None, content=text,
                   created_at="2026-11-29T12:00:00.000000Z")


def bench_assembly(home: Path, session_id: int, runs: int, seed: int = 11) -> dict:
    rng = random.Random(seed)
    vocab = vocabulary(random.Random(7))
    rt = Runtime(load_settings(home=home, environ={}))
    builder = PromptBuilder(rt.memory)
    store = rt.memory.sessions
    queries = [question(rng, vocab, rng.choice(TOPICS)) for _ in range(runs)]
    # The worst case: a long chatty message whose words hit a large share of the facts.
    worst = [" ".join(rng.sample(TOPICS, 4)) + " " + sentence(rng, vocab, rng.choice(TOPICS))
             for _ in range(max(20, runs // 10))]
    results: dict[str, list[float]] = {"later turn": [], "first turn (+ context file)": [],
                                       "worst case: 5 topics at once": []}
    # CPU time as well: on a shared, loaded machine the wall time inflates, the CPU time less.
    cpu: dict[str, list[float]] = {label: [] for label in results}
    shown = []
    cases = (("later turn", False, queries), ("first turn (+ context file)", True, queries),
             ("worst case: 5 topics at once", False, worst))
    for label, first, texts in cases:
        # A later turn extends the session's conversation (its snapshot taken once, at the
        # start); a first turn takes the snapshot (persona, basic memory, context file).
        conversation = builder.start(USER, store.messages(USER, session_id))
        for query in texts[:5]:  # warm the page cache
            builder.build(USER, query, [*store.messages(USER, session_id), as_message(query)],
                          first_turn=first)
        for query in texts:
            started, cpu_started = time.perf_counter(), time.process_time()
            if first:
                history = store.messages(USER, session_id)
                prompt = builder.build(USER, query, [*history, as_message(query)],
                                       first_turn=True)
            else:
                unsent = store.messages(USER, session_id, after_id=conversation.through)
                prompt = builder.compose(USER, query, conversation, [*unsent, as_message(query)])
            results[label].append((time.perf_counter() - started) * 1000)
            cpu[label].append((time.process_time() - cpu_started) * 1000)
            shown.append(len(prompt.shown_facts))
            # Each query is a new message on the same conversation; recalled facts are not
            # repeated within a conversation, so start clean for the next measurement.
            conversation.shown_facts.clear()
            assert all(f.user == USER for f in prompt.shown_facts)
    rt.close()
    table = {label: {"p50_ms": round(statistics.median(v), 2),
                     "p99_ms": round(percentile(v, 0.99), 2),
                     "cpu_p50_ms": round(statistics.median(cpu[label]), 2), "runs": len(v)}
             for label, v in results.items()}
    table["mean_facts_shown"] = round(statistics.mean(shown), 1)
    return table


DRIVER = r"""
import json, os, resource, sys, time
MODE = sys.argv[1]
if MODE == "clean-install":
    # pandas is in the shared venv for other tools, not a Hermes dependency; a clean install
    # has none, and sqlite-utils imports it only when present. (numpy is a dependency since
    # hybrid recall is on by default: blocking it would measure words-only recall instead.)
    sys.modules["pandas"] = None
import hermes.agent.llm as llm

def rss_mb(field):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return -1.0

original = llm.load_litellm
def report_and_exit():
    if MODE == "with-litellm":
        original()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"rss_mb": rss_mb("VmRSS"), "peak_mb": rss_mb("VmHWM"),
                      "cpu_s": usage.ru_utime + usage.ru_stime,
                      "litellm_loaded": "litellm" in sys.modules}), flush=True)
    os._exit(0)
llm.load_litellm = report_and_exit
from hermes.cli import main
sys.argv = ["hermes", "ask", "what did we decide about the postgres database migration?"]
main()
"""


def bench_startup(home: Path, repeats: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update({"HERMES_HOME": str(home), "HERMES_MODEL__NAME": "openai/gpt-4.1-mini",
                "PYTHONPATH": str(ROOT)})
    out: dict[str, dict] = {}
    for mode in ("before litellm", "clean-install", "with-litellm"):
        walls, rss, peak, cpu = [], [], [], []
        for _ in range(repeats):
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", DRIVER, mode], env=env, cwd=ROOT,
                                  capture_output=True, text=True, check=False)
            walls.append(time.perf_counter() - started)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if not lines:
                raise SystemExit(f"driver failed: {done.stderr[-2000:]}")
            data = json.loads(lines[-1])
            rss.append(data["rss_mb"])
            cpu.append(data["cpu_s"])
            peak.append(data["peak_mb"])
        out[mode] = {"wall_s_median": round(statistics.median(walls), 2),
                     "wall_s_max": round(max(walls), 2),
                     "cpu_s_median": round(statistics.median(cpu), 2),
                     "rss_mb": round(statistics.median(rss), 1),
                     "peak_rss_mb": round(statistics.median(peak), 1), "runs": repeats}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10k facts, 100k messages")
    parser.add_argument("--home", type=Path, help="reuse (or build) the bench home here")
    parser.add_argument("--facts", type=int, help="override the number of facts")
    parser.add_argument("--messages", type=int, help="override the number of messages")
    parser.add_argument("--facts-without-sources", action="store_true",
                        help="facts that cite no messages (no exchange text, as before m018)")
    parser.add_argument("--no-startup", action="store_true", help="skip the process start-up part")
    args = parser.parse_args()
    n_facts, n_messages = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
    n_facts = args.facts or n_facts
    n_messages = args.messages or n_messages
    runs = 200 if args.quick else 500
    with tempfile.TemporaryDirectory(prefix="hermes-bench-turn-") as tmp:
        home = args.home or Path(tmp) / "home"
        meta_file = home / "bench-meta.json"
        if meta_file.exists():
            meta = json.loads(meta_file.read_text())
        else:
            print(f"building {n_facts:,} facts and {n_messages:,} messages in {home} ...",
                  flush=True)
            meta = build_database(home, n_facts, n_messages,
                                  sources=not args.facts_without_sources)
            meta_file.write_text(json.dumps(meta))
        print(f"database: {meta['facts']:,} facts, {meta['messages']:,} messages in "
              f"{meta['sessions']:,} sessions, {meta['db_mb']} MB (built in "
              f"{meta['build_facts_s']} + {meta['build_messages_s']} s; facts cite "
              f"messages: {meta.get('facts_cite_messages', False)})\n")
        assembly = bench_assembly(home, meta["current_session"], runs)
        print("prompt assembly (session read + recall + basic memory + context + messages)")
        print(f"{'case':32} {'p50 ms':>8} {'p99 ms':>8} {'CPU p50':>8} {'runs':>6}")
        for label, row in assembly.items():
            if isinstance(row, dict):
                print(f"{label:32} {row['p50_ms']:>8} {row['p99_ms']:>8} "
                      f"{row['cpu_p50_ms']:>8} {row['runs']:>6}")
        print(f"(facts shown per prompt, mean: {assembly['mean_facts_shown']}; "
              "goal p50 <= 10 ms)\n")
        startup = {} if args.no_startup else bench_startup(home, repeats=3 if args.quick else 5)
        print("`hermes ask` process, from exec to the model call")
        print(f"{'stopped at':40} {'wall s':>7} {'max s':>7} {'CPU s':>7} {'RSS MB':>7}")
        names = {"before litellm": "litellm about to load",
                 "clean-install": "litellm about to load, no pandas",
                 "with-litellm": "litellm loaded (for scale)"}
        for label, row in startup.items():
            print(f"{names[label]:40} {row['wall_s_median']:>7} {row['wall_s_max']:>7} "
                  f"{row['cpu_s_median']:>7} {row['rss_mb']:>7}")
        print("(goal before litellm: <= 1.5 s, <= 150 MB)")
    RESULTS.mkdir(exist_ok=True)
    report = {"quick": args.quick, "database": meta, "assembly": assembly, "startup": startup,
              "python": sys.version.split()[0], "at": datetime.now(UTC).isoformat()}
    (RESULTS / "bench_turn.json").write_text(json.dumps(report, indent=2))
    print(f"\nwrote {RESULTS / 'bench_turn.json'}")


if __name__ == "__main__":
    main()
