"""Peak memory and lines/s of reading a corpus, the list reader of before against the Arrow one.

Generates corpora of random words (a fixed 5,000-word vocabulary, 6–18 words a line, about 5 % duplicates
of recent lines and 1 % bad lines) in ``--tmp``, then, in a fresh process per (reader, size) so that peaks do
not mix, times ``load_corpus(path, dedupe=True, shuffle=True, limit=n // 2, min_words=2)`` (read, clean,
dedupe, shuffle, limit) and records the process's peak RSS (``getrusage``) and the peak of its anonymous
resident memory (``RssAnon`` sampled every 20 ms: the RSS without the pages of memory-mapped files, which the
kernel may drop). The old reader is ``src/augcse/text/corpus.py`` at ``--old-ref``. Both readers' selections
are hashed and compared.

    python benchmarks/corpus_scale.py --sizes 1000000 --out docs/records/corpus-scale.json
    python benchmarks/corpus_scale.py --sizes 10000000 --out docs/records/corpus-scale.json   # adds its rows
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

OLD_REF = "b94ead3"  # the last commit whose corpus reader builds a list of the lines
ROOT = Path(__file__).resolve().parents[1]


def generate(path: Path, n: int, seed: int = 0, letters: bool = False) -> None:
    """``n`` lines of random words with duplicates and bad lines, written in chunks. ``letters``: words of letters
    only ("wbcd" rather than "w0123"), which ``augcse train``'s check that a corpus holds text accepts."""
    rng = np.random.default_rng(seed)
    spell = (lambda i: "w" + "".join("abcdefghij"[int(d)] for d in f"{i:04d}")) if letters else (lambda i: f"w{i:04d}")
    vocabulary = np.array([spell(i) for i in range(5000)])
    bad = [b"", b"   ", b"lonely", b"caf\xe9 au lait latin-1 bytes"]
    recent: list[bytes] = []
    with open(path, "wb") as out:
        for start in range(0, n, 100_000):
            rows = min(100_000, n - start)
            words = vocabulary[rng.integers(0, len(vocabulary), size=(rows, 18))]
            lengths = rng.integers(6, 19, size=rows)
            roll = rng.random(rows)
            lines = []
            for row, length, r in zip(words, lengths, roll):
                if r < 0.05 and recent:
                    lines.append(recent[int(r * 1e6) % len(recent)])
                elif r < 0.06:
                    lines.append(bad[int(r * 1e6) % len(bad)])
                else:
                    lines.append(" ".join(row[:length]).encode())
            recent = lines[-10_000:]
            out.write(b"\n".join(lines) + b"\n")


def _old_module(ref: str, folder: Path):
    source = subprocess.run(["git", "show", f"{ref}:src/augcse/text/corpus.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    file = folder / f"corpus_{ref}.py"
    file.write_text(source)
    spec = importlib.util.spec_from_file_location(f"corpus_{ref}", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def _rss_anon_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1])
    return 0


def measure(reader: str, corpus: Path, tmp: Path, old_ref: str) -> dict:
    """One measurement, in this process: memory before, peak RSS, peak anonymous RSS, seconds."""
    import logging

    logging.disable(logging.WARNING)
    if reader == "old":
        module = _old_module(old_ref, tmp)
        options = {}
    else:
        from augcse.text import corpus as module
        options = {"cache_dir": tmp / "arrow"}
    n = sum(1 for _ in open(corpus, "rb"))
    base_rss, base_anon = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, _rss_anon_kb()
    peak_anon, stop = [base_anon], threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            peak_anon[0] = max(peak_anon[0], _rss_anon_kb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.perf_counter()
    dataset, stats = module.load_corpus(corpus, dedupe=True, shuffle=True, limit=n // 2, min_words=2, **options)
    seconds = time.perf_counter() - start
    stop.set()
    sampler.join()
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    digest = hashlib.sha256()
    for batch in dataset.with_format("arrow").iter(batch_size=100_000):
        for text in batch.column("text").to_pylist():
            digest.update(text.encode() + b"\n")
    return {"reader": reader, "lines": n, "seconds": round(seconds, 2), "lines_per_s": round(n / seconds),
            "rss_before_mb": round(base_rss / 1024), "peak_rss_mb": round(peak_rss / 1024),
            "peak_rss_above_start_mb": round((peak_rss - base_rss) / 1024),
            "peak_anon_mb": round(peak_anon[0] / 1024), "peak_anon_above_start_mb": round((peak_anon[0] - base_anon) / 1024),
            "memory_mapped": bool(dataset.cache_files), "stats": stats.as_dict(), "selection_sha256": digest.hexdigest()}


def _command() -> str:
    return "python benchmarks/corpus_scale.py " + " ".join(sys.argv[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--readers", nargs="+", default=["old", "new"])
    parser.add_argument("--old-max", type=int, default=10_000_000, help="largest size the old reader is run on")
    parser.add_argument("--old-ref", default=OLD_REF)
    parser.add_argument("--tmp", type=Path, default=Path("/tmp/corpus-scale"))
    parser.add_argument("--out", type=Path)
    parser.add_argument("--measure", nargs=2, metavar=("READER", "CORPUS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.tmp.mkdir(parents=True, exist_ok=True)
    if args.measure:
        print(json.dumps(measure(args.measure[0], Path(args.measure[1]), args.tmp, args.old_ref)))
        return
    results = []
    for size in args.sizes:
        corpus = args.tmp / f"corpus-{size}.txt"
        if not corpus.is_file():
            start = time.perf_counter()
            generate(corpus, size)
            print(f"generated {corpus} ({corpus.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - start:.0f} s",
                  flush=True)
        for reader in args.readers:
            if reader == "old" and size > args.old_max:
                continue
            run = subprocess.run([sys.executable, __file__, "--tmp", str(args.tmp), "--old-ref", args.old_ref,
                                  "--measure", reader, str(corpus)], check=True, capture_output=True, text=True)
            result = json.loads(run.stdout.strip().splitlines()[-1])
            result["text_mb"] = round(corpus.stat().st_size / 1e6)
            results.append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "stats"}), flush=True)
    if args.out and args.out.is_file():  # keep the sizes measured by an earlier command (each under 10 minutes)
        measured = {(r["reader"], r["lines"]) for r in results}
        earlier = json.loads(args.out.read_text())
        results = [r for r in earlier["results"] if (r["reader"], r["lines"]) not in measured] + results
        commands = [c for c in earlier.get("commands", []) if c != _command()] + [_command()]
    else:
        commands = [_command()]
    results.sort(key=lambda r: (r["lines"], r["reader"] != "old"))
    by_size: dict[int, set] = {}
    for r in results:
        by_size.setdefault(r["lines"], set()).add((r["selection_sha256"], json.dumps(r["stats"], sort_keys=True)))
    same = {size: len(found) == 1 for size, found in by_size.items()}
    print("old and new select the same lines with the same counts:", same)
    cpu = next((line.split(":", 1)[1].strip() for line in subprocess.run(["lscpu"], capture_output=True, text=True)
                .stdout.splitlines() if line.startswith("Model name")), platform.processor())
    record = {"commands": commands, "cpu": cpu,
              "cores": os.cpu_count(), "python": platform.python_version(), "old_ref": args.old_ref,
              "options": "dedupe=True, shuffle=True, limit=lines // 2, min_words=2",
              "same_selection": {str(k): v for k, v in same.items()}, "results": results}
    if args.out:
        args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
