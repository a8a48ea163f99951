"""SimCSE (Gao et al., 2021): dropout views as positives, in-batch negatives, optional hard negatives."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from torch import Tensor

from augcse.core.loss_parameters import SimCSEParameters
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.infonce import KeyBlock, contrast, nt_xent


class SimCSELoss(ContrastiveLoss):
    """Unsupervised SimCSE, with the supervised form's hard negatives as an option.

    Without a ``positive`` column the positive is a second forward pass of the anchor (a different
    dropout mask); ``negative`` columns (``negative``, ``negative_2``…) are hard negatives that every
    row sees (a ``B × B(1+n)`` logit matrix), the row's own one weighted by α::

        ℓ_i = −log  e^{s(h_i,h_i⁺)/τ} / Σ_j ( e^{s(h_i,h_j⁺)/τ} + α^{1[i=j]} e^{s(h_i,h_j⁻)/τ} )

    Args:
        model: SentenceTransformer to train.
        mini_batch_size: gradient caching: embed this many texts at a time (the gradient stays the whole
            batch's; less memory, one more forward pass; docs/TRAINING.md). ``None``: the whole batch at once.
        temperature: τ (0.05 in the paper).
        head: train-only head: ``mlp`` (SimCSE's Linear+Tanh, the ``cls`` pooler), ``bn``, ``none``.
        symmetric: average with the positive→anchor direction.
        same_view_negatives: the other rows' embeddings of the query's own view are negatives too, 2M − 1
            candidates a row (NT-Xent, VaSCL's Eq. 1 and its SimCSE re-training); SimCSE's Eq. 1 has M.
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
        | (anchor, positive, negative, …)     | none   |
        +-------------------------------------+--------+

        Columns are read by name (``loss.bind(dataset.column_names)``; recipes do it for you). An NLI
        triplet file maps onto these roles with the ``columns`` view.

    Relations:
        - ``MultipleNegativesRankingLoss`` of sentence-transformers is the same softmax for text pairs; this
          loss adds the dropout positive, train-only heads, α and cross-process gathering with gradients.
        - The other augcse losses reuse :func:`augcse.losses.infonce.info_nce`.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import SimCSELoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["A man is playing a guitar.", "The cat sleeps."],
                                       "positive": ["Someone plays a guitar.", "A cat is asleep."],
                                       "negative": ["Nobody is playing.", "The cat runs."]})
            loss = SimCSELoss(model)
            loss.bind(train.column_names)  # anchor, positive, negative read by name
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = SimCSEParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        self.symmetric = self.config.symmetric
        self.hard_negative_weight = float(self.config.hard_negative_weight)
        self.same_view_negatives = self.config.same_view_negatives

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"), Role("positive", required=False, fallback="~anchor"),
                         Role("negative", required=False, many=True)))

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        negatives = pooled.get("negative", [])
        anchor, positive, *negatives = self.apply_head([pooled["anchor"], pooled["positive"], *negatives])
        g = self.gather_across_devices
        extra = [KeyBlock(n, "all", diag_offset=self.hard_negative_weight, gather=g) for n in negatives]
        if self.same_view_negatives and self.symmetric:
            return {"contrastive": nt_xent(anchor, positive, self.temperature, g, extra)}
        if self.same_view_negatives:
            extra = [KeyBlock(anchor, "offdiag", gather=g), *extra]
        return {"contrastive": contrast(anchor, positive, extra, self.temperature, self.symmetric, g)}

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "symmetric": self.symmetric,
                "same_view_negatives": self.same_view_negatives,
                "hard_negative_weight": self.hard_negative_weight,
                "alpha": math.exp(self.hard_negative_weight)}

    @property
    def citation(self) -> str:
        return "@inproceedings{gao2021simcse, title={SimCSE: Simple Contrastive Learning of Sentence Embeddings}, author={Gao, Tianyu and Yao, Xingcheng and Chen, Danqi}, booktitle={EMNLP}, year={2021}}"
