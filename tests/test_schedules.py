"""augcse's own learning-rate schedules: the piecewise-constant table by hand, its refusals at recipe load,
and the trainer stepping through it (CT's released schedule)."""

from __future__ import annotations

import pytest
import torch

from augcse.training.recipes.config import RecipeError, load_recipe
from augcse.training.schedules import piecewise_constant

CT = {"boundaries": [500, 1000, 1500, 2000], "factors": [0.8, 0.6, 0.4, 0.2]}


def test_piecewise_constant_by_hand():
    """The CT code's rates: 1e-5 to step 499, 8e-6 from 500, … 2e-6 from 2000 on."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-5)
    schedule = piecewise_constant(optimizer, CT)
    rates = {}
    for step in range(5000):
        rates[step] = optimizer.param_groups[0]["lr"]
        optimizer.step()
        schedule.step()
    expected = {0: 1e-5, 499: 1e-5, 500: 8e-6, 999: 8e-6, 1000: 6e-6, 1500: 4e-6, 1999: 4e-6, 2000: 2e-6, 4999: 2e-6}
    assert {s: pytest.approx(rates[s], rel=1e-12) for s in expected} == expected


@pytest.mark.parametrize("kwargs, says", [
    ("{boundaries: [500, 100], factors: [0.8, 0.6]}", "increasing"),
    ("{boundaries: [500], factors: [0.8, 0.6]}", "same length"),
    ("{boundaries: [500], factors: [0]}", "positive numbers"),
    ("{steps: [500]}", "needs exactly"),
])
def test_a_wrong_table_is_refused_at_recipe_load(kwargs, says):
    with pytest.raises(RecipeError, match=f"training.lr_scheduler_kwargs.*{says}"):
        load_recipe(None, "quickstart", ["training.lr_scheduler_type=piecewise_constant",
                                         f"training.lr_scheduler_kwargs={kwargs}"])


def test_the_trainer_runs_the_table(tiny_model_dir, tmp_path):
    """The trainer's scheduler is augcse's: its rate after a boundary is the table's."""
    from augcse.training.arguments import training_arguments
    from augcse.training.trainer import Trainer

    recipe = load_recipe(None, "quickstart", [f"output_dir={tmp_path}", "training.lr_scheduler_type=piecewise_constant",
                                              "training.lr_scheduler_kwargs={boundaries: [2], factors: [0.5]}"])
    args = training_arguments(recipe, has_dev=False, total_steps=4)
    from sentence_transformers import SentenceTransformer

    trainer = Trainer(model=SentenceTransformer(str(tiny_model_dir), device="cpu"), args=args)
    trainer.create_optimizer_and_scheduler(num_training_steps=4)
    rates = []
    for _ in range(4):
        rates.append(trainer.lr_scheduler.get_last_lr()[0])
        trainer.optimizer.step()
        trainer.lr_scheduler.step()
    base = recipe.training.get("learning_rate")
    assert rates == pytest.approx([base, base, base / 2, base / 2])
