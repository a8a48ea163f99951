"""``augcse train``: recipe → model, dataset, loss, arguments → ``SentenceTransformerTrainer``.

Nothing here knows any method: the loss and the view builders are looked up by name in their
registries. The trainer does the stepping, evaluation, checkpointing, resume and multi-process
work; this module adds the run directory (resolved recipe, JSONL log, before/after evaluation,
the kept model in ``final/`` with a model card) and a graceful stop on Ctrl-C.
"""

from __future__ import annotations

import argparse
import errno
import json
import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from augcse.assets import AssetError, data_dir as resolve_data_dir, has_data, resolve_data, resolve_model
from augcse.recipes.config import DEFAULT_CORPUS, Recipe, RecipeError, builtin_recipes, load_recipe
from augcse.rundir import RunFolder, checkpoint_step, latest_checkpoint

logger = logging.getLogger(__name__)


class RunError(RuntimeError):
    """A run stopped for a reason outside the recipe (a full disk); the message says what is still resumable."""


# --------------------------------------------------------------------------- pieces

def build_model(recipe: Recipe):
    """The SentenceTransformer to train: a backbone with the recipe's pooler (and, unless ``model.normalize`` is
    false, the modules it was published with after pooling), or an ST folder as it is.

    ``model.max_seq_length`` truncates training batches only (the collator's ``max_length``); the
    model keeps its own maximum, so evaluation sees whole sentences as SentEval does.
    """
    from sentence_transformers import SentenceTransformer

    from augcse.modules import build_sentence_transformer, freeze_fixed_weights

    location = resolve_model(recipe.model.backbone)
    try:
        if recipe.model.pooler is None:
            model = SentenceTransformer(location)
        else:
            model = build_sentence_transformer(location, recipe.model.pooler, max_seq_length=None,
                                               keep_after_pooling=recipe.model.normalize)
    except (OSError, ValueError, KeyError) as exc:  # Hub errors are OSErrors; a bad folder a ValueError/KeyError
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise AssetError(f"recipe key 'model.backbone': {recipe.model.backbone!r} could not be loaded ({first}); "
                         "pass an existing model folder or a Hub model name") from None
    freeze_fixed_weights(model)
    return model


def resolve_corpus(recipe: Recipe, data_dir: Path | None) -> Path:
    """The corpus file, found without downloading anything large twice.

    A corpus the user names must exist (a path, or a data-directory relative path). Only the built-in default,
    SimCSE's wiki1m, falls back to ``data.fallback`` when it is not available here, with a warning.
    """
    corpus = recipe.data.corpus
    path = Path(corpus).expanduser()
    if path.is_file():
        return path
    if corpus != DEFAULT_CORPUS:
        if has_data(corpus, data_dir):
            return resolve_data(corpus, data_dir, download=False)
        where = f" or under the data directory {data_dir}" if data_dir else " (no data directory given)"
        raise RecipeError(f"recipe key 'data.corpus': {corpus} does not exist as a file{where}; fix the path")
    tried = []
    for index, candidate in enumerate([corpus, *recipe.data.fallback]):
        if Path(candidate).expanduser().is_file():
            found = Path(candidate).expanduser()
        else:
            try:
                found = resolve_data(candidate, data_dir)
            except AssetError as exc:
                tried.append(str(exc))
                continue
        if index > 0:
            logger.warning("corpus %s is not available here; using %s instead", corpus, candidate)
        return found
    raise AssetError(f"no corpus found for recipe {recipe.name!r}: " + " | ".join(tried))


def default_tasks(data_dir: Path | None) -> dict[str, str]:
    """Evaluation defaults: the 7 STS tasks and processed STS-B dev with a data directory, else STS-B originals."""
    if has_data("sts/senteval/downstream/STS/STS12-en-test/STS.input.MSRpar.txt", data_dir):
        return {"dev": "STSBenchmark-dev", "sts": "sts"}
    return {"dev": "STSBenchmark-dev-original", "sts": "STSBenchmark-original"}


def build_loss(recipe: Recipe, model):
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
    import torch

    accelerator = getattr(torch, "accelerator", None)
    return bool(accelerator.is_available()) if accelerator is not None else torch.cuda.is_available()


def training_arguments(recipe: Recipe, has_dev: bool, total_steps: int = 0):
    """The trainer arguments: augcse's defaults, then the recipe's ``training`` keys.

    Every run is resumable: without a dev task a checkpoint is saved about every quarter of the run (at most
    every 500 steps) unless the recipe sets ``save_steps`` or ``save_strategy`` itself.
    """
    from sentence_transformers import SentenceTransformerTrainingArguments

    args: dict[str, Any] = dict(
        num_train_epochs=1,
        per_device_train_batch_size=64,
        learning_rate=3e-5,
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
        args.update(save_strategy="steps", save_steps=max(1, min(500, math.ceil(total_steps / 4))))
    args.update(recipe.training)
    if has_dev:
        args.setdefault("save_steps", args["eval_steps"])
        args.setdefault("metric_for_best_model", "eval_dev_score")
    try:
        return SentenceTransformerTrainingArguments(output_dir=str(recipe.run_dir), **args)
    except (ValueError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RecipeError(f"recipe section 'training': {first}") from None


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


# --------------------------------------------------------------------------- the run

def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def check_inputs(recipe: Recipe, root: Path | None) -> Path:
    """Everything the run names that can be checked without loading: the corpus, the model, the output folder.

    Returns the corpus file. Raises one-line errors (exit 2 from the CLI), before anything is written.
    """
    output = Path(recipe.output_dir).expanduser()
    if output.exists() and not output.is_dir():
        raise RecipeError(f"recipe key 'output_dir': {output} exists and is not a folder; choose another output_dir=")
    corpus = resolve_corpus(recipe, root)
    resolve_model(recipe.model.backbone)
    return corpus


def read_training_corpus(recipe: Recipe, corpus_path: Path):
    """The corpus read and cleaned; refuses one that leaves less than one batch (it would train on nothing)."""
    from augcse.corpus import load_corpus

    options = {k: getattr(recipe.data, k) for k in ("limit", "shuffle", "dedupe", "min_words", "max_chars")}
    corpus, stats = load_corpus(corpus_path, column=recipe.data.column, seed=recipe.seed, **options)
    batch = int(recipe.training.get("per_device_train_batch_size", 64)) * world_size()
    if stats.kept < batch:
        raise RecipeError(f"corpus {corpus_path} leaves {stats.kept} usable rows ({stats.summary()}), fewer than one "
                          f"batch of {batch}; fix the file or data.column, or lower "
                          "training.per_device_train_batch_size")
    return corpus, stats


def total_steps(recipe: Recipe, rows: int) -> int:
    """Optimizer steps of the run (``max_steps``, else epochs over the rows with the last partial batch dropped)."""
    training = recipe.training
    if training.get("max_steps", -1) > 0:
        return int(training["max_steps"])
    per_step = (int(training.get("per_device_train_batch_size", 64)) * world_size()
                * int(training.get("gradient_accumulation_steps", 1)))
    return max(1, math.ceil(float(training.get("num_train_epochs", 1)) * max(1, rows // per_step)))


def _is_write_error(exc: BaseException) -> bool:
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("no space left" in text or "file write failed" in text)


def _write_error(run_dir: Path, model, exc: BaseException) -> RunError:
    """One line: how much a checkpoint needs, how much is free, what can still be resumed."""
    last = latest_checkpoint(run_dir)
    if last is not None:
        needed = sum(f.stat().st_size for f in last.rglob("*") if f.is_file())
    else:  # weights + two Adam moments
        needed = 3 * sum(p.numel() * p.element_size() for p in model.parameters())
    free = shutil.disk_usage(run_dir).free
    resumable = (f"the last complete checkpoint, {last.name}, is still resumable: free space and run again with "
                 "--resume") if last else "no complete checkpoint was saved yet: free space and start again with --overwrite"
    reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0]
    return RunError(f"could not write a checkpoint in {run_dir} ({reason}): about {needed / 2**20:.0f} MiB needed, "
                    f"{free / 2**20:.0f} MiB free; {resumable}")


def run(recipe: Recipe, data_dir: str | Path | None = None, resume: bool = False, overwrite: bool = False) -> dict:
    """Train ``recipe`` end to end; returns the run summary (also written to ``run_dir/summary.json``).

    The process with rank 0 claims the run folder (see :mod:`augcse.rundir`) for the whole run.
    """
    root = resolve_data_dir(data_dir)
    corpus_path = check_inputs(recipe, root)
    folder = RunFolder(recipe.run_dir)
    if int(os.environ.get("RANK", "0")) == 0:
        checkpoint = folder.claim(recipe.to_dict(), resume=resume, overwrite=overwrite)
    else:
        checkpoint = latest_checkpoint(recipe.run_dir) if resume else None
    try:
        return _train(recipe, root, corpus_path, checkpoint)
    finally:
        folder.release()


def _train(recipe: Recipe, root: Path | None, corpus_path: Path, checkpoint: Path | None) -> dict:
    import torch
    from sentence_transformers import SentenceTransformerTrainer

    from augcse.callbacks import (
        DrawEpoch, GracefulStop, JsonlLogger, LossStateCheckpoint, SyncLossGradients, restore_loss_state, truncate_log,
    )
    from augcse.evaluation.suite import SuiteEvaluator
    from augcse.losses import bind_dataset
    from augcse.model_card import write_model_card
    from augcse.views import ViewContext, build_views

    started = time.perf_counter()
    run_dir = recipe.run_dir
    main_process = int(os.environ.get("RANK", "0")) == 0
    corpus, stats = read_training_corpus(recipe, corpus_path)
    torch.manual_seed(recipe.seed)
    model = build_model(recipe)
    loss = build_loss(recipe, model)
    context = ViewContext(model=model, seed=recipe.seed, data_dir=root, run_dir=run_dir)
    train_dataset = build_views(corpus, recipe.data.views, context)
    bind_dataset(loss, train_dataset)  # columns by role, before the trainer starts

    defaults = default_tasks(root)
    dev = defaults["dev"] if recipe.eval.dev == "auto" else recipe.eval.dev
    before_tasks = defaults["sts"] if recipe.eval.before == "auto" else recipe.eval.before
    after_tasks = defaults["sts"] if recipe.eval.after == "auto" else recipe.eval.after
    evaluator = SuiteEvaluator(dev, root, batch_size=recipe.eval.batch_size, name="dev") if dev else None
    args = training_arguments(recipe, has_dev=evaluator is not None, total_steps=total_steps(recipe, len(train_dataset)))

    eval_file = run_dir / "eval.json"
    scores: dict[str, dict[str, float]] = {}
    if main_process:
        if checkpoint is None:
            (run_dir / "recipe.yaml").write_text(recipe.to_yaml())
        else:
            truncate_log(run_dir / "log.jsonl", checkpoint_step(checkpoint))
            scores = json.loads(eval_file.read_text()) if eval_file.is_file() else {}
    if before_tasks and main_process and "before" not in scores:
        logger.info("evaluating the starting model on %s", before_tasks)
        scores["before"] = evaluate(model, before_tasks, root, recipe.eval.batch_size)
        eval_file.write_text(json.dumps(scores, indent=2))
        print("\nBefore training:\n" + format_table({"before": scores["before"]}), flush=True)

    trainer = SentenceTransformerTrainer(
        model=model, args=args, train_dataset=train_dataset, loss=loss, evaluator=evaluator,
        callbacks=[JsonlLogger(run_dir / "log.jsonl", loss), LossStateCheckpoint(loss), DrawEpoch(),
                   SyncLossGradients(loss)],
    )
    trainer.callback_handler.callbacks.sort(key=lambda cb: not isinstance(cb, JsonlLogger))  # exact values first
    trainer.data_collator.max_length = recipe.model.max_seq_length  # truncate training batches only
    stopper = GracefulStop()
    trainer.add_callback(stopper)
    if checkpoint is not None:
        restore_loss_state(loss, checkpoint)
        logger.info("resuming from %s", checkpoint)
    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except (OSError, RuntimeError) as exc:
        if _is_write_error(exc):
            raise _write_error(run_dir, model, exc) from None
        raise
    if stopper.requested:
        last = latest_checkpoint(run_dir)
        print(f"\nStopped; resumable checkpoint: {last}. Continue with: augcse train ... --resume", flush=True)
        return {"stopped": True, "checkpoint": str(last)}

    loss.model = model  # the trainer left its distributed wrapper of the model here
    best = trainer.state.best_model_checkpoint
    summary: dict[str, Any] = {
        "name": recipe.name,
        "corpus": str(corpus_path),
        "corpus_stats": stats.as_dict(),
        "train_rows": len(train_dataset),
        "global_step": trainer.state.global_step,
        "best_metric": trainer.state.best_metric,
        "best_checkpoint": best,
        "best_step": checkpoint_step(Path(best)) if best else None,
    }
    if trainer.is_world_process_zero():
        final = run_dir / "final"
        model.save(str(final))
        if after_tasks:
            scores["after"] = evaluate(model, after_tasks, root, recipe.eval.batch_size)
            print("\n" + format_table(scores), flush=True)
        eval_file.write_text(json.dumps(scores, indent=2))
        write_model_card(final, recipe, scores, {**summary, "seconds": time.perf_counter() - started}, loss)
        summary["seconds"] = time.perf_counter() - started
        (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        kept = f"step {summary['best_step']} (dev {summary['best_metric']:.2f})" if best else \
            f"the last step, {summary['global_step']} (no dev task)"
        print(f"\nKept model: {kept}; saved to {final}", flush=True)
    return summary


# --------------------------------------------------------------------------- CLI

def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train from a recipe (YAML file or --recipe NAME)",
                                   description="Train from a recipe; key=value arguments override recipe keys.")
    parser.add_argument("recipe_file", nargs="?", help="recipe YAML file")
    parser.add_argument("--recipe", help=f"built-in recipe name ({', '.join(builtin_recipes())})")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. training.learning_rate=1e-5 name=myrun")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA, else the embedded defaults)")
    parser.add_argument("--resume", action="store_true",
                        help="continue an unfinished run from its newest complete checkpoint (same recipe only)")
    parser.add_argument("--overwrite", action="store_true",
                        help="empty the run folder first: replaces a finished or unfinished run of the same name")
    parser.set_defaults(func=_run_cli)


def _run_cli(args: argparse.Namespace) -> int:
    overrides = list(args.overrides)
    source = args.recipe_file
    if source is not None and "=" in source:  # ``augcse train --recipe x key=value`` puts the first override here
        overrides.insert(0, source)
        source = None
    recipe = load_recipe(source, args.recipe, overrides)
    try:
        result = run(recipe, args.data_dir, resume=args.resume, overwrite=args.overwrite)
    except RunError as exc:
        print(f"augcse train: error: {exc}", file=sys.stderr)
        return 1
    return 130 if result.get("stopped") else 0


if __name__ == "__main__":  # ``python -m augcse.train`` for torchrun/accelerate launch
    from augcse.cli import main

    sys.exit(main(["train", *sys.argv[1:]]))
