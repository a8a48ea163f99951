"""Peak memory and sentences/s of a view over its augmentation cache, whole-corpus lists (old) against chunks (new).

Generates a corpus of random words (a 5,000-word vocabulary, 8–24 words a line) in ``--tmp``, then, in a fresh
process per (code, size), reads it with ``load_corpus`` (a memory-mapped Dataset, the same reader for both)
and builds the ``augcse_sample`` view with one cheap rule-based augmentation (``RandomDeletion``, no parser):
the cache key, the sharded cache (``build_cache``) and the view's columns. It records the seconds, the
process's peak RSS (``getrusage``) and the peak anonymous resident memory (``RssAnon`` sampled every 20 ms:
RSS less the pages of memory-mapped files, which the kernel may drop). ``old`` runs ``src/`` at ``--old-ref``
(extracted with ``git archive``), ``new`` the working tree; both results are hashed and compared.

    python benchmarks/augment_scale.py --sizes 100000 1000000 --out docs/records/augment-scale.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
import tarfile
import threading
import time
from io import BytesIO
from pathlib import Path

import numpy as np

OLD_REF = "1e9f21c"  # the last commit whose views and cache make lists of the whole corpus
ROOT = Path(__file__).resolve().parents[1]
AUGMENTATION = "RandomDeletion"


def generate(path: Path, n: int, seed: int = 0) -> None:
    """``n`` lines of 8–24 random words, written 100,000 at a time."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i:04d}" for i in range(5000)])
    with open(path, "w", encoding="utf-8") as out:
        for start in range(0, n, 100_000):
            rows = min(100_000, n - start)
            words = vocabulary[rng.integers(0, len(vocabulary), size=(rows, 24))]
            lengths = rng.integers(8, 25, size=rows)
            out.write("\n".join(" ".join(row[:k]) for row, k in zip(words, lengths)) + "\n")


def _rss_anon_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    return 0


def child(corpus: Path, tmp: Path, label: str) -> dict:
    """One measurement, in this (fresh) process: read the corpus, then build the view and its cache."""
    import datasets

    from augcse.text.corpus import load_corpus
    from augcse.text.views import VIEWS
    from augcse.text.views.base import ViewContext

    datasets.disable_progress_bars()
    peak = {"anon": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak["anon"] = max(peak["anon"], _rss_anon_kb())

    dataset, _ = load_corpus(corpus, cache_dir=tmp / f"corpus-{label}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    start = time.perf_counter()
    view = VIEWS["augcse_sample"].builder(dataset, ViewContext(None, seed=0, cache_dir=tmp / f"cache-{label}"),
                                          augmentations=[AUGMENTATION])
    seconds = time.perf_counter() - start
    stop.set()
    thread.join()
    digest = hashlib.sha256()
    for i in range(0, len(view), 100_000):
        part = view[i:i + 100_000]
        digest.update(json.dumps([part["augmented"], part["label"]]).encode())
    return {"seconds": round(seconds, 2), "sentences_per_s": round(len(view) / seconds),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "rss_before_view_mb": round(before / 1024), "peak_rss_anon_mb": round(peak["anon"] / 1024),
            "output_sha256": digest.hexdigest()}


def _old_source(ref: str, folder: Path) -> Path:
    """``src/`` at ``ref``, extracted into ``folder``."""
    archive = subprocess.run(["git", "archive", ref, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--codes", nargs="+", default=["old", "new"], choices=["old", "new"])
    parser.add_argument("--old-ref", default=OLD_REF)
    parser.add_argument("--tmp", type=Path, default=Path("/tmp/augment-scale"))
    parser.add_argument("--out", type=Path, default=None, help="JSON record (rows of other sizes are kept)")
    parser.add_argument("--child", nargs=2, metavar=("CORPUS", "LABEL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(Path(args.child[0]), args.tmp, args.child[1])))
        return
    args.tmp.mkdir(parents=True, exist_ok=True)
    old_src = _old_source(args.old_ref, args.tmp / "old") if "old" in args.codes else None
    rows = []
    for n in args.sizes:
        corpus = args.tmp / f"corpus-{n}.txt"
        if not corpus.is_file():
            generate(corpus, n)
        for code in args.codes:
            env = {**os.environ, "PYTHONPATH": str(old_src if code == "old" else ROOT / "src")}
            run = subprocess.run([sys.executable, __file__, "--tmp", str(args.tmp), "--child", str(corpus),
                                  f"{code}-{n}"], env=env, check=True, capture_output=True, text=True)
            row = {"code": code, "lines": n, **json.loads(run.stdout.strip().splitlines()[-1])}
            print(json.dumps(row), flush=True)
            rows.append(row)
        same = {r["output_sha256"] for r in rows if r["lines"] == n}
        print(f"{n} lines: outputs {'identical' if len(same) == 1 else 'DIFFER'}", flush=True)
    if args.out:
        cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True,
                    text=True).stdout.splitlines() if line.startswith("Model name")), platform.processor())
        record = json.loads(args.out.read_text()) if args.out.is_file() else {"rows": []}
        keep = [r for r in record["rows"] if (r["code"], r["lines"]) not in {(x["code"], x["lines"]) for x in rows}]
        record.update({"command": "python benchmarks/augment_scale.py " + " ".join(sys.argv[1:]), "cpu": cpu,
                       "cores": os.cpu_count(), "python": platform.python_version(), "old_ref": args.old_ref,
                       "augmentation": AUGMENTATION, "view": "augcse_sample",
                       "note": "measured; load average from other jobs on the 2 cores makes sentences/s noisy",
                       "rows": sorted(keep + rows, key=lambda r: (r["lines"], r["code"]))})
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
