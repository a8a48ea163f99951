"""AugCSE (Tang, Kocyigit, Wijaya, AACL 2022): an augmentation-type discriminator behind gradient reversal.

Every sentence gets one augmentation drawn uniformly from a set, once for the whole run (footnote 6:
resampling each epoch underperformed); when the augmentation leaves it unchanged (or empty) its label
becomes "no augmentation" (the last of K = #augs + 1 classes). The contrastive positive stays the
dropout copy; the augmented sentence enters only a discriminator on ``[z_orig; z_aug]`` that predicts
the augmentation type, and the encoder, through the reversal layer, learns to hide it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augcse.core.augmentation_sets import expand
from augcse.core.loss_parameters import AugCSEParameters
from augcse.losses.base import Contract, ContrastiveLoss, LabelSpace, Role
from augcse.losses.grl import GradientReversal
from augcse.losses.infonce import KeyBlock, contrast


# --------------------------------------------------------------------------- variants

@dataclass(frozen=True)
class Variant:
    """What one AugCSE setting does with the augmented sentence (paper Table 6, §3.1)."""

    positive: str  # "dropout": a second dropout pass of the anchor; "augmented": the augmented sentence
    discriminator: str | None  # "type": K-way augmentation type; "bool": augmented vs not; None: no discriminator
    augmentation_as_negative: bool = False  # the row's own augmentation as a hard negative (Eq. 1)
    symmetric: bool = True  # the default of ``symmetric``: the code's two-way "ranking" loss, Eq. 1 one-way


VARIANTS: dict[str, Variant] = {
    "augcse": Variant("dropout", "type"),
    "bool": Variant("dropout", "bool"),
    "positive": Variant("augmented", "type"),
    "none": Variant("augmented", None),
    "negative": Variant("dropout", None, augmentation_as_negative=True, symmetric=False),
}


def label_space(augmentations: int | str | Sequence[str]) -> LabelSpace:
    """K = #augmentations + 1 classes (the last: unchanged); set names expanded from the named sets.

    The loss does not load the augmentation library: a name outside the sets is taken as written (the
    view, which resolves it against the registry, is the one source of truth in a recipe).
    """
    if isinstance(augmentations, int):
        return LabelSpace(augmentations + 1, None, augmentations)
    names = tuple(expand(augmentations))
    return LabelSpace(len(names) + 1, names, augmentations)


# --------------------------------------------------------------------------- discriminator

class AugmentationDiscriminator(nn.Module):
    """The authors' code discriminator: ``num_layers`` × (Dropout → Linear → Tanh), 2d → 4d → K.

    Its parameter count matches the paper's Table 13 (the App. A.5 listing, d → 2d → d, does not).
    ``output_tanh`` keeps the code's Tanh on the logits, which bounds them to (−1, 1).
    """

    def __init__(self, input_dim: int, num_labels: int, num_layers: int = 2, dropout: float = 0.2,
                 output_tanh: bool = True) -> None:
        super().__init__()
        sizes = [input_dim] + [2 * input_dim] * (num_layers - 1) + [num_labels]
        layers: list[nn.Module] = []
        for index, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
            layers += [nn.Dropout(dropout), nn.Linear(fan_in, fan_out)]
            if index < num_layers - 1 or output_tanh:
                layers.append(nn.Tanh())
        self.net = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


def discriminator_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Paper Eq. 2: per-class sigmoid binary cross-entropy against the one-hot type, mean over batch × K."""
    target = F.one_hot(labels.long(), logits.size(-1)).to(logits.dtype)
    return F.binary_cross_entropy_with_logits(logits, target)


# --------------------------------------------------------------------------- loss

class AugCSELoss(ContrastiveLoss):
    """AugCSE: SimCSE's dropout positive plus an antagonistic augmentation-type discriminator (paper Eq. 3)::

        L = L_contrastive + λ · L_disc
        L_disc = −(1/K) Σ_k [ y_k log σ(d_k) + (1−y_k) log(1−σ(d_k)) ],  d = D(GRL_α([z_orig; z_aug]))

    ``z`` are the head outputs (the train-only BN head). The reversal layer leaves the discriminator's
    own gradient untouched and multiplies what reaches the encoder and head by α (α = −1: they
    maximise L_disc, i.e. learn embeddings from which the augmentation type cannot be told).

    Args:
        model: SentenceTransformer to train.
        mini_batch_size: gradient caching: embed this many texts at a time (the gradient stays the whole
            batch's; less memory, one more forward pass; docs/TRAINING.md). ``None``: the whole batch at once.
        augmentations: the augmentation set (a name such as ``8-aug``, a list, or their number); K = this + 1.
            In a recipe leave it out: it is passed on from the ``augcse_sample`` view (stating both, they must agree).
            Not needed by the variants without a discriminator (``none``, ``negative``), which read no label.
        variant: ``augcse`` (default), ``bool`` (binary augmented-vs-not target), ``positive`` (the augmented
            sentence is the positive, with the discriminator), ``none`` (augmented positive, no discriminator),
            ``negative`` (dropout positive, the own augmentation as a hard negative, paper Eq. 1).
        discriminator_weight: λ (paper best: 5e-3 BERT / 1e-4 RoBERTa for STS).
        grl_alpha: the factor the reversal layer applies to the gradient (paper α; −1 antagonistic, +1 cooperative).
        temperature: τ.
        head: train-only head; ``bn`` is DiffCSE's BN projection, as in the paper.
        symmetric: average with the positive→anchor direction (the code's "ranking" loss; the paper states it
            only for the ``positive`` variant). ``None``: the variant's own default, two-way except ``negative``,
            which is paper Eq. 1 (one-way, the code's ``ranking_neg``).
        discriminator_layers, discriminator_dropout, discriminator_output_tanh: the code discriminator's shape.
        hard_negative_weight: logit offset on the own augmentation in the ``negative`` variant.

    References:
        - Tang, Kocyigit, Wijaya. AugCSE: Contrastive Sentence Embedding with Diverse Augmentations. AACL 2022,
          Eq. 1–3, Table 6–7, App. A.4–A.7.

    Inputs:
        +------------------------------------+-------------------------------------------+
        | Texts                              | Labels                                    |
        +====================================+===========================================+
        | (anchor, augmented)                | augmentation index, K−1 = no augmentation |
        +------------------------------------+-------------------------------------------+

        Read by name; the dropout variants add ``positive`` as a second dropout pass of the anchor. Variants
        without a discriminator read no label. Built by the ``augcse_sample`` view.

    Relations:
        - With λ = 0 (or variant ``none`` on the anchor column itself) it is :class:`~augcse.losses.SimCSELoss`
          with the BN head and the symmetric loss.
        - Variant ``negative`` is SDA's diagonal hard-negative block without the margin.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import AugCSELoss
            from augcse.text.views import ViewContext, build_views

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            corpus = Dataset.from_dict({"text": ["The cat sleeps on the mat .", "It was raining in Paris ."]})
            augmentations = ["RandomDeletion", "RandomSwap"]  # K = 3: label 2 = unchanged
            # the augcse_sample view writes the augmented column and its label (the augmentation drawn)
            train = build_views(corpus, [{"name": "augcse_sample", "augmentations": augmentations}],
                                ViewContext(model=model, cache_dir="/tmp/augcse-cache"))
            loss = AugCSELoss(model, augmentations=augmentations)
            loss.bind(train.column_names)  # anchor, augmented, label
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = AugCSEParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        config = self.config
        variant, augmentations = config.variant, config.augmentations
        self.variant_name = variant
        self.variant = VARIANTS[variant]
        if augmentations is None and self.variant.discriminator is not None:
            raise ValueError("AugCSE needs its augmentation set (augmentations=…, the one the view drew from)")
        self.augmentations = augmentations
        self.num_labels = label_space(augmentations).size if augmentations is not None else 0  # 0: no labels read
        self.discriminator_weight = float(config.discriminator_weight)
        self.grl_alpha = float(config.grl_alpha)
        self.symmetric = self.variant.symmetric if config.symmetric is None else config.symmetric
        self.hard_negative_weight = float(config.hard_negative_weight)
        self.discriminator_options = dict(num_layers=config.discriminator_layers, dropout=config.discriminator_dropout,
                                          output_tanh=config.discriminator_output_tanh)
        self.reversal = GradientReversal(config.grl_alpha)
        self.discriminator: nn.Module | None = None
        if self.variant.discriminator is not None:
            classes = 2 if self.variant.discriminator == "bool" else self.num_labels
            dim = model.get_embedding_dimension()
            self.discriminator = AugmentationDiscriminator(2 * dim, classes, **self.discriminator_options)
        self._metrics = {"correct": 0.0, "no_aug": 0.0, "seen": 0.0}

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        variant = VARIANTS[params.get("variant", "augcse")]
        roles = [Role("anchor"), Role("augmented")]
        if variant.positive == "dropout":
            roles.append(Role("positive", required=False, fallback="~anchor", from_column=False))
        augmentations = params.get("augmentations")
        labels = None
        if variant.discriminator is not None:
            labels = label_space(augmentations) if augmentations is not None else LabelSpace(0)
        return Contract(tuple(roles), labels, default=("anchor", "augmented"))

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        dropout = self.variant.positive == "dropout"
        views = [pooled["anchor"], pooled["augmented"], *([pooled["positive"]] if dropout else [])]
        anchor, augmented, *rest = self.apply_head(views)
        positive = rest[0] if dropout else augmented
        g = self.gather_across_devices
        extra = [KeyBlock(augmented, "diag", diag_offset=self.hard_negative_weight)] \
            if self.variant.augmentation_as_negative else []
        out = {"contrastive": contrast(anchor, positive, extra, self.temperature, self.symmetric, g)}
        if self.discriminator is not None:
            if labels is None:
                raise ValueError("AugCSE's discriminator needs the augmentation labels (the `label` column)")
            out["discriminator"] = self.discriminator_weight * self.discriminate(anchor, augmented, labels)
        return out

    def targets(self, labels: Tensor) -> Tensor:
        """Discriminator targets: the augmentation type, or for ``bool`` 1 = augmented, 0 = unchanged."""
        if self.variant.discriminator == "bool":
            return (labels != self.num_labels - 1).long()
        return labels.long()

    def discriminate(self, anchor: Tensor, augmented: Tensor, labels: Tensor) -> Tensor:
        """L_disc on ``[z_orig; z_aug]`` behind the reversal layer; records accuracy while training."""
        logits = self.discriminator(self.reversal(torch.cat([anchor, augmented], dim=-1)))
        targets = self.targets(labels.to(logits.device))
        if self.training:
            with torch.no_grad():
                predicted = logits.argmax(-1)
                no_aug = 0 if self.variant.discriminator == "bool" else self.num_labels - 1
                self._metrics["correct"] += float((predicted == targets).sum())
                self._metrics["no_aug"] += float((predicted == no_aug).sum())
                self._metrics["seen"] += float(targets.numel())
        return discriminator_loss(logits, targets)

    def pop_metrics(self) -> dict[str, float]:
        """Discriminator accuracy and share predicted as "no augmentation" since the last call."""
        seen = self._metrics["seen"]
        metrics = {}
        if seen:
            metrics = {"discriminator_accuracy": self._metrics["correct"] / seen,
                       "discriminator_predicted_no_aug": self._metrics["no_aug"] / seen}
        self._metrics = {"correct": 0.0, "no_aug": 0.0, "seen": 0.0}
        return metrics

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "augmentations": self.augmentations, "num_labels": self.num_labels,
                "variant": self.variant_name, "discriminator_weight": self.discriminator_weight,
                "grl_alpha": self.grl_alpha, "symmetric": self.symmetric,
                "hard_negative_weight": self.hard_negative_weight,
                **{f"discriminator_{k}": v for k, v in self.discriminator_options.items()}}

    @property
    def citation(self) -> str:
        return ("@inproceedings{tang2022augcse, title={AugCSE: Contrastive Sentence Embedding with Diverse "
                "Augmentations}, author={Tang, Zilu and Kocyigit, Muhammed Yusuf and Wijaya, Derry Tanti}, "
                "booktitle={AACL}, year={2022}}")
