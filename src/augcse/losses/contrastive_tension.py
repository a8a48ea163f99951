"""Contrastive Tension as Carlsson et al. (ICLR 2021) train it: two encoders, binary labels, no softmax.

Two copies of the model start equal and are both trained. They embed the two sides of sentence pairs;
one pair in ``K + 1`` is a sentence with itself (label 1), the others two different sentences (label 0),
and the dot product of the two embeddings is the logit of a binary cross-entropy. The kept model is one
of the two; the other is training state of the loss, never saved in the sentence model.

sentence-transformers' :class:`~sentence_transformers.sentence_transformer.losses.ContrastiveTensionLoss`
does the forward pass and the cross-entropy (it sums over the pairs, the authors' Keras loss averages: the
``reduction`` parameter says which). What the library leaves to a data loader, the pairs, is built here
from each batch's anchors without any draw: row ``i`` of the batch is paired with itself where ``i`` is a
multiple of ``K + 1`` and with row ``i + 1`` (cyclically) otherwise, so a batch of 16 holds the authors' two
groups of one positive and seven negative pairs, each negative pair two different random sentences of
the corpus (the batch is a random sample of it). ``augcse.losses.peers.CTLoss`` (``ct``) is the library's
other variant, with in-batch negatives and a softmax.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from sentence_transformers.sentence_transformer.losses import ContrastiveTensionLoss

from augcse.core.loss_parameters import CTOriginalParameters
from augcse.losses.base import Contract, Role, RoleLoss


def tension_pairs(rows: int, negative_k: int, device: torch.device | None = None) -> tuple[Tensor, Tensor]:
    """The partner of each row and the pair labels: groups of ``negative_k + 1`` rows, the first of each a
    sentence with itself (label 1), the others a sentence with the next row's (label 0, cyclic)."""
    index = torch.arange(rows, device=device)
    positive = index % (negative_k + 1) == 0
    partner = torch.where(positive, index, (index + 1) % max(rows, 1))
    return partner, positive.to(torch.float32)


@contextlib.contextmanager
def encoders_mode(encoders: Iterable[nn.Module], training: bool | None) -> Iterator[None]:
    """Run the encoders in train (dropout) or eval mode for one forward, then restore each one's mode."""
    encoders = list(encoders)
    modes = [e.training for e in encoders]
    try:
        if training is not None:
            for encoder in encoders:
                encoder.train(training)
        yield
    finally:
        for encoder, mode in zip(encoders, modes):
            encoder.train(mode)


class CTOriginalLoss(RoleLoss):
    """The original Contrastive Tension objective on pairs built from the batch's anchors::

        ℓ = (1/B) Σ_i BCE(σ(f₁(x_i) · f₂(x_{π(i)})), y_i),   y_i = 1 and π(i) = i where i ≡ 0 (mod K+1),
                                                          y_i = 0 and π(i) = i + 1 (mod B) otherwise

    ``f₂`` is the trained model, ``f₁`` an independent copy of it made when the loss is built, trained with
    it (its parameters are the loss's, in the optimizer) and dropped after training (the authors' code keeps
    whichever of the two scores higher on STS-B dev; here the model being trained is kept).

    Args:
        model: SentenceTransformer to train (the kept encoder).
        negative_k: K, negative pairs per positive pair (7: a batch of 16 is two groups of 8, the authors').
        reduction: ``mean`` over the pairs (the authors' ``tf.losses.BinaryCrossentropy``) or ``sum`` (the
            library's ``ContrastiveTensionLoss``).
        dropout: ``False`` embeds both sides with dropout off, as the authors' ``predictAndUpdate`` calls
            the models with ``training=False``; ``True`` leaves the trainer's train mode (dropout on).

    References:
        - Carlsson, Gyllensten, Gogoulou, Hellqvist, Sahlgren. Semantic Re-tuning with Contrastive Tension.
          ICLR 2021, §3.

    Inputs:
        +-----------+--------+
        | Texts     | Labels |
        +===========+========+
        | (anchor,) | none   |
        +-----------+--------+

    Relations:
        - :class:`~augcse.losses.CTLoss` (``ct``): sentence-transformers' in-batch-negatives variant (cosine,
          a softmax over the batch), not the paper's binary objective.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import CTOriginalLoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["my card was declined at the shop", "how do I reset my pin"]})
            loss = CTOriginalLoss(model, negative_k=7)
            loss.bind(train.column_names)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = CTOriginalParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model)
        self.config = self.settings(params)
        self.negative_k = int(self.config.negative_k)
        self.reduction = self.config.reduction
        self.dropout = bool(self.config.dropout)
        # the library's loss: model2 is the model being trained, model1 its independent copy (the loss's own)
        self.tension = ContrastiveTensionLoss(model)

    @property
    def copy(self) -> nn.Module:
        """The second, independently trained encoder (never saved with the model)."""
        return self.tension.model1

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"),), default=("anchor",))

    def pairs(self, features: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], dict[str, Tensor], Tensor]:
        """The two sides' tokenised inputs (copies: the encoders write into them) and the labels."""
        rows = features["input_ids"].size(0)
        partner, labels = tension_pairs(rows, self.negative_k, features["input_ids"].device)
        first = dict(features)
        second = {k: v[partner] if isinstance(v, Tensor) and v.dim() and v.size(0) == rows else v
                  for k, v in features.items()}
        return first, second, labels

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        features = self.by_column(sentence_features)[self.sources()["anchor"][0]]
        first, second, pair_labels = self.pairs(features)
        kept = self.tension._modules["model2"]
        # the trainer's model (DDP-wrapped under torchrun, so its gradients are averaged) for this forward only
        self.tension._modules["model2"] = self.model
        try:
            with encoders_mode([self.tension.model1, kept], None if self.dropout else False):
                loss = self.tension([first, second], pair_labels)  # the sum of the pairs' BCE
        finally:
            self.tension._modules["model2"] = kept
        if self.reduction == "mean":
            loss = loss / pair_labels.numel()
        return {"tension": loss}

    def get_config_dict(self) -> dict[str, Any]:
        return {"negative_k": self.negative_k, "reduction": self.reduction, "dropout": self.dropout}

    @property
    def citation(self) -> str:
        return ("@inproceedings{carlsson2021semantic, title={Semantic Re-tuning with Contrastive Tension}, "
                "author={Carlsson, Fredrik and Gyllensten, Amaru Cuba and Gogoulou, Evangelia and Hellqvist, "
                "Erik Ylip{\\\"a}{\\\"a} and Sahlgren, Magnus}, booktitle={ICLR}, year={2021}}")
