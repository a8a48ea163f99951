"""Recall and query time of CARDS' approximate indexes against the exact one, on real and synthetic embeddings.

Recall@k is the share of a query's exact top-k (itself excluded, as CARDS excludes it) that the index
returns in its own top-k; query time is the wall time of one batched ``search`` of the sampled queries
(top-k+1), per 1,000 queries, on every thread Faiss is given. Real: the first 11,914 Wiki-1m lines,
deduplicated as CARDS' view does, encoded as it does (mean pooling, L2-normalised, 32 tokens) by
all-MiniLM-L6-v2. Synthetic (labelled so): a Gaussian mixture of unit vectors in 384 dimensions, each
cluster spread along its own 16-dimensional subspace (embeddings have a low intrinsic dimension),
to reach 10^5–10^6 points. The indexes are the ones the view builds (:func:`augcse.text.retrieval_index.build_index`).

    python benchmarks/retrieval_scale.py --data-dir ../shared/data --out docs/records/retrieval-scale.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from augcse.text.retrieval_index import IndexChoice, build_index

KS = (8, 64)


def cpu_model() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                platform.processor())


def real_vectors(data_dir: Path, cache: Path) -> np.ndarray:
    """The Wiki-1m sample as CARDS' view encodes it (cached in ``cache``: encoding is the slow part)."""
    if cache.is_file():
        return np.load(cache)
    from augcse import load_model
    from augcse.assets.resolve import resolve_model
    from augcse.text.retrieval import dedupe_corpus, mean_pooled

    texts = dedupe_corpus((data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines())
    model = load_model(str(resolve_model("sentence-transformers/all-MiniLM-L6-v2")))
    started = time.perf_counter()
    vectors = mean_pooled(model, texts, 128, max_seq_length=32)
    print(f"encoded {len(texts)} sentences in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    np.save(cache, vectors)
    return vectors


def mixture(n: int, dim: int = 384, per_cluster: int = 100, rank: int = 16, seed: int = 0) -> np.ndarray:
    """Synthetic unit vectors: n // per_cluster overlapping clusters whose centres lie in a 32-dimensional
    subspace, each spread along its own rank-16 subspace, plus isotropic noise (tuned so IVF's recall on
    20,000 points is near, a little above, the real set's)."""
    rng = np.random.default_rng(seed)
    clusters = max(1, n // per_cluster)
    centres = rng.standard_normal((clusters, 32)).astype(np.float32) @ (
        rng.standard_normal((32, dim)).astype(np.float32) / np.sqrt(32))
    bases = rng.standard_normal((clusters, rank, dim)).astype(np.float32) / np.sqrt(rank)
    label = rng.integers(0, clusters, n)
    out = np.empty((n, dim), np.float32)
    for start in range(0, n, 50_000):  # in blocks: the (n, rank, dim) product would not fit
        lab = label[start:start + 50_000]
        z = rng.standard_normal((len(lab), rank)).astype(np.float32)
        block = centres[lab] + 2.0 * np.einsum("nr,nrd->nd", z, bases[lab])
        block += 0.5 * rng.standard_normal(block.shape).astype(np.float32)
        out[start:start + 50_000] = block
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def index_bytes(index) -> int:
    """The index's size as Faiss writes it (vectors or codes, lists, graph): what it holds in memory."""
    import faiss

    return int(faiss.serialize_index(index).nbytes)


def end_to_end(n: int, choice: IndexChoice, k: int, folder: Path) -> dict:
    """CARDS' retrieval path for ``n`` distinct synthetic sentences, every one a query, as the view runs it
    (``build_neighbours``: dedupe, keys, index, search, the per-query filtering, the cached lists), with the
    encoding replaced by the synthetic vectors (encoding 10^6 real sentences takes hours on CPUs)."""
    import augcse.text.retrieval as retrieval

    points = mixture(n)
    texts = [f"synthetic sentence number {i} of the corpus" for i in range(n)]
    retrieval.corpus_vectors = lambda index_texts, *args, **kwargs: points
    retrieval.model_fingerprint = lambda model: "synthetic"
    started = time.perf_counter()
    found = retrieval.build_neighbours(texts, texts, None, k, folder, index=choice)
    seconds = time.perf_counter() - started
    assert found.ids.shape == (n, k)
    return {"n": n, "k": k, "index": choice.resolved(n), "nprobe": choice.nprobe, "ef_search": choice.ef_search,
            "seconds": round(seconds, 1), "queries_per_s": round(n / seconds)}


def without_self(ids: np.ndarray, own: np.ndarray, k: int) -> list[set[int]]:
    return [set([i for i in row if i != o and i >= 0][:k]) for row, o in zip(ids, own)]


def measure(vectors: np.ndarray, queries: int, choices: list[IndexChoice], seed: int = 0) -> list[dict]:
    """One row per index: its build time, query time per 1k queries, recall@8 and @64 against the flat index."""
    rng = np.random.default_rng(seed)
    own = np.sort(rng.choice(len(vectors), size=min(queries, len(vectors)), replace=False))
    xq = vectors[own]
    rows, truth = [], None
    built: dict[tuple, tuple] = {}
    for choice in choices:
        kind = choice.resolved(len(vectors))
        shape = (kind, choice.hnsw_m) if kind == "hnsw" else (kind,)
        if shape not in built:  # one build per structure; nprobe and efSearch are search-time settings
            started = time.perf_counter()
            built[shape] = (build_index(vectors, choice), time.perf_counter() - started)
        index, build_s = built[shape]
        if kind in ("ivf", "ivfpq"):
            index.nprobe = choice.nprobe
        if kind == "hnsw":
            index.hnsw.efSearch = choice.ef_search
        started = time.perf_counter()
        _, ids = index.search(xq, max(KS) + 1)
        search_s = time.perf_counter() - started
        found = {k: without_self(ids, own, k) for k in KS}
        if kind == "flat":
            truth = found
        row = {"index": kind, "build_s": round(build_s, 2), "query_ms_per_1k": round(1000 * search_s / len(xq) * 1000, 1),
               "index_mb": round(index_bytes(index) / 2**20, 1)}
        if kind in ("ivf", "ivfpq"):
            row.update(nlist=int(index.nlist), nprobe=choice.nprobe)
        if kind == "ivfpq":
            row.update(pq_bytes_per_vector=int(index.pq.M))
        if kind == "hnsw":
            row.update(m=choice.hnsw_m, ef_search=choice.ef_search)
        for k in KS:
            row[f"recall@{k}"] = round(float(np.mean([len(f & t) / max(1, len(t))
                                                      for f, t in zip(found[k], truth[k])])), 4)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    return rows


def main() -> None:
    import faiss

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=None, help="the JSON record (default: print it)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="synthetic sizes")
    parser.add_argument("--queries", type=int, default=2000, help="sampled queries per set")
    parser.add_argument("--nprobe", type=int, nargs="+", default=[4, 16, 32, 64, 128])
    parser.add_argument("--hnsw-up-to", type=int, default=1_000_000, help="build HNSW only on sets up to this size")
    parser.add_argument("--ivfpq-nprobe", type=int, nargs="+", default=[32, 128])
    parser.add_argument("--end-to-end", type=int, metavar="N",
                        help="instead: time CARDS' retrieval path for N synthetic sentences (every one a query)")
    parser.add_argument("--index", default="auto", help="with --end-to-end: the index kind")
    parser.add_argument("--e2e-nprobe", type=int, default=32, help="with --end-to-end: nprobe")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/retrieval-scale-wiki.npy"))
    args = parser.parse_args()

    if args.end_to_end:
        import tempfile

        with tempfile.TemporaryDirectory() as folder:
            row = end_to_end(args.end_to_end, IndexChoice(args.index, nprobe=args.e2e_nprobe), 64, Path(folder))
        record = {"command": "python " + " ".join(sys.argv), "cpu": cpu_model(), "threads": faiss.omp_get_max_threads(),
                  "faiss": faiss.__version__, "end_to_end": row}
        if args.out:
            args.out.write_text(json.dumps(record, indent=1) + "\n")
        print(json.dumps(record, indent=1))
        return

    def choices(n: int) -> list[IndexChoice]:
        out = [IndexChoice("flat")] + [IndexChoice("ivf", nprobe=p) for p in args.nprobe]
        if n >= 39 * 256:
            out += [IndexChoice("ivfpq", nprobe=p) for p in args.ivfpq_nprobe]
        if n <= args.hnsw_up_to:
            out += [IndexChoice("hnsw", ef_search=e) for e in (64, 128, 256)]
        return out

    sets = []
    real = real_vectors(args.data_dir, args.cache)
    sets.append({"set": "wiki1m first 11,914 lines, deduplicated; all-MiniLM-L6-v2 mean pooling, 32 tokens (real)",
                 "n": len(real), "dim": real.shape[1], "rows": measure(real, args.queries, choices(len(real)))})
    for n in args.sizes:
        points = mixture(n)
        sets.append({"set": f"Gaussian mixture, {n // 100} overlapping clusters of rank 16 in 384 dims (synthetic)",
                     "n": n, "dim": points.shape[1], "rows": measure(points, args.queries, choices(n))})
        del points
    record = {"command": "python " + " ".join(sys.argv), "cpu": cpu_model(), "threads": faiss.omp_get_max_threads(),
              "faiss": faiss.__version__, "queries_per_set": args.queries, "k": list(KS),
              "measured": "recall@k against the exact flat index (own sentence excluded); wall time of one batched "
                          "search of the sampled queries, per 1,000 queries; build = train + add",
              "nlist_rule": "4·√n, at most n/39", "sets": sets}
    text = json.dumps(record, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
