"""The masked-LM auxiliary objective (SimCSE App. E.1; DeCLUTR's MLM term): a composable ``mlm`` term.

The encoder reads the anchor with some of its tokens masked (BERT's 80/10/10, :mod:`augcse.losses.masking`)
and a masked-LM head predicts the original tokens; the loss is the cross-entropy over the masked tokens
(0 for a batch in which no token was masked).
The head is training state of the loss, like a train-only projection: it starts from the backbone
checkpoint's own masked-LM head where the checkpoint has one (bert-base-uncased's ``cls.predictions``, as
SimCSE's code loads it), else fresh, with a warning; the saved sentence model never has it.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

import torch.nn.functional as F
from torch import Tensor, nn
from transformers import AutoModelForMaskedLM

from augcse.core.loss_parameters import MLMParameters
from augcse.losses.base import Contract, Role, RoleLoss
from augcse.losses.masking import IGNORE, mask_tokens

logger = logging.getLogger(__name__)

ENCODER_INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # what a tokenised column gives the encoder


def transformer_of(model) -> nn.Module:
    """The sentence model's first module (its Transformer), through any wrapper (DDP)."""
    return getattr(model, "module", model)[0]


def head_name(masked_lm: nn.Module) -> str:
    """The one child of a masked-LM model that maps hidden states to vocabulary logits (``cls``, ``lm_head``)."""
    base = masked_lm.base_model_prefix
    heads = [name for name, child in masked_lm.named_children()
             if name != base and any(True for _ in child.parameters())]
    if len(heads) != 1:
        raise ValueError(f"the mlm term needs a masked-LM head in one module (BERT's cls, RoBERTa's lm_head); "
                         f"{type(masked_lm).__name__} has {heads or 'none'}")
    return heads[0]


def masked_lm_head(encoder: nn.Module, init: str) -> nn.Module:
    """A copy of the checkpoint's masked-LM head for ``encoder`` (``init: checkpoint``) or a fresh one.

    A checkpoint without head weights (a sentence-transformers model such as all-MiniLM-L6-v2) gives a
    fresh head, with a warning: the objective then trains the head from scratch alongside the encoder. The
    head takes the encoder's device and dtype (an encoder cast to float64 or bfloat16 keeps working).
    """
    return _head(encoder, init).to(device=encoder.device, dtype=encoder.dtype)


def _head(encoder: nn.Module, init: str) -> nn.Module:
    config = encoder.config
    if init == "checkpoint":
        source = getattr(config, "_name_or_path", "") or ""
        try:
            loaded, info = AutoModelForMaskedLM.from_pretrained(source, output_loading_info=True)
        except (OSError, ValueError) as exc:
            logger.warning("mlm: no masked-LM checkpoint loads from %r (%s); the MLM head starts fresh",
                           source, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        else:
            name = head_name(loaded)
            missing = [k for k in info.get("missing_keys", []) if k.startswith(f"{name}.")]
            if missing:
                logger.warning("mlm: the checkpoint %r has no masked-LM head weights (%s…); the MLM head starts "
                               "fresh", source, missing[0])
            return copy.deepcopy(getattr(loaded, name))
    fresh = AutoModelForMaskedLM.from_config(config)
    return copy.deepcopy(getattr(fresh, head_name(fresh)))


def masked_lm_loss(logits: Tensor, labels: Tensor) -> Tensor:
    """Mean cross-entropy over the masked tokens (labels ``IGNORE`` elsewhere); 0, with a zero gradient, when
    no token is masked.

    A batch of short sentences can draw no token at all (15 % of a few tokens each), and the plain mean is then
    0/0, a NaN that would stop the run. The sum over the masked tokens divided by their count (at least 1) is
    the same mean otherwise, keeps the term on the graph (every parameter still gets a gradient, zero) and
    needs no check on the host.
    """
    flat = labels.reshape(-1)
    summed = F.cross_entropy(logits.reshape(-1, logits.size(-1)), flat, ignore_index=IGNORE, reduction="sum")
    return summed / (flat != IGNORE).sum().clamp(min=1)


class MLMLoss(RoleLoss):
    """Masked-LM on the anchor's tokens through the sentence encoder and a train-only masked-LM head.

    ``loss = CE(head(encoder(mask(x))), x)`` over the masked tokens. Alone it is plain masked-LM training
    of the encoder; as a ``composite`` term with a weight it is SimCSE's auxiliary objective
    (``composite [simcse, mlm weight 0.1]`` = SimCSE w/ MLM, App. E.1) or DeCLUTR's MLM term.

    Args:
        model: SentenceTransformer to train (its first module a Hugging Face Transformer with a masked-LM
            counterpart: BERT, RoBERTa and their kin).
        mask_ratio: share of tokens chosen for masking (0.15), replaced 80/10/10 by [MASK]/random/kept.
        head_init: ``checkpoint``: the backbone's own masked-LM head where its checkpoint has one (SimCSE's
            code: BERT's copied from ``cls.predictions``, RoBERTa's loaded by name), else fresh with a warning;
            ``fresh``: a newly initialised head.
        copies: independent maskings of each anchor (SimCSE's code masks both rows of its dropout pair: 2).

    References:
        - Gao, Yao, Chen. SimCSE: Simple Contrastive Learning of Sentence Embeddings. EMNLP 2021, App. E.1.
        - Devlin, Chang, Lee, Toutanova. BERT. NAACL 2019, §3.1 (the 80/10/10 masking).

    Inputs:
        +-----------------------+--------+
        | Texts                 | Labels |
        +=======================+========+
        | (anchor,)             | none   |
        +-----------------------+--------+

        In a composite the term reads the ``anchor`` column (or the column its ``inputs`` name).

    Relations:
        - SimCSE w/ MLM: a ``composite`` of ``simcse`` (weight 1) and ``mlm`` (weight 0.1).

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse import load_model
            from augcse.losses import CompositeLoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")  # no masked-LM head: it starts fresh
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It rains today.", "A man plays a guitar."]})
            loss = CompositeLoss(model, terms=[{"loss": "simcse"}, {"loss": "mlm", "weight": 0.1}])
            loss.bind(train.column_names)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = MLMParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model)
        self.config = self.settings(params)
        self.mask_ratio = float(self.config.mask_ratio)
        self.head_init = self.config.head_init
        self.copies = int(self.config.copies)
        self.lm_head = masked_lm_head(transformer_of(model).auto_model, self.head_init)

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"),))

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        if not features or "anchor" not in features:
            raise ValueError("the mlm term reads the anchor's tokens; call it through forward() or a composite")
        tokens = {k: v for k, v in features["anchor"].items() if k in ENCODER_INPUTS}
        tokens = {k: v.repeat(self.copies, 1) for k, v in tokens.items()}
        tokenizer = transformer_of(self.model).tokenizer
        masked, targets = mask_tokens(tokenizer, tokens["input_ids"], tokens["attention_mask"], self.mask_ratio)
        return {"mlm": self.predict_loss({**tokens, "input_ids": masked}, targets)}

    def predict_loss(self, tokens: Mapping[str, Tensor], targets: Tensor) -> Tensor:
        """The masked-LM loss of already masked ``tokens`` against ``targets`` (``IGNORE`` where unmasked)."""
        hidden = transformer_of(self.model).auto_model(**tokens, return_dict=True).last_hidden_state
        return masked_lm_loss(self.lm_head(hidden), targets)

    def get_config_dict(self) -> dict[str, Any]:
        return {"mask_ratio": self.mask_ratio, "head_init": self.head_init, "copies": self.copies}

    @property
    def citation(self) -> str:
        return ("@inproceedings{gao2021simcse, title={SimCSE: Simple Contrastive Learning of Sentence Embeddings}, "
                "author={Gao, Tianyu and Yao, Xingcheng and Chen, Danqi}, booktitle={EMNLP}, year={2021}}")
