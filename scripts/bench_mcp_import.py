"""Benchmark `hermes mcp` start-up and tool latency, and ChatGPT/Claude import throughput.

    python scripts/bench_mcp_import.py            # 5 server starts, 1,000-conversation exports
    python scripts/bench_mcp_import.py --quick    # 2 starts, 200 conversations

MCP figures are whole-process: a real `hermes mcp` child is started on a temporary home with a
few hundred facts, and the clock runs from spawning it to the `initialize` answer (wall), with
the child's own CPU time at that moment (utime + stime from /proc); then `tools/call`
facts_search round trips over the same pipe (the first one apart: it opens the database and
imports the stores, which `initialize` does not wait for). Import: a generated export
(ChatGPT: branching trees with edits, code and attachments; Claude: text blocks and
attachments) through
`import_export`, in-process, wall and CPU time. Results are printed and written to
bench-results/. On a shared machine wall times move with the load: the CPU times are the
steadier figure.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

T0 = 1_700_000_000
WORDS = (
    "postgres", "backup", "nginx", "docker", "garden", "tomato", "lisbon", "cello", "invoice",
    "kubernetes", "python", "rust", "budget", "flight", "hotel", "dentist", "sister", "project",
    "atlas", "deploy", "redis", "cache", "tls", "certificate", "tuesday", "meeting", "review",
    "migration", "schema", "index", "query",
)


def sentence(rng: random.Random, n: int = 14) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def chatgpt_conversation(rng: random.Random, number: int, turns: int) -> dict:
    mapping: dict[str, dict] = {"root": {"id": "root", "message": None, "parent": None,
                                         "children": []}}
    parent = "root"
    at = T0 + number * 3600
    current = "root"
    for turn in range(turns):
        for role in ("user", "assistant"):
            node_id = f"{number}-{turn}-{role}"
            parts = [sentence(rng)]
            content: dict = {"content_type": "text", "parts": parts}
            if role == "assistant" and turn % 4 == 3:
                content = {"content_type": "code", "language": "python",
                           "text": "print('hello')\n" * 3}
            mapping[node_id] = {"id": node_id, "parent": parent, "children": [], "message": {
                "id": node_id, "author": {"role": role}, "create_time": at, "content": content,
                "metadata": ({"attachments": [{"name": "notes.txt"}]}
                             if role == "user" and turn == 1 else {})}}
            mapping[parent]["children"].append(node_id)
            if role == "user" and turn == 2:  # an edit: a sibling branch left behind
                old = f"{node_id}-old"
                mapping[old] = {"id": old, "parent": parent, "children": [], "message": {
                    "id": old, "author": {"role": "user"}, "create_time": at - 1,
                    "content": {"content_type": "text", "parts": ["an edited-away question"]},
                    "metadata": {}}}
                mapping[parent]["children"].append(old)
            parent = current = node_id
            at += 30
    return {"id": f"conv-{number}", "title": sentence(rng, 5), "create_time": T0 + number * 3600,
            "mapping": mapping, "current_node": current}


def claude_conversation(rng: random.Random, number: int, turns: int) -> dict:
    messages = []
    day = f"2025-{1 + number % 12:02d}-{1 + number % 28:02d}"
    for i in range(turns * 2):
        message = {"uuid": f"{number}-{i}", "sender": "human" if i % 2 == 0 else "assistant",
                   "created_at": f"{day}T08:00:{i % 60:02d}Z",
                   "text": "", "content": [{"type": "text", "text": sentence(rng)}]}
        if i == 0:
            message["attachments"] = [{"file_name": "a.txt", "extracted_content": sentence(rng)}]
        messages.append(message)
    return {"uuid": f"c-{number}", "name": sentence(rng, 5),
            "created_at": f"2025-{1 + number % 12:02d}-{1 + number % 28:02d}T08:00:00Z",
            "chat_messages": messages}


def bench_import(conversations: int) -> dict:
    from hermes.config import load_settings
    from hermes.memory.sessions.chat_exports import import_export
    from hermes.runtime import Runtime

    rng = random.Random(15)
    results = {}
    for fmt, make in (("chatgpt", chatgpt_conversation), ("claude", claude_conversation)):
        export = [make(rng, n, rng.randint(3, 20)) for n in range(conversations)]
        with tempfile.TemporaryDirectory() as home:
            os.environ["HERMES_HOME"] = home
            rt = Runtime(load_settings())
            store = rt.memory.sessions
            wall, cpu = time.perf_counter(), time.process_time()
            report = import_export(store, "owner", export, fmt)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            again = time.perf_counter()
            repeat = import_export(store, "owner", export, fmt)
            again = time.perf_counter() - again
            rt.close()
        assert report.sessions_created == conversations and not report.errors
        assert repeat.messages_added == 0
        results[fmt] = {"conversations": conversations, "messages": report.messages_added,
                        "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                        "conversations_per_s": round(conversations / wall, 1),
                        "messages_per_s": round(report.messages_added / wall),
                        "reimport_wall_s": round(again, 2)}
    return results


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def _send(proc: subprocess.Popen, message: dict) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _receive(proc: subprocess.Popen) -> dict:
    assert proc.stdout is not None
    return json.loads(proc.stdout.readline())


def bench_mcp(starts: int, calls: int) -> dict:
    from hermes.config import load_settings
    from hermes.runtime import Runtime

    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HERMES_HOME": home}
        os.environ["HERMES_HOME"] = home
        rt = Runtime(load_settings())
        facts = rt.memory.facts
        for n in range(300):
            facts.add("owner", f"{sentence(rng, 10)} number {n}")
        rt.close()
        command = [str(Path(sys.executable).with_name("hermes")), "mcp"]
        init_wall, init_cpu, call_ms, first_ms = [], [], [], []
        for _ in range(starts):
            began = time.perf_counter()
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.DEVNULL, env=env)
            _send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}})
            answer = _receive(proc)
            init_wall.append(time.perf_counter() - began)
            init_cpu.append(_cpu_of(proc.pid))
            assert answer["result"]["serverInfo"]["name"] == "hermes", answer
            _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            for i in range(calls):
                started = time.perf_counter()
                _send(proc, {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": {
                    "name": "facts_search", "arguments": {"query": rng.choice(WORDS)}}})
                reply = _receive(proc)
                # The first call opens the database and imports the stores (kept off initialize).
                (first_ms if i == 0 else call_ms).append((time.perf_counter() - started) * 1000)
                assert not reply["result"].get("isError"), reply
            proc.stdin.close()  # type: ignore[union-attr]
            proc.wait(timeout=30)
    return {"starts": starts, "facts": 300,
            "initialize_wall_s_median": round(statistics.median(init_wall), 3),
            "initialize_wall_s_min": round(min(init_wall), 3),
            "initialize_cpu_s_median": round(statistics.median(init_cpu), 3),
            "first_tool_call_ms_median": round(statistics.median(first_ms), 1),
            "tool_call_ms_p50": round(statistics.median(call_ms), 2),
            "tool_call_ms_p90": round(sorted(call_ms)[int(len(call_ms) * 0.9)], 2),
            "tool_calls": len(call_ms)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    results = {
        "load_average_1m": round(load, 2),
        "mcp_stdio": bench_mcp(2 if args.quick else 5, 10 if args.quick else 20),
        "import": bench_import(200 if args.quick else 1000),
    }
    print(json.dumps(results, indent=2))
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    (out / f"mcp_import-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(
        json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
