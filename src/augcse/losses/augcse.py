"""AugCSE (Tang, Kocyigit, Wijaya, AACL 2022): an augmentation-type discriminator behind gradient reversal.

Every sentence gets one augmentation drawn uniformly from a set, once for the whole run (footnote 6:
resampling each epoch underperformed); when the augmentation leaves it unchanged (or empty) its label
becomes "no augmentation" (the last of K = #augs + 1 classes). The contrastive positive stays the
dropout copy; the augmented sentence enters only a discriminator on ``[z_orig; z_aug]`` that predicts
the augmentation type, and the encoder, through the reversal layer, learns to hide it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from datasets import Dataset
from torch import Tensor, nn

from augcse.losses.base import ContrastiveLoss
from augcse.losses.grl import GradientReversal
from augcse.losses.infonce import KeyBlock, info_nce, symmetric_info_nce
from augcse.views import ViewContext, register_view

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- variants

@dataclass(frozen=True)
class Variant:
    """What one AugCSE setting does with the augmented sentence (paper Table 6, §3.1)."""

    positive: str  # "dropout": a second dropout pass of the anchor; "augmented": the augmented sentence
    discriminator: str | None  # "type": K-way augmentation type; "bool": augmented vs not; None: no discriminator
    augmentation_as_negative: bool = False  # the row's own augmentation as a hard negative (Eq. 1)


VARIANTS: dict[str, Variant] = {
    "augcse": Variant("dropout", "type"),
    "bool": Variant("dropout", "bool"),
    "positive": Variant("augmented", "type"),
    "none": Variant("augmented", None),
    "negative": Variant("dropout", None, augmentation_as_negative=True),
}


def augmentation_names(augmentations: str | Sequence[str]) -> list[str]:
    """A named set (``8-aug``…) or a list of augmentation names, as a list of names."""
    if isinstance(augmentations, str):
        from augcse.augment import SETS

        return list(SETS[augmentations]) if augmentations in SETS else [augmentations]
    return list(augmentations)


def count_augmentations(augmentations: int | str | Sequence[str]) -> int:
    return augmentations if isinstance(augmentations, int) else len(augmentation_names(augmentations))


# --------------------------------------------------------------------------- discriminator

class AugmentationDiscriminator(nn.Module):
    """The authors' code discriminator: ``num_layers`` × (Dropout → Linear → Tanh), 2d → 4d → K.

    Its parameter count matches the paper's Table 13 (the App. A.5 listing, d → 2d → d, does not).
    ``output_tanh`` keeps the code's Tanh on the logits, which bounds them to (−1, 1).
    """

    def __init__(self, input_dim: int, num_labels: int, num_layers: int = 2, dropout: float = 0.2,
                 output_tanh: bool = True) -> None:
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"the discriminator needs at least one layer, got num_layers={num_layers}")
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
        augmentations: the augmentation set (a name such as ``8-aug``, a list, or their number); K = this + 1.
        variant: ``augcse`` (default), ``bool`` (binary augmented-vs-not target), ``positive`` (the augmented
            sentence is the positive, with the discriminator), ``none`` (augmented positive, no discriminator),
            ``negative`` (dropout positive, the own augmentation as a hard negative, paper Eq. 1).
        discriminator_weight: λ (paper best: 5e-3 BERT / 1e-4 RoBERTa for STS).
        grl_alpha: the factor the reversal layer applies to the gradient (paper α; −1 antagonistic, +1 cooperative).
        temperature: τ.
        head: train-only head; ``bn`` is DiffCSE's BN projection, as in the paper.
        symmetric: average with the positive→anchor direction (the code's "ranking" loss; the paper states it
            only for the ``positive`` variant).
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

        Built by the ``augcse_sample`` view.

    Relations:
        - With λ = 0 (or variant ``none`` on the anchor column itself) it is :class:`~augcse.losses.SimCSELoss`
          with the BN head and the symmetric loss.
        - Variant ``negative`` is SDA's diagonal hard-negative block without the margin.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
            from augcse.losses import AugCSELoss

            model = SentenceTransformer("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It was raining."],
                                       "augmented": ["The cat slept.", "It was raining."],
                                       "label": [0, 2]})  # 2 augmentations: label 2 = unchanged
            loss = AugCSELoss(model, augmentations=2)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    def __init__(
        self,
        model,
        augmentations: int | str | list[str] = "8-aug",
        variant: str = "augcse",
        discriminator_weight: float = 0.005,
        grl_alpha: float = -1.0,
        temperature: float = 0.05,
        head: str | None = "bn",
        symmetric: bool = True,
        discriminator_layers: int = 2,
        discriminator_dropout: float = 0.2,
        discriminator_output_tanh: bool = True,
        hard_negative_weight: float = 0.0,
        gather_across_devices: bool = True,
    ) -> None:
        super().__init__(model, temperature, head, gather_across_devices)
        if variant not in VARIANTS:
            raise ValueError(f"unknown AugCSE variant {variant!r}; choose one of {', '.join(VARIANTS)}")
        self.variant_name = variant
        self.variant = VARIANTS[variant]
        self.augmentations = augmentations
        self.num_labels = count_augmentations(augmentations) + 1
        self.discriminator_weight = float(discriminator_weight)
        self.grl_alpha = float(grl_alpha)
        self.symmetric = symmetric
        self.hard_negative_weight = float(hard_negative_weight)
        self.discriminator_options = dict(num_layers=discriminator_layers, dropout=discriminator_dropout,
                                          output_tanh=discriminator_output_tanh)
        self.reversal = GradientReversal(grl_alpha)
        self.discriminator: nn.Module | None = None
        if self.variant.discriminator is not None:
            classes = 2 if self.variant.discriminator == "bool" else self.num_labels
            dim = model.get_embedding_dimension()
            self.discriminator = AugmentationDiscriminator(2 * dim, classes, **self.discriminator_options)
        self._metrics = {"correct": 0.0, "no_aug": 0.0, "seen": 0.0}

    def default_inputs(self) -> list[str]:
        """Embedded views, in the order :meth:`compute_loss_from_embeddings` reads them (``~`` = dropout copy)."""
        if self.variant.positive == "dropout":
            return ["anchor", "~anchor", "augmented"]
        return ["anchor", "augmented"]

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        dropout_copies = 1 if self.variant.positive == "dropout" else 0
        return self.compute_loss_from_embeddings(self.embed(sentence_features, dropout_copies), labels)

    def targets(self, labels: Tensor) -> Tensor:
        """Discriminator targets: the augmentation type, or for ``bool`` 1 = augmented, 0 = unchanged."""
        if self.variant.discriminator == "bool":
            return (labels != self.num_labels - 1).long()
        return labels.long()

    def compute_loss_from_embeddings(self, embeddings: Sequence[Tensor], labels: Tensor | None = None) -> dict[str, Tensor]:
        if self.variant.positive == "dropout":
            anchor, positive, augmented = embeddings
        else:
            anchor, augmented = embeddings
            positive = augmented
        extra = [KeyBlock(augmented, "diag", diag_offset=self.hard_negative_weight)] \
            if self.variant.augmentation_as_negative else []
        if self.symmetric:
            contrastive = symmetric_info_nce(anchor, positive, self.temperature, extra)
        else:
            contrastive = info_nce(anchor, [KeyBlock(positive, gather=self.gather_across_devices), *extra],
                                   self.temperature)
        out = {"contrastive": contrastive}
        if self.discriminator is not None:
            if labels is None:
                raise ValueError("AugCSE's discriminator needs the augmentation labels (the `label` column)")
            out["discriminator"] = self.discriminator_weight * self.discriminate(anchor, augmented, labels)
        return out

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


# --------------------------------------------------------------------------- views

def texts_of(dataset: Dataset) -> list[str]:
    """The anchor sentences of a corpus or of an already built dataset."""
    return list(dataset["anchor" if "anchor" in dataset.column_names else "text"])


def as_anchor(dataset: Dataset) -> Dataset:
    return dataset.rename_column("text", "anchor") if "text" in dataset.column_names else dataset


def cache_root(context: ViewContext) -> Path:
    """Where augmentation caches and retrieval indexes live: the context's cache dir, else beside the runs."""
    if context.cache_dir is not None:
        return Path(context.cache_dir)
    if context.run_dir is not None:
        return Path(context.run_dir).parent / ".cache"
    return Path.home() / ".cache" / "augcse"


def cached_augmentations(sentences: Sequence[str], names: Sequence[str], context: ViewContext, seed: int,
                         params: dict[str, dict] | None = None, n_process: int = 1) -> Dataset:
    """Run each augmentation once over the sentences through the library's content-keyed cache."""
    from augcse.augment import build_cache
    from augcse.augment.cache import cache_key

    key = cache_key(list(sentences), list(names), params or {}, seed)
    out = cache_root(context) / "augment" / key[:20]
    return build_cache(list(sentences), list(names), out, seed=seed, n_process=n_process, params=params,
                       progress=False)


@register_view("augcse_sample")
def augcse_sample_view(dataset: Dataset, context: ViewContext, augmentations: str | list[str] = "8-aug",
                       column: str = "augmented", label_column: str | None = "label",
                       drop_unchanged: bool = False, seed: int | None = None, n_process: int = 1,
                       params: dict[str, dict] | None = None) -> Dataset:
    """One augmentation per sentence, drawn uniformly and fixed for the run; label K−1 when it changed nothing.

    ``drop_unchanged`` removes those rows (the paper's single-augmentation positive/negative studies);
    ``label_column: null`` leaves the label out (variants without a discriminator).
    """
    names = augmentation_names(augmentations)
    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    sentences = texts_of(dataset)
    cache = cached_augmentations(sentences, names, context, seed, params, n_process)
    choice = np.random.default_rng(seed).integers(0, len(names), size=len(sentences))
    texts, labels = [], []
    columns = {name: cache[name] for name in names}
    changed = {name: cache[f"{name}__changed"] for name in names}
    for row, index in enumerate(choice):
        name = names[index]
        text = columns[name][row] or ""
        ok = bool(changed[name][row]) and bool(text.strip())
        texts.append(text if ok else sentences[row])
        labels.append(int(index) if ok else len(names))
    unchanged = sum(label == len(names) for label in labels)
    logger.info("augcse_sample: %d/%d sentences unchanged by their drawn augmentation", unchanged, len(labels))
    dataset = dataset.add_column(column, texts)
    if label_column:
        dataset = dataset.add_column(label_column, labels)
    if drop_unchanged:
        keep = [i for i, label in enumerate(labels) if label != len(names)]
        dataset = dataset.select(keep)
    return dataset
