"""sentence-transformers' own unsupervised losses, by name in a recipe: ``tsdae`` and ``ct``.

They are the peers a user would otherwise pick to adapt a model to unlabelled texts, so they run
through the same recipes, validation and trainer as augcse's losses. The library's classes do the
work (:class:`DenoisingAutoEncoderLoss`, :class:`ContrastiveTensionLossInBatchNegatives`); this module
only states which dataset columns they read, by role, and in which order they take them. A recipe
sees each class's own constructor parameters, checked against its own signature.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from torch import Tensor, nn

from sentence_transformers.sentence_transformer.losses import (
    ContrastiveTensionLossInBatchNegatives,
    DenoisingAutoEncoderLoss,
)

from augcse.losses.base import Contract, Role, RoleLoss
from augcse.core.schema import signature_model


class PeerLoss(RoleLoss):
    """A sentence-transformers loss under the role contract.

    Subclasses set ``wraps`` (the library's class), ``roles`` (in the order that class reads its inputs)
    and ``fixed`` (constructor parameters a recipe cannot set, e.g. a Python function). The subclass's
    parameters are the wrapped class's signature, so recipes are validated against the library's own
    parameters (types as the library annotates them; its own checks apply on construction).
    """

    wraps: ClassVar[type[nn.Module]]
    roles: ClassVar[tuple[Role, ...]]
    fixed: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        cls.Parameters = signature_model(cls.wraps, skip=("model", *cls.fixed))
        super().__init_subclass__(**kwargs)

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model)
        self.params = self.settings(params).model_dump()
        self.peer = self.wraps(model, **self.params)

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract(cls.roles, default=tuple(r.name for r in cls.roles))

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        by_column = self.by_column(sentence_features)
        sources = self.sources()
        ordered = [by_column[sources[role.name][0]] for role in self.roles]
        return {self.component: self.peer(ordered, labels)}

    @property
    def component(self) -> str:
        return type(self).__name__.removesuffix("Loss").lower()

    def get_config_dict(self) -> dict[str, Any]:
        return dict(self.params)


class TSDAELoss(PeerLoss):
    """TSDAE: a decoder tied to the encoder rebuilds each sentence from the embedding of its damaged copy
    (the ``noisy`` column, e.g. the ``tsdae_noise`` view).

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import TSDAELoss
            from augcse.text.views import ViewContext, build_views

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            corpus = Dataset.from_dict({"text": ["my card was declined at the shop", "how do I reset my pin"]})
            train = build_views(corpus, [{"name": "tsdae_noise", "del_ratio": 0.6}], ViewContext(model=model))
            loss = TSDAELoss(model, tie_encoder_decoder=True)
            loss.bind(train.column_names)  # (noisy, anchor), read by name
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    wraps = DenoisingAutoEncoderLoss
    roles = (Role("noisy"), Role("anchor"))  # (damaged, original), the order the library's loss reads


class CTLoss(PeerLoss):
    """Contrastive Tension with in-batch negatives: the encoder and an independent copy of it (trained too,
    dropped after training) embed the same sentence; the batch's other sentences are the negatives.

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import CTLoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            train = Dataset.from_dict({"anchor": ["my card was declined at the shop", "how do I reset my pin"]})
            loss = CTLoss(model, scale=20.0)
            loss.bind(train.column_names)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    wraps = ContrastiveTensionLossInBatchNegatives
    roles = (Role("anchor"),)
    fixed = ("similarity_fct",)


PEERS: dict[str, type[PeerLoss]] = {"tsdae": TSDAELoss, "ct": CTLoss}
