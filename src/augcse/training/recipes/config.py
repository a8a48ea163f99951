"""Recipes: one YAML file is the whole, reproducible description of a run, validated before anything loads.

The sections are :mod:`augcse.core.schema` sections (pydantic): an unknown key or a bad value is refused with
one line naming the key, what is wrong and how to fix it, before torch, a model or a data file loads.
Command-line overrides use dotted keys: ``training.learning_rate=1e-5 data.limit=2000``.
"""

from __future__ import annotations

import copy
import enum
import os
import re
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints

import yaml
from pydantic import ConfigDict, Field, create_model, field_validator, model_validator

from augcse.core import yamlfile
from augcse.core.loss_parameters import LOSS_PARAMETERS, loss_settings, needs_in_batch_negatives
from augcse.core.names import FOLDER_NAME_RULE, is_folder_name, suggest
from augcse.core.outputs import check_writable
from augcse.core.schema import (
    Budgets, FieldsError, KeyedSection, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, Probability,
    RecipeError, Section, validate,
)
from augcse.core.textfile import read_text

# numpy's generator, which the trainer seeds along with Python's and torch's, takes seeds below 2**32
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]

RECIPE_DIR = Path(__file__).parent
DEFAULT_CORPUS = "corpus/wiki1m_for_simcse.txt"
# the names of augcse.models.poolers.POOLERS, here so that a recipe is checked without loading torch
PoolerName = Literal["cls", "cls_before_pooler", "avg", "avg_first_last", "avg_emb_last", "avg_top2", "prompt"]

__all__ = ["DEFAULT_CORPUS", "RECIPE_DIR", "DataConfig", "EvalConfig", "LossConfig", "ModelConfig", "Recipe",
           "RecipeError", "TrainingRanges", "builtin_recipes", "check_output_dir", "load_recipe", "parse_override",
           "validate_recipe"]


class RecipeSection(KeyedSection):
    """A section of a recipe file (the parameters of losses and views are sections too, under ``params``)."""


class ModelConfig(RecipeSection):
    key: ClassVar[str] = "model"

    backbone: str = "sentence-transformers/all-MiniLM-L6-v2"  # Hugging Face name or local folder (a packaged copy first)
    pooler: PoolerName | None = "avg"  # the encoder + this pooler (see Poolers); None: the model as published
    # with a pooler, keep the modules a sentence-transformers model has after pooling (all-MiniLM-L6-v2: Normalize,
    # unit-norm embeddings as published); a plain encoder has none, and none is added; false drops them
    normalize: bool = True
    max_seq_length: PositiveInt = 32  # tokens per training sentence (truncation)
    # the backbone's config values replaced before its weights load (hidden_dropout_prob: 0.15): what the
    # encoder trains with where a paper's differs from the checkpoint's own; {}: the checkpoint's
    config: dict[str, float | int | bool | str] = Field(default_factory=dict)


class DataConfig(RecipeSection):
    key: ClassVar[str] = "data"

    # a path, or a data-directory relative path; only the default corpus falls back (see ``fallback``)
    corpus: str = DEFAULT_CORPUS
    # used, with a warning, only when ``corpus`` is the default wiki1m and is not available here
    fallback: list[str] = Field(default_factory=lambda: ["corpus/wiki1m_for_simcse.first11914.txt",
                                                          "corpus/wiki_default.txt"])
    column: str = "text"  # the column of a CSV/JSON/Parquet corpus holding the sentences
    limit: PositiveInt | None = None  # keep the first N sentences (after shuffling)
    shuffle: bool = False  # shuffle the corpus with the seed before the limit
    dedupe: bool = False  # drop repeated sentences
    min_words: NonNegativeInt = 1  # drop sentences with fewer words
    max_chars: PositiveInt | None = 10_000  # drop longer lines (broken corpus files)
    views: list[dict[str, Any]] = Field(default_factory=list)  # registered view builders, in order: [{name: …, …}]
    # augmentation caches and retrieval indexes: null beside the runs (output_dir/.cache); a relative path is the
    # working directory's, so each node of a job can keep them on its own disk (built once per node)
    cache_dir: str | None = None

    @field_validator("fallback", mode="before")
    @classmethod
    def _one_path(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value  # a single path stands for a list of one


class LossConfig(RecipeSection):
    key: ClassVar[str] = "loss"

    name: str = "simcse"  # a registered loss (see Losses)
    params: dict[str, Any] = Field(default_factory=dict)  # the loss's keyword parameters

    @field_validator("name")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in LOSS_PARAMETERS:  # the registry, not a fixed list: a loss registered later is known
            raise ValueError(f"unknown loss {value!r}{suggest(value, LOSS_PARAMETERS)}; "
                             f"choose one of {', '.join(LOSS_PARAMETERS)}")
        return value


class EvalConfig(RecipeSection):
    key: ClassVar[str] = "eval"

    dev: str | None = "auto"  # task for model selection; auto: STS-B dev (processed if available, else original)
    before: str | None = "auto"  # tasks before/after training; auto: the 7 STS tasks with a data dir, else STS-B
    after: str | None = "auto"  # null skips an evaluation
    batch_size: PositiveInt = 128  # sentences per encoding batch in evaluation
    # steps after which the model is also scored on the ``after`` tasks, into curve.json (a learning curve
    # from one run); recorded only, nothing is selected on them
    budgets: Budgets = Field(default_factory=list)

    @model_validator(mode="after")
    def _budgets_need_tasks(self) -> EvalConfig:
        if self.budgets and self.after is None:
            raise FieldsError(("budgets", "after"),
                              "budgets are scored on the 'after' tasks; give eval.after or drop eval.budgets")
        return self


class Recipe(RecipeSection):
    name: str = "run"  # the run folder's name: output_dir/name
    seed: Seed = 42  # data order, dropout, views and initialisation
    output_dir: str = "runs"  # folder holding the run folders
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    training: dict[str, Any] = Field(default_factory=dict)  # SentenceTransformerTrainingArguments fields
    skip_nonfinite_steps: NonNegativeInt = 0  # NaN/inf steps skipped before a run stops
    keep_checkpoints: bool = False  # keep checkpoint-* after a successful run (default: only final/ stays)

    @field_validator("name")
    @classmethod
    def _folder_name(cls, value: str) -> str:
        if not is_folder_name(value):
            raise ValueError(f"must be a folder name ({FOLDER_NAME_RULE}), got {value!r}")
        return value

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir) / self.name

    def to_dict(self) -> dict:
        return self.model_dump()

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


class TrainingRanges(Section):
    """The ranges of the trainer arguments a recipe commonly sets (their types are the trainer's own)."""

    model_config = ConfigDict(extra="allow")

    per_device_train_batch_size: PositiveInt | None = None
    per_device_eval_batch_size: PositiveInt | None = None
    gradient_accumulation_steps: PositiveInt | None = None
    eval_steps: PositiveFloat | None = None
    save_steps: PositiveFloat | None = None
    logging_steps: PositiveFloat | None = None
    num_train_epochs: PositiveFloat | None = None
    learning_rate: PositiveFloat | None = None
    save_total_limit: PositiveInt | None = None
    weight_decay: NonNegativeFloat | None = None
    warmup_steps: NonNegativeFloat | None = None
    warmup_ratio: Probability | None = None
    max_grad_norm: NonNegativeFloat | None = None
    max_steps: int | None = None  # -1: train for num_train_epochs

    @field_validator("max_steps")
    @classmethod
    def _steps_or_epochs(cls, value: int | None) -> int | None:
        if value is not None and value < 1 and value != -1:
            raise ValueError(f"must be a positive integer (or -1 for epochs), got {value}")
        return value


SEED_KEYS = ("seed", "data_seed")  # trainer arguments set from the recipe's ``seed``, never on their own


def _training_hints() -> dict[str, Any]:
    from sentence_transformers import SentenceTransformerTrainingArguments

    return get_type_hints(SentenceTransformerTrainingArguments)


def _validate_training(training: dict) -> None:
    """Every ``training.*`` key is a trainer argument of the trainer's type; named loggers are installed."""
    hints = _training_hints()
    for key in training:
        if key in SEED_KEYS:  # one setting, one spelling: the trainer's seeds are the recipe's seed
            raise RecipeError(f"recipe key 'training.{key}': the run's seed is the recipe key 'seed' (it seeds the "
                              f"data order, dropout, views and the trainer alike); write seed={training[key]} instead")
        if key not in hints or key == "output_dir":
            raise RecipeError(
                f"unknown recipe key 'training.{key}'{suggest(key, hints)}: not a SentenceTransformerTrainingArguments "
                "field (output_dir comes from the recipe's output_dir and name)"
            )
    from augcse.training.schedules import CHECKS

    given = {key: (_enum_values(hints[key]) | None, None) for key in training}
    if "lr_scheduler_type" in given:  # the trainer's schedules and augcse's (training/schedules.py)
        from transformers.trainer_utils import SchedulerType

        given["lr_scheduler_type"] = (Literal[(*(s.value for s in SchedulerType), *CHECKS)] | None, None)
    for key, value in training.items():  # YAML 1.1 reads a bare `no` as false: `save_strategy: no` means "no"
        if value is False and "no" in _literal_values(given[key][0]):
            training[key] = "no"
    validate(create_model("TrainingArguments", __base__=Section, **given), training, "training")
    if training.get("lr_scheduler_type") in CHECKS:
        try:
            CHECKS[training["lr_scheduler_type"]](training.get("lr_scheduler_kwargs"))
        except ValueError as exc:
            raise RecipeError(str(exc)) from None
    _validate_report_to(training.get("report_to"))


def _enum_values(hint: Any) -> Any:
    """``SchedulerType | str`` as the trainer means it: one of the enum's values (written as a string)."""
    if get_origin(hint) in (Union, types.UnionType):
        arms = get_args(hint)
        enums = [a for a in arms if isinstance(a, type) and issubclass(a, enum.Enum)]
        if enums:
            values = tuple(member.value for e in enums for member in e)
            rest = [a for a in arms if a is not str and a not in enums]
            return Union[tuple([Literal[values], *rest])] if rest else Literal[values]
    return hint


def _literal_values(hint: Any) -> set:
    """Every value a hint's ``Literal`` arms allow, through unions."""
    if get_origin(hint) is Literal:
        return set(get_args(hint))
    return set().union(*map(_literal_values, get_args(hint))) if get_origin(hint) in (Union, types.UnionType) else set()


def _validate_report_to(report_to: str | list[str] | None) -> None:
    """A logging backend named in ``training.report_to`` must be known and installed, or the run would fail late."""
    if report_to is None:
        return
    from transformers.integrations import get_available_reporting_integrations
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK

    available = set(get_available_reporting_integrations())
    for name in [report_to] if isinstance(report_to, str) else report_to:
        if name in ("none", "all"):
            continue
        if name not in INTEGRATION_TO_CALLBACK:
            raise RecipeError(f"recipe key 'training.report_to': unknown logging backend {name!r}"
                              f"{suggest(name, INTEGRATION_TO_CALLBACK)}; choose from none, "
                              f"{', '.join(INTEGRATION_TO_CALLBACK)}")
        if name not in available:
            extra = " (or pip install 'augcse[tensorboard]')" if name == "tensorboard" else ""
            raise RecipeError(f"recipe key 'training.report_to': {name} is not installed; pip install {name}{extra}, "
                              "or drop it from report_to")


def _validate_components(recipe: Recipe) -> None:
    """What needs the registries: views against the loss's roles, task names (loads no model)."""
    from augcse.losses import validate_loss  # torch: only once everything else is known to be right
    from augcse.text.views import produced_columns

    try:  # the loss's roles against the views' columns; every default filled in
        recipe.loss.params = validate_loss(recipe.loss.name, recipe.loss.params, produced_columns(recipe.data.views))
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    for key in ("dev", "before", "after"):
        spec = getattr(recipe.eval, key)
        if spec not in (None, "auto"):
            _validate_tasks(f"eval.{key}", spec)


def _validate_tasks(key: str, spec: str) -> None:
    from augcse.evaluation.tasks import resolve_tasks

    try:
        if not resolve_tasks(spec):
            raise ValueError("no task named")
    except ValueError as exc:
        raise RecipeError(f"recipe key {key!r}: {exc}") from None


def parse_override(text: str) -> tuple[list[str], Any]:
    if "=" not in text:
        raise RecipeError(f"override {text!r} must look like key.path=value (e.g. training.learning_rate=1e-5)")
    key, raw = text.split("=", 1)
    try:
        return key.strip().split("."), yamlfile.load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise RecipeError(f"override {text!r} is not valid YAML: {str(exc).splitlines()[0]}") from None


def refuse_reserved(overrides: Sequence[str], reserved: Mapping[str, str], command: str) -> None:
    """ValueError (one line) for an override of a key ``command`` sets itself, or of a section holding one: it
    would replace what the command's flags say without a word. ``reserved``: key -> what to give instead."""
    for text in overrides:
        key = ".".join(parse_override(text)[0])
        for name, instead in reserved.items():
            if key == name or name.startswith(key + "."):
                raise ValueError(f"override {text}: {command} sets {name} itself; {instead}")


def _step(node: Any, part: str, text: str) -> tuple[Any, str | int]:
    """Resolve ``name`` or ``name[i]`` under ``node``; returns the container and the final key/index."""
    name, _, index = part.partition("[")
    if not index:
        return node, name
    if not index.endswith("]") or not index[:-1].isdigit():
        raise RecipeError(f"override {text!r}: {part!r} must look like name[0]")
    items = node.get(name) if isinstance(node, dict) else None
    if not isinstance(items, list) or int(index[:-1]) >= len(items):
        raise RecipeError(f"override {text!r}: {name!r} has no item {index[:-1]}")
    return items, int(index[:-1])


def apply_overrides(values: dict, overrides: list[str]) -> dict:
    """Dotted keys, with list items by index: ``training.learning_rate=1e-5``, ``data.views[0].proportion=0.5``."""
    for text in overrides:
        path, value = parse_override(text)
        node = values
        for part in path[:-1]:
            container, key = _step(node, part, text)
            if isinstance(key, str):
                node = container.setdefault(key, {})
            else:
                node = container[key]
            if not isinstance(node, dict):
                raise RecipeError(f"override {text!r}: {part!r} is not a section")
        container, key = _step(node, path[-1], text)
        container[key] = value
    return values


def _numbers(values: Any) -> Any:
    """YAML 1.1 reads ``1e-5`` as a string; turn such strings back into floats."""
    if isinstance(values, dict):
        return {k: _numbers(v) for k, v in values.items()}
    if isinstance(values, list):
        return [_numbers(v) for v in values]
    if isinstance(values, str):
        try:
            return float(values) if any(c in values.lower() for c in "e.") and values[0] in "0123456789.-" else values
        except ValueError:
            return values
    return values


def builtin_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def validate_recipe(values: dict | Recipe, check_output: bool = False) -> Recipe:
    """The one check of a recipe, from a YAML mapping or a :class:`Recipe` built in Python.

    First everything that needs no torch (every key, type and range, the loss's, views' and training
    arguments' declared parameters), so a bad value is refused in about a second; with ``check_output``
    (``augcse train``) the output folder is then proven writable, still before anything heavy loads; then
    what needs the registries (the trainer's own argument types, the views' columns against the loss's
    roles, task names). Returns the recipe with every default a component fills in written out.
    """
    if isinstance(values, Recipe):
        values = values.model_dump()
    recipe = validate(Recipe, values)
    recipe.loss.params = loss_settings(recipe.loss.name, recipe.loss.params)
    validate(TrainingRanges, recipe.training, "training")
    from augcse.text.views import validate_view_specs  # here, not at the top: `augcse train --help` stays numpy-free

    recipe.data.views = validate_view_specs(recipe.data.views)
    if check_output:
        check_output_dir(recipe)
    _validate_training(recipe.training)
    check_budgets_reached(recipe, recipe.training.get("max_steps", -1))
    _validate_negatives(recipe)
    _validate_components(recipe)
    return recipe


def check_budgets_reached(recipe: Recipe, steps: int) -> None:
    """``eval.budgets`` past the run's last step would never be scored, though a study's plan lists them:
    refused (``steps`` -1: not known yet, checked again once the corpus is read)."""
    past = [budget for budget in recipe.eval.budgets if 0 < steps < budget]
    if past:
        raise RecipeError(f"recipe key 'eval.budgets': {', '.join(map(str, past))} past the run's last step {steps} "
                          "would never be scored; drop them, or raise training.max_steps (or data.limit)")


def _validate_negatives(recipe: Recipe) -> None:
    """A loss that contrasts each row with the others refuses a batch with no other row: its loss and gradient
    would be exactly zero at every step. Under torchrun the processes' batches count together when the loss
    gathers across them (``WORLD_SIZE``)."""
    if not needs_in_batch_negatives(recipe.loss.name, recipe.loss.params):
        return
    per_device = recipe.training.get("per_device_train_batch_size", 8)
    processes = int(os.environ.get("WORLD_SIZE", "1") or 1)
    gathers = recipe.loss.params.get("gather_across_devices", True) is not False
    if per_device < 2 and (processes < 2 or not gathers):
        where = "" if processes < 2 else f" (and {processes} processes do not gather across devices)"
        raise RecipeError(f"recipe key 'training.per_device_train_batch_size': {recipe.loss.name} contrasts each "
                          f"sentence with the others of its batch, and a batch of {per_device}{where} has none, so "
                          "it would train nothing; use 2 or more (the papers use 64-1024)")


def check_output_dir(recipe: Recipe) -> None:
    """The output folder (and the run folder, when it is one of its own: a mount, other permissions) can be
    written: a probe file, removed again; RecipeError naming ``output_dir`` otherwise."""
    from augcse.training.rundir import RunFolderError, refuse_foreign

    try:
        refuse_foreign(recipe.run_dir)  # before the probe below writes into it
        check_writable(recipe.output_dir, "recipe key 'output_dir':")
        if recipe.run_dir.is_dir():
            check_writable(recipe.run_dir, "recipe key 'output_dir': the run folder")
    except (ValueError, RunFolderError) as exc:
        raise RecipeError(str(exc)) from None


def load_recipe(source: str | Path | None = None, name: str | None = None, overrides: list[str] | None = None,
                check_output: bool = False) -> Recipe:
    """Load a recipe from a YAML path or a built-in name, apply overrides, validate everything (with
    ``check_output``, the output folder too: see :func:`validate_recipe`)."""
    if (source is None) == (name is None):
        raise RecipeError("give either a recipe file or --recipe NAME")
    if name is not None:
        path = RECIPE_DIR / f"{name}.yaml"
        if not path.is_file():
            raise RecipeError(f"unknown recipe {name!r}{suggest(name, builtin_recipes())}; "
                              f"built-in recipes: {', '.join(builtin_recipes())}")
    else:
        path = Path(source)
        if not path.is_file():
            raise RecipeError(f"recipe file {path} " + ("is a folder; give the recipe's YAML file" if path.is_dir()
                                                        else "does not exist"))
    try:
        values = yamlfile.load(read_text(path, f"recipe {path}"))
    except yaml.YAMLError as exc:
        raise RecipeError(f"recipe {path} is not valid YAML: {yamlfile.describe(exc)}") from None
    except ValueError as exc:  # not UTF-8 text
        raise RecipeError(str(exc)) from None
    if values is None:
        raise RecipeError(f"recipe {path} is empty; write at least a name: and a loss: (see docs/RECIPES.md or "
                          "augcse train --recipe quickstart)")
    if not isinstance(values, dict):
        raise RecipeError(f"recipe {path} must be a mapping of keys (name:, model:, data:, loss:…), "
                          f"got a {type(values).__name__}")
    changed = apply_overrides(copy.deepcopy(values), overrides or [])
    try:
        return validate_recipe(_numbers(changed), check_output)
    except RecipeError as exc:
        raise RecipeError(_carried_parameters(values, changed, str(exc), path)) from None


def _carried_parameters(written: dict, changed: dict, message: str, path: Path) -> str:
    """A ``loss.params`` key refused after ``loss.name=`` changed the loss: the key is the file's, written for its
    own loss, so the line says where it came from and how to drop it."""
    old, new = (written.get("loss") or {}).get("name"), (changed.get("loss") or {}).get("name")
    carried = re.match(r"unknown recipe key 'loss\.params\.(\w+)'", message)
    params = (written.get("loss") or {}).get("params") or {}
    if not carried or old == new or carried.group(1) not in params:
        return message
    return (f"recipe key 'loss.params.{carried.group(1)}' comes from {path.name}, written for loss {old!r}, and "
            f"loss {new!r} has no such parameter ({message.partition('; ')[2] or 'it takes none'}); add "
            f"'loss.params={{}}' to start from the new loss's defaults")
