"""The trainer's random order of rows, with no Python list of every row number.

PyTorch's ``RandomSampler`` draws ``torch.randperm(n)`` and turns all of it into a list of Python ints before the
first batch: about 40 bytes a training row (a pointer and an int object each) held for the whole epoch, 80 MB
for 2·10^6 rows. :class:`StreamedRandomSampler` draws the same permutations from the same generator and hands
them out :data:`CHUNK` rows at a time, so it holds 8 bytes a row (the permutation tensor) and the order of every
batch, hence every trained weight, is the one ``RandomSampler`` gives.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch.utils.data import RandomSampler

CHUNK = 8_192  # row numbers turned into Python ints at a time


class StreamedRandomSampler(RandomSampler):
    """``RandomSampler`` without replacement whose permutations are read out a chunk at a time."""

    def __iter__(self) -> Iterator[int]:
        if self.replacement:  # draws 32 at a time already
            yield from super().__iter__()
            return
        rows = len(self.data_source)
        generator = self.generator
        if generator is None:  # as RandomSampler seeds its own: one draw from the global generator
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
            generator = torch.Generator()
            generator.manual_seed(seed)
        for _ in range(self.num_samples // rows):
            yield from _streamed(torch.randperm(rows, generator=generator))
        yield from _streamed(torch.randperm(rows, generator=generator)[: self.num_samples % rows])


def _streamed(order: torch.Tensor) -> Iterator[int]:
    for chunk in order.split(CHUNK):
        yield from chunk.tolist()
