"""VaSCL (Zhang et al., Findings ACL 2022): in-batch neighbours and a virtual augmentation in embedding space.

Besides SimCSE-style instance discrimination of two dropout views (NT-Xent over 2B rows), each sentence
gets a *virtual* view ``e_i + δ_i``: the point within ‖δ‖ ≤ Δ of its embedding that is hardest to tell
apart from its K nearest in-batch neighbours. The neighbourhood loss then pulls that point back to the
sentence while pushing the neighbours (clean and virtual) away.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor


from augcse.core.loss_parameters import VaSCLParameters
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.infonce import KeyBlock, info_nce, nt_xent


def nearest_neighbours(embeddings: Tensor, k: int, similarity: Literal["dot", "cosine"] = "dot") -> Tensor:
    """Indices ``(B, k)`` of each row's k most similar other rows (self excluded).

    ``dot`` ranks by the unnormalised dot product, as the authors' code does; ``cosine`` by the cosine of
    the paper's ``sim``, so a neighbour's norm cannot outrank its direction.
    """
    k = min(k, embeddings.size(0) - 1)
    if k < 1:
        raise ValueError("VaSCL's neighbourhood needs a batch of at least 2 sentences")
    with torch.no_grad():
        rows = F.normalize(embeddings, dim=-1) if similarity == "cosine" else embeddings
        scores = rows @ rows.T
        scores.fill_diagonal_(float("-inf"))
        return scores.topk(k, dim=1).indices


def start_noise(like: Tensor, noise: Literal["uniform", "gaussian"] = "uniform") -> Tensor:
    """The random start of the virtual augmentation, before normalisation, drawn from the global generator.

    ``uniform`` is the authors' code, U(−0.5, 0.5) per coordinate (``rand − 0.5``, so a seeded run draws what
    it drew before this option existed); ``gaussian`` is the paper's isotropic N(0, I) (§3.2).
    """
    return torch.randn_like(like) if noise == "gaussian" else torch.rand_like(like) - 0.5


class VaSCLLoss(ContrastiveLoss):
    """Instance NT-Xent over both dropout views plus the augmented-neighbourhood loss (paper Eq. 5–6)::

        L = (1/2B) Σ_i [ ℓ_B(z_i, z_i') + ℓ_B(z_i', z_i) + ℓ_{N_A(i)}(z_i, z_i*) + ℓ_{N_A(i)}(z_i*, z_i) ]

    ``ℓ_B`` has the other 2B−2 views as negatives; ``ℓ_{N_A(i)}`` has the K neighbours of i (by the dot
    product, or the cosine, of the pooled embeddings ``e`` of view 1) in both their clean and virtual forms.
    The virtual view ``z_i* = h(e_i + δ_i)`` takes, like the authors' code, one normalised gradient step from
    a random direction d: ``g = ∇_d ℓ_N(h(e + ξ d), h(e))``, ``δ = Δ · g/‖g‖`` (so ‖δ‖ = Δ exactly), computed
    with :func:`torch.autograd.grad` so no parameter gradient is touched. With ``ascent_steps`` n > 1 the
    step is repeated n − 1 times from the current δ: ``δ ← Δ · ∇_δ ℓ_N(h(e + δ))/‖·‖``.

    Args:
        model: SentenceTransformer to train.
        mini_batch_size: gradient caching: embed this many texts at a time (the gradient stays the whole
            batch's; less memory, one more forward pass; docs/TRAINING.md). ``None``: the whole batch at once.
        topk: K neighbours (code default 16; the paper does not give it).
        eps: Δ, the perturbation norm (15 for RoBERTa-base/DistilRoBERTa, 30 for RoBERTa-large).
        xi: probe magnitude ξ of the random start; ``None`` uses Δ, as the code does.
        detach: ``True`` (code default) computes the neighbourhood loss on detached embeddings, so it trains
            only the head; ``False`` trains the encoder end to end, as the paper's Eq. 6 reads.
        clean_gradient: ``False`` (the authors' code) embeds the clean side ``h(e_i)`` of the neighbourhood
            loss under ``no_grad``, so only the virtual side ``h(e_i + δ_i)`` trains the head (and, without
            ``detach``, the encoder); ``True`` lets the gradient through ``h(e_i)`` too, which is how Eq. 5–6
            read when ``z_i`` is taken as a trainable function (the loss value is the same either way).
        noise: the random start direction before normalisation: ``uniform`` (the authors' code) draws
            U(−0.5, 0.5) per coordinate; ``gaussian`` draws the paper's isotropic N(0, I) (§3.2).
        similarity: how the K neighbours are ranked: ``dot`` (the authors' code) by the unnormalised dot
            product of ``e``, so long embeddings are everyone's neighbours; ``cosine`` by the paper's ``sim``.
        ascent_steps: normalised gradient-ascent steps that find δ (the authors' code takes 1; the paper
            does not say). Each step after the first replaces δ by ``Δ · g/‖g‖`` with g the gradient of ℓ_N
            at the current δ: the maximiser of ℓ_N's first-order expansion around δ over the ball
            ‖δ‖ ≤ Δ (Eq. 3), which lies on its sphere, so ‖δ‖ = Δ after every step and step 1 is the code's.
        temperature: τ (0.05, code default).
        head: train-only head; ``vascl`` is Linear(d,d) → ReLU → Linear(d,128), no biases. Give it its own
            learning rate with ``training.learning_rate_mapping: {"head\\\\.": 5.0e-4}``.

    References:
        - Zhang, Xiao, Zhu, Ma, Arnold. Virtual Augmentation Supported Contrastive Learning of Sentence
          Representations. Findings of ACL 2022, Eq. 1–6, App. A.

    Inputs:
        +------------+--------+
        | Texts      | Labels |
        +============+========+
        | (anchor,)  | none   |
        +------------+--------+

    Relations:
        - The instance term alone is NT-Xent (SimCLR) over SimCSE's two dropout views.
        - The neighbourhood term is :func:`~augcse.losses.infonce.info_nce` with per-row key subsets.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import VaSCLLoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It rains.", "Dogs bark.", "A man runs."]})
            loss = VaSCLLoss(model, topk=2, eps=1.0)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = VaSCLParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        self.topk = self.config.topk
        self.eps = float(self.config.eps)
        self.xi = None if self.config.xi is None else float(self.config.xi)
        self.detach = self.config.detach
        self.clean_gradient = self.config.clean_gradient
        self.noise = self.config.noise
        self.similarity = self.config.similarity
        self.ascent_steps = self.config.ascent_steps

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"), Role("positive", required=False, fallback="~anchor", from_column=False)))

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        """From the encoder's pooled embeddings ``e, e'`` (the head and the perturbation run here)."""
        e1, e2 = pooled["anchor"], pooled["positive"]
        z1, z2 = self.apply_head([e1, e2])
        instance = self.instance_loss(z1, z2)
        neighbours = nearest_neighbours(e1, self.topk, self.similarity)
        base = e1.detach() if self.detach else e1
        delta = self.virtual_perturbation(base, neighbours)
        virtual = self.head(base + delta)
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.clean_gradient):
            clean = self.head(base)
        return {"instance": instance, "neighbourhood": self.neighbourhood_loss(clean, virtual, neighbours)}

    def instance_loss(self, z1: Tensor, z2: Tensor) -> Tensor:
        """NT-Xent (paper Eq. 1) averaged over the 2B rows: partner view positive, all other views negative."""
        return nt_xent(z1, z2, self.temperature, self.gather_across_devices)

    def probe_loss(self, e: Tensor, delta: Tensor, neighbours: Tensor) -> Tensor:
        """ℓ_N (paper Eq. 2): the perturbed view h(e+δ) against h(e) and the clean neighbours h(e_k)."""
        with torch.no_grad():
            anchors = self.head(e)
        perturbed = self.head(e + delta)
        blocks = [KeyBlock(anchors, "diag"), KeyBlock(anchors, neighbours)]
        return info_nce(perturbed, blocks, self.temperature)

    def virtual_perturbation(self, e: Tensor, neighbours: Tensor) -> Tensor:
        """δ* ≈ argmax_{‖δ‖≤Δ} ℓ_N (Eq. 3): ``ascent_steps`` normalised gradient steps from a random
        direction probed at magnitude ξ, each landing on ‖δ‖ = Δ; no parameter gradient is touched."""
        e = e.detach()
        direction = F.normalize(start_noise(e, self.noise), dim=-1)
        radius = self.xi if self.xi is not None else self.eps  # the first probe's magnitude; then Δ
        for _ in range(self.ascent_steps):
            # differentiated in the unit direction d of δ = r·d (the code's variable); ∇_δ differs by r only
            direction = direction.detach().requires_grad_(True)
            with torch.enable_grad():
                (grad,) = torch.autograd.grad(self.probe_loss(e, radius * direction, neighbours), direction)
            direction, radius = F.normalize(grad, dim=-1), self.eps
        return self.eps * direction.detach()

    def neighbourhood_loss(self, clean: Tensor, virtual: Tensor, neighbours: Tensor) -> Tensor:
        """ℓ_{N_A} both ways (paper Eq. 5): the partner positive, the K neighbours' clean and virtual views negative."""
        negatives = [KeyBlock(clean, neighbours), KeyBlock(virtual, neighbours)]
        to_virtual = info_nce(clean, [KeyBlock(virtual, "diag"), *negatives], self.temperature)
        to_clean = info_nce(virtual, [KeyBlock(clean, "diag"), *negatives], self.temperature)
        return (to_virtual + to_clean) / 2

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "topk": self.topk, "eps": self.eps, "xi": self.xi, "detach": self.detach,
                "clean_gradient": self.clean_gradient, "noise": self.noise, "similarity": self.similarity,
                "ascent_steps": self.ascent_steps}

    @property
    def citation(self) -> str:
        return ("@inproceedings{zhang2022vascl, title={Virtual Augmentation Supported Contrastive Learning of "
                "Sentence Representations}, author={Zhang, Dejiao and Xiao, Wei and Zhu, Henghui and Ma, Xiaofei "
                "and Arnold, Andrew O.}, booktitle={Findings of ACL}, year={2022}}")
