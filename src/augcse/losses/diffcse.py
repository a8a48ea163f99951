"""DiffCSE (Chuang et al., NAACL 2022): SimCSE plus conditional replaced-token detection (RTD).

Each sentence's tokens are masked (``mask_ratio``), a frozen masked-LM generator fills the masks, and a
discriminator, an encoder of the backbone's architecture whose [CLS] input is replaced by the sentence
embedding ``h``, predicts for every token whether the generator changed it. The RTD loss's gradient flows
into ``h``, so the embedding learns to carry what tells the sentence from its edited copy; the InfoNCE
term keeps it insensitive to dropout. ``total = InfoNCE + λ·RTD``.

The generator (frozen, no gradient) and the discriminator with its two-way head are training state of the
loss: the discriminator and its head train with the encoder (the trainer's optimizer takes every
parameter of the loss that needs a gradient) and are saved in checkpoints for an exact resume; the
generator is neither trained nor saved (it reloads from its name). The saved model is the sentence
encoder alone.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from augcse.core.loss_parameters import DiffCSEParameters
from augcse.core.schema import RecipeError
from augcse.losses.base import Contract, ContrastiveLoss, Role
from augcse.losses.infonce import contrast
from augcse.losses.masking import mask_tokens
from augcse.losses.mlm import ENCODER_INPUTS, head_name, transformer_of


def load_generator(name: str, vocab_size: int) -> nn.Module:
    """The frozen masked-LM generator ``name``; one line when it cannot load here or its vocabulary differs."""
    from transformers import AutoModelForMaskedLM

    from augcse.assets.resolve import AssetError, resolve_model

    try:
        path = resolve_model(name)
        generator, info = AutoModelForMaskedLM.from_pretrained(path, output_loading_info=True)
    except (AssetError, OSError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RecipeError(f"loss.params.generator: the DiffCSE generator {name!r} does not load ({first}); "
                          "name a masked-LM model on this machine (a folder or a cached Hub name)") from None
    head = head_name(generator)
    if any(key.startswith(f"{head}.") for key in info.get("missing_keys", [])):
        raise RecipeError(f"loss.params.generator: {name!r} has no masked-LM head weights (a plain encoder); "
                          "the generator must be a trained masked-LM such as distilbert-base-uncased")
    if generator.config.vocab_size != vocab_size:
        raise RecipeError(f"loss.params.generator: the generator {name!r} has {generator.config.vocab_size} "
                          f"tokens, the backbone's tokenizer {vocab_size}; the generator must share the backbone's "
                          "vocabulary (distilbert-base-uncased for bert-base-uncased, distilroberta-base for "
                          "roberta-base)")
    for param in generator.parameters():
        param.requires_grad_(False)
    return generator


def edited_inputs(generated: Tensor, input_ids: Tensor, attention_mask: Tensor, cls_id: int) -> tuple[Tensor, Tensor]:
    """(discriminator input, replaced labels) from the generator's tokens at every position.

    As the authors' ``cl_forward``: position 0 keeps [CLS]; a token is *replaced* where the generator's
    differs from the original, inside the attention mask; padding becomes id 0 in the discriminator input.
    """
    edited = generated.clone()
    edited[:, 0] = cls_id
    replaced = (edited != input_ids).long() * attention_mask
    return edited * attention_mask, replaced


def rtd_loss(logits: Tensor, replaced: Tensor) -> Tensor:
    """Two-way cross-entropy averaged over every position of the batch, padding included (labelled 0), as the
    authors' ``CrossEntropyLoss()(prediction_scores.view(-1, 2), e_labels.view(-1))``."""
    return F.cross_entropy(logits.reshape(-1, 2), replaced.reshape(-1))


def pad_to(tokens: Mapping[str, Tensor], length: int, pad_id: int) -> dict[str, Tensor]:
    """A tokenised column right-padded to ``length`` (ids with ``pad_id``, masks and types with 0)."""
    extra = length - tokens["input_ids"].size(1)
    if extra <= 0:
        return dict(tokens)
    return {k: F.pad(v, (0, extra), value=pad_id if k == "input_ids" else 0) for k, v in tokens.items()}


class DiffCSELoss(ContrastiveLoss):
    """SimCSE's InfoNCE on the (head-projected) embeddings plus λ times the conditional RTD loss::

        L = −log e^{cos(h_i,h_i⁺)/τ} / Σ_j e^{cos(h_i,h_j⁺)/τ}  +  λ · mean_{rows, positions} CE(D(x̃, h), 1[x̃ ≠ x])

    Both rows of each pair, the anchor and its positive (by default a second dropout pass of the anchor),
    are masked independently and edited by the generator, and each edited row is read by the discriminator
    with its own embedding as [CLS] input, as the authors' code does for its two views. ``x̃`` is the
    generator's token at every position ([CLS] kept, padding 0); the embedding given to the discriminator
    is the one after the train-only head (``condition_on: head``, the authors' default) or before it.

    Args:
        model: SentenceTransformer to train (first module a Hugging Face Transformer).
        temperature: τ (0.05).
        head: train-only head (``bn``: the authors' ``--batchnorm`` projection, on ``cls``).
        rtd_weight: λ (0.005 in the authors' script).
        mask_ratio: share of tokens masked before the generator fills them (0.30 for BERT-base), 80/10/10.
        generator: the frozen masked-LM (``distilbert-base-uncased`` for BERT, ``distilroberta-base`` for
            RoBERTa); it must share the backbone's vocabulary and load on this machine.
        generator_decoding: ``argmax`` (the authors' code) or ``sample`` (the paper's wording).
        condition_on: ``head`` or ``encoder``: the embedding that replaces the discriminator's [CLS] input.
        gather_across_devices: gather the in-batch positives across processes (the RTD loss is per process).

    References:
        - Chuang, Dangovski, Luo, Zhang, Chang, Soljačić, Li, Yih, Kim, Glass. DiffCSE: Difference-based
          Contrastive Learning for Sentence Embeddings. NAACL 2022, §3.

    Inputs:
        +-----------------------+--------+
        | Texts                 | Labels |
        +=======================+========+
        | (anchor,)             | none   |
        +-----------------------+--------+
        | (anchor, positive)    | none   |
        +-----------------------+--------+

    Relations:
        - :class:`~augcse.losses.SimCSELoss` is this loss with ``rtd_weight: 0`` (and its own head).

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from transformers import BertConfig, BertForMaskedLM
            from augcse import load_model
            from augcse.losses import DiffCSELoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            # the generator: a masked-LM on this machine with the backbone's vocabulary (the paper's is
            # distilbert-base-uncased); a small untrained one stands in here, so the example runs offline
            config = BertConfig(vocab_size=len(model.tokenizer), hidden_size=32, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=64)
            BertForMaskedLM(config).save_pretrained("generator")
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It rains today.", "A man plays a guitar."]})
            loss = DiffCSELoss(model, head="bn", generator="generator", rtd_weight=0.005, mask_ratio=0.30)
            loss.bind(train.column_names)
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = DiffCSEParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        self.rtd_weight = float(self.config.rtd_weight)
        self.mask_ratio = float(self.config.mask_ratio)
        self.generator_name = self.config.generator
        self.generator_decoding = self.config.generator_decoding
        self.condition_on = self.config.condition_on
        transformer = transformer_of(model)
        self.tokenizer = transformer.tokenizer
        # not a submodule: frozen, reloaded from its name, kept out of checkpoints; moved by hand
        self._generator = [load_generator(self.generator_name, len(self.tokenizer))]
        # the discriminator starts from the backbone's pretrained weights, as the authors load it
        self.discriminator = copy.deepcopy(transformer.auto_model)
        for param in self.discriminator.parameters():
            param.requires_grad_(True)
        self.rtd_head = nn.Linear(self.discriminator.config.hidden_size, 2)
        self.metrics: dict[str, list[float]] = {}

    @property
    def generator(self) -> nn.Module:
        return self._generator[0]

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        return Contract((Role("anchor"), Role("positive", required=False, fallback="~anchor")))

    def generate(self, masked_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """The generator's token at every position (no gradient)."""
        generator = self.generator
        if next(generator.parameters()).device != masked_ids.device:
            generator.to(masked_ids.device)
        with torch.no_grad():
            logits = generator(input_ids=masked_ids, attention_mask=attention_mask).logits
        if self.generator_decoding == "argmax":
            return logits.argmax(-1)
        return torch.distributions.Categorical(logits=logits.float()).sample()

    def discriminate(self, edited: Tensor, tokens: Mapping[str, Tensor], condition: Tensor) -> Tensor:
        """Per-token replaced/kept logits of the discriminator reading ``edited`` with ``condition`` as the
        output of its embedding layer at position 0 (the authors' ``cls_input``)."""
        def replace_first(module, args, output):
            return torch.cat([condition.unsqueeze(1).to(output.dtype), output[:, 1:]], dim=1)

        handle = self.discriminator.embeddings.register_forward_hook(replace_first)
        try:
            inputs = {k: v for k, v in tokens.items() if k != "input_ids"}
            hidden = self.discriminator(input_ids=edited, **inputs, return_dict=True).last_hidden_state
        finally:
            handle.remove()
        return self.rtd_head(hidden)

    def rtd(self, tokens: Mapping[str, Tensor], condition: Tensor) -> Tensor:
        """The RTD loss of the rows ``tokens`` (masked and edited here) conditioned on ``condition``."""
        # in the authors' model both are submodules: their dropout follows the encoder's train()/eval()
        training = getattr(self.model, "module", self.model).training
        self.discriminator.train(training)
        self.generator.train(training)
        ids, mask = tokens["input_ids"], tokens["attention_mask"]
        masked, _ = mask_tokens(self.tokenizer, ids, mask, self.mask_ratio)
        edited, replaced = edited_inputs(self.generate(masked, mask), ids, mask, self.tokenizer.cls_token_id)
        logits = self.discriminate(edited, tokens, condition)
        self.record(logits.detach(), replaced, mask)
        return rtd_loss(logits, replaced)

    def record(self, logits: Tensor, replaced: Tensor, mask: Tensor) -> None:
        """The discriminator's accuracy and the share of replaced tokens (logged as metrics)."""
        inside = mask.bool()
        hit = (logits.argmax(-1) == replaced)[inside].float().mean()
        self.metrics.setdefault("rtd_accuracy", []).append(float(hit))
        self.metrics.setdefault("replaced_share", []).append(float(replaced[inside].float().mean()))

    def pop_metrics(self) -> dict[str, float]:
        out = {k: sum(v) / len(v) for k, v in self.metrics.items() if v}
        self.metrics = {}
        return out

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        if not features:
            raise ValueError("the diffcse loss reads the sentences' tokens; call it through forward() or a composite")
        anchor, positive = self.apply_head([pooled["anchor"], pooled["positive"]])
        out = {"contrastive": contrast(anchor, positive, [], self.temperature, False, self.gather_across_devices)}
        if self.rtd_weight == 0:
            return out
        rows = [{k: v for k, v in features[role].items() if k in ENCODER_INPUTS} for role in ("anchor", "positive")]
        length = max(r["input_ids"].size(1) for r in rows)
        rows = [pad_to(r, length, self.tokenizer.pad_token_id) for r in rows]
        tokens = {k: torch.cat([r[k] for r in rows]) for k in rows[0]}
        if self.condition_on == "head":
            condition = torch.cat([anchor, positive])
        else:
            condition = torch.cat([pooled["anchor"], pooled["positive"]])
        out["rtd"] = self.rtd_weight * self.rtd(tokens, condition)
        return out

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "rtd_weight": self.rtd_weight, "mask_ratio": self.mask_ratio,
                "generator": self.generator_name, "generator_decoding": self.generator_decoding,
                "condition_on": self.condition_on}

    @property
    def citation(self) -> str:
        return ("@inproceedings{chuang2022diffcse, title={DiffCSE: Difference-based Contrastive Learning for "
                "Sentence Embeddings}, author={Chuang, Yung-Sung and Dangovski, Rumen and Luo, Hongyin and Zhang, "
                "Yang and Chang, Shiyu and Solja{\\v{c}}i{\\'c}, Marin and Li, Shang-Wen and Yih, Wen-tau and Kim, "
                "Yoon and Glass, James}, booktitle={NAACL}, year={2022}}")
