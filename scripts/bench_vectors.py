"""Vector search at scale: the old in-memory layout (float32 rows, one matrix-vector product)
next to today's (int8 rows with a per-row scale, hermes.memory.vector_matrix), and an IVF
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
from pathlib import Path

# One core, as the budget is stated (OpenBLAS would otherwise spin a thread per core, and its
# spinning counts as CPU time under load).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hermes.memory.vector_matrix import Int8Rows  # noqa: E402

CACHE = "/tmp/lead-vec/all-MiniLM-L6-v2-onnx-int8-dq.json"


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
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

    def __init__(self, x: np.ndarray, rows: Int8Rows, cells: int, seed: int = 0) -> None:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", default=CACHE, help="a bench_locomo vector-cache file")
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--no-load", action="store_true", help="skip the SQLite load cost")
    parser.add_argument("--load-only", nargs=2, metavar=("DB", "LAYOUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load_only:
        return load_only(*args.load_only)
    real = real_vectors(args.vectors)
    qs = queries(real, args.queries)
    report("LoCoMo's real vectors", real, qs, False, 64)
    for n in args.sizes:
        x = synthetic(real, n)
        report("synthetic", x, qs, not args.no_load, max(64, int(np.sqrt(n))))
        del x
        gc.collect()


if __name__ == "__main__":
    main()
