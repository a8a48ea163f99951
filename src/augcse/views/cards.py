"""CARDS' view: a switch-cased positive and retrieved hard negatives, drawn afresh on every access."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, TYPE_CHECKING

from augcse.augment import get
from augcse.retrieval import NegativeSampler, build_neighbours
from augcse.schema import NonNegativeInt, PositiveInt, Probability
from augcse.views.base import ViewContext, as_anchor, cache_root, register_view, texts_of

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset

logger = logging.getLogger(__name__)


def tokenizer_ignores_case(model) -> bool:
    """True when the model's tokenizer maps a word and its case-flipped form to the same ids."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return False
    probe = "Paris Is A City"
    return tokenizer(probe)["input_ids"] == tokenizer(probe.swapcase())["input_ids"]


def negative_columns(column: str, s: int) -> list[str]:
    """``retrieved``, ``retrieved_2``… for ``s`` negatives per anchor."""
    return [column] + [f"{column}_{j}" for j in range(2, s + 1)]


def _outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    if not (params["switch_case"] or params["retrieve"]):
        raise ValueError("switch_case: false with retrieve: false writes nothing")
    out = {params["positive_column"]: None} if params["switch_case"] else {}
    if params["retrieve"]:
        out.update({c: None for c in negative_columns(params["negative_column"], params["s"])})
    return out


def _switcher(context: ViewContext, p: float, variant: str, mode: str):
    if tokenizer_ignores_case(context.model):
        logger.warning("CARDS switch-case: the tokenizer of this model lower-cases its input, so flipping "
                       "the case of words changes nothing it sees; the positive is effectively the dropout "
                       "copy. Use a cased model (e.g. roberta-base) for the paper's augmentation.")
    tokenizer = None
    if mode != "default":
        tokenizer = getattr(getattr(context.model, "tokenizer", None), "name_or_path", None)
    return get("SwitchCase", p=p, variant=variant, mode=mode, tokenizer=tokenizer)


@register_view("cards", outputs=_outputs)
def cards_view(dataset: Dataset, context: ViewContext, switch_case: bool = True, p: Probability = 0.05,
               variant: Literal["v1", "v2"] = "v2", mode: Literal["default", "substitution"] = "default",
               retrieve: bool = True, k: PositiveInt = 64, s: PositiveInt = 1,
               sampling: Literal["R_uniform", "R_top", "D_uniform"] = "R_uniform", min_words: NonNegativeInt = 3,
               positive_column: str = "positive", negative_column: str = "retrieved",
               seed: NonNegativeInt | None = None, batch_size: PositiveInt = 128) -> Dataset:
    """CARDS' columns, drawn lazily on every access (so every step sees fresh draws):

    ``positive``: the switch-cased anchor (CARDS v1/v2, probability ``p``; ``mode: substitution`` only
    switches words whose first sub-token changes, CARDS Table 5); ``retrieved`` (``retrieved_2``… for
    ``s > 1``): neighbours sampled from the anchor's top-``k`` by ``sampling`` (CARDS Fig. 3, see
    :mod:`augcse.retrieval`). ``switch_case: false`` writes no positive (the loss then uses the dropout
    copy: "+ retrieval only"); ``retrieve: false`` writes no negatives ("+ switch-case only"). Table 5's
    retokenization mode changes only token ids, not the text, so it is not a view option. Put this view
    last: it installs a ``Dataset.set_transform``, which later ``map`` calls would not see.
    """
    import numpy as np

    _outputs(locals())
    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    sentences = texts_of(dataset)
    switcher = _switcher(context, p, variant, mode) if switch_case else None
    if switcher is not None:
        dataset = dataset.add_column(positive_column, sentences)
    sampler, columns = None, []
    if retrieve:
        neighbours = build_neighbours(sentences, sentences, context.model, k, cache_root(context) / "retrieval",
                                      min_words=min_words, batch_size=batch_size)
        sampler = NegativeSampler(neighbours, sampling, s, seed)
        columns = negative_columns(negative_column, s)
        for column in columns:  # placeholders: the transform fills them per access
            dataset = dataset.add_column(column, sentences)
    draws = np.random.default_rng(seed + 1)

    def transform(batch: dict[str, list]) -> dict[str, list]:
        out = dict(batch)
        anchors = batch["anchor"]
        if switcher is not None and positive_column in batch:
            out[positive_column] = [switcher.apply([a], seed=int(draws.integers(1 << 31)))[0] for a in anchors]
        if sampler is not None and negative_column in batch:
            drawn = [sampler(a) for a in anchors]
            for j, column in enumerate(columns):
                out[column] = [d[j] for d in drawn]
        return out

    dataset.set_transform(transform)
    return dataset
