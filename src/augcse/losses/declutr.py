"""DeCLUTR (Giorgi et al., ACL 2021): a span against the mean of its nearby spans, NT-Xent over the batch.

The ``declutr_spans`` view cuts each document into anchor spans and, per anchor, ``P`` positive spans of the
same document. The positives of one anchor are embedded and averaged into one positive (the authors' model:
"positives are represented by their mean embedding"), then anchors and averaged positives enter the NT-Xent
loss of SimCLR that the authors take from PyTorch Metric Learning: each of the 2N embeddings is contrasted
with its partner against the other 2N − 2 (anchors and positives alike), and the 2N terms are averaged.

The masked-LM half of DeCLUTR's objective is another term (``mlm``, on the anchor column) of a ``composite``
loss; this loss is the contrastive half alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor

from augcse.core.loss_parameters import DeCLUTRParameters
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.infonce import KeyBlock, info_nce


def mean_positive(positives: Tensor | list[Tensor]) -> Tensor:
    """One positive per anchor: the mean of its ``P`` positive embeddings (a tensor, or a list of P tensors)."""
    if isinstance(positives, Tensor):
        return positives
    return torch.stack(list(positives), dim=1).mean(dim=1)


def nt_xent(anchors: Tensor, positives: Tensor, temperature: float, gather: bool = True) -> Tensor:
    """SimCLR's NT-Xent on (anchor, positive) pairs: both directions, every other embedding a negative.

    Row i of the anchors sees its positive and every other anchor and positive; so does row i of the
    positives with its anchor; the mean over the 2N rows (the two directions' means, averaged).
    """
    forward = info_nce(anchors, [KeyBlock(positives, "all", gather=gather), KeyBlock(anchors, "offdiag",
                                                                                      gather=gather)], temperature)
    backward = info_nce(positives, [KeyBlock(anchors, "all", gather=gather), KeyBlock(positives, "offdiag",
                                                                                       gather=gather)], temperature)
    return (forward + backward) / 2


class DeCLUTRLoss(ContrastiveLoss):
    """NT-Xent of each anchor span against the mean embedding of its positive spans::

        p_i = (1/P) Σ_k h(positive_k of anchor i)
        ℓ = (1/2N) Σ_{x ∈ {a_i, p_i}} −log e^{cos(x, x⁺)/τ} / Σ_{y ≠ x} e^{cos(x, y)/τ}

    where ``x⁺`` is ``p_i`` for ``a_i`` and ``a_i`` for ``p_i``, and ``y`` runs over the batch's 2N anchors
    and averaged positives but ``x`` itself (the authors' ``DeCLUTR.forward`` with PyTorch Metric Learning's
    ``NTXentLoss``, cosine similarity).

    Args:
        model: SentenceTransformer to train.
        temperature: τ (0.05, the authors' ``declutr_base.jsonnet``).
        head: train-only head (``none``: the authors train the pooled embedding itself).
        gather_across_devices: gather anchors and positives across processes (the authors'
            ``all_gather_anchor_positive_pairs``).
        mini_batch_size: gradient caching (``None``: the batch at once).

    References:
        - Giorgi, Nitski, Wang, Bader. DeCLUTR: Deep Contrastive Learning for Unsupervised Textual
          Representations. ACL 2021, §2.

    Inputs:
        +-------------------------------------------+--------+
        | Texts                                     | Labels |
        +===========================================+========+
        | (anchor, positive, positive_2, …)         | none   |
        +-------------------------------------------+--------+

        Read by name; the ``declutr_spans`` view writes them, one row per anchor span.

    Relations:
        - With one positive per anchor, no head and the InfoNCE of one direction only, this is
          :class:`~augcse.losses.SimCSELoss` on span pairs (DeCLUTR's NT-Xent adds the positive→anchor
          direction and the same-side negatives).

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import DeCLUTRLoss
            from augcse.text.views import ViewContext, build_views

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            document = ("Spans of one document are drawn as anchors and positives. A document must hold at least "
                        "num_anchors times max_span_len times two words, or it is skipped and counted.")
            corpus = Dataset.from_dict({"text": [document] * 8})
            train = build_views(corpus, [{"name": "declutr_spans", "max_span_len": 4, "min_span_len": 2,
                                          "unit": "word"}], ViewContext(model=model))
            loss = DeCLUTRLoss(model)
            loss.bind(train.column_names)  # anchor, positive, positive_2
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = DeCLUTRParameters

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"), Role("positive", many=True)), default=("anchor", "positive"))

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        positives = pooled["positive"]
        anchor, *heads = self.apply_head([pooled["anchor"], *(positives if isinstance(positives, list) else [positives])])
        positive = mean_positive(heads)
        return {"contrastive": nt_xent(anchor, positive, self.temperature, self.gather_across_devices)}

    @property
    def citation(self) -> str:
        return ("@inproceedings{giorgi2021declutr, title={DeCLUTR: Deep Contrastive Learning for Unsupervised "
                "Textual Representations}, author={Giorgi, John and Nitski, Osvald and Wang, Bo and Bader, Gary}, "
                "booktitle={ACL}, year={2021}}")
