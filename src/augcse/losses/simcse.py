"""SimCSE (Gao et al., 2021): dropout views as positives, in-batch negatives, optional hard negatives."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from torch import Tensor

from augcse.losses.base import ContrastiveLoss
from augcse.losses.infonce import KeyBlock, info_nce, symmetric_info_nce


class SimCSELoss(ContrastiveLoss):
    """Unsupervised SimCSE, with the supervised form's hard negatives as an option.

    With one input column the positive is a second forward pass of the same sentence (a different
    dropout mask); with two or more, column 2 is the positive and the rest are hard negatives that
    every row sees (a ``B × B(1+n)`` logit matrix), the row's own one weighted by α::

        ℓ_i = −log  e^{s(h_i,h_i⁺)/τ} / Σ_j ( e^{s(h_i,h_j⁺)/τ} + α^{1[i=j]} e^{s(h_i,h_j⁻)/τ} )

    Args:
        model: SentenceTransformer to train.
        temperature: τ (0.05 in the paper).
        head: train-only head: ``mlp`` (SimCSE's Linear+Tanh, the ``cls`` pooler), ``bn``, ``none``.
        symmetric: average with the positive→anchor direction.
        hard_negative_weight: ``log α`` added to the row's own hard-negative logit (0 means α = 1).
        gather_across_devices: gather positives/negatives across processes with gradients.

    References:
        - Gao, Yao, Chen. SimCSE: Simple Contrastive Learning of Sentence Embeddings. EMNLP 2021, Eq. 1 and 5.

    Inputs:
        +-------------------------------------+--------+
        | Texts                               | Labels |
        +=====================================+========+
        | (anchor,)                           | none   |
        +-------------------------------------+--------+
        | (anchor, positive)                  | none   |
        +-------------------------------------+--------+
        | (anchor, positive, negative_1, …)   | none   |
        +-------------------------------------+--------+

    Relations:
        - ``MultipleNegativesRankingLoss`` of sentence-transformers is the same softmax for text pairs; this
          loss adds the dropout positive, train-only heads, α and cross-process gathering with gradients.
        - The other augcse losses reuse :func:`augcse.losses.infonce.info_nce`.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
            from augcse.losses import SimCSELoss

            model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["A man is playing a guitar.", "The cat sleeps."]})
            trainer = SentenceTransformerTrainer(model=model, train_dataset=train, loss=SimCSELoss(model))
            trainer.train()
    """

    def __init__(
        self,
        model,
        temperature: float = 0.05,
        head: str | None = "none",
        symmetric: bool = False,
        hard_negative_weight: float = 0.0,
        gather_across_devices: bool = True,
    ) -> None:
        super().__init__(model, temperature, head, gather_across_devices)
        self.symmetric = symmetric
        self.hard_negative_weight = float(hard_negative_weight)

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        features = list(sentence_features)
        embeddings = self.embed(features, dropout_copies=1 if len(features) == 1 else 0)
        return self.compute_loss_from_embeddings(embeddings, labels)

    def compute_loss_from_embeddings(self, embeddings: Sequence[Tensor], labels: Tensor | None = None) -> dict[str, Tensor]:
        anchor, positive, *negatives = embeddings
        extra = [KeyBlock(n, "all", diag_offset=self.hard_negative_weight, gather=self.gather_across_devices)
                 for n in negatives]
        if self.symmetric:
            loss = symmetric_info_nce(anchor, positive, self.temperature, extra)
        else:
            loss = info_nce(anchor, [KeyBlock(positive, gather=self.gather_across_devices), *extra], self.temperature)
        return {"contrastive": loss}

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "symmetric": self.symmetric,
                "hard_negative_weight": self.hard_negative_weight,
                "alpha": math.exp(self.hard_negative_weight)}

    @property
    def citation(self) -> str:
        return "@inproceedings{gao2021simcse, title={SimCSE: Simple Contrastive Learning of Sentence Embeddings}, author={Gao, Tianyu and Yao, Xingcheng and Chen, Danqi}, booktitle={EMNLP}, year={2021}}"
