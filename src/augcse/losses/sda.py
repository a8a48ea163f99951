"""SDA (Zhu et al., Simple Discrete Augmentation): rule-based positives and the negation as a margin-relaxed negative.

Positives are punctuation insertion (PI), modal verbs (MV) or double negation (DN) of the sentence (or one
of the three per sentence, the ensemble); a sentence the rules cannot change is paired with itself, which
is SimCSE's dropout positive. The negation of the sentence is the row's own hard negative, with a margin δ
that pushes it away less than an ordinary negative (paper Eq. 4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

from augcse.core.loss_parameters import SDAParameters
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.infonce import KeyBlock, contrast


class SDALoss(ContrastiveLoss):
    """InfoNCE with the row's own negation as a negative whose logit is lowered by the margin (paper Eq. 4)::

        ℓ_i = −log  e^{s(h_i,h_i⁺)/τ} / ( Σ_j e^{s(h_i,h_j⁺)/τ} + e^{(s(h_i,h_i⁻) − δ)/τ} )

    i.e. one extra key per row with the logit offset −δ/τ (δ = 0.5, τ = 0.05: −10).

    Args:
        model: SentenceTransformer to train.
        mini_batch_size: gradient caching: embed this many texts at a time (the gradient stays the whole
            batch's; less memory, one more forward pass; docs/TRAINING.md). ``None``: the whole batch at once.
        margin: δ ≥ 0 (it relaxes the negation; 0 is a plain hard negative); 0.5 in the paper's Table 3
            (Fig. 5b finds 0.3 best for DN).
        neg_block: ``diag`` (default, as Eq. 4 is written: only the row's own negation) or ``all`` (every
            negation of the batch is a negative, the own one still with the margin; the training code is
            unpublished, so this is offered, not assumed).
        temperature: τ.
        head: train-only head; ``bn`` (DiffCSE's BN projection, the paper's "two-layer MLP with batch norm").
        symmetric: average with the positive→anchor direction (off in the paper).

    References:
        - Zhu et al. SDA: Simple Discrete Augmentation for Contrastive Sentence Representation Learning, Eq. 4, Table 3.

    Inputs:
        +------------------------------+--------+
        | Texts                        | Labels |
        +==============================+========+
        | (anchor, positive, negation) | none   |
        +------------------------------+--------+
        | (anchor, positive)           | none   |
        +------------------------------+--------+

        Built by the ``sda`` view.

    Relations:
        - :class:`~augcse.losses.SimCSELoss` with one hard-negative column and ``hard_negative_weight = −δ/τ``
          is the ``all`` block; SDA's default sees only the own negation.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import SDALoss
            from augcse.text.views import ViewContext, build_views

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            corpus = Dataset.from_dict({"text": ["The cat sleeps on the mat .", "It rains in Paris ."]})
            # the sda view writes the positive (PI/MV/DN rewrite) and the negation columns from the text
            train = build_views(corpus, [{"name": "sda", "positive": "ensemble", "negation": True}],
                                ViewContext(model=model, cache_dir="/tmp/augcse-cache"))
            loss = SDALoss(model, margin=0.5)
            loss.bind(train.column_names)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = SDAParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        self.margin = float(self.config.margin)
        self.neg_block = self.config.neg_block
        self.symmetric = self.config.symmetric

    @property
    def negation_offset(self) -> float:
        """The logit offset −δ/τ on the row's own negation."""
        return -self.margin / self.temperature

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"), Role("positive", required=False, fallback="~anchor"),
                         Role("negation", required=False, many=True)), default=("anchor", "positive", "negation"))

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        anchor, positive, *negations = self.apply_head([pooled["anchor"], pooled["positive"],
                                                        *pooled.get("negation", [])])
        g = self.gather_across_devices
        extra = [KeyBlock(n, self.neg_block, diag_offset=self.negation_offset, gather=g) for n in negations]
        return {"contrastive": contrast(anchor, positive, extra, self.temperature, self.symmetric, g)}

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "margin": self.margin, "neg_block": self.neg_block,
                "symmetric": self.symmetric, "negation_offset": self.negation_offset}

    @property
    def citation(self) -> str:
        return ("@article{zhu2023sda, title={SDA: Simple Discrete Augmentation for Contrastive Sentence "
                "Representation Learning}, author={Zhu, Dongsheng and others}, note={arXiv preprint}}")
