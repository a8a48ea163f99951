"""Run registered evaluation tasks on one model and print the table with its wall time.

    python benchmarks/eval_suite.py MODEL --tasks transfer,clustering,intent --data-dir ../shared/data \
        --threads 1 --out results.json

Used before ``augcse eval`` existed and for runs needing a fixed torch thread count.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch
from sentence_transformers import SentenceTransformer

from augcse.assets.resolve import resolve_model
from augcse.evaluation.encoding import EmbeddingCache
from augcse.evaluation.suite import main_scores, run_tasks
from augcse.evaluation.tasks import TASKS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tasks", default="all")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default=None, help="write results JSON here")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    model = SentenceTransformer(resolve_model(args.model), device="cpu")
    cache = EmbeddingCache(model, batch_size=args.batch_size, show_progress=False)
    results = run_tasks(model, args.tasks, args.data_dir, fast=args.fast, cache=cache, progress=False)
    total = time.perf_counter() - start
    task_seconds = sum(r["seconds"] for r in results.values())
    print("| task | main metric | score | seconds |\n|---|---|---:|---:|")
    for name, scores in results.items():
        metric = TASKS[name].main_metric
        print(f"| {name} | {metric} | {scores[metric]:.2f} | {scores['seconds']:.1f} |")
    for key, value in main_scores(results).items():
        if key.endswith("_avg"):
            print(f"| **{key}** | | **{value:.2f}** | |")
    print(f"\ntotal {total:.0f} s (encoding {cache.encoded_count} distinct sentences + model load: "
          f"{total - task_seconds:.0f} s; tasks {task_seconds:.0f} s); torch threads {torch.get_num_threads()}")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "model": args.model, "tasks": args.tasks, "fast": args.fast, "results": results,
            "main": main_scores(results), "seconds": total, "encoded": cache.encoded_count,
            "torch_threads": torch.get_num_threads(), "machine": platform.platform(),
        }, indent=1))


if __name__ == "__main__":
    main()
