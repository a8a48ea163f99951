"""CARDS (Wang et al., SIGIR 2022): case-switched positives and retrieved hard negatives.

The positive is the sentence with the first letter of a few words case-flipped (which changes how a
cased sub-word tokenizer splits it while keeping the meaning); the extra negatives are corpus sentences
that the starting model finds close to the anchor, drawn afresh every epoch and shared across the batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from augcse.core.loss_parameters import CARDSParameters
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.infonce import KeyBlock, contrast

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
        mini_batch_size: gradient caching: embed this many texts at a time (the gradient stays the whole
            batch's; less memory, one more forward pass; docs/TRAINING.md). ``None``: the whole batch at once.
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
        | (anchor, retrieved, …)               | none   |
        +--------------------------------------+--------+
        | (anchor,)                            | none   |
        +--------------------------------------+--------+

        Read by name; without a ``positive`` column the positive is a second dropout pass of the anchor
        (the paper's "+ retrieval only" row). Built by the ``cards`` view (the switch-case positive and the
        retrieved negatives are drawn per step).

    Relations:
        - :class:`~augcse.losses.SimCSELoss` with hard negatives is the same softmax without the id mask.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import CARDSLoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It rains."],
                                       "positive": ["the cat sleeps.", "It Rains."],
                                       "retrieved": ["A dog sleeps.", "It snows."]})
            loss = CARDSLoss(model)
            loss.bind(train.column_names)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = CARDSParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        self.mask_own_text = self.config.mask_own_text
        self.symmetric = self.config.symmetric

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"), Role("positive", required=False, fallback="~anchor"),
                         Role("retrieved", required=False, many=True)), default=("anchor", "positive", "retrieved"))

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        anchor, positive, *negatives = self.apply_head([pooled["anchor"], pooled["positive"],
                                                        *pooled.get("retrieved", [])])
        query_ids, key_ids = None, [None] * len(negatives)
        if self.mask_own_text and features is not None and negatives:
            query_ids = text_ids(features["anchor"])
            key_ids = [text_ids(f) for f in features["retrieved"]]
        g = self.gather_across_devices
        extra = [KeyBlock(n, "all", key_ids=i, gather=g) for n, i in zip(negatives, key_ids)]
        return {"contrastive": contrast(anchor, positive, extra, self.temperature, self.symmetric, g, query_ids)}

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "mask_own_text": self.mask_own_text, "symmetric": self.symmetric}

    @property
    def citation(self) -> str:
        return ("@inproceedings{wang2022cards, title={Improving Contrastive Learning of Sentence Embeddings with "
                "Case-Augmented Positives and Retrieved Negatives}, author={Wang, Wei and Zhang, Jingqiao and "
                "others}, booktitle={SIGIR}, year={2022}}")
