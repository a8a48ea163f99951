"""Peak anonymous memory of a one-step ``augcse train`` against the size of its corpus: does a run hold the corpus?

For each size, generates a corpus (benchmarks/corpus_scale.py's random-word lines) and runs
``augcse train --recipe quickstart data.corpus=… training.max_steps=1`` (no evaluation) in a fresh process,
sampling ``RssAnon`` of the process and its children every 20 ms (the resident memory without memory-mapped file
pages). Prints and records, per size, the peak and the corpus's bytes; then the growth of the peak between the
smallest and the largest size as a share of the extra text.

    python benchmarks/train_corpus_memory.py --sizes 200000 2000000 --backbone PATH --out docs/records/train-corpus-memory.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from corpus_scale import generate  # noqa: E402


def rss_anon_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            return next((int(line.split()[1]) for line in handle if line.startswith("RssAnon:")), 0)
    except OSError:
        return 0


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from /proc, no extra dependency)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo += children.get(current, [])
    return found


def one_step(corpus: Path, backbone: str | None, out: Path) -> dict:
    command = [sys.executable, "-m", "augcse", "train", "--recipe", "quickstart", f"data.corpus={corpus}",
               "training.max_steps=1", "eval.dev=null", "eval.before=null", "eval.after=null", f"output_dir={out}",
               "--overwrite", *([f"model.backbone={backbone}"] if backbone else [])]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], sum(rss_anon_kb(p) for p in tree(proc.pid)))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"augcse train failed on {corpus}: {err.strip().splitlines()[-1:]}")
    return {"peak_rss_anon_mb": round(peak[0] / 1024, 1), "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--backbone", help="model.backbone (default: the quickstart's)")
    parser.add_argument("--tmp", type=Path, default=Path("/tmp/train-corpus-memory"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.tmp.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.sizes:
        corpus = args.tmp / f"letters-{n}.txt"
        if not corpus.exists():
            generate(corpus, n, letters=True)
        row = {"lines": n, "text_mb": round(corpus.stat().st_size / 2**20, 1),
               **one_step(corpus, args.backbone, args.tmp / "runs")}
        print(json.dumps(row), flush=True)
        rows.append(row)
    first, last = rows[0], rows[-1]
    growth = (last["peak_rss_anon_mb"] - first["peak_rss_anon_mb"]) / (last["text_mb"] - first["text_mb"])
    print(f"peak anonymous memory grows {growth:.1%} of the extra text ({first['lines']} -> {last['lines']} lines)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"command": " ".join(["python", *sys.argv]), "python": platform.python_version(),
                                        "rows": rows, "growth_share_of_extra_text": round(growth, 4)}, indent=1) + "\n")


if __name__ == "__main__":
    main()
