"""``augcse train``: recipe → model, dataset, loss, arguments → ``SentenceTransformerTrainer``.

Nothing here knows any method: the loss and the view builders are looked up by name in their
registries. The trainer does the stepping, evaluation, checkpointing, resume and multi-process
work; this module adds the run directory (resolved recipe, JSONL log, before/after evaluation,
the kept model in ``final/`` with a model card) and a graceful stop on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

from augcse.assets import AssetError, data_dir as resolve_data_dir, has_data, resolve_data, resolve_model
from augcse.corpus import load_corpus
from augcse.recipes.config import Recipe, RecipeError, builtin_recipes, load_recipe

logger = logging.getLogger(__name__)
LOSS_STATE = "loss_state.pt"


# --------------------------------------------------------------------------- pieces

def build_model(recipe: Recipe):
    """The SentenceTransformer to train: a backbone with the recipe's pooler, or an ST folder as it is.

    ``model.max_seq_length`` truncates training batches only (the collator's ``max_length``); the
    model keeps its own maximum, so evaluation sees whole sentences as SentEval does.
    """
    from sentence_transformers import SentenceTransformer

    from augcse.modules import build_sentence_transformer, freeze_fixed_weights

    location = resolve_model(recipe.model.backbone)
    if recipe.model.pooler is None:
        model = SentenceTransformer(location)
    else:
        model = build_sentence_transformer(location, recipe.model.pooler, max_seq_length=None)
    freeze_fixed_weights(model)
    return model


def resolve_corpus(recipe: Recipe, data_dir: Path | None) -> Path:
    """The corpus file: a path, or a data-directory path with the recipe's fallbacks (logged when used)."""
    candidates = [recipe.data.corpus, *recipe.data.fallback]
    tried = []
    for index, candidate in enumerate(candidates):
        if Path(candidate).expanduser().is_file():
            return Path(candidate).expanduser()
        try:
            path = resolve_data(candidate, data_dir)
        except AssetError as exc:
            tried.append(str(exc))
            continue
        if index > 0:
            logger.warning("corpus %s is not available here; using %s instead", recipe.data.corpus, candidate)
        return path
    raise AssetError(f"no corpus found for recipe {recipe.name!r}: " + " | ".join(tried))


def default_tasks(data_dir: Path | None) -> dict[str, str]:
    """Evaluation defaults: the 7 STS tasks and processed STS-B dev with a data directory, else STS-B originals."""
    if has_data("sts/senteval/downstream/STS/STS12-en-test/STS.input.MSRpar.txt", data_dir):
        return {"dev": "STSBenchmark-dev", "sts": "sts"}
    return {"dev": "STSBenchmark-dev-original", "sts": "STSBenchmark-original"}


def build_loss(recipe: Recipe, model) -> torch.nn.Module:
    """The recipe's loss from the registry; a loss with a ``head`` argument defaults to the pooler's head."""
    import inspect

    from augcse.losses import LOSSES
    from augcse.modules import POOLERS

    factory = LOSSES[recipe.loss.name]
    params = dict(recipe.loss.params)
    accepts = inspect.signature(factory).parameters
    if "head" in accepts and "head" not in params and recipe.model.pooler is not None:
        params["head"] = POOLERS[recipe.model.pooler].default_head
    unknown = sorted(set(params) - set(accepts)) if not any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in accepts.values()) else []
    if unknown:
        raise RecipeError(f"unknown recipe key 'loss.params.{unknown[0]}' for loss {recipe.loss.name!r}; "
                          f"allowed: {', '.join(k for k in accepts if k != 'model')}")
    return factory(model, **params)


def _has_accelerator() -> bool:
    accelerator = getattr(torch, "accelerator", None)
    return bool(accelerator.is_available()) if accelerator is not None else torch.cuda.is_available()


def training_arguments(recipe: Recipe, has_dev: bool):
    from sentence_transformers import SentenceTransformerTrainingArguments

    args: dict[str, Any] = dict(
        num_train_epochs=1,
        per_device_train_batch_size=64,
        learning_rate=3e-5,
        warmup_ratio=0.0,
        weight_decay=0.0,
        lr_scheduler_type="linear",
        logging_steps=10,
        save_total_limit=2,
        report_to="none",
        seed=recipe.seed,
        data_seed=recipe.seed,
        dataloader_drop_last=True,
        disable_tqdm=False,
        # without an accelerator, say so: torchrun/accelerate then run CPU processes as real DDP
        use_cpu=not _has_accelerator(),
    )
    if has_dev:
        args.update(eval_strategy="steps", eval_steps=125, save_strategy="steps", load_best_model_at_end=True,
                    greater_is_better=True)
    else:
        args.update(save_strategy="steps", save_steps=125)
    args.update(recipe.training)
    if has_dev:
        args.setdefault("save_steps", args["eval_steps"])
        args.setdefault("metric_for_best_model", "eval_dev_score")
    return SentenceTransformerTrainingArguments(output_dir=str(recipe.run_dir), **args)


# --------------------------------------------------------------------------- callbacks

class JsonlLogger(TrainerCallback):
    """Every trainer log event (named loss components, learning rate, dev score) as one JSON line."""

    def __init__(self, path: Path, loss: torch.nn.Module) -> None:
        self.path = path
        self.loss = loss

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        metrics = getattr(self.loss, "pop_metrics", None)
        record = {"step": state.global_step, "epoch": state.epoch, **logs, **(metrics() if metrics else {})}
        with open(self.path, "a") as handle:
            handle.write(json.dumps(record) + "\n")


class LossStateCheckpoint(TrainerCallback):
    """Save the loss's own parameters (train-only heads, discriminators) into each checkpoint, so resume is exact."""

    def __init__(self, loss: torch.nn.Module) -> None:
        self.loss = loss

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            state_dict = {k: v for k, v in self.loss.state_dict().items() if not k.startswith("model.")}
            torch.save(state_dict, folder / LOSS_STATE)


class GracefulStop(TrainerCallback):
    """On SIGINT/SIGTERM finish the current step, save a resumable checkpoint and stop."""

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._request)

    def _request(self, signum, frame) -> None:
        if self.requested:  # a second Ctrl-C stops at once
            raise KeyboardInterrupt
        self.requested = True
        logger.warning("stop requested: saving a checkpoint after this step (Ctrl-C again to abort)")

    def on_step_end(self, args, state, control, **kwargs):
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
        return control


def restore_loss_state(loss: torch.nn.Module, checkpoint: Path) -> None:
    path = checkpoint / LOSS_STATE
    if path.is_file():
        result = loss.load_state_dict(torch.load(path, map_location="cpu"), strict=False)
        if result.unexpected_keys:
            raise RuntimeError(
                f"checkpoint {checkpoint} has loss parameters this loss lacks: {result.unexpected_keys[:3]}")


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest *complete* checkpoint: a process killed while saving leaves a folder without the
    files written last (the trainer state, then the loss state), which is skipped."""
    complete = [
        path for path in run_dir.glob("checkpoint-*")
        if path.name.split("-")[-1].isdigit() and (path / "trainer_state.json").is_file() and (path / LOSS_STATE).is_file()
    ]
    return max(complete, key=lambda p: int(p.name.split("-")[-1]), default=None)


# --------------------------------------------------------------------------- reporting

def format_table(columns: dict[str, dict[str, float]]) -> str:
    """A small aligned table: rows are tasks, columns are e.g. before/after."""
    tasks = [t for t in next(iter(columns.values()))]
    width = max(len(t) for t in tasks) + 2
    head = "task".ljust(width) + "".join(name.rjust(10) for name in columns)
    lines = [head, "-" * len(head)]
    for task in tasks:
        cells = "".join(f"{columns[name].get(task, float('nan')):10.2f}" for name in columns)
        lines.append(task.ljust(width) + cells)
    return "\n".join(lines)


def evaluate(model, tasks: str, data_dir: Path | None, batch_size: int) -> dict[str, float]:
    from augcse.evaluation.suite import main_scores, run_tasks

    return main_scores(run_tasks(model, tasks, data_dir, batch_size=batch_size))


def write_model_card(final: Path, recipe: Recipe, scores: dict) -> None:
    card = final / "README.md"
    lines = ["", "## augcse training recipe", "", "```yaml", recipe.to_yaml().rstrip(), "```", ""]
    if scores.get("after"):
        lines += ["## augcse evaluation (Spearman ×100, cosine)", "", "```",
                  format_table({k: v for k, v in scores.items() if v}), "```", ""]
    with open(card, "a", encoding="utf-8") as handle:
        handle.write("\n".join(lines))


# --------------------------------------------------------------------------- the run

def run(recipe: Recipe, data_dir: str | Path | None = None, resume: bool = False) -> dict:
    """Train ``recipe`` end to end; returns the run summary (also written to ``run_dir/summary.json``)."""
    from sentence_transformers import SentenceTransformerTrainer

    from augcse.evaluation.suite import SuiteEvaluator
    from augcse.losses import bind_dataset
    from augcse.views import ViewContext, build_views

    started = time.perf_counter()
    root = resolve_data_dir(data_dir)
    run_dir = recipe.run_dir
    checkpoint = latest_checkpoint(run_dir) if resume else None
    if resume and checkpoint is None:
        raise RecipeError(f"--resume: no checkpoint in {run_dir}; start the run without --resume")
    if not resume and run_dir.exists() and any(run_dir.glob("checkpoint-*")):
        raise RecipeError(f"{run_dir} already has checkpoints; pass --resume to continue, or choose another name=")
    main_process = int(os.environ.get("RANK", "0")) == 0
    run_dir.mkdir(parents=True, exist_ok=True)
    if main_process:
        (run_dir / "recipe.yaml").write_text(recipe.to_yaml())

    torch.manual_seed(recipe.seed)
    model = build_model(recipe)
    loss = build_loss(recipe, model)
    corpus_path = resolve_corpus(recipe, root)
    options = {k: getattr(recipe.data, k) for k in ("limit", "shuffle", "dedupe", "min_words", "max_chars")}
    corpus, stats = load_corpus(corpus_path, column=recipe.data.column, seed=recipe.seed, **options)
    context = ViewContext(model=model, seed=recipe.seed, data_dir=root, run_dir=run_dir)
    train_dataset = build_views(corpus, recipe.data.views, context)
    bind_dataset(loss, train_dataset)  # columns by role, before the trainer starts

    defaults = default_tasks(root)
    dev = defaults["dev"] if recipe.eval.dev == "auto" else recipe.eval.dev
    before_tasks = defaults["sts"] if recipe.eval.before == "auto" else recipe.eval.before
    after_tasks = defaults["sts"] if recipe.eval.after == "auto" else recipe.eval.after
    evaluator = SuiteEvaluator(dev, root, batch_size=recipe.eval.batch_size, name="dev") if dev else None
    args = training_arguments(recipe, has_dev=evaluator is not None)

    scores: dict[str, dict[str, float]] = {}
    eval_file = run_dir / "eval.json"
    if resume and eval_file.is_file():
        scores = json.loads(eval_file.read_text())
    if before_tasks and main_process and "before" not in scores:
        logger.info("evaluating the starting model on %s", before_tasks)
        scores["before"] = evaluate(model, before_tasks, root, recipe.eval.batch_size)
        eval_file.write_text(json.dumps(scores, indent=2))
        print("\nBefore training:\n" + format_table({"before": scores["before"]}), flush=True)

    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=train_dataset, loss=loss, evaluator=evaluator,
        callbacks=[JsonlLogger(run_dir / "log.jsonl", loss), LossStateCheckpoint(loss)],
    )
    trainer.data_collator.max_length = recipe.model.max_seq_length  # truncate training batches only
    stopper = GracefulStop()
    trainer.add_callback(stopper)
    if checkpoint is not None:
        restore_loss_state(loss, checkpoint)
        logger.info("resuming from %s", checkpoint)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    if stopper.requested:
        last = latest_checkpoint(run_dir)
        print(f"\nStopped; resumable checkpoint: {last}. Continue with: augcse train ... --resume", flush=True)
        return {"stopped": True, "checkpoint": str(last)}

    summary: dict[str, Any] = {
        "name": recipe.name,
        "corpus": str(corpus_path),
        "corpus_stats": stats.as_dict(),
        "train_rows": len(train_dataset),
        "global_step": trainer.state.global_step,
        "best_metric": trainer.state.best_metric,
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "best_step": int(trainer.state.best_model_checkpoint.rsplit("-", 1)[1]) if trainer.state.best_model_checkpoint else None,
    }
    if trainer.is_world_process_zero():
        final = run_dir / "final"
        model.save(str(final))
        if after_tasks:
            scores["after"] = evaluate(model, after_tasks, root, recipe.eval.batch_size)
            print("\n" + format_table(scores), flush=True)
        eval_file.write_text(json.dumps(scores, indent=2))
        write_model_card(final, recipe, scores)
        summary["seconds"] = time.perf_counter() - started
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        print(f"\nKept model: step {summary['best_step']} (dev {summary['best_metric']}); saved to {final}", flush=True)
    return summary


# --------------------------------------------------------------------------- CLI

def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train from a recipe (YAML file or --recipe NAME)",
                                   description="Train from a recipe; key=value arguments override recipe keys.")
    parser.add_argument("recipe_file", nargs="?", help="recipe YAML file")
    parser.add_argument("--recipe", help=f"built-in recipe name ({', '.join(builtin_recipes())})")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. training.learning_rate=1e-5 name=myrun")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA, else the embedded defaults)")
    parser.add_argument("--resume", action="store_true", help="continue from the run's latest checkpoint")
    parser.set_defaults(func=_run_cli)


def _run_cli(args: argparse.Namespace) -> int:
    overrides = list(args.overrides)
    source = args.recipe_file
    if source is not None and "=" in source:  # ``augcse train --recipe x key=value`` puts the first override here
        overrides.insert(0, source)
        source = None
    recipe = load_recipe(source, args.recipe, overrides)
    result = run(recipe, args.data_dir, resume=args.resume)
    return 130 if result.get("stopped") else 0


if __name__ == "__main__":  # ``python -m augcse.train`` for torchrun/accelerate launch
    import sys

    from augcse.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
