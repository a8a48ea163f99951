"""Views every method can use: the anchor column, an explicit dropout copy, and a user's own columns."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TYPE_CHECKING

from augcse.core.schema import PositiveInt
from augcse.text.views.base import ANCHOR, MAP_BATCH, REMOVED, ViewContext, as_anchor, register_view, view_fingerprint

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset


@register_view("anchor", outputs=lambda p: {ANCHOR: None})
def anchor_view(dataset: Dataset, context: ViewContext) -> Dataset:
    """Rename ``text`` to ``anchor`` (the default first column)."""
    return as_anchor(dataset)


@register_view("dropout_copy", outputs=lambda p: {"positive": None})
def dropout_copy_view(dataset: Dataset, context: ViewContext) -> Dataset:
    """An explicit ``positive`` column equal to the anchor (the second dropout view as its own column).

    Copied a batch at a time, so a memory-mapped corpus is never read whole into Python.
    """
    dataset = as_anchor(dataset)
    return dataset.map(_copy, batched=True, batch_size=MAP_BATCH, input_columns=[ANCHOR],
                       new_fingerprint=view_fingerprint(dataset, "dropout_copy"))


def _copy(texts: list[str]) -> dict[str, list[str]]:
    return {"positive": texts}


def _columns_outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"text": REMOVED, **{role: None for role in params["columns"]}}


@register_view("columns", outputs=_columns_outputs, replaces=True)
def columns_view(dataset: Dataset, context: ViewContext, path: str, columns: dict[str, str],
                 limit: PositiveInt | None = None) -> Dataset:
    """A user's own multi-column file (CSV, TSV, JSON lines, Parquet) with its columns mapped onto roles by name.

    ``columns`` maps each role the loss reads to the file's column, e.g. supervised SimCSE on NLI triplets:
    ``{name: columns, path: nli.csv, columns: {anchor: sent0, positive: sent1, negative: hard_neg}}``. The
    file replaces the corpus; its other columns are left out.
    """
    from pathlib import Path

    from datasets import load_dataset

    file = Path(path).expanduser()
    if not file.is_file() and context.data_dir is not None and (Path(context.data_dir) / path).is_file():
        file = Path(context.data_dir) / path
    if not file.is_file():
        raise ValueError(f"columns view: file {path} does not exist")
    kind = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet"}.get(file.suffix)
    if kind is None:
        raise ValueError(f"columns view: {file.name} is not .csv, .tsv, .json(l) or .parquet")
    options = {"delimiter": "\t"} if file.suffix == ".tsv" else {}
    table = load_dataset(kind, data_files=str(file), split="train", **options)
    missing = [c for c in columns.values() if c not in table.column_names]
    if missing:
        raise ValueError(f"columns view: {file.name} has no column {missing[0]!r} (it has: {', '.join(table.column_names)})")
    if limit is not None:
        table = table.select(range(min(limit, len(table))))
    table = table.select_columns(list(columns.values()))
    return table.rename_columns({source: role for role, source in columns.items() if source != role})
