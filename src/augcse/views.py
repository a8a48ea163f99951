"""View builders: a corpus (``text`` column) → the training columns a loss reads, in order.

The text side of every method is columns of a dataset (``anchor``, ``positive``, ``negative``,
``label``…). A view builder is a registered function ``(dataset, context, **params) -> dataset``;
recipes list them under ``data.views`` and they run in order. With no views the dataset is the
single ``anchor`` column (SimCSE: the loss makes the dropout positive itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from datasets import Dataset


@dataclass
class ViewContext:
    """What a view builder may need besides the dataset."""

    model: Any  # the SentenceTransformer being trained (e.g. to encode the corpus for retrieval)
    seed: int = 42
    data_dir: Path | None = None
    run_dir: Path | None = None
    cache_dir: Path | None = None
    extras: dict = field(default_factory=dict)


ViewBuilder = Callable[..., Dataset]
VIEWS: dict[str, ViewBuilder] = {}


def register_view(name: str) -> Callable[[ViewBuilder], ViewBuilder]:
    """Decorator: make a view builder available to recipes as ``{name: <name>, …params}``."""

    def decorator(fn: ViewBuilder) -> ViewBuilder:
        if name in VIEWS:
            raise ValueError(f"view {name!r} is registered twice")
        VIEWS[name] = fn
        return fn

    return decorator


@register_view("anchor")
def anchor_view(dataset: Dataset, context: ViewContext) -> Dataset:
    """Rename ``text`` to ``anchor`` (the default first column)."""
    return dataset.rename_column("text", "anchor") if "text" in dataset.column_names else dataset


@register_view("dropout_copy")
def dropout_copy_view(dataset: Dataset, context: ViewContext) -> Dataset:
    """An explicit ``positive`` column equal to the anchor (the second dropout view as its own column)."""
    dataset = anchor_view(dataset, context)
    return dataset.add_column("positive", dataset["anchor"])


def build_views(dataset: Dataset, views: list[dict], context: ViewContext) -> Dataset:
    """Run the recipe's view builders in order; always ends with an ``anchor`` first column."""
    _load_builtin_views()
    for spec in views:
        params = {k: v for k, v in spec.items() if k != "name"}
        dataset = VIEWS[spec["name"]](dataset, context, **params)
    dataset = anchor_view(dataset, context)
    ordered = ["anchor", *[c for c in dataset.column_names if c != "anchor"]]
    return dataset.select_columns(ordered)


def _load_builtin_views() -> None:
    """Import the method modules so their views register themselves."""
    import augcse.losses  # noqa: F401  (each paper's module registers its views)
