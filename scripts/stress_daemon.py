"""Stress: a running daemon's memory and another user's wait while a large input arrives.

    python scripts/stress_daemon.py [--tree PATH] [--rounds N] [--only TEXT]

Starts `hermes run --no-repl` as its own process on a fresh home (the model faked at litellm's
boundary, answering "ok" at once; web panel on a free port; embeddings and extraction as
configured by default), warms it up with small turns from two users (alice, bob) over the local
socket, and takes its resident memory then as idle. Then, for each large input:

- **peak memory**: the daemon's peak resident set size (VmHWM, reset before each case with
  /proc/PID/clear_refs) above its idle VmRSS (issue 30's goal: <= 64 MiB above idle);
- **another user's wait**: while alice's input is handled, bob sends one small turn after
  another over the socket; the worst of his turns' latency beside his median when alone (the
  goal: blocked <= 100 ms);
- **the event loop's longest stall** ("loop max"): a thread in the daemon hands its loop a
  callback every 5 ms and notes how late it ran (what any new request waits for the loop), the
  longest of them while the case ran. Less noisy than bob's wall clock, which also counts his
  own turn's work and the machine's load.

``--tree PATH`` runs the daemon from another checkout (an A/B in one run: run the script twice,
interleaved, from the same machine state). Figures are wall-clock on a shared machine: compare
runs made together, never with a figure from another time.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024


# -- the daemon's side (``--serve``): the real command line with a model that says "ok" -----

def serve(argv: list[str]) -> None:
    sys.path.insert(0, os.getcwd())
    from tests.fakellm import FakeRequest, Reply, ScriptedLLM, installed

    class AlwaysOk(ScriptedLLM):
        """Every call answers "ok" at once, and nothing is kept (its memory is not the
        daemon's)."""

        def _record(self, kw: dict[str, Any], stream: bool) -> FakeRequest:
            return FakeRequest(messages=[], tools=None, optional_params={}, stream=stream,
                               api_base=None, timeout=None)

        def _take(self, request: FakeRequest) -> Any:
            return Reply(text="ok")

    os.environ["HERMES_MODEL__NAME"] = "fake/scripted"
    stacks = os.environ.get("STRESS_LAG_STACKS")
    watch_the_loop(Path(os.environ["STRESS_LAG_FILE"]), Path(stacks) if stacks else None)
    with installed(AlwaysOk()):
        from hermes.cli import main as hermes_main

        sys.argv = ["hermes", *argv]
        hermes_main()


LAG_NOTED = 0.005  # the probe's period, and the smallest lateness it writes down


def watch_the_loop(path: Path, stacks: Path | None) -> None:
    """(in the daemon) Once its event loop runs, a thread hands it a callback every 5 ms and
    appends "<monotonic time> <seconds late>" to ``path`` for each that ran over 5 ms late;
    with ``stacks``, where the loop's thread was (our frames) while a callback waited over
    20 ms, one line a sample."""
    original = asyncio.BaseEventLoop.run_forever

    def run_forever(loop: asyncio.BaseEventLoop) -> None:
        threading.Thread(target=probe, args=(loop, threading.get_ident(), path, stacks),
                         daemon=True).start()
        original(loop)

    asyncio.BaseEventLoop.run_forever = run_forever  # type: ignore[method-assign]


def probe(loop: asyncio.AbstractEventLoop, loop_thread: int, path: Path,
          stacks: Path | None) -> None:
    import traceback

    with path.open("a", encoding="utf-8") as out:
        while not loop.is_closed():
            ran = threading.Event()
            sent = time.monotonic()
            try:
                loop.call_soon_threadsafe(ran.set)
            except RuntimeError:  # the loop closed
                return
            seen: list[str] = []
            while not ran.wait(0.02 if not seen else LAG_NOTED):
                frame = sys._current_frames().get(loop_thread)
                if stacks is None or frame is None:
                    seen.append("")
                    continue
                frames = list(reversed(traceback.extract_stack(frame)))
                where = [f"{Path(f.filename).name}:{f.lineno}:{f.name}" for f in frames]
                ours = [w for w, f in zip(where, frames, strict=True) if "/hermes/" in f.filename]
                seen.append(" < ".join(where[:3]) + " || " + " < ".join(ours[:10]))
                if time.monotonic() - sent > 30:
                    return
            late = time.monotonic() - sent
            if late > LAG_NOTED:
                out.write(f"{sent} {late}\n")
                out.flush()
            if stacks is not None and seen and late > 0.03:
                with stacks.open("a", encoding="utf-8") as where_out:
                    where_out.write(f"{sent} {late * 1000:.0f}ms\n")
                    where_out.writelines(f"  {line}\n" for line in seen if line)
            time.sleep(LAG_NOTED)


def longest_stall(path: Path, start: float, end: float) -> float:
    """The loop's longest lateness noted between ``start`` and ``end`` (monotonic)."""
    worst = 0.0
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            at, late = map(float, line.split())
            if start <= at <= end:
                worst = max(worst, late)
    return worst


# -- the measuring side ----------------------------------------------------------------------

def status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of ``pid``, in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024
    return found


def reset_peak(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM := VmRSS


async def turn(path: str, user: str, session_id: int, text: str) -> tuple[float, str]:
    """One turn over the local socket: its latency, and what came back (result or error)."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_unix_connection(path, limit=64 * MiB)
    outcome = "closed"
    try:
        writer.write(json.dumps({"op": "turn", "user": user, "session_id": session_id,
                                 "text": text}).encode() + b"\n")
        await writer.drain()
    except (ConnectionError, BrokenPipeError):
        outcome = "closed while sending"  # what it said before closing is still read
    try:
        while line := await reader.readline():
            message = json.loads(line)
            if "result" in message:
                error = message["result"].get("error")
                outcome = f"refused: {error[:60]}" if error else "answered"
                break
            if "error" in message:
                outcome = "one line: " + str(message["error"])[:70]
                break
    except (ConnectionError, BrokenPipeError):
        pass  # closed without a line (outcome says so)
    writer.close()
    return time.perf_counter() - started, outcome


async def raw_line(path: str, size: int) -> tuple[float, str]:
    """A request line of ``size`` bytes (no JSON): what the socket says."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_unix_connection(path, limit=64 * MiB)
    try:
        writer.write(b'{"op": "turn", "text": "' + b"x" * size + b'"}\n')
        await writer.drain()
        line = await reader.readline()
        said = json.loads(line).get("error", "?") if line else "closed"
    except (ConnectionError, BrokenPipeError) as exc:
        said = f"connection ended ({type(exc).__name__})"
    writer.close()
    return time.perf_counter() - started, "one line: " + str(said)[:70]


def http_body(port: int, path: str, size: int, *, length: bool) -> tuple[float, str]:
    """POST ``size`` bytes to the web panel, with or without a Content-Length (chunked), as
    fast as the server reads them; what it answered."""
    started = time.perf_counter()
    sock = socket.create_connection(("127.0.0.1", port))
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n")
    head += f"Content-Length: {size}\r\n\r\n" if length else "Transfer-Encoding: chunked\r\n\r\n"
    piece = b"a" * MiB
    try:
        sock.sendall(head.encode())
        sent = 0
        while sent < size:
            sock.sendall(piece if length else b"%x\r\n" % len(piece) + piece + b"\r\n")
            sent += len(piece)
        if not length:
            sock.sendall(b"0\r\n\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed before the body ended: what we want
    sock.settimeout(30)
    try:
        answer = sock.recv(200).decode("latin-1").split("\r\n", 1)[0]
    except (ConnectionResetError, TimeoutError) as exc:
        answer = type(exc).__name__
    sock.close()
    return time.perf_counter() - started, answer or "closed"


PROSE = ("The tomato variety we planted in March grew well near the south fence, and my "
         "neighbour Omar asked about the seeds again on Tuesday. ")


def prose(size: int) -> str:
    return (PROSE * (size // len(PROSE) + 1))[:size]


def dense_secrets(size: int) -> str:
    pieces = []
    for i in range(size // 60 + 1):
        pieces.append(f"pin {1000 + i % 9000}, password is Hx{i}q!z, 4111 1111 1111 1111, "
                      f"eyJ{i:x}aaaaaaaa. ")
    return "".join(pieces)[:size]


class Daemon:
    def __init__(self, tree: Path, home: Path, stacks: Path | None = None) -> None:
        self.home = home
        config = home / "config.yaml"
        config.write_text("", encoding="utf-8")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("HERMES_") and k != "DISCORD_TOKEN"}
        self.lags = home / "loop-lag.txt"
        env.update(HERMES_HOME=str(home), HERMES_CONFIG=str(config), HERMES_WEB__PORT="0",
                   PYTHONPATH=str(tree), STRESS_LAG_FILE=str(self.lags))
        if stacks is not None:
            env["STRESS_LAG_STACKS"] = str(stacks.resolve())
        self.log = open(home / "daemon.out", "w+", encoding="utf-8")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", "run", "--no-repl"],
            cwd=tree, env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        self.socket = str(home / "hermes.sock")
        self.port = 0

    def wait_ready(self, timeout: float = 300) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit("the daemon exited:\n" + (self.home / "daemon.out").read_text())
            text = (self.home / "daemon.out").read_text()
            if "hermes: running" in text and "panel at http://" in text:
                url = text.split("panel at http://", 1)[1].split()[0]
                self.port = int(url.split(":")[1].split("/")[0])
                if Path(self.socket).exists():
                    return
            time.sleep(0.2)
        raise SystemExit("the daemon did not start:\n" + (self.home / "daemon.out").read_text())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def sessions(tree: Path, home: Path) -> dict[str, int]:
    """A terminal session for alice and for bob, made the way `hermes ask` makes one."""
    code = ("import sys; from hermes.config import load_settings; from hermes.runtime import "
            "Runtime; rt = Runtime(load_settings()); "
            "print(rt.memory.sessions.create('alice', 'terminal').id, "
            "rt.memory.sessions.create('bob', 'terminal').id); rt.close()")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERMES_")}
    env.update(HERMES_HOME=str(home), HERMES_CONFIG=str(home / "config.yaml"),
               PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return {"alice": int(out[0]), "bob": int(out[1])}


async def measure(daemon: Daemon, ids: dict[str, int], rounds: int, only: str | None = None
                  ) -> None:
    pid = daemon.proc.pid
    path = daemon.socket
    for i in range(6):  # warm: imports, the embedding model, prepared statements
        await turn(path, "alice", ids["alice"], f"warm up {i}: the tomato seeds")
        await turn(path, "bob", ids["bob"], f"warm up {i}: hello there")
    await asyncio.sleep(3)  # the background vector job of the warm-up turns
    started = time.monotonic()
    alone = [(await turn(path, "bob", ids["bob"], f"how are you {i}?"))[0]
             for i in range(rounds)]
    stall = longest_stall(daemon.lags, started, time.monotonic())
    idle = status(pid)["VmRSS"]
    bob_median = statistics.median(alone)
    print(f"daemon pid {pid}: idle RSS {idle / MiB:.1f} MiB; bob's turn alone: median "
          f"{bob_median * 1000:.0f} ms, p95 {p95(alone) * 1000:.0f} ms, worst "
          f"{max(alone) * 1000:.0f} ms ({rounds} turns); loop max {stall * 1000:.0f} ms")
    print(f"{'case':46} {'took s':>7} {'peak +MiB':>10} {'bob worst':>10} {'bob p95':>8} "
          f"{'bob med':>8} {'loop max':>8}  outcome")

    pool = concurrent.futures.ProcessPoolExecutor(1)  # alice's side: its own process, so
    # that building and sending her input never holds up bob's client (only the daemon may)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(pool, alice, "warm", path, ids["alice"], 10)

    async def case(name: str, kind: str, size: int) -> None:
        if only and only not in name:
            return
        await asyncio.sleep(1)
        reset_peak(pid)
        base = status(pid)["VmRSS"]
        waits: list[float] = []
        done = asyncio.Event()

        async def bob() -> None:
            i = 0
            while not done.is_set() or not waits:
                waits.append((await turn(path, "bob", ids["bob"], f"quick question {i}"))[0])
                i += 1

        bob_task = asyncio.create_task(bob())
        await asyncio.sleep(0.05)  # bob's first turn under way
        started = time.monotonic()
        try:
            took, outcome = await loop.run_in_executor(
                pool, alice, kind, path if kind.startswith(("turn", "line")) else str(daemon.port),
                ids["alice"], size)
        finally:
            done.set()
        await bob_task
        stall = longest_stall(daemon.lags, started, time.monotonic())
        peak = status(pid)["VmHWM"]
        print(f"{name:46} {took:7.2f} {(peak - idle) / MiB:+10.1f} "
              f"{max(waits) * 1000:8.0f}ms {p95(waits) * 1000:6.0f}ms "
              f"{statistics.median(waits) * 1000:6.0f}ms {stall * 1000:6.0f}ms  "
              f"{outcome} (rss before +{(base - idle) / MiB:.1f})", flush=True)

    await case("message of 4,000 characters (prose)", "turn prose", 4_000)
    await case("message of 64,000 characters (prose)", "turn prose", 64_000)
    await case("message of 64,000 characters (dense secrets)", "turn secrets", 64_000)
    await case("message of 70,000 characters (over the limit)", "turn prose", 70_000)
    await case("message of 16 MiB (over the socket's line)", "turn prose", 16 * MiB)
    await case("socket request line of 1 MiB", "line", MiB)
    await case("socket request line of 64 MiB", "line", 64 * MiB)
    await case("web /login body of 128 MiB, with length", "web /login", 128 * MiB)
    await case("web /login body of 128 MiB, chunked", "web chunked /login", 128 * MiB)
    await case("web /chat/send body of 16 MiB (no login)", "web /chat/send", 16 * MiB)
    pool.shutdown()


def p95(values: list[float]) -> float:
    """The 95th percentile of ``values`` (nearest rank: the worst of a few turns)."""
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def alice(kind: str, where: str, session_id: int, size: int) -> tuple[float, str]:
    """Alice's side of a case, in its own process: the input built and sent, its outcome."""
    if kind == "warm":
        return 0.0, "warm"
    if kind.startswith("turn"):
        text = dense_secrets(size) if kind == "turn secrets" else prose(size)
        return asyncio.run(turn(where, "alice", session_id, text))
    if kind == "line":
        return asyncio.run(raw_line(where, size))
    chunked = "chunked" in kind
    return http_body(int(where), kind.split()[-1], size, length=not chunked)


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=REPO,
                        help="the checkout whose hermes the daemon runs (default: this one)")
    parser.add_argument("--rounds", type=int, default=20,
                        help="bob's turns alone, for his median")
    parser.add_argument("--only", help="only the cases whose name holds this (e.g. 'message of')")
    parser.add_argument("--stacks", type=Path,
                        help="append where the daemon's loop was during each stall over 30 ms "
                        "to this file (sampled every 5 ms)")
    args = parser.parse_args()
    tree = args.tree.resolve()
    print(f"tree {tree}")
    with tempfile.TemporaryDirectory(prefix="hermes-daemon-", dir="/tmp") as name:
        home = Path(name)
        (home / "config.yaml").write_text("", encoding="utf-8")
        ids = sessions(tree, home)
        daemon = Daemon(tree, home, args.stacks)
        try:
            daemon.wait_ready()
            asyncio.run(measure(daemon, ids, args.rounds, args.only))
        finally:
            daemon.stop()


if __name__ == "__main__":
    main()
