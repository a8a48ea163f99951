"""``augcse train``: recipe → model, dataset, loss, arguments → ``SentenceTransformerTrainer``.

Nothing here knows any method: the loss and the view builders are looked up by name in their
registries. The trainer does the stepping, evaluation, checkpointing, resume and multi-process
work; this module adds the run directory (resolved recipe, JSONL log, before/after evaluation,
the kept model in ``final/`` with a model card), a graceful stop on Ctrl-C, and faults that end in one line
(:class:`RunError`): a non-finite loss (:mod:`augcse.training.guard`) or a failed write (:mod:`augcse.core.outputs`) stops
the run with the last good checkpoint named and no ``final/`` written.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from augcse.assets.resolve import AssetError, data_dir as resolve_data_dir, has_data, resolve_data, resolve_model
from augcse.core.loss_parameters import loss_models
from augcse.core.outputs import free_bytes, mib, write_failure, write_text_atomically
from augcse.core.sanity import SAMPLE, check_distinct, check_text
from augcse.models.load import check_readable, load_as_published
from augcse.models.module_types import make_portable
from augcse.text.corpus_source import find_corpus, how_to_get
from augcse.training.recipes.config import (DEFAULT_CORPUS, Recipe, RecipeError, check_budgets_reached, check_output_dir,
                                           validate_recipe)
from augcse.training.rundir import (FINISHED, RECIPE as RECIPE_FILE, RunFolder, RunFolderError, checkpoint_step, checkpoints,
                                    latest_checkpoint)

if TYPE_CHECKING:  # the guard imports torch: not at start-up (``augcse train --help`` stays light)
    from augcse.training.guard import NonFiniteError

logger = logging.getLogger(__name__)

TIME_FILE = "time.json"  # seconds of each part of a resumed run


class RunError(RuntimeError):
    """A run stopped for a reason outside the recipe (a full disk); the message says what is still resumable."""


# --------------------------------------------------------------------------- pieces

def build_model(recipe: Recipe):
    """The SentenceTransformer to train: a backbone with the recipe's pooler (and, unless ``model.normalize`` is
    false, the modules it was published with after pooling), or an ST folder as it is.

    ``model.max_seq_length`` truncates training batches only (the collator's ``max_length``); the
    model keeps its own maximum, so evaluation sees whole sentences as SentEval does. ``model.config``
    replaces values of the backbone's config (a paper's dropout) before the weights load.
    """
    from augcse.models.backbone_config import ConfigKeyError, check_config
    from augcse.models.poolers import build_sentence_transformer, freeze_fixed_weights

    location = resolve_model(recipe.model.backbone)
    try:
        if recipe.model.pooler is None:
            model = load_as_published(location, check_config(location, recipe.model.config) or None)
        else:
            model = build_sentence_transformer(location, recipe.model.pooler, max_seq_length=None,
                                               keep_after_pooling=recipe.model.normalize, config=recipe.model.config)
    except ConfigKeyError as exc:
        raise RecipeError(str(exc)) from None
    except (OSError, ValueError, KeyError) as exc:  # Hub errors are OSErrors; a bad folder a ValueError/KeyError
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise AssetError(f"recipe key 'model.backbone': {recipe.model.backbone!r} could not be loaded ({first}); "
                         "pass an existing model folder or a Hub model name") from None
    freeze_fixed_weights(model)
    return model


def resolve_corpus(recipe: Recipe, data_dir: Path | None) -> Path:
    """The corpus file, found without downloading anything large twice.

    A corpus the user names must exist (a path, or a data-directory relative path). Only the built-in default,
    SimCSE's wiki1m, falls back to ``data.fallback`` when it is not available here, with a warning; nothing is
    downloaded, so a run without a data directory trains on the embedded sentences its documented figures
    come from.
    """
    corpus = recipe.data.corpus
    found = find_corpus(corpus, data_dir)
    if found is not None:
        return found
    if corpus != DEFAULT_CORPUS:
        if Path(corpus).expanduser().is_dir():
            raise RecipeError(f"recipe key 'data.corpus': {corpus} is a folder; give the corpus file in it (one "
                              "sentence per line, or a CSV/JSON-lines/Parquet file)")
        where = f" or under the data directory {data_dir}" if data_dir else " (no data directory given)"
        raise RecipeError(f"recipe key 'data.corpus': {corpus} does not exist as a file{where}; fix the path "
                          f"({how_to_get(corpus, data_dir)})")
    tried = []
    for index, candidate in enumerate([corpus, *recipe.data.fallback]):
        if Path(candidate).expanduser().is_file():
            found = Path(candidate).expanduser()
        else:
            try:  # never downloaded here: the default stands for what is at hand (augcse download corpus fetches it)
                found = resolve_data(candidate, data_dir, download=False)
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
    """The recipe's loss from the registry, with the recipe's parameters as they are.

    One rule for the head (and every other parameter): the loss's own declared default stands unless the
    recipe names a value; the pooler never changes it. A validated recipe lists every value it trains with.
    """
    from augcse.losses import LOSSES

    return LOSSES[recipe.loss.name](model, **recipe.loss.params)


def _has_accelerator() -> bool:
    import torch

    accelerator = getattr(torch, "accelerator", None)
    return bool(accelerator.is_available()) if accelerator is not None else torch.cuda.is_available()


# augcse's defaults for what the trainer trains with; a recipe's ``training`` keys win (the trainer's own
# defaults stand for the rest)
# (stated here, not left to the trainer's version: older ones default to the unfused AdamW, whose rounding differs)
TRAINING_DEFAULTS: dict[str, Any] = dict(num_train_epochs=1, per_device_train_batch_size=64, learning_rate=3e-5,
                                         weight_decay=0.0, lr_scheduler_type="linear", warmup_steps=0,
                                         optim="adamw_torch_fused", adam_beta1=0.9, adam_beta2=0.999, adam_epsilon=1e-8,
                                         max_grad_norm=1.0, dataloader_drop_last=True)
DEV_DEFAULTS: dict[str, Any] = dict(eval_steps=125, load_best_model_at_end=True)  # with a dev task
# the trainer arguments that change what is trained (the rest name outputs, logging cadence or workers)
TRAINED_WITH = ("per_device_train_batch_size", "learning_rate", "learning_rate_mapping", "num_train_epochs",
                "max_steps", "lr_scheduler_type", "lr_scheduler_kwargs", "warmup_steps", "warmup_ratio", "optim",
                "optim_args", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon", "max_grad_norm",
                "gradient_accumulation_steps", "fp16", "bf16", "dataloader_drop_last", "batch_sampler",
                "eval_steps", "load_best_model_at_end")


def effective_training(recipe: Recipe) -> dict[str, Any]:
    """The values of :data:`TRAINED_WITH` a run of ``recipe`` trains with: the recipe's, else augcse's
    default, else the trainer's (``eval_steps`` and model selection only with a dev task)."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    trainer = {field.name: (field.default if field.default is not dataclasses.MISSING else field.default_factory())
               for field in dataclasses.fields(SentenceTransformerTrainingArguments)
               if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING}
    ours = {**TRAINING_DEFAULTS, **(DEV_DEFAULTS if recipe.eval.dev is not None else {})}
    values = {}
    for key in TRAINED_WITH:
        if key in ("eval_steps", "load_best_model_at_end") and recipe.eval.dev is None:
            continue
        value = recipe.training.get(key, ours.get(key, trainer.get(key)))
        values[key] = value.value if isinstance(value, enum.Enum) else value
    return values


def training_arguments(recipe: Recipe, has_dev: bool, total_steps: int = 0):
    """The trainer arguments: augcse's defaults, then the recipe's ``training`` keys.

    Every run is resumable: without a dev task a checkpoint is saved about every quarter of the run (at most
    every 500 steps) unless the recipe sets ``save_steps`` or ``save_strategy`` itself.
    """
    from sentence_transformers import SentenceTransformerTrainingArguments

    from augcse.training.schedules import CHECKS

    args: dict[str, Any] = dict(
        **TRAINING_DEFAULTS,
        logging_steps=10,
        save_total_limit=2,
        report_to="none",
        seed=recipe.seed,
        data_seed=recipe.seed,
        disable_tqdm=False,
        # without an accelerator, say so: torchrun/accelerate then run CPU processes as real DDP
        use_cpu=not _has_accelerator(),
    )
    if has_dev:
        args.update(eval_strategy="steps", save_strategy="steps", greater_is_better=True, **DEV_DEFAULTS)
    else:
        args.update(save_strategy="steps", save_steps=max(1, min(500, math.ceil(total_steps / 4))))
    args.update(recipe.training)
    if has_dev:
        args.setdefault("save_steps", args["eval_steps"])
        args.setdefault("metric_for_best_model", "eval_dev_score")
    schedule = None
    if args.get("lr_scheduler_type") in CHECKS:  # one of augcse's schedules: the trainer runs it as constant
        name, kwargs = args["lr_scheduler_type"], args.pop("lr_scheduler_kwargs", None)
        try:
            CHECKS[name](kwargs)
        except ValueError as exc:
            raise RecipeError(str(exc)) from None
        schedule, args["lr_scheduler_type"] = (name, kwargs), "constant"
    try:
        arguments = SentenceTransformerTrainingArguments(output_dir=str(recipe.run_dir), **args)
    except (ValueError, TypeError) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise RecipeError(f"recipe section 'training': {first}") from None
    arguments.augcse_schedule = schedule
    return arguments


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

    The output folder is created (or found) and proven writable with a probe file. Returns the corpus file.
    Raises one-line errors (exit 2 from the CLI) before any model, spaCy pipeline or corpus loads.
    """
    check_output_dir(recipe)
    if recipe.eval.budgets and world_size() > 1:
        raise RecipeError("recipe key 'eval.budgets': budgets are scored in one process; train with one process "
                          "or drop eval.budgets")
    corpus = resolve_corpus(recipe, root)
    location = resolve_model(recipe.model.backbone)
    try:
        check_readable(location)
    except ValueError as exc:
        raise RecipeError(f"recipe key 'model.backbone': {exc}") from None
    _check_model_config(location, recipe)
    for name in loss_models(recipe.loss.name, recipe.loss.params or {}):  # DiffCSE's generator
        try:
            resolve_model(name)
        except AssetError as exc:
            raise RecipeError(f"recipe key 'loss.params.generator': {exc}") from None
    return corpus


def _check_model_config(location: str, recipe: Recipe) -> None:
    """``model.config``'s keys against the backbone's ``config.json`` (a few KB), before the corpus is read."""
    from augcse.models.backbone_config import ConfigKeyError, check_config

    try:
        check_config(location, recipe.model.config)
    except ConfigKeyError as exc:
        raise RecipeError(str(exc)) from None


def read_training_corpus(recipe: Recipe, corpus_path: Path):
    """The corpus read and cleaned; refuses one that leaves less than one batch (it would train on nothing)."""
    from augcse.text.corpus import load_corpus

    options = {k: getattr(recipe.data, k) for k in ("limit", "shuffle", "dedupe", "min_words", "max_chars")}
    corpus, stats = load_corpus(corpus_path, column=recipe.data.column, seed=recipe.seed, **options)
    batch = int(recipe.training.get("per_device_train_batch_size", 64)) * world_size()
    sample = corpus.select(range(min(SAMPLE, len(corpus))))["text"]
    check_text(str(corpus_path), sample, stats.read, stats.skipped["undecodable"] + stats.skipped["malformed"])
    if stats.kept < batch:
        raise RecipeError(f"corpus {corpus_path} leaves {stats.kept} usable rows ({stats.summary()}), fewer than one "
                          f"batch of {batch}; fix the file or data.column, or lower "
                          "training.per_device_train_batch_size")
    warning = check_distinct(str(corpus_path), sample, batch)
    if warning:
        logger.warning(warning)
    return corpus, stats


def total_steps(recipe: Recipe, rows: int) -> int:
    """Optimizer steps of the run (``max_steps``, else epochs over the rows with the last partial batch dropped)."""
    training = recipe.training
    if training.get("max_steps", -1) > 0:
        return int(training["max_steps"])
    per_step = (int(training.get("per_device_train_batch_size", 64)) * world_size()
                * int(training.get("gradient_accumulation_steps", 1)))
    return max(1, math.ceil(float(training.get("num_train_epochs", 1)) * max(1, rows // per_step)))


def run(recipe: Recipe, data_dir: str | Path | None = None, resume: bool | str = False, overwrite: bool = False,
        callbacks: Sequence[Any] = ()) -> dict:
    """Train ``recipe`` end to end; returns the run summary (also written to ``run_dir/summary.json``).

    ``callbacks`` are extra ``TrainerCallback`` objects; ``eval.budgets`` adds
    :class:`augcse.training.budgets.BudgetEvaluation` itself.
    The process with rank 0 claims the run folder (see :mod:`augcse.training.rundir`) for the whole run. The recipe
    is validated first (one line, exit 2 from the CLI), whether it came from a file or was built in Python.
    """
    recipe = validate_recipe(recipe)
    root = resolve_data_dir(data_dir)
    corpus_path = check_inputs(recipe, root)
    folder = RunFolder(recipe.run_dir)
    try:
        checkpoint = agreed_checkpoint(folder, recipe, resume, overwrite)
        return _train(recipe, root, corpus_path, checkpoint, callbacks)
    except Exception as exc:
        if world_size() == 1 or isinstance(exc, RunFolderError):  # a refusal reaches every rank by itself
            raise
        raise RunError(every_ranks_line(recipe, exc)) from None
    finally:
        folder.release()


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def join_process_group(recipe: Recipe) -> None:
    """Set up the trainer's own process group now, through its arguments (so its backend and ``ddp_timeout`` are
    the ones training uses), so that rank 0's decision about the run folder reaches the other ranks."""
    training_arguments(recipe, has_dev=recipe.eval.dev is not None, total_steps=1)


def agreed_checkpoint(folder: RunFolder, recipe: Recipe, resume: bool | str, overwrite: bool) -> Path | None:
    """The checkpoint every rank resumes from: rank 0's decision in :meth:`RunFolder.claim`, broadcast.

    Other ranks do not look at the folder themselves: rank 0 may empty it (``--overwrite``, a restart of an
    ``--auto-resume`` run stopped before its first checkpoint) or finish a checkpoint while they would read it,
    and ranks that resumed from different checkpoints would train on, silently apart. A refusal is broadcast
    too, so every rank ends with the same line (:class:`RunFolderError`, exit 2)."""
    if world_size() == 1:
        return folder.claim(recipe.to_dict(), resume=resume, overwrite=overwrite)
    import torch.distributed as dist

    join_process_group(recipe)
    decision: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            found = folder.claim(recipe.to_dict(), resume=resume, overwrite=overwrite)
            decision = [("resume", str(found) if found else None)]
        except RunFolderError as exc:
            decision = [("refused", str(exc))]
    dist.broadcast_object_list(decision, src=0)
    kind, value = decision[0]
    if kind == "refused":
        raise RunFolderError(value)
    return Path(value) if value else None


def _fault_key() -> str:
    # the store outlives a torchrun restart: each attempt has its own key
    return f"augcse/fault/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


def _fault_store():
    """The key-value store the process group was set up with (the launcher's), or None."""
    import torch.distributed as dist

    try:
        return dist.distributed_c10d._get_default_store() if dist.is_initialized() else None
    except (RuntimeError, ValueError):
        return None


def every_ranks_line(recipe: Recipe, exc: BaseException) -> str:
    """The one line every rank of a multi-process run ends with, whichever rank met the fault first.

    A rank that fails publishes its line (which rank, what, the resumable checkpoint) in the process group's
    store before it exits; its exit breaks the collective the other ranks wait in (gloo reports a closed
    connection at once), and they end with the line published first instead of their own broken connection.
    A non-finite step is met by every rank at the same step (:class:`augcse.training.guard.NonFiniteGuard`
    combines their verdicts), so its line is the same on each. The store is in memory, so a full disk does not
    stop the line from reaching the others; a rank killed without a word (SIGKILL, out of memory) leaves the
    others their own line. The launcher's SIGTERM to the remaining ranks is ignored from here on, so that it
    cannot cut the line short (torchrun sends SIGKILL 30 s later anyway)."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    own = str(exc) if isinstance(exc, RunError) else f"{type(exc).__name__}: {_first_line(exc)}; {resumable(recipe.run_dir)}"
    own = own if own.startswith("rank ") else f"rank {rank()}: {own}"
    store = _fault_store()
    if store is None:
        return own
    try:
        published = store.compare_set(_fault_key(), "", own)  # the first line published wins
    except (RuntimeError, ValueError):  # the store's host is gone too
        return own
    return published.decode() if isinstance(published, bytes) else str(published)


def resumable(run_dir: Path) -> str:
    """What a stopped run can be continued from (read only: every rank may ask)."""
    last = latest_checkpoint(run_dir)
    return (f"{last.name} is resumable: run the same command with --auto-resume (or --resume)" if last
            else "no complete checkpoint was saved yet: start again with --overwrite")


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


@dataclass
class Setup:
    """What a run builds before training: the model, its loss and data, the evaluation plan and the arguments."""

    model: Any
    loss: Any
    train_dataset: Any
    stats: Any
    evaluator: Any
    args: Any
    before: str | None
    after: str | None
    dev: str | None = None


def build_setup(recipe: Recipe, root: Path | None, corpus_path: Path) -> Setup:
    """Corpus, model, loss, views and trainer arguments, in the order that makes a run reproducible."""
    import torch

    from augcse.models.load import damaged_weights
    from augcse.evaluation.suite import SuiteEvaluator
    from augcse.losses import bind_dataset
    from augcse.core.sole_builder import WAIT_SECONDS
    from augcse.text.views import ViewContext, build_views

    corpus, stats = read_training_corpus(recipe, corpus_path)
    check_budgets_reached(recipe, total_steps(recipe, len(corpus)))
    torch.manual_seed(recipe.seed)
    try:
        model = build_model(recipe)
    except Exception as exc:
        damaged = damaged_weights(exc, recipe.model.backbone)
        if damaged is None:
            raise
        raise AssetError(f"recipe key 'model.backbone': {damaged}") from None
    loss = build_loss(recipe, model)
    # a rank waits for another building a shared cache as long as it would wait in a collective
    context = ViewContext(model=model, seed=recipe.seed, data_dir=root, run_dir=recipe.run_dir,
                          cache_dir=Path(recipe.data.cache_dir) if recipe.data.cache_dir else None,
                          wait_seconds=float(recipe.training.get("ddp_timeout", WAIT_SECONDS)))
    train_dataset = build_views(corpus, recipe.data.views, context)
    bind_dataset(loss, train_dataset)  # columns by role, before the trainer starts
    defaults = default_tasks(root)
    dev = defaults["dev"] if recipe.eval.dev == "auto" else recipe.eval.dev
    evaluator = SuiteEvaluator(dev, root, batch_size=recipe.eval.batch_size, name="dev") if dev else None
    args = training_arguments(recipe, has_dev=evaluator is not None, total_steps=total_steps(recipe, len(train_dataset)))
    return Setup(model, loss, train_dataset, stats, evaluator, args,
                 before=defaults["sts"] if recipe.eval.before == "auto" else recipe.eval.before,
                 after=defaults["sts"] if recipe.eval.after == "auto" else recipe.eval.after, dev=dev)


def build_trainer(recipe: Recipe, setup: Setup, extra_callbacks: list):
    """The trainer with augcse's callbacks, through the trainer's public constructor and callback methods.

    The JSONL logger writes the exact loss components into the log record before the console and the logging
    integrations (TensorBoard…) see it, so those are moved behind it; training batches are truncated to
    ``model.max_seq_length`` by the collator given here (the model keeps its own maximum for evaluation).
    """
    from sentence_transformers.sentence_transformer.data_collator import SentenceTransformerDataCollator
    from transformers.integrations import get_reporting_integration_callbacks

    from augcse.training.callbacks import (
        DrawEpoch, JsonlLogger, LossStateCheckpoint, NothingLearned, SyncLossGradients,
    )
    from augcse.training.trainer import Trainer

    loss, args = setup.loss, setup.args
    collator = SentenceTransformerDataCollator(preprocess_fn=setup.model.preprocess, router_mapping=args.router_mapping,
                                               prompts=args.prompts, max_length=recipe.model.max_seq_length)
    trainer = Trainer(
        model=setup.model, args=args, train_dataset=setup.train_dataset, loss=loss, evaluator=setup.evaluator,
        data_collator=collator,
        callbacks=[JsonlLogger(recipe.run_dir / "log.jsonl", loss), NothingLearned(), LossStateCheckpoint(loss, recipe.to_dict()),
                   DrawEpoch(),
                   SyncLossGradients(loss), *extra_callbacks],
    )
    for integration in get_reporting_integration_callbacks(args.report_to):
        moved = trainer.pop_callback(integration)
        if moved is not None:
            trainer.add_callback(moved)
    return trainer


def previous_seconds(run_dir: Path) -> float:
    """Time spent by the earlier parts of a resumed run (each part adds its own when it ends)."""
    path = run_dir / TIME_FILE
    return sum(json.loads(path.read_text()).get("parts", [])) if path.is_file() else 0.0


def record_part(run_dir: Path, seconds: float) -> None:
    path = run_dir / TIME_FILE
    parts = json.loads(path.read_text()).get("parts", []) if path.is_file() else []
    try:
        path.write_text(json.dumps({"parts": [*parts, seconds]}))
    except OSError:  # a full disk is reported by the run itself; the time of this part is then not counted
        pass


def checkpoint_bytes(run_dir: Path, model) -> int:
    """The size of one checkpoint: the last one saved, else the weights and two Adam moments."""
    last = latest_checkpoint(run_dir)
    if last is not None:
        return sum(f.stat().st_size for f in last.rglob("*") if f.is_file())
    return 3 * sum(p.numel() * p.element_size() for p in model.parameters())


def warn_if_short_of_space(recipe: Recipe, setup: Setup) -> None:
    """Warn before training when the disk cannot hold the checkpoints kept at once and the final model."""
    one = checkpoint_bytes(recipe.run_dir, setup.model)
    kept = (setup.args.save_total_limit or 2) + 1  # the kept ones and the one being written
    needed = kept * one + one // 3
    free = free_bytes(recipe.run_dir)
    if free < needed:
        logger.warning("only %s free in %s; this run needs about %s (%d checkpoints of %s and final/): free space "
                       "now, or it will stop when a save fails", mib(free), recipe.run_dir, mib(needed), kept, mib(one))


def last_finite_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint whose weights are all finite; newer non-finite ones are removed."""
    from augcse.training.guard import safetensors_finite

    while (last := latest_checkpoint(run_dir)) is not None:
        if all(safetensors_finite(f) for f in last.rglob("*.safetensors")):
            return last
        logger.warning("removing %s: its weights are not finite", last)
        shutil.rmtree(last)
    return None


# a suggested learning rate never exceeds this: above every rate the papers fine-tune with
HIGHEST_SUGGESTED_RATE = 1e-4


def recovery_checkpoint(run_dir: Path, setup: Setup, probe: tuple[tuple, float] | None) -> Path | None:
    """The newest checkpoint whose weights still train soundly (:func:`augcse.training.guard.sound` on the run's
    first batch); newer ones, finite but wrecked, are set aside as ``diverged-checkpoint-N`` so ``--resume``
    continues from the sound one. Without a probe, the newest finite checkpoint."""
    while (last := _from_rank_0(lambda: last_finite_checkpoint(run_dir))) is not None:
        # with several processes every rank probes its own first batch (the loss gathers across them), and a
        # checkpoint is sound when it is sound for all; only rank 0 touches the folder
        if _on_every_rank(probe is None or _sound_checkpoint(last, setup, probe)):
            return last
        aside = last.with_name(f"diverged-{last.name}")
        if rank() == 0:
            shutil.rmtree(aside, ignore_errors=True)
            last.rename(aside)
            logger.warning("%s gives the first batch a non-finite or exploded loss: set aside as %s", last.name,
                           aside.name)
    return None


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _from_rank_0(decide):
    """``decide()`` on rank 0 (which may change the folder), its answer on every rank."""
    if not _distributed():
        return decide()
    import torch.distributed as dist

    answer = [decide() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(answer, src=0)
    return answer[0]


def _on_every_rank(flag: bool) -> bool:
    """Whether ``flag`` holds on every rank."""
    if not _distributed():
        return flag
    import torch
    import torch.distributed as dist

    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    value = torch.tensor([int(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return bool(value.item())


def _sound_checkpoint(checkpoint: Path, setup: Setup, probe: tuple[tuple, float]) -> bool:
    """The checkpoint's encoder weights and loss state loaded into the live model and loss, then probed. A
    checkpoint whose weights do not match the encoder cannot be probed and is judged by finiteness alone."""
    from safetensors.torch import load_file

    from augcse.training.callbacks import restore_loss_state
    from augcse.training.guard import sound

    encoder = setup.model[0].auto_model
    device = str(next(encoder.parameters()).device)
    state = {k: v for file in checkpoint.glob("*.safetensors") for k, v in load_file(str(file), device=device).items()}
    loaded = encoder.load_state_dict(state, strict=False)
    if not state or loaded.missing_keys or loaded.unexpected_keys:
        return True
    restore_loss_state(setup.loss, checkpoint)
    return sound(setup.loss, probe)


def nonfinite_error(recipe: Recipe, setup: Setup, exc: NonFiniteError) -> RunError:
    """One line: the step, what was not finite, the likely causes, and how to continue from the last good checkpoint."""
    causes = [f"the learning rate ({setup.args.learning_rate:g}) is too high"]
    temperature = getattr(setup.loss, "temperature", None)
    if isinstance(temperature, (int, float)):
        causes.append(f"the loss temperature ({temperature:g}) is too low")
    causes.append("a batch is bad")
    setup.loss.model = setup.model  # probed without the trainer's distributed wrapper
    last = recovery_checkpoint(recipe.run_dir, setup, exc.probe)
    lower = f"training.learning_rate={min(setup.args.learning_rate / 10, HIGHEST_SUGGESTED_RATE):g}"
    stored = recipe.run_dir / RECIPE_FILE
    if last is not None:
        how = (f"{last.name} is the last good checkpoint: continue from it with a lower rate, e.g. augcse train "
               f"{stored} {lower} --resume, or allow skipped steps with skip_nonfinite_steps=N")
    else:
        how = (f"no checkpoint was saved before the weights went wrong: start again with a lower rate, e.g. augcse "
               f"train {stored} {lower} --overwrite, or allow skipped steps with skip_nonfinite_steps=N")
    who = f"rank {exc.rank}: " if exc.rank is not None else ""
    return RunError(f"{who}the run stopped at {exc} (likely: {', '.join(causes)}); the weights were not updated "
                    f"from it and no final/ was written; {how}")


def write_error(recipe: Recipe, setup: Setup, reason: str, writing: str, size: int) -> RunError:
    """One line: what could not be written, how much was needed and is free, what can still be resumed."""
    last = latest_checkpoint(recipe.run_dir)
    resumable = (f"the last complete checkpoint, {last.name}, is still resumable: free space and run again with "
                 "--resume") if last else "no complete checkpoint was saved yet: free space and start again with --overwrite"
    who = f"rank {rank()}: " if world_size() > 1 else ""
    return RunError(f"{who}could not write {writing} in {recipe.run_dir} ({reason}): about {mib(size)} needed, "
                    f"{mib(free_bytes(recipe.run_dir))} free; {resumable}")


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
                           f"{_first_line(exc)}; {resumable(recipe.run_dir)}") from exc
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
        (run_dir / RECIPE_FILE).write_text(recipe.to_yaml())
    if scored:
        eval_file.write_text(json.dumps(scores, indent=2))
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
        "best_checkpoint": best,
        "best_step": checkpoint_step(Path(best)) if best else None,
        **what_ran(trainer.args, run_dir),
    }
    if not trainer.is_world_process_zero():
        return summary
    if not all_finite(setup.loss):
        raise RunError(f"the trained weights are not finite; no final/ was written; "
                       f"{_resume_hint(run_dir)}")
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


def _resume_hint(run_dir: Path) -> str:
    last = last_finite_checkpoint(run_dir)
    return f"{last.name} is resumable with --resume" if last else "start again with --overwrite"


def _train(recipe: Recipe, root: Path | None, corpus_path: Path, checkpoint: Path | None,
           callbacks: Sequence[Any] = ()) -> dict:
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
        print(f"\nStopped; resumable checkpoint: {last}. Continue with: augcse train ... --resume", flush=True)
        return {"stopped": True, "checkpoint": str(last)}
    setup.loss.model = setup.model  # the trainer left its distributed wrapper of the model here
    if guard.skipped:
        logger.warning("%d non-finite step(s) were skipped: %s", len(guard.skipped), guard.skipped)
    return finish(recipe, setup, trainer, root, corpus_path, scores,
                  lambda: earlier + time.perf_counter() - started)

