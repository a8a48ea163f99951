"""The trainer's plain random batches: RandomSampler's order, without a list of every row number."""

from __future__ import annotations

import tracemalloc
from types import SimpleNamespace

import pytest
import torch
from sentence_transformers.base.sampler import NoDuplicatesBatchSampler
from sentence_transformers.sentence_transformer.training_args import BatchSamplers
from accelerate.data_loader import SeedableRandomSampler, get_sampler
from torch.utils.data import RandomSampler

from augcse.training.sampler import CHUNK, StreamedRandomSampler, StreamedSeedableRandomSampler
from augcse.training.trainer import Trainer


def generator_for(seed: int | None) -> torch.Generator | None:
    return None if seed is None else torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("rows", [1, 7, CHUNK, CHUNK + 1, 3 * CHUNK + 5])
@pytest.mark.parametrize("share", [None, 0.5, 2.5])  # num_samples as a share of the rows (None: all of them)
@pytest.mark.parametrize("seed", [None, 0, 42])
@pytest.mark.parametrize("replacement", [False, True])
def test_the_order_is_random_samplers(rows: int, share: float | None, seed: int | None, replacement: bool) -> None:
    samples = None if share is None else max(1, int(rows * share))
    orders = []
    for sampler in (RandomSampler, StreamedRandomSampler):
        torch.manual_seed(7)  # a sampler without a generator seeds its own from the global one
        drawn = sampler(range(rows), replacement=replacement, num_samples=samples, generator=generator_for(seed))
        orders.append([list(drawn), list(drawn)])  # two epochs: the generator's state carries on alike
    assert orders[0] == orders[1]


@pytest.mark.parametrize("rows", [5, CHUNK + 3])
@pytest.mark.parametrize("data_seed", [None, 0, 11])
@pytest.mark.parametrize("epoch", [0, 2])
def test_the_seedable_order_is_the_accelerators(rows: int, data_seed: int | None, epoch: int) -> None:
    """The accelerator's sampler, and a streamed one made from it mid-run: the same rows over three epochs."""
    torch.manual_seed(5)  # without data_seed the seed is torch's initial one
    theirs = SeedableRandomSampler(data_source=range(rows), generator=torch.Generator().manual_seed(1),
                                   data_seed=data_seed)
    theirs.set_epoch(epoch)
    ours = StreamedSeedableRandomSampler.like(theirs)
    assert type(ours) is StreamedSeedableRandomSampler and ours.epoch == epoch
    assert [list(theirs) for _ in range(3)] == [list(ours) for _ in range(3)]


def test_no_list_of_every_row_is_built() -> None:
    rows = 1_000_000  # RandomSampler's list: about 40 MB of Python objects
    sampler = StreamedRandomSampler(range(rows), generator=torch.Generator().manual_seed(0))
    tracemalloc.start()
    try:
        first = next(iter(sampler))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 <= first < rows
    assert peak < 2 * CHUNK * 64  # one chunk of ints, not a million


def trainer_with(batch_sampler) -> Trainer:
    trainer = Trainer.__new__(Trainer)  # get_batch_sampler reads only the arguments
    trainer.args = SimpleNamespace(batch_sampler=batch_sampler)
    return trainer


@pytest.mark.parametrize("batch_sampler", [BatchSamplers.BATCH_SAMPLER, "batch_sampler"])
def test_plain_batches_use_the_streamed_sampler(batch_sampler) -> None:
    generator = torch.Generator().manual_seed(3)
    batches = trainer_with(batch_sampler).get_batch_sampler(range(100), 8, True, generator=generator)
    assert isinstance(batches.sampler, StreamedRandomSampler)
    expected = list(torch.randperm(100, generator=torch.Generator().manual_seed(3)).tolist())
    assert [row for batch in batches for row in batch] == expected[:96]


def test_other_batch_samplers_are_the_trainers() -> None:
    from datasets import Dataset

    dataset = Dataset.from_dict({"text": [f"line {i}" for i in range(32)]})
    batches = trainer_with(BatchSamplers.NO_DUPLICATES).get_batch_sampler(dataset, 8, True)
    assert isinstance(batches, NoDuplicatesBatchSampler)


def test_the_trainers_loader_draws_the_same_rows_streamed(tmp_path, tiny_st) -> None:
    """The real path: the accelerator's prepared loader holds the streamed sampler, in the trainer's order."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    dataset = Dataset.from_dict({"anchor": [f"line {i}" for i in range(40)], "positive": [f"p {i}" for i in range(40)]})
    orders = []
    for trainer_class in (SentenceTransformerTrainer, Trainer):
        args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path / trainer_class.__name__), seed=3,
                                                    data_seed=3, per_device_train_batch_size=4, use_cpu=True,
                                                    report_to="none")
        loader = trainer_class(model=tiny_st, args=args, train_dataset=dataset).get_train_dataloader()
        sampler = get_sampler(loader)
        epochs = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            epochs.append(list(sampler))
        orders.append((type(sampler), epochs))
    assert orders[0][0] is SeedableRandomSampler and orders[1][0] is StreamedSeedableRandomSampler
    assert orders[0][1] == orders[1][1] and orders[1][1][0] != orders[1][1][1]
