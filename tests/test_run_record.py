"""A run's records (recipe.yaml, summary.json, the report, compare) state what the trainer received: each
setting changed every way a user can set it, and the records read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from augcse.commands.main import main
from conftest import tiny_cls_recipe

TRAINING = {"max_steps": 2}


def train(recipe: Path, *overrides: str) -> int:
    return main(["train", str(recipe), *overrides])


def records(run: Path) -> dict:
    """The seed, global batch and precision as each record states them."""
    assert main(["report", str(run)]) == 0
    assert main(["compare", str(run), "--out", str(run / "cmp")]) == 0
    summary = json.loads((run / "summary.json").read_text())
    return {"recipe": yaml.safe_load((run / "recipe.yaml").read_text())["seed"], "summary": summary["seed"],
            "report": f"| seed | {summary['seed']} |" in (run / "report.md").read_text(),
            "compare": f"(seed {summary['seed']})" in (run / "cmp" / "compare.md").read_text(), **summary}


@pytest.mark.parametrize(("in_file", "overrides", "seed"), [
    ({"seed": 7}, [], 7),                          # the recipe file
    ({"seed": 7}, ["seed=9"], 9),                  # an override
])
def test_seed_recorded_as_the_trainer_received_it(tmp_path, tiny_model_dir, data_dir, in_file, overrides, seed):
    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "s", {"dev": None, "before": None,
                                                                      "after": "STSBenchmark-dev-original"},
                             TRAINING)
    values = yaml.safe_load(recipe.read_text())
    recipe.write_text(yaml.safe_dump({**values, **in_file}))
    assert train(recipe, *overrides) == 0
    got = records(tmp_path / "runs" / "s")
    assert (got["recipe"], got["summary"], got["report"], got["compare"]) == (seed, seed, True, True)


@pytest.mark.parametrize(("override", "said"), [
    ("training.seed=5", "recipe key 'training.seed': the run's seed is the recipe key 'seed'"),
    ("training.data_seed=5", "recipe key 'training.data_seed'"),
    ("seed=99999999999999999999", "recipe key 'seed' must be <= 4294967295"),
    ("eval.budgets=[1,4]", "recipe key 'eval.budgets': 4 past the run's last step 2"),
])
def test_a_setting_the_trainer_would_not_receive_is_refused(tmp_path, tiny_model_dir, data_dir, capsys,
                                                           override, said):
    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "r", {"dev": None, "before": None,
                                                                      "after": "STSBenchmark-dev-original"},
                             TRAINING)
    assert train(recipe, override) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err
    assert not (tmp_path / "runs" / "r").exists()


def test_budgets_past_the_epochs_are_refused_once_the_corpus_is_read(tmp_path, tiny_model_dir, data_dir, capsys):
    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "e", {"dev": None, "before": None,
                                                                      "after": "STSBenchmark-dev-original"}, {})
    assert train(recipe, "eval.budgets=[2,64]") == 2  # 32 rows of 8: 4 steps in one epoch
    assert "recipe key 'eval.budgets': 64 past the run's last step 4" in capsys.readouterr().err


def test_global_batch_budgets_and_precision_recorded(tmp_path, tiny_model_dir, data_dir):
    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "g", {"dev": None, "before": None,
                                                                      "after": "STSBenchmark-dev-original"},
                             {"max_steps": 2, "gradient_accumulation_steps": 2})
    assert train(recipe, "training.per_device_train_batch_size=4", "eval.budgets=[1]") == 0
    run = tmp_path / "runs" / "g"
    got = records(run)
    assert (got["processes"], got["global_batch"], got["precision"], got["budgets_scored"]) == (1, 8, "float32", [1])
    assert "1 process(es), global batch 8, float32" in (run / "report.md").read_text()
    # scores encoded in bf16 say so in eval.json and in compare
    assert main(["eval", str(run / "final"), "--tasks", "STSBenchmark-dev-original", "--bf16", "--save-to",
                 str(run)]) == 0
    assert json.loads((run / "eval.json").read_text())["versions"]["after"]["precision"] == "bf16"
    assert main(["compare", str(run), "--out", str(run / "cmp")]) == 0
    assert "g (bf16)" in (run / "cmp" / "compare.md").read_text()
