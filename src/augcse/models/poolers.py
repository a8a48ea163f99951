"""Poolers: the ones SimCSE and its successors use, stored in the saved model so evaluation uses what training used.

Every pooler is built from sentence-transformers' own modules, so a saved model loads with a plain
``SentenceTransformer(path)`` (no custom code):

* ``cls`` / ``cls_before_pooler``: CLS pooling (``cls`` also gets SimCSE's train-only MLP, which
  lives in the loss and is never saved);
* ``avg``: masked mean of the last layer;
* ``avg_first_last`` (layer 1 + last: current SimCSE code), ``avg_emb_last`` (embedding layer +
  last: the published baselines) and ``avg_top2``: a frozen 0/1-weighted ``WeightedLayerPooling``
  over the hidden states followed by mean pooling, i.e. the masked mean of the average of the
  chosen layers. The backbone's config keeps ``output_hidden_states=True`` in the saved model.

A sentence-transformers backbone keeps the modules it was published with after pooling (``Normalize``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from sentence_transformers.base.modules import Transformer
from sentence_transformers.sentence_transformer.modules import Pooling, WeightedLayerPooling

from augcse.models.backbone_config import check_config
from augcse.models.published import (  # noqa: F401 (what a published folder holds; named here too)
    load_after_pooling, modules_after_pooling, published_max_seq_length,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pooler:
    """A named pooler: its saved modules and the train-only head it implies."""

    layers: tuple[int, ...] | None = None  # hidden_states indices to average; None: last layer only
    mode: str = "mean"
    default_head: str = "none"
    prompt: bool = False  # PromptBERT: the [MASK] state of a template (augcse.models.prompt), not a pooling

    def build(self, dim: int, num_layers: int) -> list[nn.Module]:
        if self.layers is None:
            return [Pooling(dim, self.mode)]
        chosen = sorted({layer % (num_layers + 1) for layer in self.layers})
        start = chosen[0]
        weights = torch.zeros(num_layers + 1 - start)
        weights[[layer - start for layer in chosen]] = 1.0
        layer_pooling = WeightedLayerPooling(dim, num_layers, start, nn.Parameter(weights, requires_grad=False))
        return [layer_pooling, Pooling(dim, "mean")]


POOLERS: dict[str, Pooler] = {
    "cls": Pooler(mode="cls", default_head="mlp"),
    "cls_before_pooler": Pooler(mode="cls"),
    "avg": Pooler(mode="mean"),
    "avg_first_last": Pooler(layers=(1, -1)),
    "avg_emb_last": Pooler(layers=(0, -1)),
    "avg_top2": Pooler(layers=(-2, -1)),
    "prompt": Pooler(mode="prompt", default_head="mlp", prompt=True),
}


def build_sentence_transformer(backbone: str, pooler: str = "avg", max_seq_length: int | None = 32,
                               keep_after_pooling: bool = True, config: Mapping[str, Any] | None = None):
    """A SentenceTransformer of the Hugging Face encoder ``backbone`` with the named ``pooler``.

    A sentence-transformers model keeps the modules it was published with after its pooling (all-MiniLM-L6-v2:
    ``Normalize``, so the rebuilt model is unit-norm like the published one) unless ``keep_after_pooling`` is
    false; a plain encoder has none, and nothing is added to it. ``max_seq_length=None`` keeps the backbone's
    own maximum: the published one of a sentence-transformers model (all-MiniLM-L6-v2: 256, not its
    tokenizer's 512), else the tokenizer's. ``config`` replaces values of the backbone's config before its
    weights load (a paper's dropout); a key the config does not have is refused (:func:`check_config`).
    """
    from sentence_transformers import SentenceTransformer

    if pooler not in POOLERS:
        raise ValueError(f"unknown pooler {pooler!r}; choose one of {', '.join(POOLERS)}")
    spec = POOLERS[pooler]
    if spec.prompt:  # the template's module replaces the encoder's: it tokenizes the sentence into the template
        from augcse.models.prompt import prompt_model  # prompt needs only augcse.models.published: no cycle

        return prompt_model(backbone, max_seq_length=max_seq_length, keep_after_pooling=keep_after_pooling,
                            config=config)
    if max_seq_length is None:
        max_seq_length = published_max_seq_length(backbone)
    config_kwargs = {**check_config(backbone, config), **({"output_hidden_states": True} if spec.layers else {})}
    after = modules_after_pooling(backbone)
    if after and not keep_after_pooling:  # Normalize: cosine scores are unchanged, K-means and dot products not
        names = " + ".join(str(e.get("type", "")).rsplit(".", 1)[-1] for e in after)
        logger.info("model %s rebuilt with pooler %s without its %s after pooling (model.normalize: false)",
                    backbone, pooler, names)
    transformer = Transformer(backbone, max_seq_length=max_seq_length, config_kwargs=config_kwargs or None)
    num_layers = int(transformer.auto_model.config.num_hidden_layers)
    kept = load_after_pooling(backbone, after) if keep_after_pooling else []
    modules = [transformer, *spec.build(transformer.get_embedding_dimension(), num_layers), *kept]
    return SentenceTransformer(modules=modules)


def freeze_fixed_weights(model: nn.Module) -> None:
    """Keep the layer-selection weights of ``WeightedLayerPooling`` fixed while training (they define the pooler)."""
    for module in model.modules():
        if isinstance(module, WeightedLayerPooling) and isinstance(module.layer_weights, nn.Parameter):
            module.layer_weights.requires_grad_(False)
