"""Whole-process figures for the command line: `hermes ask` with a daemon running and cold,
and the CPU of memory commands.

    python scripts/bench_cli.py            # 5 runs of each
    python scripts/bench_cli.py --runs 10 --provider-delay 0.3

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
    return subprocess.Popen([sys.executable, "-m", "hermes", *args], cwd=REPO, env=env, **kw)


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
            "wall": done - started, "cpu": cpu}


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
    args = parser.parse_args()

    provider = Provider(args.provider_delay)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    home = Path(tempfile.mkdtemp(prefix="hermes-bench-cli-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update({"HERMES_HOME": str(home), "HERMES_CONFIG": str(home / "config.yaml"),
                "HERMES_MODEL__NAME": "openai/bench-model",
                "HERMES_MODEL__API_BASE": provider.base, "OPENAI_API_KEY": "sk-bench"})
    home.mkdir(exist_ok=True)
    (home / "config.yaml").write_text("", encoding="utf-8")
    for i in range(20):
        subprocess.run([sys.executable, "-m", "hermes", "facts", "add",
                        f"Project {i} deploys redis cluster number {i}"], cwd=REPO, env=env,
                       check=True, stdout=subprocess.DEVNULL)

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
          f"provider delay {args.provider_delay:.2f} s; home {home}")
    results: dict[str, list[float]] = {}

    for _ in range(args.runs):
        results.setdefault("memory show", []).append(cpu_run(env, "memory", "show"))
        results.setdefault("facts search", []).append(cpu_run(env, "facts", "search", "redis"))

    # Cold: no daemon, so `hermes ask` loads litellm itself.
    cold = [ask_once(env, provider) for _ in range(args.runs)]

    daemon = hermes(env, "run", "--no-repl", stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL)
    socket_file = home / "hermes.sock"
    deadline = time.monotonic() + 120
    while not socket_file.exists():
        if time.monotonic() > deadline or daemon.poll() is not None:
            raise SystemExit("the daemon did not start")
        time.sleep(0.05)
    time.sleep(1.0)  # let its start-up work (catch-up, context files) settle
    try:
        warm = [ask_once(env, provider) for _ in range(args.runs)]
    finally:
        daemon.terminate()
        daemon.wait(120)
    provider.shutdown()

    print(summary("hermes memory show: CPU", results["memory show"]))
    print(summary("hermes facts search: CPU", results["facts search"]))
    for label, runs in (("with a daemon", warm), ("cold, in-process", cold)):
        print(f"hermes ask, {label}:")
        print(summary("  first token on stdout, from process start", [r["first_token"]
                                                                      for r in runs]))
        print(summary("  the provider's own first token (from its request)",
                      [r["provider_ttft"] for r in runs]))
        print(summary("  Hermes overhead (first token - provider's own)",
                      [r["overhead"] for r in runs]))
        print(summary("  process start -> request at the provider", [r["to_request"]
                                                                     for r in runs]))
        print(summary("  provider's first token -> on stdout", [r["after_provider"]
                                                               for r in runs]))
        print(summary("  whole process, wall", [r["wall"] for r in runs]))
        print(summary("  whole process, CPU", [r["cpu"] for r in runs]))
    goal = statistics.median(r["overhead"] for r in warm)
    print(f"goal: first token within 0.5 s of the provider's own with a daemon: "
          f"{'met' if goal <= 0.5 else 'NOT met'} (median overhead {goal:.3f} s)")
    cpu_goal = max(statistics.median(results[k]) for k in ("memory show", "facts search"))
    print(f"goal: memory show / facts search at most 0.3 s CPU: "
          f"{'met' if cpu_goal <= 0.3 else 'NOT met'} (median {cpu_goal:.3f} s)")


if __name__ == "__main__":
    main()
