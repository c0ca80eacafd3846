"""Vector search at scale: the old in-memory layout (float32 rows, one matrix-vector product)
next to today's (int8 rows with a per-row scale, hermes.memory.vectors.matrix), and an IVF
coarse index measured as an option (numpy k-means cells; not what Hermes runs).

    OMP_NUM_THREADS=1 nice -n 10 python scripts/bench_vectors.py [--sizes 100000 1000000]

For each size: per-query CPU p50/p99 of the vector part (the cosines of every row, and the
nearest 100), the bytes held, the CPU and RSS of loading the user's vectors out of SQLite (a
CLI process's start; ``MessageVectors`` on a real message_vectors table), and how much of the
exact float32 top 20 / top 100 each layout returns. Vectors: LoCoMo's real MiniLM vectors
(the bench_locomo --vector-cache file), and a synthetic set of any size made from them (each
row a random real vector plus 0.6 x another plus noise, renormalised: the mean cosine of two
rows is about the real set's). Queries: real vectors with a little noise. CPU time
(time.process_time); RSS from /proc (this machine is shared: say its load next to a figure).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# One core, as the budget is stated (OpenBLAS would otherwise spin a thread per core, and its
# spinning counts as CPU time under load).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

CACHE = "/tmp/lead-vec/all-MiniLM-L6-v2-onnx-int8-dq.json"


def rss_mb(field: str = "VmRSS") -> float:
    """RSS in MB; ``field`` RssAnon: private memory only, RssFile: pages of mapped files
    (shared with other processes, dropped by the kernel when memory is short)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return 0.0


def real_vectors(path: str) -> np.ndarray:
    data = json.loads(Path(path).read_text())
    return np.stack([np.frombuffer(bytes.fromhex(v), dtype=np.float32) for v in data.values()])


def synthetic(real: np.ndarray, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((n, real.shape[1]), np.float32)
    for s in range(0, n, 100_000):
        m = min(100_000, n - s)
        x = (real[rng.integers(0, len(real), m)] + 0.6 * real[rng.integers(0, len(real), m)]
             + rng.standard_normal((m, real.shape[1]), dtype=np.float32)
             * (0.8 / np.sqrt(real.shape[1])))
        out[s : s + m] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def queries(real: np.ndarray, n: int, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = real[rng.integers(0, len(real), n)] + rng.standard_normal(
        (n, real.shape[1]), dtype=np.float32) * (0.5 / np.sqrt(real.shape[1]))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def top(scores: np.ndarray, k: int) -> np.ndarray:
    k = min(k, len(scores))
    best = np.argpartition(-scores, k - 1)[:k]
    return best[np.argsort(-scores[best])]


def timed(fn, qs) -> tuple[list, float, float]:
    out, times = [], []
    for q in qs:
        t = time.process_time()
        out.append(fn(q))
        times.append(time.process_time() - t)
    ms = np.array(times) * 1000
    return out, float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


def overlap(found: list, exact: list, k: int) -> float:
    return float(np.mean([len(set(f[:k].tolist()) & set(e[:k].tolist())) / k
                          for f, e in zip(found, exact, strict=True)]))


class IVF:
    """Spherical k-means cells over int8 rows; a query scans the ``nprobe`` nearest cells."""

    def __init__(self, x: np.ndarray, rows: Any, cells: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        t = time.process_time()
        sample = x[rng.choice(len(x), min(len(x), 40 * cells), replace=False)]
        c = sample[rng.choice(len(sample), cells, replace=False)].copy()
        for _ in range(8):
            a = np.argmax(sample @ c.T, axis=1)
            for j in range(cells):
                members = sample[a == j]
                if len(members):
                    s = members.sum(0)
                    c[j] = s / max(float(np.linalg.norm(s)), 1e-9)
        self.train_s = time.process_time() - t
        t = time.process_time()
        cell = np.concatenate([np.argmax(x[i : i + 32768] @ c.T, axis=1)
                               for i in range(0, len(x), 32768)])
        self.assign_s = time.process_time() - t
        order = np.argsort(cell, kind="stable")
        self.bounds = np.searchsorted(cell[order], np.arange(cells + 1))
        # Each cell's rows stored together: a probe reads contiguous slices.
        self.rows = rows.take(order)
        self.ids = order
        self.centroids = c

    def nearest(self, q: np.ndarray, nprobe: int, k: int) -> np.ndarray:
        probe = np.argpartition(-(self.centroids @ q), nprobe - 1)[:nprobe]
        spans = [np.arange(self.bounds[p], self.bounds[p + 1]) for p in probe]
        at = np.concatenate(spans)
        return self.ids[at[top(self.rows.cosines(q, at), k)]]


def load_cost(x: np.ndarray) -> dict:
    """CPU and RSS of reading every vector of one user out of SQLite, each layout in a fresh
    process: the old one (float32, as MessageVectors read it before) and today's
    (MessageVectors._matrix)."""
    import subprocess

    from hermes.store.db import connect

    out = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        path = Path(tmp) / "v.db"
        db = connect(path)
        db.execute("PRAGMA foreign_keys=OFF")  # vectors without their messages: a bench only
        half = x.astype(np.float16)
        with db.conn:
            for s in range(0, len(x), 50_000):
                db.conn.executemany(
                    "INSERT INTO message_vectors (message_id, user, model, vector) "
                    "VALUES (?, 'u', 'bench', ?)",
                    [(s + i + 1, half[s + i].tobytes()) for i in range(min(50_000, len(x) - s))])
        del half
        db.conn.close()
        for layout in ("old", "new"):
            done = subprocess.run([sys.executable, __file__, "--load-only", str(path), layout],
                                  capture_output=True, text=True, check=True)
            out[layout] = json.loads(done.stdout.splitlines()[-1])
    return out


def load_only(path: str, layout: str) -> None:
    from hermes.memory.sessions.vectors import MessageVectors
    from hermes.store.db import connect

    class Bench:
        model_id = "bench"

    db = connect(Path(path))  # modules imported and the database opened before measuring
    db.execute("SELECT count(*) FROM vector_changes").fetchone()
    before, t = rss_mb(), time.process_time()
    if layout == "old":
        rows = db.execute("SELECT message_id, vector FROM message_vectors WHERE user = ? "
                          "AND model = ? ORDER BY message_id", ["u", "bench"]).fetchall()
        ids = np.array([r[0] for r in rows], dtype=np.int64)
        held = (np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float16)
                .reshape(len(rows), -1).astype(np.float32))
        del rows
    else:
        held = MessageVectors(db, Bench())._matrix("u")
    cpu = time.process_time() - t
    gc.collect()
    print(json.dumps([cpu, rss_mb() - before, held is not None and len(ids if layout == "old"
                                                                       else held.ids)]))


def report(name: str, x: np.ndarray, qs: np.ndarray, with_load: bool, cells: int) -> None:
    from hermes.memory.vectors.matrix import Int8Rows

    print(f"\n## {name}: {len(x):,} vectors x {x.shape[1]}, {len(qs)} queries "
          f"(load average {os.getloadavg()[0]:.1f})")
    top(x @ qs[0], 100)  # first touch of every page, outside the timing
    exact, f32_p50, f32_p99 = timed(lambda q: top(x @ q, 100), qs)
    rows = Int8Rows.quantized(x)
    top(rows.cosines(qs[0]), 100)
    found, i8_p50, i8_p99 = timed(lambda q: top(rows.cosines(q), 100), qs)
    print("| layout | bytes held | vector part p50 / p99 (CPU) | top-20 / top-100 of exact |")
    print("|---|---|---|---|")
    print(f"| old: float32 rows | {x.nbytes / 2**20:,.0f} MB | {f32_p50:.1f} / {f32_p99:.1f} ms "
          f"| 1.000 / 1.000 |")
    print(f"| new: int8 rows + scale | {rows.nbytes / 2**20:,.0f} MB | {i8_p50:.1f} / "
          f"{i8_p99:.1f} ms | {overlap(found, exact, 20):.3f} / {overlap(found, exact, 100):.3f} |")
    if cells:
        ivf = IVF(x, rows, cells)
        for nprobe in (8, 16, 32, 64):
            if nprobe > cells:
                continue
            got, p50, p99 = timed(lambda q, n=nprobe: ivf.nearest(q, n, 100), qs)
            print(f"| option: IVF {cells} cells, {nprobe} probed (int8) | "
                  f"{ivf.rows.nbytes / 2**20:,.0f} MB | {p50:.1f} / {p99:.1f} ms | "
                  f"{overlap(got, exact, 20):.3f} / {overlap(got, exact, 100):.3f} |")
        print(f"(IVF build: k-means {ivf.train_s:.1f} s CPU, assigning every row "
              f"{ivf.assign_s:.1f} s CPU)")
    if with_load:
        cost = load_cost(x)
        print(f"Loading the user's vectors out of SQLite: old {cost['old'][0]:.2f} s CPU, "
              f"+{cost['old'][1]:,.0f} MB RSS; new {cost['new'][0]:.2f} s CPU, "
              f"+{cost['new'][1]:,.0f} MB RSS")


def end_to_end(x: np.ndarray, qs: np.ndarray, modes: Sequence[str],
               ivf_min: int | None = None) -> None:
    """The shipped path on a home of len(x) messages (sessions of 20) with these vectors:
    clustering (vector_cells.maybe_cluster, as the background pass runs it), then, in a fresh
    process per mode, the first search (load + session windows: a CLI's start) and each
    search's vector part (semantic.similarities, its nearest 20 messages and windows, the exact
    cosines of a 100-message word pool), exact scan vs cells."""

    from hermes.memory.sessions.vectors import _float32_of
    from hermes.memory.vectors import cells as vector_cells
    from hermes.store.db import connect

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        path = Path(tmp) / "e2e.db"
        db = connect(path)
        for trigger in ("messages_fts_ai", "messages_count_ai"):  # words are not measured here
            db.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        n = len(x)
        half = x.astype(np.float16)
        with db.conn:
            db.conn.executemany(
                "INSERT INTO sessions (id, user, source, started_at, last_active_at) "
                "VALUES (?, 'u', 'import', '2026-01-01', '2026-01-01')",
                [(s + 1,) for s in range((n + 19) // 20)])
            for s in range(0, n, 50_000):
                part = range(s, min(n, s + 50_000))
                db.conn.executemany(
                    "INSERT INTO messages (id, session_id, user, role, speaker, content, "
                    "created_at) VALUES (?, ?, 'u', 'user', 'u', ?, '2026-01-01')",
                    [(i + 1, i // 20 + 1, f"m{i}") for i in part])
                db.conn.executemany(
                    "INSERT INTO message_vectors (message_id, user, model, vector) "
                    "VALUES (?, 'u', 'bench', ?)", [(i + 1, half[i].tobytes()) for i in part])
        del half
        t = time.process_time()
        if ivf_min is not None:  # a small set clustered all the same, to measure its recall
            vector_cells.IVF_MIN = ivf_min
        vector_cells.maybe_cluster(db, "message", "u", "bench", _float32_of)
        build = time.process_time() - t
        db.conn.close()
        print(f"\n## The shipped path: {n:,} messages, {len(qs)} queries (load average "
              f"{os.getloadavg()[0]:.1f}); clustering as the background pass does it: "
              f"{build:.1f} s CPU")
        run_modes(tmp, qs, modes, {"db": str(path), "user": "u", "model": "bench"})


def run_modes(tmp: str, qs: np.ndarray, modes: Sequence[str], spec: dict) -> None:
    """Each mode in a fresh process on the database of ``spec`` (db, user, model). A mode
    ending in ``+file`` keeps the user's vectors in a file (<tmp>/cache: none at first): it
    runs twice, the first process building and saving the file, the second mapping it."""
    import shutil
    import subprocess

    np.save(Path(tmp) / "q.npy", qs)
    (Path(tmp) / "spec.json").write_text(json.dumps(spec))
    print("| mode | first search of a new process: CPU, RSS after (of it private) | RSS after "
          "every query (private) | vector part p50 / p99 (CPU) | nearest 20 messages / 20 "
          "windows: share of the exact |")
    print("|---|---|---|---|---|")
    split = []
    for mode in modes:
        shutil.rmtree(Path(tmp) / "cache", ignore_errors=True)
        edits = mode.endswith("+edits")
        mode = mode.removesuffix("+edits")
        runs = ([f"{mode} (saves the file)", f"{mode} (maps it)"] if mode.endswith("+file")
                else [mode])
        if edits:  # then EDITS messages edited (their vectors dropped), and a new process
            runs.append(f"{mode} (maps it after {EDITS} edits)")
        for label in runs:
            if "edits)" in label:
                edit_some(spec)
            done = subprocess.run([sys.executable, __file__, "--e2e-only", tmp, mode],
                                  capture_output=True, text=True)
            if done.returncode:
                print(done.stderr[-2000:])
                break
            r = json.loads(done.stdout.splitlines()[-1])
            print(f"| {label} | {r['first']:.2f} s, {r['rss']:,.0f} MB ({r['anon']:,.0f}) | "
                  f"{r['rss_end']:,.0f} MB ({r['anon_end']:,.0f}) | {r['p50']:.1f} / "
                  f"{r['p99']:.1f} ms | {r['recall'][0]:.3f} / {r['recall'][1]:.3f} |",
                  flush=True)
            split.append(f"- {label}: " + ", ".join(f"{name} {ms:.2f}"
                                                    for name, ms in r["stages"].items()))
    print("\nThe vector part by stage, CPU p50 ms:\n" + "\n".join(split))


EDITS = 100
# The vector part's stages, each timed on its own (CPU p50 printed under the table)
STAGES = ("cells' scan (similarities)", "nearest 20 messages and windows",
          "their exact cosines", "a 100-message pool's cosines")


def edit_some(spec: dict) -> None:
    """EDITS of the user's messages edited, spread over the history, as another process
    would (each edit drops the message's vector: the next search re-embeds a few)."""
    from hermes.store.db import connect

    db = connect(Path(spec["db"]))
    ids = [r[0] for r in db.execute("SELECT message_id FROM message_vectors WHERE user = ? "
                                    "AND model = ? ORDER BY message_id",
                                    [spec["user"], spec["model"]]).fetchall()]
    chosen = [ids[i] for i in np.random.default_rng(9).choice(len(ids), EDITS, replace=False)]
    with db.conn:
        db.conn.executemany("UPDATE messages SET content = content || ' (edited)' WHERE id = ?",
                            [(i,) for i in chosen])
    db.conn.close()


def on_home(home: str, user: str, qs: np.ndarray, modes: Sequence[str]) -> None:
    """The modes on an existing home (e.g. bench_turn's 1M messages: a COPY, the bench may
    embed a few messages without a vector), its user's vectors of their commonest model."""
    from hermes.store.db import connect

    db_path = Path(home) / "hermes.db"
    db = connect(db_path)
    model, n = db.execute("SELECT model, count(*) FROM message_vectors WHERE user = ? "
                          "GROUP BY model ORDER BY 2 DESC LIMIT 1", [user]).fetchone()
    sessions = db.execute("SELECT count(DISTINCT session_id) FROM messages WHERE user = ?",
                          [user]).fetchone()[0]
    db.conn.close()
    print(f"\n## {home}: user {user}, {n:,} message vectors ({model}) in {sessions:,} sessions, "
          f"{len(qs)} queries (load average {os.getloadavg()[0]:.1f})")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        run_modes(tmp, qs, modes, {"db": str(db_path), "user": user, "model": model})


def e2e_only(tmp: str, mode: str) -> None:
    if mode == "old":  # the code before int8 rows and cells (a checkout named by BENCH_OLD_CODE)
        sys.path.insert(0, os.environ["BENCH_OLD_CODE"])
    from hermes.memory.sessions import semantic
    from hermes.memory.sessions.vectors import MessageVectors
    from hermes.store.db import connect

    qs = np.load(Path(tmp) / "q.npy")
    spec = json.loads((Path(tmp) / "spec.json").read_text())
    user = spec["user"]

    class Queries:
        model_id = spec["model"]

        def embed(self, texts):  # a message without a vector (a home's newest): any unit one
            x = np.random.default_rng(len(texts)).standard_normal((len(texts), qs.shape[1]))
            return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

        def embed_query(self, text):
            return qs[int(text)]

    if mode != "old":
        from hermes.memory.vectors import cells as vector_cells

        if mode == "exact":
            vector_cells.load = lambda *a: None  # type: ignore[assignment]  # as unclustered
            vector_cells.version = lambda *a: 0  # type: ignore[assignment]
        if mode.startswith("cells:"):  # another scan size (and window seeds): cells:8192:80
            from hermes.memory.sessions import vectors as message_vectors

            vector_cells.SCAN_ROWS = int(mode.split(":")[1].removesuffix("+file"))
            if mode.count(":") == 2:
                message_vectors.WINDOW_SEEDS = int(mode.split(":")[2].removesuffix("+file"))
    db = connect(Path(spec["db"]))
    if mode.endswith("+file"):  # the user's vectors kept in <tmp>/cache (vector_file)
        vectors = MessageVectors(db, Queries(), Path(tmp) / "cache")
    else:
        vectors = MessageVectors(db, Queries())
    t = time.process_time()
    semantic.similarities(vectors, user, "0")
    first, rss, anon = time.process_time() - t, rss_mb(), rss_mb("RssAnon")
    rng = np.random.default_rng(5)
    times, found = [], []
    stages: dict[str, list[float]] = {name: [] for name in STAGES}
    ids = np.asarray(vectors.matrix(user).ids)
    for i in range(len(qs)):
        pool = ids[rng.integers(0, len(ids), 100)].tolist()
        t = time.process_time()
        sims = semantic.similarities(vectors, user, str(i))
        t1 = time.process_time()
        extra = sims.nearest(20)
        t2 = time.process_time()
        sims.of(extra)  # the candidates' exact cosines, as session search reads them next
        t3 = time.process_time()
        sims.of(pool)
        t4 = time.process_time()
        times.append(t4 - t)
        for name, a, b in zip(STAGES, (t, t1, t2, t3), (t1, t2, t3, t4), strict=True):
            stages[name].append(b - a)
        if mode.startswith("cells"):
            found.append((set(sims.nearest_messages(20)), set(sims.nearest_windows(20))))
    rss_end, anon_end = rss_mb(), rss_mb("RssAnon")
    recall = [1.0, 1.0]
    if mode.startswith("cells"):  # the exact answer, by the full scan, outside the timing
        matrix = vectors.matrix(user)
        win = semantic._windows_of(vectors, user, matrix)
        exact = []
        for q in qs:
            cos = matrix.cosines(q)  # every row (the full scan)
            padded = np.append(cos, np.float32(0))
            windows = (cos + padded[win.prev] + padded[win.next]) / win.norm
            exact.append(({int(matrix.ids[r]) for r in top(cos, 20)},
                          {int(matrix.ids[r]) for r in top(windows, 20)}))
        recall = [float(np.mean([len(f[part] & e[part]) / 20
                                 for f, e in zip(found, exact, strict=True)])) for part in (0, 1)]
    ms = np.array(times) * 1000
    print(json.dumps({"first": first, "rss": rss, "anon": anon, "rss_end": rss_end,
                      "anon_end": anon_end, "p50": float(np.percentile(ms, 50)),
                      "p99": float(np.percentile(ms, 99)), "recall": recall,
                      "stages": {name: float(np.percentile(np.array(v) * 1000, 50))
                                 for name, v in stages.items()}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", default=CACHE, help="a bench_locomo vector-cache file")
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--no-load", action="store_true", help="skip the SQLite load cost")
    parser.add_argument("--load-only", nargs=2, metavar=("DB", "LAYOUT"), help=argparse.SUPPRESS)
    parser.add_argument("--e2e-only", nargs=2, metavar=("DIR", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--no-e2e", action="store_true", help="skip the shipped path")
    parser.add_argument("--e2e-alone", action="store_true", help="only the shipped path")
    parser.add_argument("--modes", nargs="*", default=["exact", "cells", "cells+file"],
                        help="shipped path: exact, cells, cells:SCAN_ROWS[:SEEDS], old (the "
                             "code in the checkout named by BENCH_OLD_CODE); +file after any "
                             "but old: the vectors kept in a file (run twice: saving, mapping); "
                             "+file+edits: then a third run after 100 edits")
    parser.add_argument("--home", help="run the modes on this home's database instead (a "
                                       "copy: a few messages may be embedded)")
    parser.add_argument("--user", default="owner", help="with --home: whose vectors")
    args = parser.parse_args()
    if args.load_only:
        return load_only(*args.load_only)
    if args.e2e_only:
        return e2e_only(*args.e2e_only)
    real = real_vectors(args.vectors)
    qs = queries(real, args.queries)
    if args.home:
        return on_home(args.home, args.user, qs, args.modes)
    if not args.e2e_alone:
        report("LoCoMo's real vectors", real, qs, False, 64)
    if not args.no_e2e:  # LoCoMo's real vectors as one long history, clustered all the same
        end_to_end(real, qs, ["exact", "cells:512", "cells:1024"], ivf_min=1024)
    for n in args.sizes:
        x = synthetic(real, n)
        if not args.e2e_alone:
            report("synthetic", x, qs, not args.no_load, max(64, int(np.sqrt(n))))
        if not args.no_e2e:
            end_to_end(x, qs, args.modes)
        del x
        gc.collect()


if __name__ == "__main__":
    main()
