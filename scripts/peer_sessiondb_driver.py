"""Drive hermes-agent 0.19.0's ``hermes_state.SessionDB`` for scripts/bench_sessions.py.

Runs ONLY under the throwaway peer venv that the benchmark creates; Hermes never imports it.
Reads a JSON job on stdin: {"workdir", "sessions_file", "queries": [...], "repeats"}; loads the
same JSON Lines transcripts the Hermes side imports, runs every query, prints one JSON document.
"""

import json
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

job = json.load(sys.stdin)
workdir = Path(job["workdir"])
workdir.mkdir(parents=True, exist_ok=True)
# hermes_state computes its default path at import time: point it at the workdir first.
os.environ["HERMES_HOME"] = str(workdir / "home")

from hermes_state import SessionDB  # noqa: E402


def epoch(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


db = SessionDB(db_path=workdir / "state.db")
started = time.perf_counter()
messages = 0
with open(job["sessions_file"], encoding="utf-8") as handle:
    for line in handle:
        session = json.loads(line)
        sid = session["external_id"]
        db.create_session(sid, source=session["source"], model="bench")
        for m in session["messages"]:
            db.append_message(sid, m["role"], content=m["content"],
                              timestamp=epoch(m["created_at"]))
            messages += 1
load_seconds = time.perf_counter() - started

results = []
for query in job["queries"]:
    times = []
    hits: list = []
    error = None
    for _ in range(job["repeats"]):
        t0 = time.perf_counter()
        try:
            hits = db.search_messages(query, limit=20)
        except Exception as exc:  # noqa: BLE001 - report, do not crash the benchmark
            hits, error = [], f"{type(exc).__name__}: {exc}"
        times.append(time.perf_counter() - t0)
    sessions: list = []
    for hit in hits:
        if hit["session_id"] not in sessions:
            sessions.append(hit["session_id"])
    results.append({"query": query, "hits": len(hits), "sessions": sessions[:5],
                    "median_ms": statistics.median(times) * 1000, "times_ms":
                    [t * 1000 for t in times], "error": error})
db.close()
size = sum(p.stat().st_size for p in workdir.glob("state.db*"))
print(json.dumps({"messages": messages, "load_seconds": load_seconds, "results": results,
                  "db_bytes": size}))
