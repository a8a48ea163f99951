"""What a run builds before training: its inputs checked, then corpus, model, loss, views and the trainer.

Nothing here knows any method: the loss and the view builders are looked up by name in their registries.
Everything a run names is checked (:func:`check_inputs`) before any model, spaCy pipeline or corpus loads;
:func:`build_setup` then builds in the order that makes a run reproducible.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from augcse.assets.resolve import AssetError, has_data, resolve_data, resolve_model
from augcse.core.loss_parameters import loss_models
from augcse.core.sanity import SAMPLE, check_distinct, check_text
from augcse.models.load import check_readable, load_as_published
from augcse.text.corpus_source import find_corpus, how_to_get
from augcse.training.arguments import training_arguments
from augcse.training.ranks import world_size
from augcse.training.recipes.config import DEFAULT_CORPUS, Recipe, RecipeError, check_budgets_reached, check_output_dir

logger = logging.getLogger(__name__)


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


def check_inputs(recipe: Recipe, root: Path | None, corpus: bool = True) -> Path | None:
    """Everything the run names that can be checked without loading: the corpus, the model, the output folder.

    The output folder is created (or found) and proven writable with a probe file. Returns the corpus file (None
    with ``corpus`` false: a corpus the run writes itself once its folder is claimed).
    Raises one-line errors (exit 2 from the CLI) before any model, spaCy pipeline or corpus loads.
    """
    check_output_dir(recipe)
    if recipe.eval.budgets and world_size() > 1:
        raise RecipeError("recipe key 'eval.budgets': budgets are scored in one process; train with one process "
                          "or drop eval.budgets")
    found = resolve_corpus(recipe, root) if corpus else None
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
    return found


def _check_model_config(location: str, recipe: Recipe) -> None:
    """``model.config``'s keys against the backbone's ``config.json`` (a few KB), before the corpus is read."""
    from augcse.models.backbone_config import ConfigKeyError, check_config

    try:
        check_config(location, recipe.model.config)
    except ConfigKeyError as exc:
        raise RecipeError(str(exc)) from None


def read_training_corpus(recipe: Recipe, corpus_path: Path):
    """The corpus read and cleaned; refuses one that leaves less than one batch on every process (it would train
    on nothing: the trainer drops a partial batch), before the model loads."""
    from augcse.text.corpus import load_corpus

    options = {k: getattr(recipe.data, k) for k in ("limit", "shuffle", "dedupe", "min_words", "max_chars")}
    corpus, stats = load_corpus(corpus_path, column=recipe.data.column, seed=recipe.seed, **options)
    batch = one_batch(recipe)
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


def one_batch(recipe: Recipe) -> int:
    """The rows one optimizer micro-step takes: a batch on every process."""
    return int(recipe.training.get("per_device_train_batch_size", 64)) * world_size()


def check_views_fill_a_batch(recipe: Recipe, rows: int) -> None:
    """Views that drop rows (``drop_unchanged``, DeCLUTR's documents too short for their spans) can leave fewer
    than one batch of a corpus that had enough: refused in one line, as the corpus is, not trained for 0 steps."""
    if rows < one_batch(recipe):
        names = ", ".join(str(view.get("name")) for view in recipe.data.views) or "none"
        raise RecipeError(f"data.views ({names}) leave {rows} training rows, fewer than one batch of "
                          f"{one_batch(recipe)}; use a larger corpus or data.limit, or lower "
                          "training.per_device_train_batch_size")


def total_steps(recipe: Recipe, rows: int) -> int:
    """Optimizer steps of the run, as the trainer counts them: ``max_steps``, else epochs over the batches of
    ``rows`` (a batch on every process; a last partial batch dropped unless ``dataloader_drop_last`` is false),
    a step every ``gradient_accumulation_steps`` batches and one more for an epoch's remaining batches. A corpus
    smaller than one accumulated global batch therefore trains one step; one smaller than :func:`one_batch` is
    refused before the model loads (:func:`read_training_corpus`), so no run trains 0 steps."""
    training = recipe.training
    if training.get("max_steps", -1) > 0:
        return int(training["max_steps"])
    batches = rows // one_batch(recipe) if training.get("dataloader_drop_last", True) else -(-rows // one_batch(recipe))
    per_epoch = max(1, math.ceil(batches / int(training.get("gradient_accumulation_steps", 1))))
    return max(1, math.ceil(float(training.get("num_train_epochs", 1)) * per_epoch))


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
    check_views_fill_a_batch(recipe, len(train_dataset))
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
