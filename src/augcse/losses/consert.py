"""ConSERT (Yan et al., ACL 2021): two views made in the token-embedding layer, and NT-Xent between them.

Each view is one forward pass of the sentence with one augmentation of the embedding layer's output
(:mod:`augcse.losses.embedding_augment`): token shuffling (permuted position ids), token cutoff, feature
cutoff, element dropout, or an adversarial perturbation; ``none`` is the plain pass. The authors' unsupervised
setting trains with the encoder's own dropout off (``--no_dropout``), so the augmentations are the only
difference between the views; ``dropout: true`` keeps it on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import torch
from torch import Tensor

from augcse.core.loss_parameters import ConSERTParameters
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.embedding_augment import adversarial_noise, augmenting, draw, embedding_module
from augcse.losses.infonce import KeyBlock, info_nce


class ConSERTLoss(ContrastiveLoss):
    """NT-Xent between two embedding-layer augmentations of the same sentences, summed over both directions::

        ℓ = scale · ( CE([z1·z2ᵀ | z1·z1ᵀ − ∞·I] / τ, i) + CE([z2·z1ᵀ | z2·z2ᵀ − ∞·I] / τ, i) )

    with ``z1``, ``z2`` the L2-normalised embeddings of the two views (the authors'
    ``AdvCLSoftmaxLoss._contrastive_loss_forward``, ``nt_xent``; ``scale`` is their ``--cl_rate``, which
    multiplies the contrastive loss even when it is the only one). In training each view's pass draws its
    augmentation afresh per batch (``int(n · rate)`` of the row's ``n`` tokens, dimensions or elements); in
    eval mode both views are plain passes. ``adversarial`` perturbs the embedding output of a plain pass by
    ``adversarial_norm · g/‖g‖`` per token, ``g`` the gradient of this loss between that plain pass and the
    other view (detached) with respect to it (parameter gradients untouched).

    Args:
        model: SentenceTransformer to train (a BERT-like encoder: its ``auto_model.embeddings`` is hooked).
        temperature: τ (0.1 in the authors' unsupervised script).
        augment_1, augment_2: the two views' augmentations (``feature_cutoff`` and ``shuffle`` in the script).
        rate_1, rate_2: their cutoff rates (0.2 for the feature cutoff in the script; unused by the others).
        adversarial_norm: the perturbation's norm per token (the authors' ``--noise_norm``, 1.0).
        scale: the factor on the summed two-way loss (the authors' ``--cl_rate``, 0.15).
        dropout: keep the encoder's dropout in the loss's passes (the script: off).
        head: train-only head on both views (``none`` in the authors' code).

    References:
        - Yan, Li, Wang, Zhang, Wu, Xu. ConSERT: A Contrastive Framework for Self-Supervised Sentence
          Representation Transfer. ACL 2021, §3.2–3.3.

    Inputs:
        +-------------+--------+
        | Texts       | Labels |
        +=============+========+
        | (anchor,)   | none   |
        +-------------+--------+

    Relations:
        - :class:`~augcse.losses.SimCSELoss` with ``symmetric`` is close to ``augment_1 = augment_2 = none``
          with dropout on; NT-Xent adds each view's other rows as negatives.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import ConSERTLoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It rains today.", "A man plays."]})
            loss = ConSERTLoss(model, augment_1="feature_cutoff", augment_2="shuffle", temperature=0.1)
            loss.bind(train.column_names)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = ConSERTParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        config = self.config
        self.augmentations = (config.augment_1, config.augment_2)
        self.rates = (float(config.rate_1), float(config.rate_2))
        self.adversarial_norm = float(config.adversarial_norm)
        self.scale = float(config.scale)
        self.dropout = bool(config.dropout)
        embedding_module(getattr(model, "module", model))  # refuse an encoder without an embedding layer now

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"),), default=("anchor",))

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        by_column = self.by_column(sentence_features)
        return self.compute_loss({}, labels, {"anchor": by_column[self.sources()["anchor"][0]]})

    @contextmanager
    def _dropout_setting(self) -> Iterator[None]:
        model = self.model
        was_training = model.training
        if not self.dropout and self.augmenting_now():
            model.eval()  # the encoder's dropout off; gradients still flow
        try:
            yield
        finally:
            model.train(was_training)

    def augmenting_now(self) -> bool:
        """Augment in training forwards only: eval mode and gradient-free probes see plain passes."""
        return self.training and torch.is_grad_enabled()

    def embed(self, features: Mapping[str, Tensor], name: str = "none", rate: float = 0.0,
              replace: Tensor | None = None, capture: list[Tensor] | None = None) -> Tensor:
        """One pass of the model with ``name`` applied in its embedding layer (``replace``: its output)."""
        inner = getattr(self.model, "module", self.model)
        mask = features["attention_mask"]
        hidden = inner[0].auto_model.config.hidden_size
        chosen = draw(name, mask, hidden, rate) if self.augmenting_now() else None
        with augmenting(inner, mask, chosen, replace, capture):
            return self.model(dict(features))["sentence_embedding"]

    def nt_xent(self, view_1: Tensor, view_2: Tensor) -> Tensor:
        """Both directions of NT-Xent, summed and scaled: each view's other rows of both views are negatives."""
        g = self.gather_across_devices
        forward = info_nce(view_1, [KeyBlock(view_2, gather=g), KeyBlock(view_1, "offdiag", gather=g)], self.temperature)
        backward = info_nce(view_2, [KeyBlock(view_1, gather=g), KeyBlock(view_2, "offdiag", gather=g)], self.temperature)
        return self.scale * (forward + backward)

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        if features is None:
            raise ValueError("ConSERT makes its views inside the encoder; it needs the tokenised anchor")
        anchor = features["anchor"]
        views: list[Tensor | None] = [None, None]
        with self._dropout_setting():
            for k, (name, rate) in enumerate(zip(self.augmentations, self.rates)):
                if name != "adversarial":
                    views[k] = self.apply_head([self.embed(anchor, name, rate)])[0]
            for k, name in enumerate(self.augmentations):
                if name == "adversarial":
                    views[k] = self.adversarial_view(anchor, views[1 - k])
        return {"contrastive": self.nt_xent(views[0], views[1])}

    def adversarial_view(self, anchor: Mapping[str, Tensor], other: Tensor) -> Tensor:
        """A plain pass whose embedding output moves ``adversarial_norm`` along this loss's gradient per token."""
        captured: list[Tensor] = []
        clean = self.apply_head([self.embed(anchor, capture=captured)])[0]
        if not self.augmenting_now():
            return clean
        probe = self.nt_xent(clean, other.detach())
        (gradient,) = torch.autograd.grad(probe, captured[0], retain_graph=True)
        perturbed = captured[0] + adversarial_noise(gradient.detach(), self.adversarial_norm)
        return self.apply_head([self.embed(anchor, replace=perturbed)])[0]

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "augment_1": self.augmentations[0], "augment_2": self.augmentations[1],
                "rate_1": self.rates[0], "rate_2": self.rates[1], "adversarial_norm": self.adversarial_norm,
                "scale": self.scale, "dropout": self.dropout}

    @property
    def citation(self) -> str:
        return ("@inproceedings{yan2021consert, title={ConSERT: A Contrastive Framework for Self-Supervised Sentence "
                "Representation Transfer}, author={Yan, Yuanmeng and Li, Rumei and Wang, Sirui and Zhang, Fuzheng and "
                "Wu, Wei and Xu, Weiran}, booktitle={ACL}, year={2021}}")
