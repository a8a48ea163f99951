"""The public path of :class:`augcse.training.trainer.Trainer` (``from augcse.trainer import Trainer``)."""

from augcse.training.trainer import Trainer

__all__ = ["Trainer"]
