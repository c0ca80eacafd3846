"""Whole-process figures for the command line: `hermes ask` with a daemon running and cold,
`hermes run` from start to ready (and its resident memory once idle), and the CPU of memory
commands.

    python scripts/bench_cli.py            # 5 runs of each
    python scripts/bench_cli.py --runs 10 --provider-delay 0.3
    python scripts/bench_cli.py --against /tmp/main-checkout    # A/B, runs interleaved
    python scripts/bench_cli.py --against /tmp/main-checkout --memory-only --runs 10

With ``--against TREE`` every case also runs the Hermes of another checkout (``python -m
hermes`` with that tree first on the path, this virtual environment), one run of each tree in
turn, so that both see the same load; the figures are printed per tree, and the memory
commands side by side with the ratio (this tree / the other). ``--memory-only`` measures only
those: `memory show`, `facts search`, `sessions search`, with no daemon and then answered by
a running daemon (each tree's own, both running during the interleaved runs; a tree whose
command has no daemon call answers in-process, as it would).

The provider is a scripted OpenAI-compatible HTTP server on 127.0.0.1 in this process: it waits
``--provider-delay`` seconds after a request arrives, then streams its reply. Its own time to
first token is measured from the request's arrival; Hermes's overhead is the time from starting
the `hermes ask` process to its first token on stdout, minus that. Goals (issue 10): with a
daemon running, first token within 0.5 s of the provider's own; `hermes memory show` and
`hermes facts search` at most 0.3 s of CPU.

Each command is a fresh `python -m hermes` process (CPU: user + system, from the kernel's
accounting of the child). On a shared machine the wall-clock figures move with the load; the
CPU figures much less.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
REPLY = "Paris is the capital of France, and it has been for a long time."


class Provider(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, delay: float) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.delay = delay
        self.arrivals: list[float] = []       # perf_counter at each streamed request's arrival
        self.first_tokens: list[float] = []   # ... and when its first token was sent

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: Provider

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        arrived = time.perf_counter()
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        if not body.get("stream"):
            # Background work (extraction, summaries, the context file): nothing to learn.
            self._json({"id": "b", "object": "chat.completion", "created": 0,
                        "model": body.get("model"), "choices": [{
                            "index": 0, "finish_reason": "stop",
                            "message": {"role": "assistant", "content": "[]"}}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 1,
                                  "total_tokens": 11}})
            return
        self.server.arrivals.append(arrived)
        time.sleep(self.server.delay)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        words = REPLY.split(" ")
        for index, word in enumerate(words):
            delta = {"content": (word if index == 0 else " " + word)}
            if index == 0:
                delta["role"] = "assistant"
            self._event({"id": "s", "object": "chat.completion.chunk", "created": 0,
                         "model": body.get("model"),
                         "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            if index == 0:
                self.server.first_tokens.append(time.perf_counter())
        self._event({"id": "s", "object": "chat.completion.chunk", "created": 0,
                     "model": body.get("model"),
                     "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, data: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
        self.wfile.flush()

    def _json(self, data: dict) -> None:
        raw = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


def hermes(env: dict[str, str], *args: str, **kw: object) -> subprocess.Popen:
    tree = env.get("PYTHONPATH") or str(REPO)
    return subprocess.Popen([sys.executable, "-m", "hermes", *args], cwd=tree, env=env, **kw)


def run_ready(env: dict[str, str], idle_seconds: float) -> dict[str, float]:
    """`hermes run --no-repl` from process start to its "hermes: running" line, and its
    resident memory after ``idle_seconds`` more (start-up work done, nothing asked)."""
    started = time.perf_counter()
    proc = hermes(env, "run", "--no-repl", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                  text=True)
    assert proc.stderr is not None
    ready = None
    for line in proc.stderr:
        if "hermes: running" in line:
            ready = time.perf_counter() - started
            cpu_ready = cpu_so_far(proc.pid)
            break
    if ready is None:
        raise SystemExit(f"hermes run did not start ({proc.wait()})")
    threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep its pipe drained
    time.sleep(idle_seconds)
    with open(f"/proc/{proc.pid}/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status)
    rss = int(fields["VmRSS"].split()[0]) / 1024
    proc.terminate()
    cpu = cpu_of(proc)
    return {"ready": ready, "cpu_ready": cpu_ready, "rss_idle_mb": rss, "cpu": cpu}


def cpu_so_far(pid: int) -> float:
    """User + system CPU of a running process, all its threads (/proc/<pid>/stat): what a
    figure cost, less moved by the machine's load than its wall time."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(proc: subprocess.Popen) -> float:
    """User + system CPU of a finished child (os.wait4 reports it per process)."""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def ask_once(env: dict[str, str], provider: Provider) -> dict[str, float]:
    before = len(provider.first_tokens)
    started = time.perf_counter()
    proc = hermes(env, "ask", "What is the capital of France?", stdout=subprocess.PIPE,
                  stderr=subprocess.PIPE)
    assert proc.stdout is not None
    first = os.read(proc.stdout.fileno(), 1)
    first_out = time.perf_counter()
    cpu_first = cpu_so_far(proc.pid)
    rest = proc.stdout.read()
    cpu = cpu_of(proc)
    done = time.perf_counter()
    text = (first + rest).decode()
    if proc.returncode != 0 or not text.startswith("Paris"):
        raise SystemExit(f"hermes ask failed ({proc.returncode}): {text!r} "
                         f"{proc.stderr.read().decode() if proc.stderr else ''}")
    assert len(provider.first_tokens) == before + 1
    arrival, token = provider.arrivals[-1], provider.first_tokens[-1]
    return {"first_token": first_out - started, "provider_ttft": token - arrival,
            "overhead": (first_out - started) - (token - arrival),
            "to_request": arrival - started, "after_provider": first_out - token,
            "wall": done - started, "cpu": cpu, "cpu_first_token": cpu_first}


# The memory commands: their CPU with no daemon, and with one running on the home (issue 33)
MEMORY_COMMANDS = {"memory show": ("memory", "show"),
                   "facts search": ("facts", "search", "redis"),
                   "sessions search": ("sessions", "search", "docker network")}


def cpu_run(env: dict[str, str], *args: str) -> float:
    proc = hermes(env, *args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cpu = cpu_of(proc)
    if proc.returncode != 0:
        raise SystemExit(f"hermes {' '.join(args)} failed ({proc.returncode})")
    return cpu


def summary(name: str, values: list[float], unit: str = "s") -> str:
    return (f"{name:<52} median {statistics.median(values):6.3f} {unit}  "
            f"min {min(values):6.3f}  max {max(values):6.3f}  (n={len(values)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--provider-delay", type=float, default=0.2,
                        help="seconds the provider waits before its first token")
    parser.add_argument("--against", type=Path, metavar="TREE",
                        help="another checkout to measure the same way, interleaved")
    parser.add_argument("--idle", type=float, default=5.0,
                        help="seconds after `hermes run` is ready before its RSS is read")
    parser.add_argument("--memory-only", action="store_true",
                        help="only the memory commands, with and without a daemon")
    args = parser.parse_args()

    provider = Provider(args.provider_delay)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    trees = {"this tree": REPO}
    if args.against is not None:
        trees["--against"] = args.against.resolve()
    envs = {name: setup_home(tree, provider) for name, tree in trees.items()}
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"provider delay {args.provider_delay:.2f} s; "
          + "; ".join(f"{name}: {tree}" for name, tree in trees.items()))
    results: dict[str, dict[str, list]] = {name: {} for name in trees}

    def each(key: str, measure) -> None:
        for _ in range(args.runs):
            for name, env in envs.items():
                results[name].setdefault(key, []).append(measure(env))

    for key, argv in MEMORY_COMMANDS.items():
        each(key, lambda env, argv=argv: cpu_run(env, *argv))
    daemons = [start_daemon(env) for env in envs.values()]
    try:
        for key, argv in MEMORY_COMMANDS.items():
            each(f"{key}, daemon", lambda env, argv=argv: cpu_run(env, *argv))
    finally:
        for daemon in daemons:
            daemon.terminate()
            daemon.wait(120)
    if not args.memory_only:
        # Cold: no daemon, so `hermes ask` loads litellm itself.
        each("cold", lambda env: ask_once(env, provider))
        each("run", lambda env: run_ready(env, args.idle))
        for name, env in envs.items():
            results[name]["warm"] = warm_asks(env, provider, args.runs)
    provider.shutdown()
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    for name in trees:
        report(name, results[name])
    if len(trees) > 1:
        side_by_side(results["this tree"], results["--against"])


def side_by_side(this: dict[str, list], other: dict[str, list]) -> None:
    """The memory commands' median CPU in both trees, and this tree's over the other's."""
    print("memory commands, CPU (median; ratio = this tree / --against):")
    print(f"  {'':<28} {'--against':>10} {'this tree':>10} {'ratio':>6}")
    for key in (*MEMORY_COMMANDS, *(f"{k}, daemon" for k in MEMORY_COMMANDS)):
        theirs, ours = statistics.median(other[key]), statistics.median(this[key])
        print(f"  {key:<28} {theirs:9.3f}s {ours:9.3f}s {ours / theirs:6.2f}")


def setup_home(tree: Path, provider: Provider) -> dict[str, str]:
    home = Path(tempfile.mkdtemp(prefix="hermes-bench-cli-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update({"HERMES_HOME": str(home), "HERMES_CONFIG": str(home / "config.yaml"),
                "HERMES_MODEL__NAME": "openai/bench-model", "PYTHONPATH": str(tree),
                "HERMES_MODEL__API_BASE": provider.base, "OPENAI_API_KEY": "sk-bench",
                "HERMES_WEB__PORT": "0"})   # two trees' daemons never share a port
    (home / "config.yaml").write_text("", encoding="utf-8")
    for i in range(20):
        subprocess.run([sys.executable, "-m", "hermes", "facts", "add",
                        f"Project {i} deploys redis cluster number {i}"], cwd=tree, env=env,
                       check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, "-m", "hermes", "memory", "add", "Prefers short answers"],
                   cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
    # (the example's last line is broken on purpose: the import says so and exits 1)
    subprocess.run([sys.executable, "-m", "hermes", "sessions", "import",
                    str(REPO / "scripts" / "example_transcripts.jsonl")], cwd=tree, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return env


def start_daemon(env: dict[str, str]) -> subprocess.Popen:
    """`hermes run --no-repl` on the env's home, once its socket answers."""
    daemon = hermes(env, "run", "--no-repl", stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    socket_file = Path(env["HERMES_HOME"]) / "hermes.sock"
    deadline = time.monotonic() + 120
    while not socket_file.exists():
        if time.monotonic() > deadline or daemon.poll() is not None:
            raise SystemExit("the daemon did not start")
        time.sleep(0.05)
    time.sleep(1.0)  # let its start-up work (catch-up, context files) settle
    return daemon


def warm_asks(env: dict[str, str], provider: Provider, runs: int) -> list[dict[str, float]]:
    daemon = start_daemon(env)
    try:
        return [ask_once(env, provider) for _ in range(runs)]
    finally:
        daemon.terminate()
        daemon.wait(120)


def report(name: str, results: dict[str, list]) -> None:
    print(f"== {name}")
    for key in MEMORY_COMMANDS:
        print(summary(f"hermes {key}: CPU", results[key]))
        print(summary(f"hermes {key}, a daemon running: CPU", results[f"{key}, daemon"]))
    cpu_goal = max(statistics.median(results[f"{k}, daemon"]) for k in MEMORY_COMMANDS)
    print(f"goal: memory show / facts search / sessions search answered through a daemon at "
          f"most 0.3 s CPU: {'met' if cpu_goal <= 0.3 else 'NOT met'} "
          f"(median {cpu_goal:.3f} s)")
    if "run" not in results:
        return
    runs = results["run"]
    print("hermes run --no-repl:")
    print(summary("  start -> ready ('hermes: running')", [r["ready"] for r in runs]))
    print(summary("  its CPU until ready", [r["cpu_ready"] for r in runs]))
    print(summary("  resident memory once idle", [r["rss_idle_mb"] for r in runs], "MB"))
    print(summary("  CPU, start to stop", [r["cpu"] for r in runs]))
    for label, key in (("with a daemon", "warm"), ("cold, in-process", "cold")):
        asks = results[key]
        print(f"hermes ask, {label}:")
        print(summary("  first token on stdout, from process start", [r["first_token"]
                                                                      for r in asks]))
        print(summary("  the provider's own first token (from its request)",
                      [r["provider_ttft"] for r in asks]))
        print(summary("  Hermes overhead (first token - provider's own)",
                      [r["overhead"] for r in asks]))
        print(summary("  process start -> request at the provider", [r["to_request"]
                                                                     for r in asks]))
        print(summary("  provider's first token -> on stdout", [r["after_provider"]
                                                               for r in asks]))
        print(summary("  whole process, wall", [r["wall"] for r in asks]))
        print(summary("  its CPU until the first token", [r["cpu_first_token"]
                                                          for r in asks]))
        print(summary("  whole process, CPU", [r["cpu"] for r in asks]))
    goal = statistics.median(r["overhead"] for r in results["warm"])
    print(f"goal: first token within 0.5 s of the provider's own with a daemon: "
          f"{'met' if goal <= 0.5 else 'NOT met'} (median overhead {goal:.3f} s)")
    cold = statistics.median(r["overhead"] for r in results["cold"])
    print(f"goal: cold, first token within 3 s of the provider's own: "
          f"{'met' if cold <= 3 else 'NOT met'} (median overhead {cold:.3f} s)")
    ready = statistics.median(r["ready"] for r in runs)
    print(f"goal: hermes run ready within 3 s: {'met' if ready <= 3 else 'NOT met'} "
          f"(median {ready:.3f} s)")
    cpu_goal = max(statistics.median(results[k]) for k in ("memory show", "facts search"))
    print(f"goal: memory show / facts search at most 0.3 s CPU: "
          f"{'met' if cpu_goal <= 0.3 else 'NOT met'} (median {cpu_goal:.3f} s)")


if __name__ == "__main__":
    main()
