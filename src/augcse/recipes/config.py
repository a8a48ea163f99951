"""Recipes: one YAML file is the whole, reproducible description of a run, validated before anything loads.

An unknown key or a bad value is refused with one line naming the key, what is wrong and how to fix it.
Command-line overrides use dotted keys: ``training.learning_rate=1e-5 data.limit=2000``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

import yaml

RECIPE_DIR = Path(__file__).parent


class RecipeError(ValueError):
    """A recipe is invalid; the message is one line saying what and how to fix it."""


@dataclass
class ModelConfig:
    backbone: str = "sentence-transformers/all-MiniLM-L6-v2"
    pooler: str | None = "avg"  # None keeps a sentence-transformers folder's own pooling
    max_seq_length: int = 32


@dataclass
class DataConfig:
    corpus: str = "corpus/wiki1m_for_simcse.txt"  # a path, or a data-directory relative path
    fallback: list[str] = field(default_factory=lambda: ["corpus/wiki1m_for_simcse.first11914.txt",
                                                          "corpus/wiki_default.txt"])
    column: str = "text"
    limit: int | None = None
    shuffle: bool = False
    dedupe: bool = False
    min_words: int = 1
    max_chars: int | None = 10_000
    views: list[dict] = field(default_factory=list)  # registered view builders, in order: [{name: …, …}]


@dataclass
class LossConfig:
    name: str = "simcse"
    params: dict = field(default_factory=dict)


@dataclass
class EvalConfig:
    dev: str | None = "auto"  # task for model selection; auto: STS-B dev (processed if available, else original)
    before: str | None = "auto"  # tasks before/after training; auto: the 7 STS tasks with a data dir, else STS-B
    after: str | None = "auto"
    batch_size: int = 128


@dataclass
class Recipe:
    name: str = "run"
    seed: int = 42
    output_dir: str = "runs"
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


def _check_type(key: str, value: Any, hint: Any) -> Any:
    """Validate a value against a simple type hint: int, float, bool, str, list[...], dict, or ``X | None``."""
    args = [a for a in get_args(hint) if a is not type(None)]
    optional = type(None) in get_args(hint)
    if get_origin(hint) in (Union, UnionType):
        hint = args[0]
    if value is None:
        if optional:
            return None
        raise RecipeError(f"recipe key {key!r} cannot be null")
    kind = get_origin(hint) or hint
    if kind is list:
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list):
            raise RecipeError(f"recipe key {key!r} must be a list, got {value!r}")
    elif kind is dict and not isinstance(value, dict):
        raise RecipeError(f"recipe key {key!r} must be a mapping, got {value!r}")
    elif kind is bool and not isinstance(value, bool):
        raise RecipeError(f"recipe key {key!r} must be true or false, got {value!r}")
    elif kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise RecipeError(f"recipe key {key!r} must be an integer, got {value!r}")
    elif kind is str and not isinstance(value, str):
        raise RecipeError(f"recipe key {key!r} must be a string, got {value!r}")
    return value


def _build(cls: type, values: dict, prefix: str = "") -> Any:
    if not isinstance(values, dict):
        raise RecipeError(f"recipe section {prefix.rstrip('.') or 'root'!r} must be a mapping, got {values!r}")
    hints = get_type_hints(cls)
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise RecipeError(f"unknown recipe key {prefix + unknown[0]!r}; allowed here: {', '.join(sorted(known))}")
    kwargs = {}
    for name, value in values.items():
        hint = hints[name]
        if dataclasses.is_dataclass(hint):
            kwargs[name] = _build(hint, value or {}, f"{prefix}{name}.")
        else:
            kwargs[name] = _check_type(prefix + name, value, hint)
    return cls(**kwargs)


def _validate_training(training: dict) -> None:
    from sentence_transformers import SentenceTransformerTrainingArguments

    allowed = {f.name for f in fields(SentenceTransformerTrainingArguments)}
    for key in training:
        if key not in allowed or key == "output_dir":
            raise RecipeError(
                f"unknown recipe key 'training.{key}': not a SentenceTransformerTrainingArguments field "
                "(output_dir comes from the recipe's output_dir and name)"
            )
    for key in ("per_device_train_batch_size", "eval_steps", "save_steps", "max_steps"):
        value = training.get(key)
        if value is not None and (not isinstance(value, int) or (value <= 0 and key != "max_steps")):
            raise RecipeError(f"recipe key 'training.{key}' must be a positive integer, got {value!r}")
    lr = training.get("learning_rate")
    if lr is not None and (not isinstance(lr, (int, float)) or lr <= 0):
        raise RecipeError(f"recipe key 'training.learning_rate' must be a positive number, got {lr!r}")


def _validate_names(recipe: Recipe) -> None:
    from augcse.losses import validate_loss
    from augcse.modules import POOLERS
    from augcse.views import produced_columns

    if recipe.model.pooler is not None and recipe.model.pooler not in POOLERS:
        raise RecipeError(f"recipe key 'model.pooler': unknown pooler {recipe.model.pooler!r}; "
                          f"choose one of {', '.join(POOLERS)} or null")
    try:  # views and loss parameters by their signatures, the loss's roles against the views' columns
        recipe.loss.params = validate_loss(recipe.loss.name, recipe.loss.params, produced_columns(recipe.data.views))
    except ValueError as exc:
        raise RecipeError(str(exc)) from None
    if recipe.model.max_seq_length <= 0:
        raise RecipeError("recipe key 'model.max_seq_length' must be positive")
    if not recipe.name or "/" in recipe.name:
        raise RecipeError(f"recipe key 'name' must be a non-empty folder name, got {recipe.name!r}")


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
            raise RecipeError(f"unknown recipe {name!r}; built-in recipes: {', '.join(builtin_recipes())}")
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
