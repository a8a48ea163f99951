"""BERT's token masking for the masked-LM objectives (the ``mlm`` term, DiffCSE's generator input).

The draw is transformers' own (``DataCollatorForLanguageModeling.torch_mask_tokens``): each ordinary token
is chosen with probability ``ratio``; a chosen token becomes ``[MASK]`` 80% of the time, a random token
10%, and stays 10%. Special tokens and padding are never chosen. The draw runs on the CPU from torch's
global generator (the trainer seeds it), so a run is repeatable on any device.
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers import DataCollatorForLanguageModeling

IGNORE = -100  # the label of a token the masked-LM loss skips (transformers' and the authors' convention)


def special_tokens(tokenizer, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
    """True where a token is special ([CLS], [SEP], <s>…) or padding: never masked."""
    special = torch.isin(input_ids, torch.tensor(sorted(tokenizer.all_special_ids), device=input_ids.device))
    return special | (attention_mask == 0)


def mask_tokens(tokenizer, input_ids: Tensor, attention_mask: Tensor, ratio: float) -> tuple[Tensor, Tensor]:
    """(masked ids, labels): the ids with the chosen tokens replaced 80/10/10, the labels ``IGNORE`` except
    at the chosen tokens (their original id). Both on ``input_ids``'s device."""
    if tokenizer.mask_token is None:
        raise ValueError(f"the tokenizer {type(tokenizer).__name__} has no mask token; masked-LM training needs one")
    collator = DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=ratio, return_tensors="pt")
    ids = input_ids.detach().cpu().clone()  # the collator writes into its input, on the CPU
    masked, labels = collator.torch_mask_tokens(ids, special_tokens(tokenizer, ids, attention_mask.cpu()))
    return masked.to(input_ids.device), labels.to(input_ids.device)
