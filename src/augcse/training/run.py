"""``augcse train``: recipe → model, dataset, loss, arguments → ``SentenceTransformerTrainer``.

The conductor of a run, read top to bottom: inputs checked (:mod:`~augcse.training.build`), the run folder
claimed and agreed on by every rank (:mod:`~augcse.training.ranks`), the setup built, the starting model
evaluated, training, then ``final/`` with its evaluation, model card and summary. The trainer does the stepping,
evaluation, checkpointing, resume and multi-process work; this module adds the run directory (resolved recipe,
JSONL log, before/after evaluation, the kept model in ``final/``), a graceful stop on Ctrl-C, and faults that
end in one line (:class:`~augcse.training.recovery.RunError`, :mod:`~augcse.training.recovery`) with the last
good checkpoint named and no ``final/`` written.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from augcse.assets.resolve import data_dir as resolve_data_dir
from augcse.core.outputs import write_failure, write_text_atomically
from augcse.models.module_types import make_portable
from augcse.training.build import Setup, build_setup, build_trainer, check_inputs
from augcse.training.ranks import agreed_checkpoint, every_ranks_line, rank, world_size
from augcse.training.recipes.config import Recipe, validate_recipe
from augcse.training.recovery import (RunError, checkpoint_bytes, continue_command, fault_line, first_line,
                                      nonfinite_error, resumable, resume_hint, warn_if_short_of_space, write_error)
from augcse.training.rundir import (FINISHED, RECIPE as RECIPE_FILE, RunFolder, RunFolderError, checkpoint_step,
                                    checkpoints, latest_checkpoint)

logger = logging.getLogger(__name__)

TIME_FILE = "time.json"  # seconds of each part of a resumed run


def run(recipe: Recipe, data_dir: str | Path | None = None, resume: bool | str = False, overwrite: bool = False,
        callbacks: Sequence[Any] = (), prepare: Callable[[Path | None], Path] | None = None) -> dict:
    """Train ``recipe`` end to end; returns the run summary (also written to ``run_dir/summary.json``).

    ``callbacks`` are extra ``TrainerCallback`` objects; ``eval.budgets`` adds
    :class:`augcse.training.budgets.BudgetEvaluation` itself. ``prepare``, for a command that writes the run's
    corpus into the run folder (``augcse adapt``'s texts): called once the folder is claimed (emptied first on
    ``--overwrite``) with the checkpoint resumed from, it returns the corpus file; it is not checked before.
    The process with rank 0 claims the run folder (see :mod:`augcse.training.rundir`) for the whole run. The recipe
    is validated first (one line, exit 2 from the CLI), whether it came from a file or was built in Python.
    """
    recipe = validate_recipe(recipe)
    root = resolve_data_dir(data_dir)
    corpus_path = check_inputs(recipe, root, corpus=prepare is None)
    folder = RunFolder(recipe.run_dir)
    try:
        checkpoint = agreed_checkpoint(folder, recipe, resume, overwrite)
        if prepare is not None:
            corpus_path = prepare(checkpoint)
        return _train(recipe, root, corpus_path, checkpoint, callbacks)
    except Exception as exc:
        if world_size() == 1 or isinstance(exc, RunFolderError):  # a refusal reaches every rank by itself
            raise
        raise RunError(every_ranks_line(partial(fault_line, recipe.run_dir, exc))) from None
    finally:
        folder.release()


def _train(recipe: Recipe, root: Path | None, corpus_path: Path, checkpoint: Path | None,
           callbacks: Sequence[Any] = ()) -> dict:
    """The run once its folder is claimed: setup, the starting model's scores, training, then ``final/``."""
    from augcse.training.budgets import BudgetEvaluation
    from augcse.training.callbacks import GracefulStop, ScaleLearningRate, SkipWhenTrained, restore_loss_state
    from augcse.evaluation.encoding import bf16_warning
    from augcse.training.guard import NonFiniteGuard

    started = time.perf_counter()
    earlier = previous_seconds(recipe.run_dir) if checkpoint is not None else 0.0
    main_process = int(os.environ.get("RANK", "0")) == 0
    setup = build_setup(recipe, root, corpus_path)
    scores: dict = {}
    if main_process:
        warn_if_short_of_space(recipe, setup)
        if recipe.training.get("bf16") and (warning := bf16_warning(setup.args.device, "training.bf16")):
            logger.warning(warning)
        try:
            scores = evaluate_before(recipe, setup, root, checkpoint)
        except OSError as exc:
            if write_failure(exc) is None:
                raise
            raise write_error(recipe, setup, write_failure(exc), "the run's records", 2**20) from None
    guard = NonFiniteGuard(setup.loss, recipe.skip_nonfinite_steps)
    stopper = GracefulStop()
    budgets = [BudgetEvaluation(recipe.eval.budgets, setup.after, recipe.run_dir, root, recipe.eval.batch_size)
               ] if recipe.eval.budgets else []
    trainer = build_trainer(recipe, setup, [guard, ScaleLearningRate(), SkipWhenTrained(), stopper, *budgets,
                                            *callbacks])
    if checkpoint is not None:
        restore_loss_state(setup.loss, checkpoint)
        logger.info("resuming from %s", checkpoint)
    try:
        fit(recipe, setup, trainer, checkpoint)
    finally:
        stopper.restore()
        guard.remove()
        if main_process:
            record_part(recipe.run_dir, time.perf_counter() - started)
    if stopper.requested:
        last = latest_checkpoint(recipe.run_dir)
        print(f"\nStopped; resumable checkpoint: {last}. Continue with: {continue_command(sys.argv, recipe.run_dir)}",
              flush=True)
        return {"stopped": True, "checkpoint": str(last)}
    setup.loss.model = setup.model  # the trainer left its distributed wrapper of the model here
    if guard.skipped:
        logger.warning("%d non-finite step(s) were skipped: %s", len(guard.skipped), guard.skipped)
    return finish(recipe, setup, trainer, root, corpus_path, scores,
                  lambda: earlier + time.perf_counter() - started)


def fit(recipe: Recipe, setup: Setup, trainer, checkpoint: Path | None) -> None:
    """``trainer.train``, with a non-finite step or a failed save turned into one :class:`RunError` line.

    A save that failed leaves a partial ``checkpoint-N`` (N the step being saved); it is removed, so the
    folder shows only complete checkpoints and the space it held is free again.
    """
    from augcse.training.callbacks import AlreadyTrained
    from augcse.training.guard import NonFiniteError

    try:
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    except AlreadyTrained:
        logger.info("%s is the last step: nothing left to train", checkpoint)
    except NonFiniteError as exc:
        print(file=sys.stderr, flush=True)  # end the progress bar's line: the error is a line of its own
        raise nonfinite_error(recipe, setup, exc) from None
    except Exception as exc:
        reason = write_failure(exc)
        if reason is None and world_size() > 1:  # which step, for the line every rank ends with
            raise RunError(f"rank {rank()}: {type(exc).__name__} at step {trainer.state.global_step + 1}: "
                           f"{first_line(exc)}; {resumable(recipe.run_dir)}") from exc
        if reason is None:
            raise
        print(file=sys.stderr, flush=True)
        partial = recipe.run_dir / f"checkpoint-{trainer.state.global_step}"
        if partial.is_dir() and rank() == 0:
            shutil.rmtree(partial, ignore_errors=True)
        named = getattr(exc, "filename", None)  # an OSError names its file; the log, say, rather than a checkpoint
        writing = Path(named).name if named and partial.name not in str(named) else "a checkpoint"
        raise write_error(recipe, setup, reason, writing, checkpoint_bytes(recipe.run_dir, setup.model)) from None


def evaluate_before(recipe: Recipe, setup: Setup, root: Path | None, checkpoint: Path | None) -> dict:
    """Scores so far (``eval.json`` of a resumed run) and the starting model's, written before training."""
    from augcse.training.callbacks import truncate_log

    run_dir, eval_file = recipe.run_dir, recipe.run_dir / "eval.json"
    scores: dict[str, dict[str, float]] = {}
    if checkpoint is not None:
        truncate_log(run_dir / "log.jsonl", checkpoint_step(checkpoint))
        scores = json.loads(eval_file.read_text()) if eval_file.is_file() else {}
    scored = bool(setup.before) and "before" not in scores
    if scored:
        logger.info("evaluating the starting model on %s", setup.before)
        scores["before"] = evaluate(setup.model, setup.before, root, recipe.eval.batch_size)
    if checkpoint is None:  # written after that evaluation: a run stopped in it leaves no folder to refuse a rerun
        write_text_atomically(run_dir / RECIPE_FILE, recipe.to_yaml())
    if scored:
        write_text_atomically(eval_file, json.dumps(scores, indent=2))
        print("\nBefore training:\n" + format_table({"before": scores["before"]}), flush=True)
    return scores


def finish(recipe: Recipe, setup: Setup, trainer, root: Path | None, corpus_path: Path, scores: dict,
           seconds) -> dict:
    """Save ``final/`` (only from finite weights), evaluate it, write the summary and model card, prune checkpoints."""
    from augcse.evaluation.versions import record_versions
    from augcse.training.guard import all_finite
    from augcse.training.model_card import write_model_card

    model, run_dir = setup.model, recipe.run_dir
    best = trainer.state.best_model_checkpoint
    summary: dict[str, Any] = {
        "name": recipe.name,
        "corpus": str(corpus_path),
        "corpus_stats": setup.stats.as_dict(),
        "train_rows": len(setup.train_dataset),
        "global_step": trainer.state.global_step,
        "best_metric": trainer.state.best_metric,
        "best_checkpoint": best if recipe.keep_checkpoints else None,  # removed below otherwise: final/ holds it
        "best_step": checkpoint_step(Path(best)) if best else None,
        **what_ran(trainer.args, run_dir),
    }
    if not trainer.is_world_process_zero():
        return summary
    if not all_finite(setup.loss):
        raise RunError(f"the trained weights are not finite; no final/ was written; "
                       f"{resume_hint(run_dir)}")
    final = run_dir / "final"
    try:
        model.save(str(final))
        make_portable(final)  # plain sentence-transformers loads augcse's own modules from the folder
        if setup.after:
            scores["after"] = evaluate(model, setup.after, root, recipe.eval.batch_size)
            print("\n" + format_table(scores), flush=True)
        record_versions(scores, "after", final, [setup.dev, setup.after], root)
        write_text_atomically(run_dir / "eval.json", json.dumps(scores, indent=2))
        write_model_card(final, recipe, scores, {**summary, "seconds": seconds()}, setup.loss)
        summary["seconds"] = seconds()
        write_text_atomically(run_dir / FINISHED, json.dumps(summary, indent=2))  # marks the run finished
    except Exception as exc:
        reason = write_failure(exc)
        if reason is None:
            raise
        shutil.rmtree(final, ignore_errors=True)
        (run_dir / FINISHED).unlink(missing_ok=True)
        size = sum(p.numel() * p.element_size() for p in model.parameters())
        raise write_error(recipe, setup, reason, "final/", size) from None
    if not recipe.keep_checkpoints:
        for folder in [*checkpoints(run_dir), *run_dir.glob("diverged-checkpoint-*")]:
            shutil.rmtree(folder, ignore_errors=True)
    kept = f"step {summary['best_step']} (dev {summary['best_metric']:.2f})" if best else \
        f"the last step, {summary['global_step']} (no dev task)"
    print(f"\nKept model: {kept}; saved to {final}", flush=True)
    return summary


def what_ran(args, run_dir: Path) -> dict[str, Any]:
    """The settings as the trainer received them, for the record: seed, processes, global batch, precision, and
    the budgets actually scored (``curve.json``)."""
    from augcse.training.budgets import read_curve

    return {"seed": args.seed, "processes": args.world_size,
            "global_batch": args.per_device_train_batch_size * args.gradient_accumulation_steps * args.world_size,
            "precision": "bf16" if args.bf16 else "fp16" if args.fp16 else "float32",
            "budgets_scored": sorted(read_curve(run_dir))}


def previous_seconds(run_dir: Path) -> float:
    """Time spent by the earlier parts of a resumed run (each part adds its own when it ends)."""
    path = run_dir / TIME_FILE
    return sum(json.loads(path.read_text()).get("parts", [])) if path.is_file() else 0.0


def record_part(run_dir: Path, seconds: float) -> None:
    path = run_dir / TIME_FILE
    parts = json.loads(path.read_text()).get("parts", []) if path.is_file() else []
    try:
        write_text_atomically(path, json.dumps({"parts": [*parts, seconds]}))
    except OSError:  # a full disk is reported by the run itself; the time of this part is then not counted
        pass


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
