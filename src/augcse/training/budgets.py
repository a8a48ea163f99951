"""Evaluation along the way: one training run scored at several step budgets, so a learning curve costs one run.

:class:`BudgetEvaluation` is a ``TrainerCallback``: after each optimizer step whose number is one of the
budgets, the main process scores the model being trained on the run's tasks with
:func:`augcse.evaluation.suite.run_tasks` and writes the scores to ``curve.json`` in the run folder
(``{"steps": {"16": {...}, "64": {...}}}``). Nothing is selected on these scores: they are recorded only,
so a test split may be scored (the kept model is still the last step). A budget past the end of training
(e.g. past one epoch) is simply never reached; the run's final scores (``eval.json``) are its last point.
A resumed run recomputes the budgets after its checkpoint and keeps those before it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from augcse.core.outputs import write_text_atomically
from augcse.core.schema import Budgets, validate_value

logger = logging.getLogger(__name__)

CURVE = "curve.json"


def read_curve(run_dir: Path) -> dict[int, dict[str, float]]:
    """The scores recorded at each budget of a run, by step (empty when none were)."""
    path = Path(run_dir) / CURVE
    if not path.is_file():
        return {}
    return {int(step): scores for step, scores in json.loads(path.read_text()).get("steps", {}).items()}


def check_budgets(budgets: Sequence[int]) -> tuple[int, ...]:
    """Distinct positive step counts, ascending (the schema's ``Budgets``, as ``eval.budgets`` is checked);
    anything else is refused in one line."""
    return tuple(validate_value(Budgets, list(budgets), "budgets"))


class BudgetEvaluation(TrainerCallback):
    """Scores the model on ``tasks`` after each step in ``budgets``, into ``run_dir/curve.json``."""

    def __init__(self, budgets: Sequence[int], tasks: str, run_dir: Path, data_dir: Path | None,
                 batch_size: int = 64) -> None:
        self.budgets = set(check_budgets(budgets))
        self.tasks, self.path, self.data_dir, self.batch_size = tasks, Path(run_dir) / CURVE, data_dir, batch_size

    def on_step_end(self, args, state, control, model=None, **kwargs: Any):
        if state.global_step not in self.budgets or not state.is_world_process_zero:
            return
        from augcse.evaluation.suite import main_scores, run_tasks

        training = model.training
        model.eval()
        scores = main_scores(run_tasks(model, self.tasks, self.data_dir, batch_size=self.batch_size))
        model.train(training)
        curve = read_curve(self.path.parent)
        curve[state.global_step] = scores
        write_text_atomically(self.path, json.dumps({"tasks": self.tasks,
                                                     "steps": {str(k): curve[k] for k in sorted(curve)}}, indent=2))
        logger.info("step %d on %s: %s", state.global_step, self.tasks, scores)
