"""View builders: a corpus (``text`` column) → the named training columns a loss reads by role.

The text side of every method is columns of a dataset (``anchor``, ``positive``, ``negation``,
``retrieved``, ``label``…). Recipes list registered view builders under ``data.views`` and they run
in order; with none the dataset is the single ``anchor`` column. One module per paper
(:mod:`~augcse.text.views.augcse`, :mod:`~augcse.text.views.sda`, :mod:`~augcse.text.views.cards`,
:mod:`~augcse.text.views.esimcse`) and the generic
ones (:mod:`~augcse.text.views.generic`). Views never import a loss, and losses never import a view.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, TYPE_CHECKING

from augcse.core.names import suggest
from augcse.core.schema import RecipeError, signature_model, validate
from augcse.text.views import augcse, cards, declutr, esimcse, generic, random_insertion, sda, tsdae  # noqa: F401  (each module registers its views)
from augcse.text.views.augcse import augcse_sample_view
from augcse.text.views.base import ANCHOR, LABEL, REMOVED, VIEWS, View, ViewContext, register_view
from augcse.text.views.cards import cards_view
from augcse.text.views.declutr import declutr_spans_view
from augcse.text.views.esimcse import esimcse_repetition_view
from augcse.text.views.generic import anchor_view, columns_view, dropout_copy_view
from augcse.text.views.sda import sda_view

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset


@functools.cache
def view_parameters(name: str):
    """The view builder's keyword parameters as a schema section (its signature is the declaration)."""
    return signature_model(VIEWS[name].builder, skip=("dataset", "context"))


def _spec_params(spec: Any, index: int) -> tuple[View, dict[str, Any]]:
    where = f"data.views[{index}]"
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise RecipeError(f"recipe key {where!r} must be a mapping with a 'name', got {spec!r}")
    name = spec["name"]
    if name not in VIEWS:
        raise RecipeError(f"recipe key '{where}.name': unknown view {name!r}{suggest(str(name), list(VIEWS))}; "
                          f"choose one of {', '.join(VIEWS)}")
    params = validate(view_parameters(name), {k: v for k, v in spec.items() if k != "name"}, where)
    return VIEWS[name], params.model_dump()


def produced_columns(specs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The columns the views will write, in order, without running them: column → ``None`` (text) or the
    label space ``{size, names, spec}``. Validates every view's name and parameters (one line each)."""
    columns: dict[str, Any] = {"text": None}
    for index, spec in enumerate(specs):
        view, params = _spec_params(spec, index)
        try:
            outputs = view.outputs(params)
        except ValueError as exc:
            raise RecipeError(f"recipe key 'data.views[{index}]': {exc}") from None
        if view.replaces:
            columns = {}
        for column, value in outputs.items():
            if value is REMOVED:
                columns.pop(column, None)
            else:
                columns[column] = value
    if "text" in columns:
        columns = {ANCHOR if c == "text" else c: v for c, v in columns.items()}
    return columns


def validate_view_specs(specs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The specs with every parameter's default written out; an unknown view, an unknown or mistyped
    parameter, or a bad value is refused in one line (the columns they write are not computed)."""
    return [{"name": spec["name"], **_spec_params(spec, index)[1]} for index, spec in enumerate(specs)]


def build_views(dataset: Dataset, views: Sequence[Mapping[str, Any]], context: ViewContext) -> Dataset:
    """Run the recipe's view builders in order; always ends with an ``anchor`` first column."""
    for index, spec in enumerate(views):
        view, params = _spec_params(spec, index)
        dataset = view.builder(dataset, context, **params)
    dataset = anchor_view(dataset, context)
    ordered = [ANCHOR, *[c for c in dataset.column_names if c != ANCHOR]]
    return dataset if dataset.column_names == ordered else dataset.select_columns(ordered)


__all__ = ["ANCHOR", "LABEL", "VIEWS", "ViewContext", "anchor_view", "augcse_sample_view", "build_views", "cards_view",
           "columns_view", "declutr_spans_view", "dropout_copy_view", "esimcse_repetition_view", "produced_columns", "register_view", "sda_view"]
