"""Stress: hostile bodies, archives and socket messages against the limits of issue 30.

    python scripts/stress_bounds.py [--export-only | --import-only | --turn-only]
    # MESSAGES=200000 by default; EXPORT_TREES=/a,/b: the export and import by each checkout

Each case says what came back (one line, or the whole answer), whether anything raised, and the
peak of Python's allocations while it ran (tracemalloc, above the start of the case; the goal is
<= 64 MiB above idle). Also how long the longest message a turn takes (64,000 characters, the
worst text for the secret screen) holds the event loop while it is recorded: the time another
user's turn waits (goal <= 100 ms).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MiB = 1024 * 1024


def measured(name: str, fn) -> None:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    from hermes.errors import HermesError

    try:
        outcome = fn()
        error = None
    except HermesError as exc:  # the one line the user sees
        outcome, error = f"one line: {exc}", None
    except Exception as exc:  # counted: the goal is 0
        outcome, error = None, f"{type(exc).__name__}: {exc}"
    spent = time.perf_counter() - started
    peak = (tracemalloc.get_traced_memory()[1] - base) / MiB
    tracemalloc.stop()
    said = error or str(outcome)
    print(f"{name:44} {spent:7.2f} s  peak +{peak:7.1f} MiB  {'RAISED ' if error else ''}"
          f"{said[:110]}", flush=True)
    RESULTS.append((name, error is not None, peak))


RESULTS: list[tuple[str, bool, float]] = []


# -- web bodies, straight through the ASGI app (no client buffering the body) ----------------

def asgi_post(app: Any, path: str, body_chunks, *, length: int | None,
              headers: list[tuple[bytes, bytes]] | None = None) -> str:
    async def run() -> str:
        sent: list[dict[str, Any]] = []
        chunks = iter(body_chunks)

        async def receive() -> dict[str, Any]:
            chunk = next(chunks, None)
            if chunk is None:
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.request", "body": chunk, "more_body": True}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        head = [(b"content-type", b"application/x-www-form-urlencoded"),
                (b"host", b"127.0.0.1")]
        if length is not None:
            head.append((b"content-length", str(length).encode()))
        scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
                 "query_string": b"", "headers": head + (headers or []), "scheme": "http",
                 "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "http_version": "1.1",
                 "root_path": "", "app": app}
        await app(scope, receive, send)
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return f"{status} {body.decode(errors='replace')[:80]}"

    return asyncio.run(run())


def web_cases(rt: Any) -> None:
    from hermes.frontends.web.app import WebContext
    from hermes.frontends.web.site import build_app

    app = build_app(WebContext(rt.memory))
    chunk = b"a" * MiB
    measured("web /login, 128 MiB with Content-Length",
             lambda: asgi_post(app, "/login", iter([chunk] * 128), length=128 * MiB))
    measured("web /login, 128 MiB streamed, no length",
             lambda: asgi_post(app, "/login", iter([chunk] * 128), length=None))
    measured("web /chat/new, 16 MiB streamed (no login)",
             lambda: asgi_post(app, "/chat/new", iter([chunk] * 16), length=None))


# -- archives ----------------------------------------------------------------------------------

def archive_cases(folder: Path) -> None:
    from hermes.memory.sessions.chat_exports import scan_export

    bomb = folder / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z, \
            z.open("conversations.json", "w", force_zip64=True) as member:
        member.write(b"[")
        for _ in range(512):
            member.write(b" " * MiB)
        member.write(b"]")
    print(f"(the bomb: {bomb.stat().st_size / 1024:.0f} KB zipped, 512 MiB unzipped)")
    measured("zip of 512 MiB whitespace", lambda: scan_export(bomb))
    damaged = folder / "damaged.zip"
    with zipfile.ZipFile(damaged, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("conversations.json", json.dumps([{"title": f"t{i}"} for i in range(5000)]))
    data = bytearray(damaged.read_bytes())
    for offset in range(100, 400):
        data[offset] ^= 0x5A
    damaged.write_bytes(bytes(data))
    measured("zip with a damaged member", lambda: scan_export(damaged))
    plain = folder / "conversations.json"
    with plain.open("wb") as handle:
        handle.seek(300 * MiB)
        handle.write(b"]")
    measured("a 300 MiB conversations.json", lambda: scan_export(plain))


# -- the local socket, 1 MiB each way -------------------------------------------------------------

def socket_cases(rt: Any) -> None:
    from hermes.agent.turn import TurnResult
    from hermes.local_socket import RemoteAgent, SocketServer

    reply = "word " * (MiB // 5)

    class Turn:
        def __init__(self, user: str, session_id: int, text: str) -> None:
            self.exception = None
            self.result = TurnResult(user, session_id, 1, 2, reply, [], 0, False, None)
            self.text = text

        async def __aiter__(self):
            yield reply

    class Agent:
        background_llm = None

        def turn(self, user: str, session_id: int, text: str, **_: Any) -> Turn:
            return Turn(user, session_id, text)

    async def run(question: str) -> str:
        server = SocketServer(rt.memory, Agent())  # type: ignore[arg-type]
        await server.start()
        try:
            session = rt.memory.sessions.create("owner", "terminal")
            turn = RemoteAgent(rt.settings).turn("owner", session.id, question)
            got = "".join([chunk async for chunk in turn])
            if turn.exception is not None:
                return f"one line: {turn.exception}"
            return f"reply {len(got):,} characters, whole: {got == reply}"
        finally:
            await server.stop(1)

    measured("socket: 60k-character question, 1 MiB reply",
             lambda: asyncio.run(run("é" * 60_000)))
    measured("socket: a 1 MiB question (over the limit)",
             lambda: asyncio.run(run("q" * MiB)))


# -- the event loop: the longest message, recorded ------------------------------------------------

def loop_case(rt: Any) -> None:
    """The longest message recorded as a turn records it: screened for secrets on a worker
    thread (SessionStore.screen: not the loop's time), then appended on the loop (the INSERT
    and its FTS5 indexing: what the loop holds)."""
    from hermes.agent.turn import MAX_MESSAGE_CHARS

    store = rt.memory.sessions
    store.append("owner", store.create("owner", "terminal").id, "user", "warm: pin 1234")
    screened = held = 0.0
    for piece in ("pin is 1234 ", "4111 1111 1111 1111 ", "eyJaaaaaaaaa.", "1 " + "y" * 60,
                  "password is x "):
        text = (piece * (MAX_MESSAGE_CHARS // len(piece) + 1))[:MAX_MESSAGE_CHARS]
        session = store.create("owner", "terminal")
        started = time.process_time()
        clean = store.screen(text)
        screened = max(screened, time.process_time() - started)
        started = time.process_time()
        store.append("owner", session.id, "user", clean)
        held = max(held, time.process_time() - started)
    print(f"{'longest message recorded (held the loop)':44} worst {held * 1000:.0f} ms CPU "
          f"(goal <= 100 ms; its screening, on a worker thread: {screened * 1000:.0f} ms)")


def turn_loop_case(folder: Path) -> None:
    """A whole turn of the longest message (prose, then dense with secrets) in-process, the
    model faked: the event loop's longest stall meanwhile (a task that sleeps 5 ms and notes
    how late it woke), which is what another user's turn waits for on the daemon (goal <= 100
    ms). The daemon itself: scripts/stress_daemon.py (its figures swing with the machine's load)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    os.environ["HERMES_HOME"] = str(folder / "turn-home")
    os.environ["HERMES_MODEL__NAME"] = "fake/scripted"
    from tests.fakellm import Reply, ScriptedLLM, installed

    class AlwaysOk(ScriptedLLM):
        def _take(self, request: Any) -> Any:
            return Reply(text="ok")

    with installed(AlwaysOk()):
        from hermes.agent.turn import MAX_MESSAGE_CHARS
        from hermes.assembly import build_agent
        from hermes.config import load_settings
        from hermes.runtime import Runtime

        rt = Runtime(load_settings())
        try:
            rt.preload_embeddings()
            built = build_agent(rt)
            agent = built[0] if isinstance(built, tuple) else built
            session = rt.memory.sessions.create("alice", "terminal").id
            texts = {"prose": ("The tomato variety we planted in March grew well near the south "
                               "fence, and Omar asked about the seeds again. "),
                     "dense secrets": "pin 1234, password is Hx9q!z, 4111 1111 1111 1111, "}

            async def run() -> None:
                for i in range(3):
                    await agent.turn("alice", session, f"warm up {i}: the seeds").run()
                for name, piece in texts.items():
                    text = (piece * (MAX_MESSAGE_CHARS // len(piece) + 1))[:MAX_MESSAGE_CHARS]
                    lags: list[float] = []
                    stop = asyncio.Event()

                    async def probe(lags: list[float], stop: asyncio.Event) -> None:
                        while not stop.is_set():
                            started = time.perf_counter()
                            await asyncio.sleep(0.005)
                            lags.append(time.perf_counter() - started - 0.005)

                    task = asyncio.create_task(probe(lags, stop))
                    await asyncio.sleep(0.02)  # the probe under way
                    started = time.perf_counter()
                    await agent.turn("alice", session, text).run()
                    took = time.perf_counter() - started
                    stop.set()
                    await task
                    print(f"{f'turn of 64,000 characters ({name})':44} {took:7.2f} s  event "
                          f"loop stalled at most {max(lags) * 1000:.0f} ms (goal <= 100 ms)",
                          flush=True)

            asyncio.run(run())
        finally:
            rt.close()


# -- `hermes export` of a large home: its peak resident memory above the process's idle ----------

EXPORT_CHILD = """
import os, sys
from pathlib import Path
def rss(key):
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith(key + ':'):
            return int(line.split()[1]) * 1024
from hermes.cli import main as hermes_main
import hermes.cli.db, hermes.memory.transfer  # what the command imports, before idle
from hermes.config import load_settings
from hermes.runtime import Runtime
rt = Runtime(load_settings()); rt.db.execute('SELECT count(*) FROM messages').fetchone(); rt.close()
idle, idle_anon = rss('VmRSS'), rss('RssAnon')
Path('/proc/self/clear_refs').write_text('5')  # VmHWM := VmRSS
import threading
peak_anon = [idle_anon]
done = threading.Event()
def sample():  # the peak of anonymous memory (VmHWM also counts the database's mapped pages)
    while not done.wait(0.005):
        peak_anon[0] = max(peak_anon[0], rss('RssAnon'))
threading.Thread(target=sample, daemon=True).start()
sys.argv = ['hermes', 'export', '--user', 'owner', '--output', sys.argv[1]]
try:
    hermes_main()
except SystemExit:
    pass
done.set()
print(idle, rss('VmHWM'), idle_anon, peak_anon[0])
"""


IMPORT_CHILD = EXPORT_CHILD.replace(
    "import hermes.cli.db, hermes.memory.transfer",
    "import hermes.cli.db, hermes.memory.transfer, hermes.memory.sessions.transcripts",
).replace("sys.argv = ['hermes', 'export', '--user', 'owner', '--output', sys.argv[1]]",
          "sys.argv = ['hermes', 'import', sys.argv[1], '--user', 'owner']")


def build_large_home(home: Path, messages: int) -> None:
    """``messages`` messages of ~200 characters for "owner": half in one session (a long-lived
    chat: its export record is one line), the rest in sessions of 100; and facts, 1 per 20."""
    os.environ["HERMES_HOME"] = str(home)
    from hermes.config import load_settings
    from hermes.runtime import Runtime

    rt = Runtime(load_settings())
    try:
        store = rt.memory.sessions
        text = ("The tomato variety we planted in March grew well near the south fence, and "
                "my neighbour Omar asked about the seeds again on Tuesday, message {}.")
        sizes = [messages // 2] + [100] * ((messages - messages // 2) // 100)
        for size in sizes:
            session = store.create("owner", "terminal").id
            with rt.db.conn:
                rt.db.conn.executemany(
                    "INSERT INTO messages (session_id, user, role, content, created_at) "
                    "VALUES (?, 'owner', ?, ?, '2026-01-01T00:00:00+00:00')",
                    ((session, "user" if i % 2 == 0 else "assistant", text.format(i))
                     for i in range(size)))
        for i in range(messages // 20):
            rt.memory.facts.add("owner", f"The user's plant number {i} is a tomato of kind {i}")
    finally:
        rt.close()


def export_case(folder: Path, messages: int) -> None:
    """``EXPORT_TREES=/a,/b``: the export run by each checkout in turn, on the same home (an
    A/B in one run); by default this one."""
    home = folder / "large-home"
    started = time.perf_counter()
    build_large_home(home, messages)
    built = time.perf_counter() - started
    trees = os.environ.get("EXPORT_TREES") or str(Path(__file__).resolve().parent.parent)
    for tree in trees.split(","):
        export_from(tree, home, folder / "export.jsonl", messages, built)


def import_case(folder: Path, messages: int) -> None:
    """The export of the large home (one session of ``messages // 2`` messages: one line of
    the file) imported into a new home by each checkout of ``EXPORT_TREES`` in turn: its peak
    resident memory above the process's idle."""
    import subprocess

    home = folder / "large-home"
    started = time.perf_counter()
    build_large_home(home, messages)
    built = time.perf_counter() - started
    out = folder / "export.jsonl"
    trees = os.environ.get("EXPORT_TREES") or str(Path(__file__).resolve().parent.parent)
    first = trees.split(",")[0]
    subprocess.run([sys.executable, "-m", "hermes", "export", "--user", "owner", "--output",
                    str(out)], env={**os.environ, "HERMES_HOME": str(home), "PYTHONPATH": first},
                   cwd=first, check=True, capture_output=True)
    longest = max(len(line) for line in out.open("rb"))
    for n, tree in enumerate(trees.split(",")):
        target = folder / f"import-home-{n}"
        env = {**os.environ, "HERMES_HOME": str(target), "PYTHONPATH": tree}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", IMPORT_CHILD, str(out)], env=env,
                              cwd=tree, capture_output=True, text=True, check=False)
        spent = time.perf_counter() - started
        if not done.stdout.strip():
            print(f"{'import of a large export':44} RAISED {done.stderr.strip()[-300:]}")
            RESULTS.append(("import", True, 0.0))
            continue
        idle, peak, idle_anon, peak_anon = map(int, done.stdout.split()[-4:])
        print(f"{f'hermes import, {messages:,} messages':44} {spent:7.2f} s  peak RSS +"
              f"{(peak - idle) / MiB:7.1f} MiB above idle ({idle / MiB:.0f} MiB), anonymous +"
              f"{(peak_anon - idle_anon) / MiB:.1f} MiB (file {out.stat().st_size / MiB:.0f} "
              f"MiB, longest line {longest / MiB:.0f} MiB, home built in {built:.0f} s; {tree}; "
              "goal <= 64 MiB)", flush=True)
        RESULTS.append(("import", False, (peak - idle) / MiB))


def export_from(tree: str, home: Path, out: Path, messages: int, built: float) -> None:
    import subprocess

    env = {**os.environ, "HERMES_HOME": str(home), "PYTHONPATH": tree}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", EXPORT_CHILD, str(out)], env=env, cwd=tree,
                          capture_output=True, text=True, check=False)
    spent = time.perf_counter() - started
    if done.returncode or not done.stdout.strip():
        print(f"{'export of a large home':44} RAISED {done.stderr.strip()[-300:]}")
        RESULTS.append(("export", True, 0.0))
        return
    idle, peak, idle_anon, peak_anon = map(int, done.stdout.split()[-4:])
    size = out.stat().st_size / MiB
    print(f"{f'hermes export, {messages:,} messages':44} {spent:7.2f} s  peak RSS +"
          f"{(peak - idle) / MiB:7.1f} MiB above idle ({idle / MiB:.0f} MiB), anonymous +"
          f"{(peak_anon - idle_anon) / MiB:.1f} MiB (file {size:.0f} MiB, "
          f"home built in {built:.0f} s; {tree}; goal <= 64 MiB)", flush=True)
    RESULTS.append(("export", False, (peak - idle) / MiB))


def main() -> None:
    if "--turn-only" in sys.argv:
        with tempfile.TemporaryDirectory() as folder:
            turn_loop_case(Path(folder))
        return
    if "--import-only" in sys.argv:
        with tempfile.TemporaryDirectory() as folder:
            import_case(Path(folder), int(os.environ.get("MESSAGES", "200000")))
        return
    if "--export-only" in sys.argv:
        messages = int(os.environ.get("MESSAGES", "200000"))
        with tempfile.TemporaryDirectory() as folder:
            export_case(Path(folder), messages)
        return
    with tempfile.TemporaryDirectory() as folder:
        os.environ["HERMES_HOME"] = str(Path(folder) / "home")
        from hermes.config import load_settings
        from hermes.runtime import Runtime

        rt = Runtime(load_settings())
        try:
            web_cases(rt)
            archive_cases(Path(folder))
            socket_cases(rt)
            loop_case(rt)
        finally:
            rt.close()
        export_case(Path(folder), int(os.environ.get("MESSAGES", "200000")))
        turn_loop_case(Path(folder))
    raised = sum(1 for _, r, _ in RESULTS if r)
    print(f"cases: {len(RESULTS)}, raised: {raised}, worst peak +"
          f"{max(p for _, _, p in RESULTS):.1f} MiB")


if __name__ == "__main__":
    main()
