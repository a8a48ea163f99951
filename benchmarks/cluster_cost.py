"""What ``augcse cluster`` costs: N texts of a clustering set adapted and clustered with the built-in recipe, timed.

The first N texts of ``clustering/<set>.csv`` (its ``text`` column only) are written to a CSV and given to the
command as a user would, in this process; the record says the wall time, the steps trained, why training
stopped, the CPU (``lscpu``'s model name) and torch's thread count. One run on one machine: a measurement of that
run, not a rate to project to other sizes.

    python benchmarks/cluster_cost.py --data-dir $AUGCSE_DATA --out /tmp/cc10k --n 10000 --clusters 20
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

SETS = ("stackoverflow", "searchsnippets", "biomedical", "tweet")  # sets this benchmark may read


def write_texts(source: Path, n: int, target: Path) -> int:
    with open(source, encoding="utf-8", newline="") as f:
        texts = [row["text"] for _, row in zip(range(n), csv.DictReader(f))]
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text"])
        writer.writerows([t] for t in texts)
    return len(texts)


def main() -> None:
    import torch

    from augcse.commands.main import main as augcse
    from augcse.studies.cluster_study import cpu_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--set", choices=SETS, default="stackoverflow")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--clusters", type=int, default=20)
    ap.add_argument("overrides", nargs="*", help="recipe overrides passed on to augcse cluster")
    args = ap.parse_args()
    texts = args.out / f"{args.set}-{args.n}.csv"
    count = write_texts(args.data_dir / "clustering" / f"{args.set}.csv", args.n, texts)
    argv = ["cluster", str(texts), "--clusters", str(args.clusters), f"output_dir={args.out / 'runs'}",
            "name=cost", "--overwrite", "--data-dir", str(args.data_dir), *args.overrides]
    start = time.perf_counter()
    code = augcse(argv)
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"augcse cluster exited {code}")
    record = json.loads((args.out / "runs" / "cost" / "cluster.json").read_text())
    summary = {"command": "augcse " + " ".join(argv), "set": args.set, "texts": count, "clusters": args.clusters,
               "wall_s": round(wall, 1), "steps": record["steps"], "stopping_reason": record["stopping_reason"],
               "kept": record["kept"], "checks": len(record["trace"]), "cpu": cpu_model(),
               "torch_threads": torch.get_num_threads()}
    (args.out / "cluster-cost.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
