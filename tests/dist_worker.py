"""Run by tests/test_distributed.py: SimCSE loss and gradients on one rank's half of a batch.

Launched with ``torchrun --nproc_per_node 2`` (gloo) or as one plain process with the whole batch.
Writes the loss and the parameter gradients (averaged over ranks, as DDP does) to OUT/rank<r>.pt.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from augcse.losses import SimCSELoss
from augcse.modules import build_sentence_transformer

SENTENCES = [
    "a man is playing a guitar .", "a woman is slicing an onion .", "the stock market fell sharply today .",
    "two dogs run through the snow .", "the president gave a speech .", "a child rides a horse .",
    "rain is expected tomorrow .", "he cooked pasta for dinner .",
]


def main(model_dir: str, out: str, head: str) -> None:
    distributed = "RANK" in os.environ
    if distributed:
        dist.init_process_group("gloo")
    rank, world = (dist.get_rank(), dist.get_world_size()) if distributed else (0, 1)
    torch.manual_seed(0)
    model = build_sentence_transformer(model_dir, "cls", 16)
    torch.manual_seed(1)  # the head's initialisation, identical on every rank
    loss_fn = SimCSELoss(model, temperature=0.05, head=head)
    loss_fn.eval()  # no dropout: the two views coincide, so runs are comparable exactly
    # positives are a different text per row, so the in-batch negatives matter
    per_rank = len(SENTENCES) // world
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    anchors = model.preprocess(SENTENCES[mine])
    positives = model.preprocess([s.upper() for s in SENTENCES[mine]])
    loss = loss_fn([anchors, positives])["contrastive"]
    loss.backward()
    grads = {}
    for name, param in loss_fn.named_parameters():
        if param.grad is None:
            continue
        grad = param.grad.detach().clone()
        if distributed:
            dist.all_reduce(grad)
            grad /= world
        grads[name] = grad
    value = loss.detach().clone()
    if distributed:
        dist.all_reduce(value)
        value /= world
    torch.save({"loss": value, "grads": grads}, os.path.join(out, f"rank{rank}.pt"))
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:4])
