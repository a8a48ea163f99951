"""Recipes: one YAML file is the whole, reproducible description of a run, validated before anything loads.

An unknown key or a bad value is refused with one line naming the key, what is wrong and how to fix it.
Command-line overrides use dotted keys: ``training.learning_rate=1e-5 data.limit=2000``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

import yaml

from augcse.names import suggest
from augcse.recipes.checks import check_range, check_value

RECIPE_DIR = Path(__file__).parent


class RecipeError(ValueError):
    """A recipe is invalid; the message is one line saying what and how to fix it."""


POSITIVE = {"range": (0, None, True)}
NON_NEGATIVE = {"range": (0, None, False)}
DEFAULT_CORPUS = "corpus/wiki1m_for_simcse.txt"


@dataclass
class ModelConfig:
    backbone: str = "sentence-transformers/all-MiniLM-L6-v2"  # Hugging Face name or local folder (a packaged copy first)
    pooler: str | None = "avg"  # the encoder + this pooler; None: the model as published
    # with a pooler, keep the modules a sentence-transformers model has after pooling (all-MiniLM-L6-v2: Normalize);
    # a plain encoder has none, and none is added
    normalize: bool = True
    max_seq_length: int = field(default=32, metadata=POSITIVE)  # tokens per training sentence (truncation)


@dataclass
class DataConfig:
    # a path, or a data-directory relative path; only the default corpus falls back (see ``fallback``)
    corpus: str = DEFAULT_CORPUS
    # used, with a warning, only when ``corpus`` is the default wiki1m and is not available here
    fallback: list[str] = field(default_factory=lambda: ["corpus/wiki1m_for_simcse.first11914.txt",
                                                          "corpus/wiki_default.txt"])
    column: str = "text"  # the column of a CSV/JSON/Parquet corpus holding the sentences
    limit: int | None = field(default=None, metadata=POSITIVE)  # keep the first N sentences (after shuffling)
    shuffle: bool = False  # shuffle the corpus with the seed before the limit
    dedupe: bool = False  # drop repeated sentences
    min_words: int = field(default=1, metadata=NON_NEGATIVE)  # drop sentences with fewer words
    max_chars: int | None = field(default=10_000, metadata=POSITIVE)  # drop longer lines (broken corpus files)
    views: list[dict] = field(default_factory=list)  # registered view builders, in order: [{name: …, …}]


@dataclass
class LossConfig:
    name: str = "simcse"  # a registered loss (see Losses)
    params: dict = field(default_factory=dict)  # the loss's keyword parameters


@dataclass
class EvalConfig:
    dev: str | None = "auto"  # task for model selection; auto: STS-B dev (processed if available, else original)
    before: str | None = "auto"  # tasks before/after training; auto: the 7 STS tasks with a data dir, else STS-B
    after: str | None = "auto"  # null skips an evaluation
    batch_size: int = field(default=128, metadata=POSITIVE)  # sentences per encoding batch in evaluation


@dataclass
class Recipe:
    name: str = "run"  # the run folder's name: output_dir/name
    seed: int = field(default=42, metadata=NON_NEGATIVE)  # data order, dropout, views and initialisation
    output_dir: str = "runs"  # folder holding the run folders
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    training: dict = field(default_factory=dict)  # SentenceTransformerTrainingArguments fields

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir) / self.name

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def _check_field(key: str, value: Any, hint: Any, metadata: Any) -> Any:
    """Validate one recipe value against its field's type hint and range; a single string may stand for a list."""
    if value is None and type(None) not in get_args(hint):
        raise RecipeError(f"recipe key {key!r} cannot be null")
    if get_origin(hint) is list and isinstance(value, str):
        value = [value]
    try:
        check_value(key, value, hint)
        if "range" in metadata:
            check_range(key, value, *metadata["range"])
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    return value


def _build(cls: type, values: dict, prefix: str = "") -> Any:
    if not isinstance(values, dict):
        raise RecipeError(f"recipe section {prefix.rstrip('.') or 'root'!r} must be a mapping, got {values!r}")
    hints = get_type_hints(cls)
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise RecipeError(f"unknown recipe key {prefix + unknown[0]!r}{suggest(unknown[0], known)}; "
                          f"allowed here: {', '.join(sorted(known))}")
    kwargs = {}
    for name, value in values.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _build(hint, value or {}, f"{prefix}{name}.")
        else:
            kwargs[name] = _check_field(prefix + name, value, hint, known[name].metadata)
    return cls(**kwargs)


# Ranges of the trainer arguments a recipe commonly sets: (low, high, low_open).
TRAINING_RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    **{key: (0, None, True) for key in ("per_device_train_batch_size", "per_device_eval_batch_size",
                                        "gradient_accumulation_steps", "eval_steps", "save_steps",
                                        "logging_steps", "num_train_epochs", "learning_rate", "save_total_limit")},
    **{key: (0, None, False) for key in ("weight_decay", "warmup_steps", "seed", "data_seed", "max_grad_norm")},
    "warmup_ratio": (0, 1, False),
    "max_steps": (-1, None, False),
}


def _training_hints() -> dict[str, Any]:
    from sentence_transformers import SentenceTransformerTrainingArguments

    return get_type_hints(SentenceTransformerTrainingArguments)


def _validate_training(training: dict) -> None:
    """Every ``training.*`` key is a trainer argument of the right type and range; named loggers are installed."""
    hints = _training_hints()
    for key, value in training.items():
        if key not in hints or key == "output_dir":
            raise RecipeError(
                f"unknown recipe key 'training.{key}'{suggest(key, hints)}: not a SentenceTransformerTrainingArguments "
                "field (output_dir comes from the recipe's output_dir and name)"
            )
        try:
            if value is not None:
                check_value(f"training.{key}", value, hints[key])
            if key in TRAINING_RANGES:
                check_range(f"training.{key}", value, *TRAINING_RANGES[key])
        except ValueError as exc:
            raise RecipeError(str(exc)) from None
    if training.get("max_steps") == 0:
        raise RecipeError("recipe key 'training.max_steps' must be a positive integer (or -1 for epochs), got 0")
    _validate_report_to(training.get("report_to"))


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


def _validate_names(recipe: Recipe) -> None:
    from augcse.losses import validate_loss
    from augcse.modules import POOLERS
    from augcse.views import produced_columns

    if recipe.model.pooler is not None and recipe.model.pooler not in POOLERS:
        raise RecipeError(f"recipe key 'model.pooler': unknown pooler {recipe.model.pooler!r}"
                          f"{suggest(recipe.model.pooler, POOLERS)}; choose one of {', '.join(POOLERS)} or null")
    try:  # views and loss parameters by their signatures, the loss's roles against the views' columns
        recipe.loss.params = validate_loss(recipe.loss.name, recipe.loss.params, produced_columns(recipe.data.views))
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    if not RUN_NAME.fullmatch(recipe.name) or ".." in recipe.name:
        raise RecipeError(f"recipe key 'name' must be a folder name (letters, digits, '.', '_', '-', '+'; no '/' "
                          f"or '..'), got {recipe.name!r}")
    for key in ("dev", "before", "after"):
        spec = getattr(recipe.eval, key)
        if spec not in (None, "auto"):
            _validate_tasks(f"eval.{key}", spec)


RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


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
    return key.strip().split("."), yaml.safe_load(raw) if raw.strip() else None


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


def load_recipe(source: str | Path | None = None, name: str | None = None, overrides: list[str] | None = None) -> Recipe:
    """Load a recipe from a YAML path or a built-in name, apply overrides, validate everything."""
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
            raise RecipeError(f"recipe file {path} does not exist")
    try:
        values = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise RecipeError(f"recipe {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    values = _numbers(apply_overrides(values, overrides or []))
    recipe = _build(Recipe, values)
    _validate_training(recipe.training)
    _validate_names(recipe)
    return recipe
