"""AugCSE's view: one augmentation per sentence, drawn uniformly once for the run, and its type as the label."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, TYPE_CHECKING

from augcse.text.augment import resolve_names
from augcse.core.schema import NonNegativeInt, PositiveInt
from augcse.text.views.base import (ANCHOR, LABEL, MAP_BATCH, RowDraws, ViewContext, as_anchor, cached_augmentations,
                                    register_view, view_fingerprint)

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
    names = augmentation_names(augmentations)
    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    cache = cached_augmentations(dataset, names, context, seed, params, n_process)
    cache = cache.select_columns([c for name in names for c in (name, f"{name}__changed")])
    draws = RowDraws(seed, len(dataset), len(names))
    unchanged = len(names)  # the label of a sentence its drawn augmentation left as it was
    label = label_column or "__augcse_unchanged"  # kept only until drop_unchanged has read it
    count = {"unchanged": 0}

    def columns(sentences: list[str], indices: list[int]) -> dict[str, list]:
        part = cache[indices[0]:indices[-1] + 1]  # the rows of this batch, read from the memory-mapped cache
        texts, labels = [], []
        for row, (sentence, index) in enumerate(zip(sentences, draws.take(len(sentences))[0])):
            name = names[index]
            text = part[name][row] or ""
            ok = bool(part[f"{name}__changed"][row]) and bool(text.strip())
            texts.append(text if ok else sentence)
            labels.append(int(index) if ok else unchanged)
        count["unchanged"] += labels.count(unchanged)
        return {column: texts, **({label: labels} if label_column or drop_unchanged else {})}

    total = len(dataset)
    dataset = dataset.map(columns, batched=True, batch_size=MAP_BATCH, with_indices=True, input_columns=[ANCHOR],
                          load_from_cache_file=False,  # the count below comes from running it
                          new_fingerprint=view_fingerprint(dataset, "augcse_sample", names=names, params=params,
                                                           seed=seed, columns=[column, label_column, drop_unchanged]))
    logger.info("augcse_sample: %d/%d sentences unchanged by their drawn augmentation", count["unchanged"], total)
    if drop_unchanged:
        dataset = dataset.filter(lambda labels: [x != unchanged for x in labels], batched=True, batch_size=MAP_BATCH,
                                 input_columns=[label])
        if not label_column:
            dataset = dataset.remove_columns(label)
    return dataset
