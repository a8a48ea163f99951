"""ESimCSE (Wu et al., COLING 2022): a repetition positive and a queue of momentum-encoded negatives.

The positive is the sentence with a few of its tokens repeated (the ``esimcse_repetition`` view writes it),
so a positive pair no longer shares its length. The extra negatives are the embeddings a momentum copy of
the encoder gave the sentences of the preceding batches, kept in a first-in first-out queue.

The momentum encoder and the queue are training state of the loss, not of the model: the trained model is
the plain encoder and pooler (``model.save`` never sees them). Both live in the loss's ``state_dict`` (the
copy as a submodule whose parameters take no gradient, the queue as extra state), so a checkpoint's loss
state resumes them exactly. They change inside the loss, under ``no_grad``, in each training forward, in
the order of the authors' trainer: the copy moves towards the encoder's current weights, the loss reads the
queue of earlier batches, then the copy embeds this batch and the queue takes it in.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn

from augcse.core.loss_parameters import ESimCSEParameters
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.infonce import KeyBlock, contrast


def momentum_update(momentum_params: list[Tensor], online_params: list[Tensor], momentum: float) -> None:
    """θ_m ← m·θ_m + (1 − m)·θ for each pair, in place (exactly that expression, element by element)."""
    with torch.no_grad():
        for param_m, param in zip(momentum_params, online_params):
            param_m.copy_(momentum * param_m + (1.0 - momentum) * param.detach().to(param_m.dtype))


def enqueue(queue: Tensor | None, new: Tensor, size: int) -> Tensor | None:
    """First in, first out: ``new`` joins at the end, the oldest rows leave beyond ``size`` (None when 0)."""
    if size == 0:
        return None
    joined = new if queue is None else torch.cat([queue.to(new.device, new.dtype), new])
    return joined[-size:].detach()


class ESimCSELoss(ContrastiveLoss):
    """InfoNCE of the anchor against the repetition positive, the batch's other positives and the queue::

        ℓ_i = −log e^{cos(h_i,h⁺_i)/τ} / ( Σ_j e^{cos(h_i,h⁺_j)/τ} + Σ_q e^{cos(h_i,m_q)/τ} )

    ``m_q`` are the queued embeddings: the momentum encoder's output (dropout off, the train-only head
    applied) for the ``queue_view`` column of the last ``queue_size`` sentences of earlier batches. Each
    training forward first moves the momentum encoder, ``θ_m ← m·θ_m + (1 − m)·θ`` with the encoder's weights
    of this step, computes the loss with the queue as it was, then enqueues this batch (the authors'
    ``CLTrainer.compute_loss`` and ``cl_forward``). Forwards without gradients or in eval mode (probes, the
    non-finite guard) read the queue and change nothing.

    Args:
        model: SentenceTransformer to train.
        mini_batch_size: gradient caching: embed this many texts at a time (the gradient stays the whole
            batch's; the queue is a constant, so it is supported as for SimCSE). ``None``: all at once.
        temperature: τ (0.05).
        head: train-only head, applied to the online and the momentum embeddings (``mlp``: SimCSE's
            Linear+Tanh on ``cls``, dropped from the saved model).
        momentum: m of the momentum update (0.995 in the paper).
        queue_size: how many momentum embeddings are kept as negatives (the authors' ``neg_size``: 160 for
            BERT-base and RoBERTa-base at batch 64, 2.5 × the batch); 0 turns the queue off.
        queue_view: the column the momentum encoder embeds (``anchor``: the authors' code).
        gather_across_devices: gather the in-batch positives across processes; the queue stays per process,
            as in the authors' code.

    References:
        - Wu, Gao, Zang, Han, Wang, Hu. ESimCSE: Enhanced Sample Building Method for Contrastive Learning of
          Unsupervised Sentence Embedding. COLING 2022 (arXiv:2109.04380), §3.1–3.2.

    Inputs:
        +-----------------------+--------+
        | Texts                 | Labels |
        +=======================+========+
        | (anchor, positive)    | none   |
        +-----------------------+--------+
        | (anchor,)             | none   |
        +-----------------------+--------+

        Read by name; the ``esimcse_repetition`` view writes ``positive``. Without it the positive is a second
        dropout pass of the anchor (SimCSE with the momentum queue: the paper's "+ momentum contrast" row).

    Relations:
        - :class:`~augcse.losses.SimCSELoss` is this loss with ``queue_size: 0`` and the dropout positive.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import ESimCSELoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It rains today."],
                                       "positive": ["The cat cat sleeps.", "It rains rains today."]})
            loss = ESimCSELoss(model, head="none", queue_size=4)
            loss.bind(train.column_names)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = ESimCSEParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        self.momentum = float(self.config.momentum)
        self.queue_size = int(self.config.queue_size)
        self.queue_view = self.config.queue_view
        encoder = copy.deepcopy(getattr(model, "module", model))
        for param in encoder.parameters():
            param.requires_grad_(False)
        # a container, so the trainer's swap of ``loss.model`` for a wrapped model never reaches the copy
        self.momentum_state = nn.ModuleDict({"encoder": encoder.eval()})
        self.queue: Tensor | None = None

    @property
    def momentum_encoder(self) -> nn.Module:
        return self.momentum_state["encoder"]

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"), Role("positive", required=False, fallback="~anchor")),
                        default=("anchor", "positive"))

    def train(self, mode: bool = True) -> ESimCSELoss:
        super().train(mode)
        self.momentum_encoder.eval()  # the queue is embedded without dropout, as the authors' model.eval()
        return self

    def update_momentum_encoder(self) -> None:
        """One momentum step towards the encoder's current weights (parameters only, matched in order)."""
        online = list(getattr(self.model, "module", self.model).parameters())
        mirror = list(self.momentum_encoder.parameters())
        if len(online) != len(mirror):
            raise RuntimeError(f"the momentum encoder has {len(mirror)} parameter tensors, the model {len(online)}")
        momentum_update(mirror, online, self.momentum)

    @torch.no_grad()
    def momentum_embeddings(self, features: Mapping[str, Tensor]) -> Tensor:
        """The momentum encoder's embeddings of one tokenised column, through the head in eval mode."""
        encoder = self.momentum_encoder.eval()
        pooled = encoder(dict(features))["sentence_embedding"]  # a copy: modules write into the dict
        was_training = self.head.training
        self.head.eval()
        try:
            return self.head(pooled).detach()
        finally:
            self.head.train(was_training)

    def queue_block(self, device: torch.device, dtype: torch.dtype) -> list[KeyBlock]:
        if self.queue is None or self.queue.size(0) == 0:
            return []
        return [KeyBlock(self.queue.to(device, dtype), "all", gather=False)]

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        stepping = self.training and torch.is_grad_enabled() and features is not None
        if stepping:
            self.update_momentum_encoder()
        anchor, positive = self.apply_head([pooled["anchor"], pooled["positive"]])
        g = self.gather_across_devices
        loss = contrast(anchor, positive, self.queue_block(anchor.device, anchor.dtype), self.temperature, False, g)
        if stepping and self.queue_size:
            self.queue = enqueue(self.queue, self.momentum_embeddings(features[self.queue_view]), self.queue_size)
        return {"contrastive": loss}

    def get_extra_state(self) -> dict[str, Any]:
        return {"queue": None if self.queue is None else self.queue.detach().cpu()}

    def set_extra_state(self, state: Any) -> None:
        queue = state.get("queue") if isinstance(state, Mapping) else None
        self.queue = None if queue is None else queue[-self.queue_size:] if self.queue_size else None

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "momentum": self.momentum, "queue_size": self.queue_size,
                "queue_view": self.queue_view}

    @property
    def citation(self) -> str:
        return ("@inproceedings{wu2022esimcse, title={ESimCSE: Enhanced Sample Building Method for Contrastive "
                "Learning of Unsupervised Sentence Embedding}, author={Wu, Xing and Gao, Chaochen and Zang, "
                "Liangjun and Han, Jizhong and Wang, Zhongyuan and Hu, Songlin}, booktitle={COLING}, year={2022}}")
