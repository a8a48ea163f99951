"""SDA's view: a PI / MV / DN rewrite (or one of them per sentence) as the positive, the negation as the negative."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, TYPE_CHECKING

from augcse.core.schema import NonNegativeInt, PositiveInt, Probability
from augcse.text.views.base import (ANCHOR, MAP_BATCH, RowDraws, ViewContext, as_anchor, cached_augmentations, register_view,
                                    view_fingerprint)

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset

logger = logging.getLogger(__name__)

POSITIVES: dict[str, tuple[str, ...]] = {
    "PI": ("PunctuationInsertion",),
    "MV": ("ModalVerbs",),
    "DN": ("DoubleNegation",),
    "PunctuationInsertion": ("PunctuationInsertion",),
    "ModalVerbs": ("ModalVerbs",),
    "DoubleNegation": ("DoubleNegation",),
    "ensemble": ("PunctuationInsertion", "ModalVerbs", "DoubleNegation"),
}
Positive = Literal["PI", "MV", "DN", "PunctuationInsertion", "ModalVerbs", "DoubleNegation", "ensemble"]


def _outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    if params["positive"] is None and not params["negation"]:
        raise ValueError("positive: null with negation: false writes nothing")
    out = {params["positive_column"]: None} if params["positive"] else {}
    return {**out, **({params["negation_column"]: None} if params["negation"] else {})}


@register_view("sda", outputs=_outputs)
def sda_view(dataset: Dataset, context: ViewContext, positive: Positive | None = "ensemble", negation: bool = True,
             proportion: Probability = 1.0, variant: Literal["code", "paper"] = "code", seed: NonNegativeInt | None = None,
             positive_column: str = "positive", negation_column: str = "negation", n_process: PositiveInt = 1) -> Dataset:
    """SDA's columns: a PI/MV/DN (or per-sentence ensemble) positive and the negation.

    A sentence the rule cannot change, or one outside the augmented ``proportion`` (paper Fig. 5a), is its
    own positive. ``positive: null`` writes no positive column (the loss then uses the dropout copy: the
    paper's negation-only row); ``negation: false`` writes no negation. ``variant`` picks the rules of the
    paper's Algorithms 1–3 (``paper``) or of the authors' code (``code``), see docs/AUGMENTATIONS.md.
    """
    _outputs(locals())
    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    rules = POSITIVES[positive] if positive else ()
    names = [*rules, *(["Negation"] if negation else [])]
    params = {name: {"variant": variant} for name in names} if variant != "code" else None  # code: the rules' default
    cache = cached_augmentations(dataset, names, context, seed, params=params, n_process=n_process)
    cache = cache.select_columns([*(c for r in rules for c in (r, f"{r}__changed")), *(["Negation__changed", "Negation"] if negation else [])])
    draws = RowDraws(seed, len(dataset), len(rules), uniform=True) if rules else None
    counts = {"paired": 0, "same": 0}

    def columns(sentences: list[str], indices: list[int]) -> dict[str, list]:
        part = cache[indices[0]:indices[-1] + 1]  # the rows of this batch, read from the memory-mapped cache
        out: dict[str, list] = {}
        if draws is not None:
            choice, uniform = draws.take(len(sentences))
            positives = []
            for row, (sentence, index, u) in enumerate(zip(sentences, choice, uniform)):
                rule = rules[index]
                text = part[rule][row]
                positives.append(text if u < proportion and part[f"{rule}__changed"][row] and text.strip() else sentence)
            counts["paired"] += sum(p != s for p, s in zip(positives, sentences))
            out[positive_column] = positives
        if negation:
            counts["same"] += sum(not c for c in part["Negation__changed"])
            out[negation_column] = part["Negation"]
        return out

    dataset = dataset.map(columns, batched=True, batch_size=MAP_BATCH, with_indices=True, input_columns=[ANCHOR],
                          load_from_cache_file=False,  # the counts below come from running it
                          new_fingerprint=view_fingerprint(dataset, "sda", positive=positive, negation=negation,
                                                           proportion=proportion, variant=variant, seed=seed,
                                                           columns=[positive_column, negation_column]))
    if rules:
        logger.info("sda: %d/%d sentences get a rewritten positive (%s)", counts["paired"], len(dataset), positive)
    if counts["same"]:
        logger.warning("sda: %d sentences have a negation equal to themselves", counts["same"])
    return dataset
