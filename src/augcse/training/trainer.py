"""The trainer every augcse run uses: sentence-transformers' own, with saves made by the writing process only.

transformers 5 calls ``Trainer._save`` on every process and lets each return there unless it should write;
``SentenceTransformerTrainer._save`` still assumes only the writer calls it, so under torchrun every process
wrote the same checkpoint files at once (and the first process could read a half-written one as the best
model). The check restored here is the trainer's own ``args.should_save``. It also builds the schedules of
:mod:`augcse.training.schedules`, which the trainer's ``get_scheduler`` does not know.
"""

from __future__ import annotations

from sentence_transformers import SentenceTransformerTrainer


class Trainer(SentenceTransformerTrainer):
    """``SentenceTransformerTrainer`` whose ``_save`` writes from the process that ``args.should_save`` names, and
    whose scheduler may be one of augcse's (``args.augcse_schedule``: its name and arguments)."""

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
