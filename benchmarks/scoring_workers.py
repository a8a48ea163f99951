"""Scoring the costly tasks (classifiers, K-means) on one thread, two threads, or side by side in processes.

1. **K-means** (VaSCL's protocol, scikit-learn ``KMeans``, ``n_init`` 10) on a real clustering set's
   all-MiniLM-L6-v2 embeddings, ``--runs`` seeds: one after another on one thread, one after another on
   all cores' threads, and one process per core (one thread each). Labels are compared across the three.
2. **The scoring phase of ``augcse eval``**: ``run_tasks`` on ``--tasks`` with the embeddings already
   computed (cached on disk once), ``workers=1`` against ``workers=cores``; scores must be equal.

    python benchmarks/scoring_workers.py --data-dir ../shared/data
    python benchmarks/scoring_workers.py --data-dir ../shared/data --tasks clustering,intent,transfer
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from joblib import Parallel, delayed
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from augcse.assets.resolve import data_dir as resolve_data_dir
from augcse.commands.encode import load_model
from augcse.evaluation.clustering import N_INIT
from augcse.evaluation.encoding import EmbeddingCache
from augcse.evaluation.suite import run_tasks
from augcse.evaluation.tasks import get_task, resolve_tasks
from augcse.evaluation.workers import available_cores

MODEL = "sentence-transformers/all-MiniLM-L6-v2"


def kmeans(embeddings: np.ndarray, k: int, seed: int, threads: int) -> np.ndarray:
    with threadpool_limits(limits=threads):
        return KMeans(n_clusters=k, n_init=N_INIT, random_state=seed).fit_predict(embeddings)


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None, help="data directory (default: $AUGCSE_DATA)")
    ap.add_argument("--set", default="GoogleNews-T", help="clustering set for the K-means lines")
    ap.add_argument("--runs", type=int, default=4, help="K-means seeds per line")
    ap.add_argument("--tasks", default="Tweet,GoogleNews-T,SNIPS,HWU64,CR,TREC,MRPC",
                    help="tasks of the scoring-phase lines")
    ap.add_argument("--cache", default=None, help="embedding cache folder (default: a temporary one)")
    args = ap.parse_args()
    root = resolve_data_dir(args.data_dir)
    cores = available_cores()
    model = load_model(MODEL)
    cache_dir = args.cache or tempfile.mkdtemp(prefix="augcse-emb-")
    task = get_task(args.set)
    data = task.load(root)
    embeddings = EmbeddingCache(model, cache_dir=cache_dir).encode(data["texts"])
    k = int(np.unique(data["labels"]).size)
    print(f"# {args.set}: {len(embeddings)} × {embeddings.shape[1]}, k = {k}, n_init {N_INIT}, {args.runs} seeds; "
          f"{cores} cores\n\n| K-means | wall s | ratio to one thread |\n|---|---:|---:|")
    seeds = range(args.runs)
    one, labels = timed(lambda: [kmeans(embeddings, k, s, 1) for s in seeds])
    threads, by_threads = timed(lambda: [kmeans(embeddings, k, s, cores) for s in seeds])
    processes, by_processes = timed(lambda: Parallel(n_jobs=cores)(delayed(kmeans)(embeddings, k, s, 1) for s in seeds))
    for name, seconds in (("one thread", one), (f"{cores} threads", threads), (f"{cores} processes", processes)):
        print(f"| {name} | {seconds:.1f} | {one / seconds:.2f}× |")
    same = all(np.array_equal(a, b) and np.array_equal(a, c) for a, b, c in zip(labels, by_threads, by_processes))
    print(f"labels identical across the three: {same}")

    cache = EmbeddingCache(model, cache_dir=cache_dir)
    tasks = [get_task(name) for name in resolve_tasks(args.tasks)]
    cache.prefetch([s for t in tasks for s in t.sentences(t.load(root))])  # encoded once, outside the timings
    print(f"\n| scoring {args.tasks} | wall s | ratio |\n|---|---:|---:|")
    results = {}
    for workers in (1, cores):
        timings: dict[str, float] = {}
        results[workers] = run_tasks(model, args.tasks, root, progress=False, cache=cache, workers=workers,
                                     timings=timings)
        results[workers]["_wall"] = timings["scoring"]
    base = results[1]["_wall"]
    for workers in (1, cores):
        print(f"| workers={workers} | {results[workers]['_wall']:.1f} | {base / results[workers]['_wall']:.2f}× |")
    strip = {w: {t: {m: v for m, v in s.items() if m != "seconds"} for t, s in r.items() if t != "_wall"}
             for w, r in results.items()}
    print(f"scores identical: {strip[1] == strip[cores]}")
    print(f"cache: {Path(cache_dir)}")


if __name__ == "__main__":
    main()
