"""What the embedding model costs a command's start: `hermes ask` up to the model call, and
`hermes facts search` / `hermes sessions search`, each a fresh process.

    python scripts/bench_startup.py --home /tmp/turnhome     # bench_turn.py's home (or built)
    python scripts/bench_startup.py --quick                  # a 10k-fact / 100k-message home

Cases, each a fresh `python -m hermes` process on the same home:

* *words only*: ``sessions.embeddings: false``;
* *MiniLM* (the default): the model loaded as every later process does, its optimised graph
  read from ``<home>/cache`` (hermes.memory.embeddings.graph_cache);
* *MiniLM, first load*: the cache removed before each run, so the graph is rewritten,
  optimised by onnxruntime and saved (what the first command in a new home pays);
* *MiniLM, a new user*: `hermes ask` for a user with nothing embedded: words only until the
  reply is out (hermes.cli.ask.plan_embeddings).

`hermes ask` stops where litellm starts to load (scripts/bench_turn.py's driver): wall time
from process start, CPU (user + system) and resident memory then (and its peak). The search
commands run to the end: CPU and peak resident memory from the kernel's accounting of the child.

Python's bytecode files are written and used, as in an installed Hermes (a warm-up run first):
an environment with ``PYTHONDONTWRITEBYTECODE`` set compiles every Hermes module at each start,
about 0.1-0.2 s of CPU more (``--no-bytecode`` measures that). On a shared machine the wall
times move with the load; the CPU figures much less.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import bench_turn  # noqa: E402

CASES = {"words only": {"HERMES_SESSIONS__EMBEDDINGS": "false"},
         "MiniLM": {}, "MiniLM, first load": {},
         # a user with nothing embedded (the driver stops before the reply, so it stays so)
         "MiniLM, a new user": {"HERMES_USERS__DEFAULT": "newcomer"}}


def _env(home: Path, extra: dict[str, str], bytecode: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update({"HERMES_HOME": str(home), "HERMES_MODEL__NAME": "openai/gpt-4.1-mini",
                "PYTHONPATH": str(ROOT), **extra})
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def ask_once(env: dict[str, str]) -> dict[str, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", bench_turn.DRIVER, "before litellm"], env=env,
                          cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"the ask driver failed: {done.stderr[-2000:]}")
    data = json.loads(lines[-1])
    return {"wall": wall, "cpu": data["cpu_s"], "rss": data["rss_mb"], "peak": data["peak_mb"]}


def command_once(env: dict[str, str], *args: str) -> dict[str, float]:
    proc = subprocess.Popen([sys.executable, "-m", "hermes", *args], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"hermes {' '.join(args)} failed: {proc.stderr.read().decode()[-2000:]}")
    return {"cpu": usage.ru_utime + usage.ru_stime, "peak": usage.ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="bench_turn's home (built here if missing)")
    parser.add_argument("--quick", action="store_true", help="build a 10k / 100k home")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--no-bytecode", action="store_true",
                        help="set PYTHONDONTWRITEBYTECODE (every module compiled at each start)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hermes-bench-startup-") as tmp:
        home = args.home or Path(tmp) / "home"
        if not (home / "bench-meta.json").exists():
            facts, messages = (10_000, 100_000) if args.quick else (100_000, 1_000_000)
            print(f"building {facts:,} facts and {messages:,} messages in {home} ...",
                  flush=True)
            meta = bench_turn.build_database(home, facts, messages)
            (home / "bench-meta.json").write_text(json.dumps(meta))
        meta = json.loads((home / "bench-meta.json").read_text())
        bytecode = not args.no_bytecode
        print(f"home {home}: {meta['facts']:,} facts, {meta['messages']:,} messages; load "
              f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; bytecode "
              f"{'on' if bytecode else 'off'}\n")
        cache = home / "cache"
        results: dict[str, dict[str, list[dict[str, float]]]] = {}
        searches = {"facts search": ("facts", "search", "postgres database migration"),
                    "sessions search": ("sessions", "search", "postgres database migration")}
        envs = {name: _env(home, extra, bytecode) for name, extra in CASES.items()}
        for env in envs.values():
            ask_once(env)  # warm-up: bytecode written, the cache built, pages in memory
        # Interleaved (each run goes through every case) so that a change in the machine's load
        # falls on all cases alike.
        for _ in range(args.runs):
            for name, env in envs.items():
                rows = results.setdefault(name, {})
                for label, command in [("ask", None), *searches.items()]:
                    if name == "MiniLM, first load":
                        shutil.rmtree(cache, ignore_errors=True)
                    run = ask_once(env) if command is None else command_once(env, *command)
                    rows.setdefault(label, []).append(run)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")

    def med(runs: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print("`hermes ask`, process start until litellm starts to load (median of "
          f"{args.runs})")
    print(f"{'case':22} {'wall s':>7} {'CPU s':>7} {'RSS MB':>7} {'peak MB':>8}")
    for name, rows in results.items():
        runs = rows["ask"]
        print(f"{name:22} {med(runs, 'wall'):7.2f} {med(runs, 'cpu'):7.2f} "
              f"{med(runs, 'rss'):7.1f} {med(runs, 'peak'):8.1f}")
    print("(goal: <= 1.5 s, <= 150 MB)\n")
    print("search commands, whole process: CPU s / peak MB (median)")
    print(f"{'case':22} " + " ".join(f"{label:>22}" for label in searches))
    for name, rows in results.items():
        cells = [f"{med(rows[label], 'cpu'):.2f} s / {med(rows[label], 'peak'):.0f} MB"
                 for label in searches]
        print(f"{name:22} " + " ".join(f"{c:>22}" for c in cells))


if __name__ == "__main__":
    main()
