"""Build the full rule-based augmentation cache for 100,000 real sentences and time it.

Corpus: the shared Wikipedia files (SimCSE wiki1m head, CLINC OOS Wikipedia sentences), topped up
with the texts of the clustering CSVs in file-name order, de-duplicated, first 100,000.

    python benchmarks/augment_cache_100k.py --data-dir $AUGCSE_DATA --out /tmp/aug100k --n-process 2
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

from augcse.text import augment
from augcse.text.augment.cache import format_stats, load_stats


def corpus(data_dir: Path, n: int) -> list[str]:
    seen: dict[str, None] = {}
    files = [data_dir / "corpus/wiki1m_for_simcse.first11914.txt", data_dir / "corpus/clinc_oos_all_wiki_sents.txt"]
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                seen.setdefault(line.strip(), None)
    for path in sorted((data_dir / "clustering").glob("*.csv")):
        with open(path, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                text = (row.get("text") or "").strip()
                if text:
                    seen.setdefault(text, None)
                if len(seen) >= n:
                    break
        if len(seen) >= n:
            break
    sentences = list(seen)[:n]
    if len(sentences) < n:
        raise SystemExit(f"only {len(sentences)} distinct sentences available")
    return sentences


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--n-process", type=int, default=2)
    ap.add_argument("--augs", default="all-rule-based")
    args = ap.parse_args()
    sentences = corpus(args.data_dir, args.n)
    names = augment.resolve_names(args.augs)
    start = time.perf_counter()
    ds = augment.build_cache(sentences, names, args.out, n_process=args.n_process)
    wall = time.perf_counter() - start
    print(format_stats(load_stats(args.out)))
    summary = {"sentences": len(ds), "augmentations": len(names), "n_process": args.n_process,
               "wall_s": round(wall, 1), "sentences_per_s": round(len(ds) / wall, 1)}
    (args.out / "timing.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
