"""One InfoNCE core for every method: queries against blocks of keys, each block with its own pattern and offsets.

For query row ``i`` and key ``c`` of a block ``b``::

    logit_ic = sim(q_i, k_c) / τ + offset_b(i, c)            (masked logits are -inf)
    loss_i   = -log softmax_c(logit_i)[positive(i)]

The positive of row ``i`` is key ``i`` (shifted by this process's rank offset when keys are gathered)
of the first block. Patterns say which keys of a block a row sees:

* ``all``      every key (in-batch negatives; SimCSE, CARDS' shared retrieved negatives),
* ``diag``     only key ``i`` (the row's own hard negative: SDA negation, AugCSE negatives),
* ``offdiag``  every key except key ``i`` (NT-Xent's same-view block),
* a LongTensor ``(rows, k)`` of key indices per row (VaSCL's K nearest neighbours).

Offsets: ``offset`` is added to every visible key of the block and ``diag_offset`` additionally to
key ``i`` (SimCSE's ``log α`` on the own hard negative, SDA's ``-δ/τ``). ``key_ids``/``query_ids``
mask a key whose source sentence is the row's own (CARDS' false-negative guard).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Union

import torch
import torch.nn.functional as F
from torch import Tensor

from sentence_transformers.util import all_gather_with_grad, get_rank, get_world_size

Pattern = Union[Literal["all", "diag", "offdiag"], Tensor]


@dataclass
class KeyBlock:
    """A block of candidate keys for the InfoNCE softmax (see the module docstring)."""

    keys: Tensor
    pattern: Pattern = "all"
    offset: float = 0.0
    diag_offset: float = 0.0
    key_ids: Tensor | None = None
    gather: bool = True  # gather keys across processes (``all``/``offdiag`` patterns only)


def gather(tensor: Tensor) -> Tensor:
    """All-gather along dim 0 keeping gradients for every rank's slice; identity when not distributed."""
    return all_gather_with_grad(tensor) if get_world_size() > 1 else tensor


def cosine_matrix(a: Tensor, b: Tensor) -> Tensor:
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


def _block_logits(
    queries: Tensor, block: KeyBlock, temperature: float, query_ids: Tensor | None, distributed: bool,
    positive: bool = False,
) -> Tensor:
    rows = queries.size(0)
    pattern = block.pattern
    if isinstance(pattern, Tensor):  # per-row key subsets
        keys = block.keys
        sims = torch.einsum("rd,rkd->rk", F.normalize(queries, dim=-1), F.normalize(keys, dim=-1)[pattern])
        return sims / temperature + block.offset
    if pattern == "diag":
        keys = block.keys
        if keys.size(0) != rows:
            raise ValueError(f"a 'diag' block needs one key per query row, got {keys.size(0)} keys for {rows} rows")
        sims = F.cosine_similarity(queries, keys, dim=-1).unsqueeze(1)
        return sims / temperature + block.offset + block.diag_offset
    if pattern not in ("all", "offdiag"):
        raise ValueError(f"unknown key pattern {pattern!r}; use 'all', 'diag', 'offdiag' or an index tensor")
    keys = gather(block.keys) if (distributed and block.gather) else block.keys
    own = get_rank() * rows if (distributed and block.gather) else 0
    logits = cosine_matrix(queries, keys) / temperature + block.offset
    cols = torch.arange(rows, device=queries.device) + own
    row_index = torch.arange(rows, device=queries.device)
    if block.diag_offset:
        bump = torch.zeros_like(logits)
        bump[row_index, cols] = block.diag_offset
        logits = logits + bump
    if pattern == "offdiag":
        logits = logits.index_put((row_index, cols), torch.tensor(float("-inf"), dtype=logits.dtype, device=logits.device))
    if block.key_ids is not None and query_ids is not None:
        key_ids = gather(block.key_ids) if (distributed and block.gather) else block.key_ids
        same = query_ids.unsqueeze(1) == key_ids.unsqueeze(0)
        if positive:
            same[row_index, cols] = False  # never mask the positive itself
        logits = logits.masked_fill(same, float("-inf"))
    return logits


def info_nce(
    queries: Tensor,
    blocks: Sequence[KeyBlock],
    temperature: float = 0.05,
    query_ids: Tensor | None = None,
    reduction: Literal["mean", "none"] = "mean",
) -> Tensor:
    """InfoNCE of ``queries`` against ``blocks``; the positive of row i is key i of ``blocks[0]``.

    ``blocks[0]`` uses pattern ``all``, ``diag`` or a subset whose first index is the positive. Keys of ``all``/``offdiag`` blocks are gathered across processes (with gradients)
    when ``torch.distributed`` is initialised, so every process sees every other's negatives.
    """
    if not blocks:
        raise ValueError("info_nce needs at least one key block (the positives)")
    distributed = get_world_size() > 1
    first = blocks[0]
    if first.pattern == "offdiag":
        raise ValueError("the positive block cannot be 'offdiag' (it would hide the positive)")
    logits = torch.cat(
        [_block_logits(queries, b, temperature, query_ids, distributed, positive=i == 0) for i, b in enumerate(blocks)],
        dim=1,
    )
    rows = queries.size(0)
    if first.pattern == "diag" or isinstance(first.pattern, Tensor):
        target = torch.zeros(rows, dtype=torch.long, device=queries.device)
    else:
        own = get_rank() * rows if (distributed and first.gather) else 0
        target = torch.arange(rows, device=queries.device) + own
    return F.cross_entropy(logits, target, reduction=reduction)


def symmetric_info_nce(
    anchors: Tensor, positives: Tensor, temperature: float = 0.05, extra: Sequence[KeyBlock] = (), gather: bool = True
) -> Tensor:
    """(anchor→positive + positive→anchor) / 2, the CLIP-style loss AugCSE's code uses.

    Extra negative blocks join only the anchor→positive direction. ``gather`` applies to both
    directions' in-batch keys (the extra blocks carry their own setting).
    """
    forward = info_nce(anchors, [KeyBlock(positives, gather=gather), *extra], temperature)
    backward = info_nce(positives, [KeyBlock(anchors, gather=gather)], temperature)
    return (forward + backward) / 2


def nt_xent(z1: Tensor, z2: Tensor, temperature: float = 0.05, gather: bool = True,
            extra: Sequence[KeyBlock] = ()) -> Tensor:
    """NT-Xent (SimCLR; VaSCL Eq. 1), both directions averaged: each view against its partner and the batch's
    2M − 2 other embeddings of both views. Extra negative blocks join the ``z1`` direction only."""
    forward = info_nce(z1, [KeyBlock(z2, gather=gather), KeyBlock(z1, "offdiag", gather=gather), *extra], temperature)
    backward = info_nce(z2, [KeyBlock(z1, gather=gather), KeyBlock(z2, "offdiag", gather=gather)], temperature)
    return (forward + backward) / 2


def contrast(
    anchors: Tensor, positives: Tensor, extra: Sequence[KeyBlock] = (), temperature: float = 0.05,
    symmetric: bool = False, gather: bool = True, query_ids: Tensor | None = None,
) -> Tensor:
    """The anchor→positive InfoNCE with extra negative blocks, or its symmetric form; what every paper's loss calls."""
    if symmetric:
        if query_ids is not None:
            raise ValueError("the symmetric form has no own-text mask; turn one of them off")
        return symmetric_info_nce(anchors, positives, temperature, extra, gather)
    return info_nce(anchors, [KeyBlock(positives, gather=gather), *extra], temperature, query_ids=query_ids)
