"""Where a one-step ``augcse train`` holds memory for its corpus: anonymous memory at each stage of the run.

Runs ``augcse train --recipe quickstart data.corpus=CORPUS training.max_steps=1`` (no evaluation) in this process
with each stage of :data:`STAGES` wrapped: ``RssAnon`` when it starts, the highest while it runs (sampled every
10 ms) and when it returns. Stages found in neither place are left out (the setup's functions live in
``augcse.training.build``, or ``augcse.training.run`` in older trees). ``--torch-sampler`` trains with
sentence-transformers' and the accelerator's own samplers (``RandomSampler``'s list of every row number) in place of
augcse's streamed ones, to see what that list costs. Run it at two corpus sizes and compare the stages:

    python benchmarks/train_stage_memory.py /tmp/train-corpus-memory/wiki-2000000.txt --backbone PATH data.limit=null
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys
import threading
import time

# stage name: (modules to look in, attribute); the first module that has it is wrapped
STAGES = {"read corpus": (("augcse.training.build", "augcse.training.run"), "read_training_corpus"),
          "build model": (("augcse.training.build", "augcse.training.run"), "build_model"),
          "build views": (("augcse.text.views",), "build_views"),
          "build trainer": (("augcse.training.build", "augcse.training.run"), "build_trainer"),
          "train": (("augcse.training.trainer",), "Trainer.train")}


def rss_anon_mb() -> float:
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("RssAnon:")) / 1024


class Peak:
    """The highest ``RssAnon`` since :meth:`reset`, sampled by a thread every 10 ms."""

    def __init__(self) -> None:
        self.value = rss_anon_mb()
        threading.Thread(target=self._sample, daemon=True).start()

    def _sample(self) -> None:
        while True:
            self.value = max(self.value, rss_anon_mb())
            time.sleep(0.01)

    def reset(self) -> float:
        self.value = now = rss_anon_mb()
        return now


def wrap(stage: str, owner, attribute: str, peak: Peak, rows: list[dict]) -> None:
    original = getattr(owner, attribute)

    @functools.wraps(original)
    def measured(*args, **kwargs):
        start = peak.reset()
        result = original(*args, **kwargs)
        rows.append({"stage": stage, "start_mb": round(start, 1), "peak_mb": round(peak.value, 1),
                     "end_mb": round(rss_anon_mb(), 1)})
        return result

    setattr(owner, attribute, measured)


def place(modules: tuple[str, ...], attribute: str):
    """The object holding ``attribute`` (``Class.method`` names a class's), in the first module that has it."""
    owner_name, _, name = attribute.rpartition(".")
    for module_name in modules:
        try:
            owner = importlib.import_module(module_name)
        except ImportError:
            continue
        owner = getattr(owner, owner_name, None) if owner_name else owner
        if owner is not None and hasattr(owner, name):
            return owner, name
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("overrides", nargs="*", help="more recipe overrides, e.g. data.limit=null")
    parser.add_argument("--backbone", help="model.backbone (default: the quickstart's)")
    parser.add_argument("--torch-sampler", action="store_true", help="sentence-transformers' own batch sampler")
    args = parser.parse_intermixed_args()
    peak, rows = Peak(), []
    for stage, (modules, attribute) in STAGES.items():
        found = place(modules, attribute)
        if found is not None:
            wrap(stage, *found, peak, rows)
    if args.torch_sampler:
        from sentence_transformers import SentenceTransformerTrainer

        from augcse.training.trainer import Trainer

        Trainer.get_batch_sampler = SentenceTransformerTrainer.get_batch_sampler
        Trainer.get_train_dataloader = SentenceTransformerTrainer.get_train_dataloader
    from augcse.commands.main import main as augcse

    code = augcse(["train", "--recipe", "quickstart", f"data.corpus={args.corpus}", "training.max_steps=1",
                   "eval.dev=null", "eval.before=null", "eval.after=null", "output_dir=/tmp/train-stage-memory",
                   "--overwrite", *([f"model.backbone={args.backbone}"] if args.backbone else []), *args.overrides])
    for row in rows:
        print(json.dumps(row))
    sys.exit(code)


if __name__ == "__main__":
    main()
