"""SentEval's transfer classifier: the batched implementation against the one-by-one loop, same embeddings.

    python benchmarks/senteval_classifier.py sentence-transformers/all-MiniLM-L6-v2 --data-dir ../shared/data \
        --fast-tasks MR,CR,SUBJ,MPQA,SST2,TREC,MRPC --test-tasks CR,TREC --out /tmp/senteval_classifier.json

Encodes the transfer sets once (one torch thread; float32, or bf16 autocast with ``--bf16``) into an
on-disk embedding cache (``--cache``, default ``/tmp/augcse-emb``; a second run encodes nothing), then
times only the classifier phase of each transfer task — ``Task.evaluate`` on those fixed embeddings — with

- ``batched``: :mod:`augcse.evaluation.senteval`, every fold × L2 model of a task trained at once
  (what ``augcse eval --suite transfer`` runs), and
- ``one-by-one``: :mod:`augcse.evaluation.senteval_reference`, SentEval's loops, one model after another,

both on one torch thread on the CPU (``--device`` to change). For every task run both ways it checks
that the outcome is identical: test and dev accuracy, the L2 value selected in each fold and every test
prediction (MRPC's F1 follows from the predictions). It prints one table per mode, the ratio of the
summed classifier times (wall and process CPU) and exits with status 1 if any outcome differs.

SentEval's one-by-one test mode trains several hundred models per task (MR: 10 outer folds × 4 L2
values × 10 inner folds + 10), so ``--test-tasks`` defaults to a subset; ``--batched-only-tasks`` adds
tasks timed with the batched implementation only (their scores are printed, no ratio).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from augcse.evaluation import senteval, senteval_reference
from augcse.evaluation.encoding import EmbeddingCache
from augcse.evaluation.senteval import torch_threads
from augcse.evaluation.tasks import TASKS, resolve_tasks
from augcse.evaluation.transfer import TransferClassifier

ALL = "MR,CR,SUBJ,MPQA,SST2,TREC,MRPC"


class Recording(TransferClassifier):
    """SentEval's three schemes from one implementation module; keeps every :class:`senteval.Outcome`."""

    def __init__(self, module, device: torch.device) -> None:
        self.module, self.device = module, device
        self.outcomes: list[senteval.Outcome] = []

    def _keep(self, out: senteval.Outcome) -> senteval.Outcome:
        self.outcomes.append(out)
        return out

    def nested(self, X, y, fast, seed):
        out = self._keep(self.module.inner_kfold(X, y, senteval.senteval_config(fast, seed), self.device))
        return {"acc": out.acc, "devacc": out.devacc}

    def kfold(self, train, test, fast, seed):
        out = self._keep(self.module.kfold(train, test, senteval.senteval_config(fast, seed), self.device))
        return {"acc": out.acc, "devacc": out.devacc}, out.pred[0]

    def split(self, train, dev, test, fast, seed):
        out = self._keep(self.module.split_classifier(train, dev, test, senteval.senteval_config(fast, seed),
                                                      self.device))
        return {"acc": out.acc, "devacc": out.devacc}


IMPLEMENTATIONS = {"batched": senteval, "one-by-one": senteval_reference}


def run_one(name: str, impl: str, cache: EmbeddingCache, data, fast: bool, device: torch.device) -> dict:
    """Classifier phase of one transfer task with one implementation: scores, outcome, wall and CPU seconds."""
    task = copy.copy(TASKS[name])
    task.classifier = Recording(IMPLEMENTATIONS[impl], device)
    with torch_threads(1):
        wall, cpu = time.perf_counter(), time.process_time()
        scores = task.evaluate(cache, data, fast=fast)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    (outcome,) = task.classifier.outcomes
    return {"scores": {k: float(v) for k, v in scores.items()}, "l2": outcome.l2,
            "pred": [p.tolist() for p in outcome.pred], "wall": wall, "cpu": cpu}


def identical(a: dict, b: dict) -> bool:
    return a["scores"] == b["scores"] and a["l2"] == b["l2"] and a["pred"] == b["pred"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--data-dir", default=os.environ.get("AUGCSE_DATA"))
    parser.add_argument("--cache", default="/tmp/augcse-emb", help="on-disk embedding cache folder")
    parser.add_argument("--fast-tasks", default=ALL, help="tasks compared in fast mode ('' for none)")
    parser.add_argument("--test-tasks", default="CR,TREC", help="tasks compared in test mode ('' for none)")
    parser.add_argument("--batched-only-tasks", default="",
                        help="test-mode tasks timed with the batched implementation only ('' for none)")
    parser.add_argument("--bf16", action="store_true",
                        help="encode under bfloat16 autocast, as augcse eval --bf16 (cache folder gets -bf16)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=128, help="encoding batch size")
    parser.add_argument("--out", default=None, help="write every timing and score as JSON here")
    args = parser.parse_args()

    torch.set_num_threads(1)
    device = torch.device(args.device)
    names = lambda spec: resolve_tasks(spec) if spec.strip() else []  # noqa: E731
    plan = [("fast", n, True) for n in names(args.fast_tasks)] + [("test", n, True) for n in names(args.test_tasks)]
    plan += [("test", n, False) for n in names(args.batched_only_tasks) if n not in names(args.test_tasks)]
    needed = sorted({n for _, n, _ in plan})
    root = Path(args.data_dir) if args.data_dir else None

    from augcse.commands.encode import load_model

    model = load_model(args.model)
    cache_dir = args.cache + ("-bf16" if args.bf16 else "")
    cache = EmbeddingCache(model, batch_size=args.batch_size, show_progress=False, cache_dir=cache_dir)
    data = {n: TASKS[n].load(root) for n in needed}
    start = time.perf_counter()
    precision = torch.autocast(model.device.type, dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()
    with precision:
        cache.prefetch([s for n in needed for s in TASKS[n].sentences(data[n])])
    print(f"embeddings: {cache.encoded_count} sentences encoded in {time.perf_counter() - start:.0f} s "
          f"({len(cache._store)} in the cache {cache._disk})", flush=True)

    rows: list[dict] = []
    ok = True
    for mode, name, both in plan:
        fast = mode == "fast"
        row = {"mode": mode, "task": name}
        for impl in ("batched", "one-by-one") if both else ("batched",):
            row[impl] = run_one(name, impl, cache, data[name], fast, device)
            print(f"{mode:4} {name:5} {impl:10} acc {row[impl]['scores']['acc']:6.2f} devacc "
                  f"{row[impl]['scores']['devacc']:6.2f}  {row[impl]['wall']:8.1f} s wall "
                  f"{row[impl]['cpu']:8.1f} s CPU", flush=True)
        if both:
            row["identical"] = identical(row["batched"], row["one-by-one"])
            ok &= row["identical"]
            if not row["identical"]:
                print(f"  DIFFERENT: batched {row['batched']['scores']} l2 {row['batched']['l2']}; "
                      f"one-by-one {row['one-by-one']['scores']} l2 {row['one-by-one']['l2']}", flush=True)
        rows.append(row)

    print(f"\n{args.model} ({'bf16' if args.bf16 else 'float32'} encoding), classifiers on {device}, "
          f"one torch thread, torch {torch.__version__}")
    summary = {}
    for mode in ("fast", "test"):
        mine = [r for r in rows if r["mode"] == mode]
        if not mine:
            continue
        print(f"\n{mode} mode | acc | devacc | L2 per fold | batched s (CPU s) | one-by-one s (CPU s) | ratio "
              "| identical")
        print("|---|---:|---:|---|---:|---:|---:|---|")
        for r in mine:
            b = r["batched"]
            s = b["scores"]
            ref = r.get("one-by-one")
            l2 = ",".join(f"{v:g}" for v in sorted(set(b["l2"])))
            ref_cell = f"{ref['wall']:.1f} ({ref['cpu']:.1f})" if ref else "—"
            ratio = f"{ref['wall'] / b['wall']:.1f}×" if ref else "—"
            print(f"| {r['task']} | {s['acc']:.2f} | {s['devacc']:.2f} | {l2} | {b['wall']:.1f} ({b['cpu']:.1f}) | "
                  f"{ref_cell} | {ratio} | {r.get('identical', '—')} |")
        both = [r for r in mine if "one-by-one" in r]
        if both:
            tb = sum(r["batched"]["wall"] for r in both)
            tr = sum(r["one-by-one"]["wall"] for r in both)
            cb = sum(r["batched"]["cpu"] for r in both)
            cr = sum(r["one-by-one"]["cpu"] for r in both)
            summary[mode] = {"tasks": [r["task"] for r in both], "batched_wall": tb, "reference_wall": tr,
                             "batched_cpu": cb, "reference_cpu": cr, "ratio_wall": tr / tb, "ratio_cpu": cr / cb,
                             "identical": all(r["identical"] for r in both)}
            print(f"{mode} mode, {len(both)} tasks compared: batched {tb:.0f} s wall / {cb:.0f} s CPU, "
                  f"one-by-one {tr:.0f} s wall / {cr:.0f} s CPU: {tr / tb:.1f}× faster (wall), "
                  f"{cr / cb:.1f}× (CPU); outcomes identical: {summary[mode]['identical']}")
    if args.out:
        for r in rows:  # predictions are compared above; keep the JSON small
            for impl in IMPLEMENTATIONS:
                if impl in r:
                    r[impl].pop("pred")
        Path(args.out).write_text(json.dumps({
            "model": args.model, "bf16": args.bf16, "device": str(device), "torch": torch.__version__,
            "machine": platform.platform(), "cpus": os.cpu_count(), "rows": rows, "summary": summary,
        }, indent=1))
    print("\nall outcomes identical" if ok else "\nSOME OUTCOMES DIFFER", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
