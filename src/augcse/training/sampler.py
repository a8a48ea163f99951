"""The trainer's random order of rows, with no Python list of every row number.

PyTorch's ``RandomSampler`` draws ``torch.randperm(n)`` and turns all of it into a list of Python ints before the
first batch: about 40 bytes a training row (a pointer and an int object each) held for the whole epoch, 80 MB
for 2·10^6 rows. The trainer's accelerator replaces the batch sampler's ``RandomSampler`` by its own
``SeedableRandomSampler`` (which reseeds the generator each epoch and then iterates as ``RandomSampler``), so both
have a streamed form here: the same permutations from the same generator, handed out :data:`CHUNK` rows at a
time. They hold 8 bytes a row (the permutation tensor), and the order of every batch, hence every trained weight,
is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from accelerate.data_loader import SeedableRandomSampler
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


class StreamedSeedableRandomSampler(SeedableRandomSampler, StreamedRandomSampler):
    """The accelerator's ``SeedableRandomSampler`` (its seeding per epoch) over :class:`StreamedRandomSampler`."""

    @classmethod
    def like(cls, sampler: SeedableRandomSampler) -> StreamedSeedableRandomSampler:
        """A streamed sampler in ``sampler``'s state (rows, generator, seed and epoch)."""
        streamed = cls(data_source=sampler.data_source, replacement=sampler.replacement,
                       num_samples=sampler._num_samples, generator=sampler.generator, data_seed=sampler.initial_seed)
        streamed.set_epoch(sampler.epoch)
        return streamed


def _streamed(order: torch.Tensor) -> Iterator[int]:
    for chunk in order.split(CHUNK):
        yield from chunk.tolist()
