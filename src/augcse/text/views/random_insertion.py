"""SDA's Random Insertion ablation (§6.5, Table 9): punctuation inserted at random as the positive.

SDA compares its rule-based Punctuation Insertion (PI) with "randomly inserting punctuation" and states no
more. Here the random counterpart of PI inserts what PI inserts, as much as PI inserts, but anywhere: one
mark (``insertions``) drawn uniformly from PI's marks (``, . ; !``, those of the authors' PI.py) after a word
drawn uniformly (any word end, the last included), with no parse. A sentence without a word is its own
positive. Each row's draw depends only on the seed and the row's index, so the column is the same however
the corpus is batched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TYPE_CHECKING

from augcse.core.schema import NonNegativeInt, PositiveInt, Probability
from augcse.text.augment.sda import MARKS  # what PI inserts, so the random counterpart inserts the same marks
from augcse.text.views.base import ANCHOR, ViewContext, as_anchor, register_view

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset

_WORD = re.compile(r"\S+")


def random_insertion(sentence: str, rng, insertions: int = 1) -> str:
    """``sentence`` with ``insertions`` marks of :data:`MARKS` inserted after distinct words drawn uniformly
    (as many as there are words at most); ``rng`` is a ``numpy.random.Generator``."""
    ends = [match.end() for match in _WORD.finditer(sentence)]
    if not ends:
        return sentence
    chosen = sorted(rng.choice(len(ends), size=min(insertions, len(ends)), replace=False).tolist())
    marks = [MARKS[i] for i in rng.integers(0, len(MARKS), size=len(chosen)).tolist()]
    out, start = [], 0
    for index, mark in zip(chosen, marks):
        out += [sentence[start:ends[index]], mark]
        start = ends[index]
    return "".join(out) + sentence[start:]


def _outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    return {params["positive_column"]: None}


@register_view("random_insertion", outputs=_outputs)
def random_insertion_view(dataset: Dataset, context: ViewContext, insertions: PositiveInt = 1,
                          proportion: Probability = 1.0, seed: NonNegativeInt | None = None,
                          positive_column: str = "positive") -> Dataset:
    """A ``positive`` column: each sentence with ``insertions`` random punctuation marks (SDA Table 9's
    Random Insertion); a sentence outside the augmented ``proportion`` is its own positive."""
    import numpy as np

    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)

    def columns(sentences: list[str], indices: list[int]) -> dict[str, list[str]]:
        positives = []
        for sentence, index in zip(sentences, indices):
            rng = np.random.default_rng((seed, index))
            positives.append(random_insertion(sentence, rng, insertions) if rng.random() < proportion else sentence)
        return {positive_column: positives}

    return dataset.map(columns, batched=True, batch_size=1000, with_indices=True, input_columns=[ANCHOR],
                       load_from_cache_file=False)
