"""SDA (Zhu et al., Simple Discrete Augmentation): rule-based positives and the negation as a margin-relaxed negative.

Positives are punctuation insertion (PI), modal verbs (MV) or double negation (DN) of the sentence (or one
of the three per sentence, the ensemble); a sentence the rules cannot change is paired with itself, which
is SimCSE's dropout positive. The negation of the sentence is the row's own hard negative, with a margin δ
that pushes it away less than an ordinary negative (paper Eq. 4).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from datasets import Dataset
from torch import Tensor

from augcse.losses.augcse import as_anchor, cached_augmentations, texts_of
from augcse.losses.base import ContrastiveLoss
from augcse.losses.infonce import KeyBlock, info_nce, symmetric_info_nce
from augcse.views import ViewContext, register_view

logger = logging.getLogger(__name__)

NEG_BLOCKS = ("diag", "all")


class SDALoss(ContrastiveLoss):
    """InfoNCE with the row's own negation as a negative whose logit is lowered by the margin (paper Eq. 4)::

        ℓ_i = −log  e^{s(h_i,h_i⁺)/τ} / ( Σ_j e^{s(h_i,h_j⁺)/τ} + e^{(s(h_i,h_i⁻) − δ)/τ} )

    i.e. one extra key per row with the logit offset −δ/τ (δ = 0.5, τ = 0.05: −10).

    Args:
        model: SentenceTransformer to train.
        margin: δ; 0.5 in the paper's Table 3 (Fig. 5b finds 0.3 best for DN).
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
            from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
            from augcse.losses import SDALoss

            model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["The cat sleeps .", "It rains ."],
                                       "positive": ["The cat , sleeps .", "It rains !"],
                                       "negation": ["The cat does not sleep .", "It does not rain ."]})
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=SDALoss(model)).train()
    """

    def __init__(self, model, margin: float = 0.5, neg_block: str = "diag", temperature: float = 0.05,
                 head: str | None = "bn", symmetric: bool = False, gather_across_devices: bool = True) -> None:
        super().__init__(model, temperature, head, gather_across_devices)
        if neg_block not in NEG_BLOCKS:
            raise ValueError(f"unknown neg_block {neg_block!r}; choose one of {', '.join(NEG_BLOCKS)}")
        self.margin = float(margin)
        self.neg_block = neg_block
        self.symmetric = symmetric

    @property
    def negation_offset(self) -> float:
        """The logit offset −δ/τ on the row's own negation."""
        return -self.margin / self.temperature

    def default_inputs(self) -> list[str]:
        return ["anchor", "positive", "negation"]

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        return self.compute_loss_from_embeddings(self.embed(sentence_features), labels)

    def compute_loss_from_embeddings(self, embeddings: Sequence[Tensor], labels: Tensor | None = None) -> dict[str, Tensor]:
        anchor, positive, *negations = embeddings
        extra = [KeyBlock(n, self.neg_block, diag_offset=self.negation_offset, gather=self.gather_across_devices)
                 for n in negations]
        if self.symmetric:
            return {"contrastive": symmetric_info_nce(anchor, positive, self.temperature, extra)}
        blocks = [KeyBlock(positive, gather=self.gather_across_devices), *extra]
        return {"contrastive": info_nce(anchor, blocks, self.temperature)}

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "margin": self.margin, "neg_block": self.neg_block,
                "symmetric": self.symmetric, "negation_offset": self.negation_offset}

    @property
    def citation(self) -> str:
        return ("@article{zhu2023sda, title={SDA: Simple Discrete Augmentation for Contrastive Sentence "
                "Representation Learning}, author={Zhu, Dongsheng and others}, note={arXiv preprint}}")


# --------------------------------------------------------------------------- views

POSITIVES: dict[str, tuple[str, ...]] = {
    "PI": ("PunctuationInsertion",),
    "MV": ("ModalVerbs",),
    "DN": ("DoubleNegation",),
    "PunctuationInsertion": ("PunctuationInsertion",),
    "ModalVerbs": ("ModalVerbs",),
    "DoubleNegation": ("DoubleNegation",),
    "ensemble": ("PunctuationInsertion", "ModalVerbs", "DoubleNegation"),
}


@register_view("sda")
def sda_view(dataset: Dataset, context: ViewContext, positive: str | None = "ensemble", negation: bool = True,
             proportion: float = 1.0, seed: int | None = None, positive_column: str = "positive",
             negation_column: str = "negation", n_process: int = 1) -> Dataset:
    """SDA's columns: a PI/MV/DN (or per-sentence ensemble) positive and the negation.

    A sentence the rule cannot change, or one outside the augmented ``proportion`` (paper Fig. 5a), is its
    own positive. ``positive: null`` leaves the positive out (e.g. to add only negations to another method).
    """
    if positive is not None and positive not in POSITIVES:
        raise ValueError(f"unknown SDA positive {positive!r}; choose one of {', '.join(POSITIVES)} or null")
    if not 0.0 <= proportion <= 1.0:
        raise ValueError(f"proportion must be in [0, 1], got {proportion}")
    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    sentences = texts_of(dataset)
    rules = POSITIVES[positive] if positive else ()
    names = [*rules, *(["Negation"] if negation else [])]
    cache = cached_augmentations(sentences, names, context, seed, n_process=n_process)
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
        negations = list(cache["Negation"])
        same = sum(not c for c in cache["Negation__changed"])
        if same:
            logger.warning("sda: %d sentences have a negation equal to themselves", same)
        dataset = dataset.add_column(negation_column, negations)
    return dataset
