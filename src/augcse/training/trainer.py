"""The trainer every augcse run uses: sentence-transformers' own, with saves made by the writing process only.

transformers 5 calls ``Trainer._save`` on every process and lets each return there unless it should write;
``SentenceTransformerTrainer._save`` still assumes only the writer calls it, so under torchrun every process
wrote the same checkpoint files at once (and the first process could read a half-written one as the best
model). The check restored here is the trainer's own ``args.should_save``. It also builds the schedules of
:mod:`augcse.training.schedules`, which the trainer's ``get_scheduler`` does not know, and draws plain random
batches through the streamed samplers of :mod:`augcse.training.sampler` (the same order, no list of every row).
The ``eval/`` folder the trainer makes for an evaluator's files is removed again when it stays empty, as it does
for augcse's evaluator (its scores go to the log), so a run leaves no empty folder.
"""

from __future__ import annotations

import contextlib
import os

from accelerate.data_loader import SeedableRandomSampler, get_sampler
from datasets import IterableDataset
from sentence_transformers import SentenceTransformerTrainer
from sentence_transformers.base.sampler import DefaultBatchSampler
from sentence_transformers.sentence_transformer.training_args import BatchSamplers

from augcse.training.sampler import StreamedRandomSampler, StreamedSeedableRandomSampler


class Trainer(SentenceTransformerTrainer):
    """``SentenceTransformerTrainer`` whose ``_save`` writes from the process that ``args.should_save`` names, and
    whose scheduler may be one of augcse's (``args.augcse_schedule``: its name and arguments) and whose plain random
    batches hold 8 bytes a row, not a list of all row numbers."""

    def get_batch_sampler(self, dataset, batch_size: int, drop_last: bool, valid_label_columns=None,
                          generator=None, seed: int = 0):
        if self.args.batch_sampler != BatchSamplers.BATCH_SAMPLER or isinstance(dataset, IterableDataset):
            return super().get_batch_sampler(dataset, batch_size, drop_last, valid_label_columns, generator, seed)
        return DefaultBatchSampler(StreamedRandomSampler(dataset, generator=generator), batch_size=batch_size,
                                   drop_last=drop_last, valid_label_columns=valid_label_columns,
                                   generator=generator, seed=seed)

    def get_train_dataloader(self):
        loader = super().get_train_dataloader()
        sampler = get_sampler(loader)  # the accelerator's, in place of the batch sampler's own
        if type(sampler) is SeedableRandomSampler:
            loader.set_sampler(StreamedSeedableRandomSampler.like(sampler))
        return loader

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        schedule = getattr(self.args, "augcse_schedule", None)
        if schedule is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        from augcse.training.schedules import SCHEDULES

        name, kwargs = schedule
        self.lr_scheduler = SCHEDULES[name](optimizer or self.optimizer, kwargs)
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        if self.args.should_save:
            super()._save(output_dir, state_dict)

    def evaluation_loop(self, *args, **kwargs):
        try:
            return super().evaluation_loop(*args, **kwargs)
        finally:
            if self.is_world_process_zero():
                with contextlib.suppress(OSError):  # rmdir removes it only when empty
                    os.rmdir(os.path.join(self.args.output_dir, "eval"))
