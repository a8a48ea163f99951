"""Training throughput and peak memory of each method's paper recipe, through ``augcse train``'s own path.

Every configuration runs ``augcse.training.run.run`` on a built-in recipe in its own process, with only what
cannot be had offline replaced: the backbone is a randomly initialised encoder of the recipe's shape
(``bert-base``: 12 × 768; ``minilm``: 6 × 384, all-MiniLM-L6-v2's; BERT's uncased vocabulary from the
tokenizer given), DiffCSE's generator a random 6 × 768 masked-LM (distilbert-base-uncased's depth and
width), the corpus the sentences given (DeCLUTR's documents are 100 of them joined). Evaluation and
checkpoints are off; the recipe's loss, views, batch, optimiser and precision are as written, with
``training.bf16=true`` in place of the recipe's fp16 on a GPU. Sentences per second are training rows (one
sentence each, whatever views a method builds from it) over the timed steps, after ``--warmup`` untimed ones.
Peak memory is ``torch.cuda.max_memory_allocated`` on a GPU and the process's peak RSS on a CPU.

    python benchmarks/method_throughput.py --corpus wiki.txt --tokenizer minilm/ --steps 30 --out methods.json
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from transformers import TrainerCallback

SHAPES = {"bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
          "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
          "generator": dict(hidden_size=768, num_hidden_layers=6, num_attention_heads=12, intermediate_size=3072)}

# label: (recipe, encoder shape, overrides). "paper" rows keep the recipe's batch; the others change one thing.
CONFIGS = {
    "quickstart": ("quickstart", "minilm", []),
    "simcse": ("simcse-bert-base", "bert-base", []),
    "esimcse": ("esimcse-bert-base", "bert-base", []),
    "promptbert": ("promptbert-roberta-base", "bert-base", []),
    "consert": ("consert-bert-base", "bert-base", []),
    "diffcse": ("diffcse-bert-base", "bert-base", []),
    "simcse-mlm": ("simcse-mlm-bert-base", "bert-base", []),
    "ct-original": ("ct-bert-base", "bert-base", []),
    "declutr": ("declutr-roberta-base", "bert-base", []),
    "vascl": ("vascl-roberta-base", "bert-base", []),
    "vascl-mb256": ("vascl-roberta-base", "bert-base", ["loss.params.mini_batch_size=256"]),
    "simcse-512": ("simcse-bert-base", "bert-base", ["training.per_device_train_batch_size=512"]),
    "simcse-512-mb128": ("simcse-bert-base", "bert-base", ["training.per_device_train_batch_size=512",
                                                          "loss.params.mini_batch_size=128"]),
    "esimcse-512-mb128": ("esimcse-bert-base", "bert-base", ["training.per_device_train_batch_size=512",
                                                            "loss.params.queue_size=1280",
                                                            "loss.params.mini_batch_size=128"]),
    "promptbert-512": ("promptbert-roberta-base", "bert-base", ["training.per_device_train_batch_size=512"]),
}


def random_encoder(shape: str, tokenizer: Path, folder: Path, masked_lm: bool = True) -> Path:
    """A randomly initialised BERT of ``shape`` with ``tokenizer``'s files, saved as a masked LM (its
    encoder loads as the backbone; MLM terms and DiffCSE find their head in it)."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

    AutoTokenizer.from_pretrained(tokenizer).save_pretrained(folder)
    config = BertConfig(vocab_size=30522, max_position_embeddings=512, **SHAPES[shape])
    (BertForMaskedLM if masked_lm else BertModel)(config).save_pretrained(folder)
    return folder


def documents(corpus: Path, out: Path, per_document: int = 100, count: int = 400) -> Path:
    """DeCLUTR needs long documents: ``per_document`` sentences joined into one line, cycling the corpus."""
    lines = [line.strip() for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    out.write_text("\n".join(" ".join(lines[(i * per_document + j) % len(lines)] for j in range(per_document))
                             for i in range(count)) + "\n", encoding="utf-8")
    return out


def one(args) -> dict:
    """One configuration, in this process."""
    import torch

    from augcse.training.recipes.config import load_recipe
    from augcse.training.run import run

    recipe_name, shape, extra = CONFIGS[args.label]
    shape = args.shape or shape
    extra = [*extra, *([f"training.per_device_train_batch_size={args.batch}"] if args.batch else [])]
    gpu = torch.cuda.is_available()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        backbone = random_encoder(shape, args.tokenizer, tmp / "encoder")
        corpus = documents(args.corpus, tmp / "docs.txt") if args.label.startswith("declutr") else args.corpus
        overrides = [f"name=bench-{args.label}", f"output_dir={tmp / 'runs'}", f"model.backbone={backbone}",
                     f"data.corpus={corpus}", f"training.max_steps={args.warmup + args.steps}",
                     "training.num_train_epochs=1", "training.save_strategy=no", "training.logging_steps=1000",
                     "eval.dev=null", "eval.before=null", "eval.after=null", "training.fp16=false",
                     f"training.bf16={str(gpu).lower()}", "training.dataloader_num_workers=0", *extra]
        if recipe_name.startswith("diffcse"):
            overrides.append(f"loss.params.generator={random_encoder('generator', args.tokenizer, tmp / 'gen')}")
        recipe = load_recipe(None, recipe_name, overrides)
        clock = _Clock(args.warmup)
        if gpu:
            torch.cuda.reset_peak_memory_stats()
        run(recipe, None, callbacks=[clock])
        if gpu:
            torch.cuda.synchronize()
        seconds = clock.end - clock.start
    batch = int(recipe.training["per_device_train_batch_size"])
    peak = torch.cuda.max_memory_allocated() if gpu else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"label": args.label, "recipe": recipe_name, "shape": shape, "overrides": extra, "batch": batch,
            "max_seq_length": recipe.model.max_seq_length, "steps": args.steps,
            "device": torch.cuda.get_device_name() if gpu else "cpu", "precision": "bf16" if gpu else "fp32",
            "step_s": round(seconds / args.steps, 4), "sentences_per_s": round(args.steps * batch / seconds, 1),
            "peak_gib": round(peak / 2**30, 2), "peak_kind": "cuda max allocated" if gpu else "RSS",
            "versions": {name: importlib.metadata.version(name)
                         for name in ("torch", "transformers", "sentence-transformers", "datasets")}}


class _Clock(TrainerCallback):
    """Times the steps after ``warmup``, waiting for the GPU at both ends."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.start, self.end = warmup, None, None

    def _sync(self) -> None:
        import torch

        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.warmup:
            self._sync()
            self.start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        self._sync()
        self.end = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", default=",".join(CONFIGS), help=f"comma-separated, from {', '.join(CONFIGS)}")
    parser.add_argument("--corpus", type=Path, required=True, help="one sentence per line")
    parser.add_argument("--tokenizer", type=Path, required=True, help="a folder with BERT's uncased tokenizer")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--batch", type=int, help="every configuration's batch (a quick check of the wiring)")
    parser.add_argument("--shape", choices=sorted(SHAPES), help="every configuration's encoder shape (likewise)")
    parser.add_argument("--one", dest="label", help=argparse.SUPPRESS)
    args = parser.parse_args()
    unknown = [label for label in args.labels.split(",") + [args.label or "quickstart"] if label not in CONFIGS]
    if unknown:
        parser.error(f"unknown label {unknown[0]!r}; known: {', '.join(CONFIGS)}")
    if args.label:
        print(json.dumps(one(args)), flush=True)
        return
    rows = []
    for label in args.labels.split(","):
        command = [sys.executable, __file__, "--one", label, "--corpus", str(args.corpus), "--tokenizer",
                   str(args.tokenizer), "--steps", str(args.steps), "--warmup", str(args.warmup),
                   *(["--batch", str(args.batch)] if args.batch else []), *(["--shape", args.shape] if args.shape else [])]
        result = subprocess.run(command, capture_output=True, text=True)
        lines = result.stdout.strip().splitlines()
        row = (json.loads(lines[-1]) if result.returncode == 0 and lines
               else {"label": label, "error": (result.stderr.strip().splitlines() or ["?"])[-1][:300]})
        rows.append(row)
        print(json.dumps(row), flush=True)
        if "ModuleNotFoundError" in row.get("error", ""):
            break  # every other configuration would fail alike
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
