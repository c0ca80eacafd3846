"""Stress: crafted `hermes import` files never reach another user's rows (issue 11, part 4);
with --memory, what importing an export or a transcript costs in memory (issue 30).

    python scripts/stress_import.py [--count 2000] [--seed 11] [--time-limit 600]
    python scripts/stress_import.py --memory [--sizes 1,32,128,256] [--before REF]

A home holds bob's memory in every tier. An honest export of another user (same ids as bob's:
it comes from another home) is mutated at random, many times: reference columns pointed at
bob's ids, at ids the file never defines, at strings, negative or huge numbers; message
session ids and user fields rewritten to bob; ids duplicated; records dropped, repeated or
reordered; the end record recomputed (a crafter can) or left stale. Each variant is imported
as its own user (``crafted<N>``), through the same function as `hermes import`.

Counted: variants imported whole, imported with some records refused by their line, refused
as a whole with one line (HermesError), other exceptions (goal 0),
and after all of them: bob's export byte for byte (goal: unchanged) and rows outside their
importer: any row of a user table whose links join two users (goal 0).

Writes bench-results/stress_import.json.

--memory: generated Claude exports and JSON Lines
transcripts of the given sizes in MiB (many conversations of ~40 KB), and of one conversation
holding a single 2 MB message and one holding a single 50 MB message (among 1 MiB of others),
each imported by `hermes sessions import` in a child process of its own, with this tree's code
and with ``--before``'s (default: main, checked out with `git archive`). Printed: seconds, the
peak RSS above the child's idle (VmHWM, reset once the command is loaded: /proc/self/clear_refs)
and the outcome, side by side; and whether the tests' exports give the same rows byte for byte.
Writes bench-results/stress_import_memory.json.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes.clock import FakeClock  # noqa: E402
from hermes.config import load_settings  # noqa: E402
from hermes.errors import HermesError  # noqa: E402
from hermes.memory.basic import BasicMemory  # noqa: E402
from hermes.memory.operations import MemoryOperations, Scope  # noqa: E402
from hermes.memory.transfer import (  # noqa: E402
    EXPORT_END,
    TABLES,
    export_user,
    import_user,
    sealed_lines,
)
from hermes.runtime import Runtime  # noqa: E402

CLOCK = "2026-11-29T12:00:00+00:00"

LINKS = {
    "fact_entities": "SELECT count(*) FROM fact_entities fe JOIN facts f ON f.id = fe.fact_id "
                     "JOIN entities e ON e.id = fe.entity_id WHERE f.user != e.user",
    "shown_facts": "SELECT count(*) FROM shown_facts sf JOIN messages m ON m.id = sf.message_id "
                   "JOIN facts f ON f.id = sf.fact_id WHERE m.user != f.user",
    "messages": "SELECT count(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
                "WHERE m.user != s.user",
    "entity_aliases": "SELECT count(*) FROM entity_aliases a JOIN entities e ON "
                      "e.id = a.entity_id WHERE a.user != e.user",
    "fact_history": "SELECT count(*) FROM fact_history h JOIN facts f ON f.id = h.fact_id "
                    "WHERE h.user != f.user",
    "extraction_runs": "SELECT count(*) FROM extraction_runs r JOIN sessions s ON "
                       "s.id = r.session_id WHERE r.user != s.user",
    "reply_ratings": "SELECT count(*) FROM reply_ratings r JOIN messages m ON "
                     "m.id = r.message_id WHERE r.user != m.user",
    "message_refs": "SELECT count(*) FROM message_refs r JOIN messages m ON "
                    "m.id = r.message_id WHERE r.user != m.user",
    "superseded_by": "SELECT count(*) FROM facts f JOIN facts g ON g.id = f.superseded_by "
                     "WHERE f.user != g.user",
    "source_session": "SELECT count(*) FROM facts f JOIN sessions s ON "
                      "s.id = f.source_session_id WHERE f.user != s.user",
}


def seed(rt: Runtime, user: str) -> None:
    BasicMemory(rt.db, clock=rt.clock).add(user, f"{user} runs Debian 13")
    facts = rt.memory.facts
    old = facts.add(user, "The server runs PostgreSQL 15", entities=["PostgreSQL"]).id
    facts.update(user, old, "The server runs PostgreSQL 16")
    facts.add(user, "Alice Johnson maintains Project Atlas", entities=["Alice Johnson",
                                                                        "Project Atlas"])
    facts.entity_store.add_alias(user, "PostgreSQL", "pg")
    sessions = rt.memory.sessions
    for n in range(2):
        session = sessions.create(user, "discord")
        sessions.append(user, session.id, "user", f"which postgres do we run? ({n})")
        reply = sessions.append(user, session.id, "assistant", "PostgreSQL 16 on the server")
        fact_id = facts.search(user, "PostgreSQL", limit=1)[0].id
        with rt.db.conn:
            rt.db.execute("INSERT INTO shown_facts (message_id, fact_id) VALUES (?, ?)",
                          [reply.id, fact_id])
            rt.db.execute("INSERT INTO message_refs (ref, message_id, user) VALUES (?, ?, ?)",
                          [f"discord:{user}:{reply.id}", reply.id, user])
            rt.db.execute("INSERT INTO extraction_runs (user, session_id, first_message_id, "
                          "last_message_id, status, started_at) VALUES (?, ?, ?, ?, 'done', ?)",
                          [user, session.id, reply.id - 1, reply.id, "2026-11-29T12:00:00Z"])
        MemoryOperations(rt.memory).set_reply_rating(Scope(user), reply.id, "discord:42", False)


def mutate(rng: random.Random, records: list[dict[str, Any]], bob_ids: list[int],
           n: int) -> list[str]:
    records = copy.deepcopy(records)
    body = [r for r in records if r["type"] != EXPORT_END]
    for record in body:  # front-end refs are global handles: each file has its own
        if record["type"] == "message_refs":
            record["row"]["ref"] += f":{n}"
    for _ in range(rng.randint(1, 4)):
        record = rng.choice(body[1:])
        kind = record["type"]
        choice = rng.random()
        value = rng.choice([*bob_ids, 999_999, -1, 0, 2**63 - 1, "1", None, 1.5, [1], {"a": 1}])
        if choice < 0.3:
            refs = list(TABLES[kind].refs) + (["id"] if "id" in record["row"] else [])
            if refs:
                record["row"][rng.choice(refs)] = value
        elif choice < 0.55:  # the message claims bob's session, bob's id, bob
            session = next((r for r in body if r["type"] == "sessions"), None)
            if session and session["messages"]:
                message = rng.choice(session["messages"])
                column = rng.choice(["session_id", "id", "user"])
                message[column] = "bob" if column == "user" else rng.choice(bob_ids)
        elif choice < 0.7:
            record["row"]["user"] = "bob"
        elif choice < 0.8:
            body.insert(rng.randrange(1, len(body) + 1), copy.deepcopy(record))  # repeated
        elif choice < 0.9:
            body.remove(record)  # dropped
        else:
            at = rng.randrange(1, len(body))
            body[at], body[-1] = body[-1], body[at]  # reordered
    if rng.random() < 0.9:
        return list(sealed_lines(body))  # a crafter recomputes the end record
    return [json.dumps(r) for r in body] + [json.dumps(records[-1])]  # stale end record


# -- --memory: an import's peak memory, before and after (issue 30) --------------------------------

MiB = 1024 * 1024
_SAID = ("the server runs postgres on port 5432 and the backup job copies it every night to "
         "the nas in the garage while my tomatoes grow in the south bed and the cat sleeps on "
         "the keyboard so I wrote a note about the lisbon trip the flight leaves at nine forty")
WORDS = _SAID.split()

# The child: the real command, in a process of its own. Idle is its RSS once the command's
# modules are loaded and the home is migrated (a first `sessions list`); the peak is VmHWM
# after the import, reset to the idle RSS first.
CHILD = r"""
import json, os, sys, time
# The code measured is PYTHONPATH's: an editable install's finder would answer first.
sys.meta_path = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path.insert(0, os.environ["PYTHONPATH"])
from typer.main import get_command
import hermes.cli, hermes.cli.sessions
import hermes.memory.sessions.chat_exports, hermes.memory.sessions.transcripts
from hermes.cli import app
import threading
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
# VmHWM counts the database's mapped pages (MMAP_BYTES: page cache, shared and reclaimable),
# which grow with the home; the process's own memory is RssAnon, sampled every 5 ms.
anon_peak = 0
def sample():
    global anon_peak
    while True:
        anon_peak = max(anon_peak, status("RssAnon:"))
        time.sleep(0.005)
command = get_command(app)
def run(argv):
    try:
        return command.main(argv, standalone_mode=False) or 0
    except SystemExit as exc:
        return exc.code
    except Exception as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
run(["sessions", "list"])
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
idle = status("VmRSS:")
idle_anon = anon_peak = status("RssAnon:")
threading.Thread(target=sample, daemon=True).start()
started = time.perf_counter()
code = run(sys.argv[1:])
seconds = time.perf_counter() - started
print(json.dumps({"code_from": hermes.__file__, "idle": idle, "seconds": seconds,
                  "peak": status("VmHWM:") - idle, "anon": anon_peak - idle_anon,
                  "code": code}), file=sys.__stdout__)
"""


def _text(rng: random.Random, chars: int) -> str:
    words = []
    size = 0
    while size < chars:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    return " ".join(words)[:chars]


def _conversation(rng: random.Random, n: int, message_chars: list[int]) -> dict[str, Any]:
    return {"uuid": f"c-{n}", "name": f"conversation {n}", "created_at": "2025-10-01T08:00:00Z",
            "chat_messages": [
                {"uuid": f"c-{n}-m-{k}", "sender": "human" if k % 2 == 0 else "assistant",
                 "text": _text(rng, chars), "created_at": f"2025-10-01T08:{k % 60:02d}:00Z"}
                for k, chars in enumerate(message_chars)]}


def _as_line(conversation: dict[str, Any]) -> str:
    return json.dumps({"source": "import", "title": conversation["name"],
                       "started_at": conversation["created_at"],
                       "external_id": conversation["uuid"], "messages": [
                           {"role": "user" if m["sender"] == "human" else "assistant",
                            "content": m["text"], "created_at": m["created_at"],
                            "external_id": m["uuid"]} for m in conversation["chat_messages"]]})


def generate(folder: Path, name: str, mib: float, big: int | None) -> tuple[Path, Path]:
    """An export and the same conversations as JSON Lines: ``mib`` of conversations of ~40 KB
    (20 messages of 2,000 characters), the first holding one message of ``big`` characters."""
    rng = random.Random(name)
    export, jsonl = folder / f"{name}.json", folder / f"{name}.jsonl"
    with export.open("w", encoding="utf-8") as ex, jsonl.open("w", encoding="utf-8") as jl:
        ex.write("[")
        written, n = 0, 0
        while True:
            sizes = [big] if n == 0 and big else [2000] * 20
            conversation = _conversation(rng, n, sizes)
            text = json.dumps(conversation)
            if n and written + len(text) + 2 > mib * MiB:  # (256 MiB: just under the limit)
                break
            ex.write(("," if n else "") + text)
            jl.write(_as_line(conversation) + "\n")
            written += len(text) + 1 if n or not big else 0
            n += 1
        ex.write("]")
    return export, jsonl


def measure(code: Path, home: Path, argv: list[str]) -> dict[str, Any]:
    env = {**os.environ, "HERMES_HOME": str(home), "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], env=env, capture_output=True,
                          text=True, timeout=3600)
    lines = done.stdout.strip().splitlines()
    result = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {
        "peak": 0, "seconds": 0, "code": done.returncode}
    assert result.get("code_from", str(code)).startswith(str(code)), result
    said = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    result["said"] = next((line for line in said if "over the" in line or "Error" in line),
                          said[-1] if said else "")
    rows = sqlite3.connect(home / "hermes.db") if (home / "hermes.db").exists() else None
    if rows is not None:
        result["messages"] = rows.execute("SELECT count(*) FROM messages").fetchone()[0]
        rows.close()
    return result


def same_rows(before: Path, after: Path, folder: Path) -> str:
    """The tests' exports imported by both versions into fresh homes: the rows, byte for byte."""
    sys.path.insert(0, str(ROOT / "tests"))
    from test_chat_exports import chatgpt_export, claude_export

    verdicts = []
    for fmt, export in (("chatgpt", chatgpt_export()), ("claude", claude_export())):
        path = folder / f"tests-{fmt}.json"
        path.write_text(json.dumps(export), encoding="utf-8")
        dumps = []
        for label, code in (("before", before), ("after", after)):
            home = folder / f"home-tests-{fmt}-{label}"
            measure(code, home, ["sessions", "import", str(path), "--format", fmt])
            db = sqlite3.connect(home / "hermes.db")
            dumps.append([db.execute(f"SELECT * FROM {t} ORDER BY id").fetchall()
                          for t in ("sessions", "messages")])
            db.close()
        count = sum(len(t) for t in dumps[1])
        verdicts.append(f"{fmt}: {'same' if dumps[0] == dumps[1] else 'DIFFERENT'} "
                        f"({count} rows)")
    return "; ".join(verdicts)


def memory_main(args: argparse.Namespace) -> None:
    sizes = [float(s) for s in args.sizes.split(",") if s]
    with tempfile.TemporaryDirectory(prefix="stress-import-") as tmp:
        folder = Path(tmp)
        before = folder / "before"
        before.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, "hermes"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        cases = [(f"{mib:g} MiB of 40 KB conv.", f"many-{mib:g}", mib, None)
                 for mib in sizes]
        cases += [("1 MiB + one 2 MB message", "msg-2mb", 1, 2_000_000),
                  ("1 MiB + one 50 MB message", "msg-50mb", 1, 50_000_000)]
        print("peak MiB above idle: RSS (VmHWM, with the database's mapped pages) / anonymous "
              "(RssAnon, the process's own)")
        print(f"{'file':<26} {'kind':<6} {'before: s':>9} {'peak MiB':>9} {'msgs':>7} "
              f"{'after: s':>9} {'peak MiB':>9} {'msgs':>7}  exit, what it said (after)",
              flush=True)
        results = []
        for label, name, mib, big in cases:
            export, jsonl = generate(folder, name, mib, big)
            for kind, path, extra in (("export", export, ["--format", "claude"]),
                                      ("jsonl", jsonl, [])):
                row: dict[str, Any] = {"file": label, "kind": kind,
                                       "bytes": path.stat().st_size}
                for version, code in (("before", before), ("after", ROOT)):
                    home = folder / f"home-{name}-{kind}-{version}"
                    row[version] = measure(code, home, ["sessions", "import", str(path),
                                                        *extra])
                    # (a home of 256 MiB of messages is not kept for the next case)
                    subprocess.run(["rm", "-rf", str(home)], check=True)
                b, a = row["before"], row["after"]
                peaks = [f"{r['peak'] / MiB:4.0f}/{r.get('anon', 0) / MiB:<4.0f}" for r in (b, a)]
                print(f"{label:<26} {kind:<6} {b['seconds']:>9.1f} {peaks[0]:>9} "
                      f"{b.get('messages', 0):>7,} {a['seconds']:>9.1f} {peaks[1]:>9} "
                      f"{a.get('messages', 0):>7,}  {a['code']}, {a['said'][:90]}", flush=True)
                results.append(row)
            export.unlink()
            jsonl.unlink()
        rows = same_rows(before, ROOT, folder)
        print(f"the tests' exports, before and after: {rows}")
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "stress_import_memory.json").write_text(json.dumps(
        {"before": args.before, "cases": results, "tests_rows": rows}, indent=2),
        encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--memory", action="store_true", help="measure imports' memory")
    parser.add_argument("--sizes", default="1,32,128,256", help="--memory: export sizes, MiB")
    parser.add_argument("--before", default="main", help="--memory: the code to compare with")
    args = parser.parse_args()
    if args.memory:
        memory_main(args)
        return
    rng = random.Random(args.seed)
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    examples: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        elsewhere = Runtime(load_settings(home=Path(tmp) / "elsewhere"), clock=FakeClock(CLOCK))
        seed(elsewhere, "mallory")
        honest = [json.loads(line) for line in export_user(elsewhere.db, "mallory")]
        elsewhere.close()
        rt = Runtime(load_settings(home=Path(tmp) / "shared"), clock=FakeClock(CLOCK))
        seed(rt, "bob")
        bob_before = list(export_user(rt.db, "bob"))
        bob_ids = sorted({v for r in honest[1:] for v in r.get("row", {}).values()
                          if isinstance(v, int) and 0 < v < 20})
        done = 0
        for n in range(args.count):
            if time.monotonic() - started > args.time_limit:
                break
            lines = mutate(rng, honest, bob_ids, n)
            done += 1
            try:
                report = import_user(rt.db, lines, user=f"crafted{n}")
                counts["imported, some records refused" if report.errors else "imported"] += 1
                for _, why in report.errors:
                    reasons[why[:48]] += 1
            except HermesError as exc:
                counts["refused (one line)"] += 1
                text = str(exc).removeprefix("Refused: ")
                if text.startswith("line "):
                    text = text.split(": ", 1)[-1]
                reasons[text[:48]] += 1
            except Exception as exc:  # noqa: BLE001 - counted, that is the figure
                counts["EXCEPTION"] += 1
                examples.append(f"{type(exc).__name__}: {exc}"[:200])
        bob_after = list(export_user(rt.db, "bob"))
        path = rt.settings.db_path
        rt.close()
        db = sqlite3.connect(path)
        outside = {name: db.execute(sql).fetchone()[0] for name, sql in LINKS.items()}
        db.close()
    elapsed = time.monotonic() - started
    counts["bob's export changed"] = int(bob_before != bob_after)
    counts["rows outside the importing user"] = sum(outside.values())
    print(f"{done:,} crafted files in {elapsed:.0f} s")
    for key in sorted(counts):
        print(f"  {key:<36} {counts[key]:>6}")
    print("  most common refusals: " + "; ".join(f"{k} ({v})" for k, v in
                                                reasons.most_common(6)))
    for example in examples[:5]:
        print("  exception: " + example)
    out = ROOT / "bench-results"
    out.mkdir(exist_ok=True)
    (out / "stress_import.json").write_text(json.dumps({
        "files": done, "seconds": elapsed, "counts": dict(counts), "outside": outside,
        "refusals": dict(reasons.most_common(20)), "exceptions": examples[:20],
    }, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
