"""ConSERT's augmentations of the token-embedding layer, installed on an encoder for one forward pass only.

ConSERT (Yan et al., ACL 2021) makes its two views inside the encoder: the output of the embedding layer
(word + position + segment embeddings after their LayerNorm) is cut or perturbed, or the position ids are
permuted, before the Transformer layers read it. Here each augmentation is a pure function of the batch and
its random draws (so a test can feed the authors' draws), and :func:`augmenting` hooks it onto the Hugging
Face model's ``embeddings`` module for the duration of a ``with`` block. The hooks are removed when the block
ends, so the model is never changed: it saves, loads and encodes as a plain sentence-transformers model.

Draws count real tokens only (the attention mask), [CLS] and [SEP] included, as the authors' code does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor, nn

Augmentation = Literal["none", "shuffle", "token_cutoff", "feature_cutoff", "dropout", "adversarial"]
CUTOFFS = ("token_cutoff", "feature_cutoff", "dropout")


@dataclass
class Draw:
    """The random choices of one augmentation for one batch: one index tensor per row.

    ``shuffle``: a permutation of the row's real token positions; ``token_cutoff``: the token positions to
    zero; ``feature_cutoff``: the embedding dimensions to zero (at every position); ``dropout``: the flat
    positions (token × dimension, over the real tokens) to zero.
    """

    name: str
    index: list[Tensor]


def draw(name: str, attention_mask: Tensor, hidden_size: int, rate: float,
         generator: torch.Generator | None = None) -> Draw | None:
    """Draw ``name``'s choices for a batch: ``int(n · rate)`` of the row's ``n`` items, uniformly without
    repetition (the authors' ``random.shuffle`` then the first ``int(n · rate)``); ``None`` for the rest."""
    if name not in ("shuffle", *CUTOFFS):
        return None
    lengths = [int(n) for n in attention_mask.sum(dim=1).tolist()]
    index = []
    for n in lengths:
        items = {"shuffle": n, "token_cutoff": n, "feature_cutoff": hidden_size, "dropout": n * hidden_size}[name]
        perm = torch.randperm(items, generator=generator)
        index.append(perm if name == "shuffle" else perm[: int(items * rate)])
    return Draw(name, index)


def shuffle_positions(position_ids: Tensor, lengths: Sequence[int], perms: Sequence[Tensor]) -> Tensor:
    """Each row's first ``n`` position ids in the order ``perm``; padding keeps its own (token shuffling)."""
    rows = []
    for row, n, perm in zip(position_ids, lengths, perms):
        rows.append(torch.cat([row[: int(n)][perm.to(row.device, torch.long)], row[int(n):]]))
    return torch.stack(rows)


def cut(embeddings: Tensor, chosen: Draw) -> Tensor:
    """The embedding output with the drawn tokens, dimensions or elements set to zero (a cutoff)."""
    batch, length, hidden = embeddings.shape
    zero = torch.zeros(batch, length, hidden, dtype=torch.bool, device=embeddings.device)
    for row, index in enumerate(chosen.index):
        index = index.to(embeddings.device, torch.long)
        if chosen.name == "token_cutoff":
            zero[row, index, :] = True
        elif chosen.name == "feature_cutoff":
            zero[row, :, index] = True
        else:  # dropout: flat positions over the real tokens' rows, which come first
            zero[row].view(-1)[index] = True
    return embeddings.masked_fill(zero, 0.0)


def adversarial_noise(gradient: Tensor, norm: float) -> Tensor:
    """Fast gradient value: ``norm · g / (‖g‖ + 1e-10)``, the norm per token over the hidden dimension."""
    return norm * gradient / (gradient.norm(p=2, dim=-1, keepdim=True) + 1e-10)


def embedding_module(model: nn.Module) -> nn.Module:
    """The Hugging Face ``embeddings`` module under a SentenceTransformer's first module; one line if none."""
    first = model[0] if isinstance(model, nn.Sequential) else model
    auto = getattr(first, "auto_model", None)
    embeddings = getattr(auto, "embeddings", None)
    if not isinstance(embeddings, nn.Module):
        raise ValueError(f"ConSERT augments the token embeddings of a BERT-like encoder, but "
                         f"{type(auto or first).__name__} has no 'embeddings' module")
    return embeddings


@contextmanager
def augmenting(model: nn.Module, attention_mask: Tensor, chosen: Draw | None = None,
               replace: Tensor | None = None, capture: list[Tensor] | None = None) -> Iterator[None]:
    """Within the block, the encoder's embedding layer applies ``chosen`` (or returns ``replace``, the
    adversarial view's perturbed output) and appends its output to ``capture``; nothing stays afterwards."""
    embeddings = embedding_module(model)
    lengths = [int(n) for n in attention_mask.sum(dim=1).tolist()]
    handles = []

    def positions(module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        batch, length = input_ids.shape if input_ids is not None else kwargs["inputs_embeds"].shape[:2]
        position_ids = kwargs.get("position_ids")
        if position_ids is None:  # RoBERTa's real positions start after its padding index, BERT's at 0
            start = getattr(module, "padding_idx", -1) + 1
            position_ids = torch.arange(start, start + length, device=attention_mask.device).expand(batch, -1)
        return args, {**kwargs, "position_ids": shuffle_positions(position_ids, lengths, chosen.index)}

    def output(module: nn.Module, args: tuple, result: Tensor) -> Tensor:
        if capture is not None:
            capture.append(result)
        if replace is not None:
            return replace
        if chosen is not None and chosen.name in CUTOFFS:
            return cut(result, chosen)
        return result

    if chosen is not None and chosen.name == "shuffle":
        handles.append(embeddings.register_forward_pre_hook(positions, with_kwargs=True))
    handles.append(embeddings.register_forward_hook(output))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
