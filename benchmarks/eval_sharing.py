"""Shared encoding vs task-by-task encoding for one evaluation run, measured in the same process.

    python benchmarks/eval_sharing.py sentence-transformers/all-MiniLM-L6-v2 --tasks all \
        --data-dir ../shared/data --threads 1 --out sharing.json

Phase 1 encodes each task's sentences with a fresh EmbeddingCache per task (what evaluating tasks one
by one costs); phase 2 encodes the union once with one shared cache (what ``run_tasks`` does);
phase 3 runs every task once on the shared cache. The classifier/K-means time is the same either
way, so: task-by-task total = phase 1 + phase 3, shared total = phase 2 + phase 3.
``--count-only`` just counts the sentences each way (no model needed).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from augcse.evaluation.encoding import EmbeddingCache
from augcse.evaluation.tasks import TASKS, resolve_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--tasks", default="all")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("--count-only", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    names = resolve_tasks(args.tasks)
    data = {n: TASKS[n].load(Path(args.data_dir) if args.data_dir else None) for n in names}
    per_task = {n: len(set(TASKS[n].sentences(data[n]))) for n in names}
    union = {s for n in names for s in TASKS[n].sentences(data[n])}
    report: dict = {"tasks": names, "sentences_task_by_task": sum(per_task.values()),
                    "sentences_shared": len(union), "per_task": per_task}
    print(f"distinct sentences: task by task {sum(per_task.values())}, shared {len(union)}", flush=True)
    if not args.count_only:
        import torch
        from sentence_transformers import SentenceTransformer

        from augcse.assets.resolve import resolve_model

        if args.threads:
            torch.set_num_threads(args.threads)
        model = SentenceTransformer(resolve_model(args.model), device="cpu")
        model.encode(["warm up"])
        encode_each = {}
        for n in names:
            start = time.perf_counter()
            EmbeddingCache(model, batch_size=args.batch_size).prefetch(TASKS[n].sentences(data[n]))
            encode_each[n] = time.perf_counter() - start
            print(f"  {n}: {per_task[n]} sentences, {encode_each[n]:.1f} s", flush=True)
        shared = EmbeddingCache(model, batch_size=args.batch_size)
        start = time.perf_counter()
        shared.prefetch([s for n in names for s in TASKS[n].sentences(data[n])])
        encode_shared = time.perf_counter() - start
        start = time.perf_counter()
        for n in names:
            TASKS[n].evaluate(shared, data[n], fast=args.fast)
        evaluate = time.perf_counter() - start
        one_by_one, together = sum(encode_each.values()) + evaluate, encode_shared + evaluate
        report.update(encode_task_by_task_s=sum(encode_each.values()), encode_shared_s=encode_shared,
                      evaluate_s=evaluate, total_task_by_task_s=one_by_one, total_shared_s=together,
                      ratio=one_by_one / together, torch_threads=torch.get_num_threads(), encode_each_s=encode_each)
        print(f"encoding: task by task {sum(encode_each.values()):.0f} s, shared {encode_shared:.0f} s; "
              f"evaluation {evaluate:.0f} s; total {one_by_one:.0f} s vs {together:.0f} s "
              f"-> {one_by_one / together:.2f}x", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
