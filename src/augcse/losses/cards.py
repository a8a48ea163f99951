"""CARDS (Wang et al., SIGIR 2022): case-switched positives and retrieved hard negatives.

The positive is the sentence with the first letter of a few words case-flipped (which changes how a
cased sub-word tokenizer splits it while keeping the meaning); the extra negatives are corpus sentences
that the starting model finds close to the anchor, drawn afresh every step and shared across the batch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import torch
from datasets import Dataset
from torch import Tensor

from augcse.losses.augcse import as_anchor, cache_root, texts_of
from augcse.losses.base import ContrastiveLoss
from augcse.losses.infonce import KeyBlock, info_nce, symmetric_info_nce
from augcse.views import ViewContext, register_view

logger = logging.getLogger(__name__)

_HASH_BASE = 1_000_003


def text_ids(features: dict[str, Tensor]) -> Tensor:
    """One integer per row identifying its token sequence (equal texts tokenised alike get equal ids).

    Padding does not contribute, so columns padded to different widths compare correctly.
    """
    input_ids = features["input_ids"].long()
    mask = features.get("attention_mask", torch.ones_like(input_ids)).long()
    powers = torch.full((input_ids.size(1),), _HASH_BASE, dtype=torch.long, device=input_ids.device).cumprod(0)
    return ((input_ids + 1) * mask * powers).sum(1)  # int64 arithmetic wraps, which is fine for a hash


class CARDSLoss(ContrastiveLoss):
    """InfoNCE with the case-switched view as positive and every retrieved negative of the batch (paper Eq. 2)::

        ℓ_i = −log e^{cos(h_i,h'_i)/τ} / Σ_j [ e^{cos(h_i,h'_j)/τ} + e^{cos(h_i,h⁻_j)/τ} ]

    A retrieved negative whose text is the row's own anchor (another row retrieved it) is masked, the
    code's false-negative guard; texts are compared by their token ids.

    Args:
        model: SentenceTransformer to train.
        temperature: τ.
        head: train-only head (``mlp``: CARDS trains with SimCSE's Linear+Tanh on ``cls`` and drops it at eval).
        mask_own_text: mask retrieved negatives identical to the row's anchor.
        symmetric: the code's optional ``symmetric_contrastive_loss`` (off by default).

    References:
        - Wang, Zhang et al. Improving Contrastive Learning of Sentence Embeddings with Case-Augmented Positives
          and Retrieved Negatives. SIGIR 2022, Eq. 2, §2.2–2.3.

    Inputs:
        +--------------------------------------+--------+
        | Texts                                | Labels |
        +======================================+========+
        | (anchor, positive, retrieved, …)     | none   |
        +--------------------------------------+--------+
        | (anchor, positive)                   | none   |
        +--------------------------------------+--------+
        | (anchor,)                            | none   |
        +--------------------------------------+--------+

        Built by the ``cards`` view (the switch-case positive and the retrieved negative are drawn per step).

    Relations:
        - :class:`~augcse.losses.SimCSELoss` with hard negatives is the same softmax without the id mask.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
            from augcse.losses import CARDSLoss

            model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It rains."],
                                       "positive": ["the cat sleeps.", "It Rains."],
                                       "retrieved": ["A dog sleeps.", "It snows."]})
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=CARDSLoss(model)).train()
    """

    def __init__(self, model, temperature: float = 0.05, head: str | None = "mlp", mask_own_text: bool = True,
                 symmetric: bool = False, gather_across_devices: bool = True) -> None:
        super().__init__(model, temperature, head, gather_across_devices)
        self.mask_own_text = mask_own_text
        self.symmetric = symmetric

    def default_inputs(self) -> list[str]:
        return ["anchor", "positive", "retrieved"]

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        features = list(sentence_features)
        embeddings = self.embed(features, dropout_copies=1 if len(features) == 1 else 0)
        return self._loss(embeddings, features if len(features) > 1 else [features[0]] * 2)

    def loss_from_pooled(self, pooled: Sequence[Tensor], labels: Tensor | None = None,
                         features: Sequence[dict[str, Tensor]] | None = None) -> dict[str, Tensor]:
        """The loss from pooled embeddings and their token features (used by the composite loss)."""
        return self._loss(self.apply_head(pooled), features)

    def _loss(self, embeddings: Sequence[Tensor], features: Sequence[dict[str, Tensor]] | None) -> dict[str, Tensor]:
        query_ids = key_ids = None
        if self.mask_own_text and features is not None and len(embeddings) > 2:
            query_ids = text_ids(features[0])
            key_ids = [text_ids(f) for f in features[2:]]
        return self.compute_loss_from_embeddings(embeddings, None, query_ids, key_ids)

    def compute_loss_from_embeddings(self, embeddings: Sequence[Tensor], labels: Tensor | None = None,
                                     query_ids: Tensor | None = None,
                                     key_ids: Sequence[Tensor] | None = None) -> dict[str, Tensor]:
        anchor, positive, *negatives = embeddings
        g = self.gather_across_devices
        ids = list(key_ids) if key_ids is not None else [None] * len(negatives)
        extra = [KeyBlock(n, "all", key_ids=i, gather=g) for n, i in zip(negatives, ids)]
        if self.symmetric:
            if query_ids is not None:
                raise ValueError("CARDS: symmetric=True does not support the own-text mask; set mask_own_text=false")
            return {"contrastive": symmetric_info_nce(anchor, positive, self.temperature, extra)}
        blocks = [KeyBlock(positive, gather=g), *extra]
        return {"contrastive": info_nce(anchor, blocks, self.temperature, query_ids=query_ids)}

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "mask_own_text": self.mask_own_text, "symmetric": self.symmetric}

    @property
    def citation(self) -> str:
        return ("@inproceedings{wang2022cards, title={Improving Contrastive Learning of Sentence Embeddings with "
                "Case-Augmented Positives and Retrieved Negatives}, author={Wang, Wei and Zhang, Jingqiao and "
                "others}, booktitle={SIGIR}, year={2022}}")


# --------------------------------------------------------------------------- views

def tokenizer_ignores_case(model) -> bool:
    """True when the model's tokenizer maps a word and its case-flipped form to the same ids."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return False
    probe = "Paris Is A City"
    return tokenizer(probe)["input_ids"] == tokenizer(probe.swapcase())["input_ids"]


@register_view("cards")
def cards_view(dataset: Dataset, context: ViewContext, switch_case: bool = True, p: float = 0.05,
               variant: str = "v2", retrieve: bool = True, k: int = 64, s: int = 1, sampling: str = "R_uniform",
               min_words: int = 3, positive_column: str = "positive", negative_column: str = "retrieved",
               seed: int | None = None, batch_size: int = 128) -> Dataset:
    """CARDS' columns, drawn lazily on every access (so every step sees fresh draws):

    ``positive``: the switch-cased anchor (CARDS v1/v2, probability ``p``); ``retrieved`` (``retrieved_2``…
    for ``s > 1``): neighbours sampled from the anchor's top-``k`` (see :mod:`augcse.retrieval`). Put this
    view last: it installs a ``Dataset.set_transform``, which later ``map`` calls would not see.
    """
    import numpy as np

    from augcse.augment import get
    from augcse.retrieval import NegativeSampler, build_neighbours

    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    sentences = texts_of(dataset)
    switcher = None
    if switch_case:
        if tokenizer_ignores_case(context.model):
            logger.warning("CARDS switch-case: the tokenizer of this model lower-cases its input, so flipping "
                           "the case of words changes nothing it sees; the positive is effectively the dropout "
                           "copy. Use a cased model (e.g. roberta-base) for the paper's augmentation.")
        switcher = get("SwitchCase", p=p, variant=variant)
        dataset = dataset.add_column(positive_column, sentences)
    sampler = None
    negative_columns: list[str] = []
    if retrieve:
        neighbours = build_neighbours(sentences, sentences, context.model, k, cache_root(context) / "retrieval",
                                      min_words=min_words, batch_size=batch_size)
        sampler = NegativeSampler(neighbours, sampling, s, seed)
        negative_columns = [negative_column] + [f"{negative_column}_{j}" for j in range(2, s + 1)]
        for column in negative_columns:  # placeholders: the transform fills them per access
            dataset = dataset.add_column(column, sentences)
    draws = np.random.default_rng(seed + 1)

    def transform(batch: dict[str, list]) -> dict[str, list]:
        out = dict(batch)
        anchors = batch["anchor"]
        if switcher is not None and positive_column in batch:
            out[positive_column] = [switcher.apply([a], seed=int(draws.integers(1 << 31)))[0] for a in anchors]
        if sampler is not None and negative_column in batch:
            drawn = [sampler(a) for a in anchors]
            for j, column in enumerate(negative_columns):
                out[column] = [d[j] for d in drawn]
        return out

    dataset.set_transform(transform)
    return dataset
