"""What every augcse loss shares: embedding the dataset columns (with dropout copies) and the train-only head."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from sentence_transformers.base.losses.merged_forward import embed_columns

from augcse.losses.heads import build_head


class ContrastiveLoss(nn.Module):
    """Base class: holds the model, a train-only head and the temperature.

    Subclasses implement :meth:`compute_loss_from_embeddings` (the maths, on plain tensors, so it
    is testable by hand) and return a dict of named components; the trainer sums and logs them.

    Args:
        model: the SentenceTransformer being trained.
        temperature: τ of the InfoNCE softmax.
        head: train-only head name (``none``, ``mlp``, ``bn``, ``vascl``), see :mod:`augcse.losses.heads`.
        gather_across_devices: gather in-batch keys across processes (with gradients).
    """

    def __init__(self, model, temperature: float = 0.05, head: str | None = "none", gather_across_devices: bool = True):
        super().__init__()
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature}")
        self.model = model
        self.temperature = float(temperature)
        self.head_name = head or "none"
        self.head = build_head(self.head_name, model.get_embedding_dimension())
        self.gather_across_devices = gather_across_devices

    def pool(self, sentence_features: Iterable[dict[str, Tensor]], dropout_copies: int = 0) -> list[Tensor]:
        """The encoder's pooled embeddings of every column, in one merged forward pass, with
        ``dropout_copies`` extra views of column 0 right after it (``[anchor, anchor', …, column 1, …]``)."""
        features = list(sentence_features)
        columns = [features[0]] * (1 + dropout_copies) + features[1:]
        return embed_columns(self.model, columns, separate_first=False)

    def apply_head(self, views: Sequence[Tensor]) -> list[Tensor]:
        """The train-only head over all views at once (batch-norm statistics cover the whole batch),
        split back into one tensor per view."""
        return list(torch.split(self.head(torch.cat(list(views))), [v.size(0) for v in views]))

    def embed(self, sentence_features: Iterable[dict[str, Tensor]], dropout_copies: int = 0) -> list[Tensor]:
        """:meth:`pool` followed by :meth:`apply_head`: what the contrastive terms compare."""
        return self.apply_head(self.pool(sentence_features, dropout_copies))

    def compute_loss_from_embeddings(self, embeddings: Sequence[Tensor], labels: Tensor | None) -> dict[str, Tensor]:
        raise NotImplementedError

    def get_config_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "head": self.head_name,
                "gather_across_devices": self.gather_across_devices}
