"""TSDAE's damaged input: the ``noisy`` column the ``tsdae`` loss rebuilds each sentence from."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, TYPE_CHECKING

import numpy as np
from pydantic import Field

from augcse.text.views.base import ANCHOR, MAP_BATCH, ViewContext, as_anchor, register_view, view_fingerprint

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset


def _outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    return {"noisy": None}


def delete_words(text: str, del_ratio: float, rng: np.random.Generator) -> str:
    """Each word deleted with probability ``del_ratio``, at least one kept: the rule of sentence-transformers'
    ``DenoisingAutoEncoderDataset.delete``, on NLTK Treebank words of the whole text (``word_tokenize``
    without its sentence splitter, whose punkt model is a separate download), with a seeded generator."""
    from nltk.tokenize import TreebankWordDetokenizer, TreebankWordTokenizer

    words = TreebankWordTokenizer().tokenize(text)
    if not words:
        return text
    keep = rng.random(len(words)) > del_ratio
    if not keep.any():
        keep[rng.integers(len(words))] = True
    return TreebankWordDetokenizer().detokenize([w for w, k in zip(words, keep) if k])


@register_view("tsdae_noise", outputs=_outputs)
def tsdae_noise_view(dataset: Dataset, context: ViewContext,
                     del_ratio: Annotated[float, Field(ge=0, lt=1)] = 0.6) -> Dataset:
    """A ``noisy`` column: each anchor with words deleted (TSDAE's best noise, 0.6), reproducible from the run's seed.

    One generator runs through the rows in order, a batch at a time (one process), so the draws are those of
    a single pass over the whole column.
    """
    dataset = as_anchor(dataset)
    rng = np.random.default_rng(context.seed)

    def noisy(texts: list[str]) -> dict[str, list[str]]:
        return {"noisy": [delete_words(t, del_ratio, rng) for t in texts]}

    return dataset.map(noisy, batched=True, batch_size=MAP_BATCH, input_columns=[ANCHOR],
                       new_fingerprint=view_fingerprint(dataset, "tsdae_noise", seed=context.seed, del_ratio=del_ratio))
