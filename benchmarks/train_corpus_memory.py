"""Peak anonymous memory of a one-step ``augcse train`` against the size of its corpus: what does a run hold a line?

For each size, writes a corpus and runs ``augcse train --recipe quickstart data.corpus=… data.limit=…
training.max_steps=1`` (no evaluation) in a fresh process, sampling ``RssAnon`` of the process and all its
descendants every 50 ms (the resident memory without memory-mapped file pages, such as the corpus's Arrow file).
Each (limit, size) runs ``--repeats`` times, the sizes interleaved, since the machine may be shared. Prints and
records every run's peak, then, per limit, the growth of the median peak between the smallest and the largest
size in bytes per extra line, with the spread of the runs (the largest size's lowest peak less the smallest's
highest, and the other way round).

Corpora (``--corpus``):

- ``wiki``: real sentences, the 11,914 Wikipedia sentences the package embeds (``augcse/data/wiki_default.txt.gz``)
  cycled, line ``i`` being sentence ``i mod 11,914`` followed by a space and ``i`` itself, so that every line is
  distinct (the embedded set repeats some sentences; a cycle of it would too) and the same for any run;
- ``letters``: benchmarks/corpus_scale.py's random words of letters (about 5 % duplicate lines).

``--limits`` are the values given to ``data.limit``: the quickstart's 4,096 (the reader keeps that many shuffled
lines and training sees no more) and ``null`` (every line reaches the trainer, its views and its sampler).

    python benchmarks/train_corpus_memory.py --backbone PATH --label after --out docs/records/train-corpus-memory.json

``--label`` names the code measured; rows of other labels already in ``--out`` are kept.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from corpus_scale import generate  # noqa: E402
from retrieval_scale import cpu_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = ROOT / "src" / "augcse" / "data" / "wiki_default.txt.gz"
SAMPLE_SECONDS = 0.05


def write_wiki(path: Path, n: int) -> None:
    """``n`` distinct real sentences: the embedded ones cycled, each followed by its line number."""
    with gzip.open(EMBEDDED, "rt", encoding="utf-8") as handle:
        sentences = handle.read().splitlines()
    with open(path, "w", encoding="utf-8") as out:
        for start in range(0, n, 100_000):
            out.write("".join(f"{sentences[i % len(sentences)]} {i}\n" for i in range(start, min(n, start + 100_000))))


def write_letters(path: Path, n: int) -> None:
    generate(path, n, letters=True)


CORPORA: dict[str, Callable[[Path, int], None]] = {"wiki": write_wiki, "letters": write_letters}


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


def one_step(corpus: Path, limit: str, backbone: str | None, out: Path) -> dict:
    command = [sys.executable, "-m", "augcse", "train", "--recipe", "quickstart", f"data.corpus={corpus}",
               f"data.limit={limit}", "training.max_steps=1", "eval.dev=null", "eval.before=null", "eval.after=null",
               f"output_dir={out}", "--overwrite", *([f"model.backbone={backbone}"] if backbone else [])]
    started = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, done = [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], sum(rss_anon_kb(p) for p in tree(proc.pid)))
            time.sleep(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode != 0:
        raise SystemExit(f"augcse train failed on {corpus}: {err.strip().splitlines()[-1:]}")
    return {"peak_rss_anon_mb": round(peak[0] / 1024, 1), "seconds": round(time.perf_counter() - started, 1),
            "load_average": round(os.getloadavg()[0], 2)}


def growth(rows: list[dict], label: str, limit: str) -> dict:
    """Bytes a line the median peak grows by from the smallest to the largest size, and the spread of the runs."""
    mine = [row for row in rows if row["label"] == label and row["limit"] == limit]
    small, large = min(row["lines"] for row in mine), max(row["lines"] for row in mine)
    peaks = {n: [row["peak_rss_anon_mb"] for row in mine if row["lines"] == n] for n in (small, large)}
    per_line = lambda mb: round(mb * 2**20 / (large - small), 1)  # noqa: E731
    return {"label": label, "limit": limit, "lines": [small, large],
            "bytes_a_line": per_line(statistics.median(peaks[large]) - statistics.median(peaks[small])),
            "bytes_a_line_spread": [per_line(min(peaks[large]) - max(peaks[small])),
                                    per_line(max(peaks[large]) - min(peaks[small]))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--limits", nargs="+", default=["4096", "null"], help="values of data.limit")
    parser.add_argument("--corpus", choices=sorted(CORPORA), default="wiki")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--backbone", help="model.backbone (default: the quickstart's)")
    parser.add_argument("--label", default="current", help="a name for the code measured, e.g. before or after")
    parser.add_argument("--tmp", type=Path, default=Path("/tmp/train-corpus-memory"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.tmp.mkdir(parents=True, exist_ok=True)
    corpora = {}
    for n in args.sizes:
        corpora[n] = args.tmp / f"{args.corpus}-{n}.txt"
        if not corpora[n].exists():
            CORPORA[args.corpus](corpora[n], n)
    rows = []
    for limit in args.limits:
        for repeat in range(args.repeats):
            for n in args.sizes:
                row = {"label": args.label, "corpus": args.corpus, "limit": limit, "lines": n, "repeat": repeat,
                       "text_mb": round(corpora[n].stat().st_size / 2**20, 1),
                       **one_step(corpora[n], limit, args.backbone, args.tmp / "runs")}
                print(json.dumps(row), flush=True)
                rows.append(row)
    summaries = [growth(rows, args.label, limit) for limit in args.limits]
    for summary in summaries:
        print(json.dumps(summary))
    if args.out:
        old = json.loads(args.out.read_text()) if args.out.is_file() else {}
        keep = lambda entries: [e for e in entries if e.get("label") != args.label]  # noqa: E731
        record = {"python": platform.python_version(), "cpu": cpu_model(), "cores": os.cpu_count(),
                  "sample_seconds": SAMPLE_SECONDS,
                  "commands": {**old.get("commands", {}), args.label: " ".join(["python", *sys.argv])},
                  "rows": keep(old.get("rows", [])) + rows, "growth": keep(old.get("growth", [])) + summaries}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
