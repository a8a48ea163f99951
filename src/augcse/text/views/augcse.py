"""AugCSE's view: one augmentation per sentence, drawn uniformly once for the run, and its type as the label."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, TYPE_CHECKING

from augcse.text.augment import resolve_names
from augcse.core.schema import NonNegativeInt, PositiveInt
from augcse.text.views.base import LABEL, ViewContext, as_anchor, cached_augmentations, register_view, texts_of

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset

logger = logging.getLogger(__name__)


def augmentation_names(augmentations: str | Sequence[str]) -> list[str]:
    """The augmentation library's names for a set name (``8-aug``…), a comma list or a list of names."""
    return resolve_names(augmentations)


def _outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {params["column"]: None}
    if params["label_column"]:
        names = tuple(augmentation_names(params["augmentations"]))
        out[params["label_column"]] = {"size": len(names) + 1, "names": names, "spec": params["augmentations"]}
    return out


@register_view("augcse_sample", outputs=_outputs)
def augcse_sample_view(dataset: Dataset, context: ViewContext, augmentations: str | list[str] = "8-aug",
                       column: str = "augmented", label_column: str | None = LABEL,
                       drop_unchanged: bool = False, seed: NonNegativeInt | None = None, n_process: PositiveInt = 1,
                       params: dict[str, dict] | None = None) -> Dataset:
    """One augmentation per sentence, drawn uniformly and fixed for the run; label K−1 when it changed nothing.

    The set stated here is the one source of truth: a recipe's AugCSE loss takes it from this view.
    ``drop_unchanged`` removes those rows (the paper's single-augmentation positive/negative studies);
    ``label_column: null`` leaves the label out (variants without a discriminator).
    """
    import numpy as np

    names = augmentation_names(augmentations)
    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    sentences = texts_of(dataset)
    cache = cached_augmentations(sentences, names, context, seed, params, n_process)
    choice = np.random.default_rng(seed).integers(0, len(names), size=len(sentences))
    columns = {name: cache[name] for name in names}
    changed = {name: cache[f"{name}__changed"] for name in names}
    texts, labels = [], []
    for row, index in enumerate(choice):
        name = names[index]
        text = columns[name][row] or ""
        ok = bool(changed[name][row]) and bool(text.strip())
        texts.append(text if ok else sentences[row])
        labels.append(int(index) if ok else len(names))
    unchanged = sum(label == len(names) for label in labels)
    logger.info("augcse_sample: %d/%d sentences unchanged by their drawn augmentation", unchanged, len(labels))
    dataset = dataset.add_column(column, texts)
    if label_column:
        dataset = dataset.add_column(label_column, labels)
    if drop_unchanged:
        dataset = dataset.select([i for i, label in enumerate(labels) if label != len(names)])
    return dataset
