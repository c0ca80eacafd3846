"""Stress: crafted `hermes import` files never reach another user's rows (issue 11, part 4).

    python scripts/stress_import.py [--count 2000] [--seed 11] [--time-limit 600]

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
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sqlite3
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--time-limit", type=float, default=600.0)
    args = parser.parse_args()
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
