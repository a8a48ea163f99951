"""SDA's view: a PI / MV / DN rewrite (or one of them per sentence) as the positive, the negation as the negative."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, TYPE_CHECKING

from augcse.core.schema import NonNegativeInt, PositiveInt, Probability
from augcse.text.views.base import ViewContext, as_anchor, cached_augmentations, register_view, texts_of

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
    import numpy as np

    _outputs(locals())
    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    sentences = texts_of(dataset)
    rules = POSITIVES[positive] if positive else ()
    names = [*rules, *(["Negation"] if negation else [])]
    params = {name: {"variant": variant} for name in names} if variant != "code" else None  # code: the rules' default
    cache = cached_augmentations(sentences, names, context, seed, params=params, n_process=n_process)
    rng = np.random.default_rng(seed)
    if rules:
        choice = rng.integers(0, len(rules), size=len(sentences))
        augmented = rng.random(len(sentences)) < proportion
        columns = {r: (cache[r], cache[f"{r}__changed"]) for r in rules}
        positives = []
        for row, (index, use) in enumerate(zip(choice, augmented)):
            texts, changed = columns[rules[index]]
            positives.append(texts[row] if use and changed[row] and texts[row].strip() else sentences[row])
        paired = sum(p != s for p, s in zip(positives, sentences))
        logger.info("sda: %d/%d sentences get a rewritten positive (%s)", paired, len(sentences), positive)
        dataset = dataset.add_column(positive_column, positives)
    if negation:
        same = sum(not c for c in cache["Negation__changed"])
        if same:
            logger.warning("sda: %d sentences have a negation equal to themselves", same)
        dataset = dataset.add_column(negation_column, list(cache["Negation"]))
    return dataset
