"""What a run says and leaves when it ends: the command that continues a stopped run (train, adapt, study), a
summary that names only checkpoints still there, no empty folder beside them, and the steps a small corpus trains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from augcse.training.recovery import RESUME_FLAGS, continue_command

RUN = Path("runs/r")
STORED = f"augcse train {RUN / 'recipe.yaml'} --resume"  # a run started from Python: its stored recipe

ARGV = [  # (sys.argv, the line that continues the run)
    (["/venv/bin/augcse", "train", "r.yaml"], "augcse train r.yaml --resume"),
    (["/venv/bin/augcse", "train", "r.yaml", "--overwrite", "name=my run"], "augcse train r.yaml 'name=my run' --resume"),
    (["/venv/bin/augcse", "--debug", "train", "--recipe", "quickstart", "--resume"],
     "augcse --debug train --recipe quickstart --resume"),
    (["/venv/bin/augcse", "train", "r.yaml", "--auto-resume"], "augcse train r.yaml --auto-resume"),
    (["/x/site-packages/augcse/__main__.py", "train", "r.yaml", "--data-dir", "/data dir"],
     "augcse train r.yaml --data-dir '/data dir' --resume"),
    (["augcse", "adapt", "texts.txt", "--overwrite", "name=tickets", "--method", "simcse"],
     "augcse adapt texts.txt name=tickets --method simcse --resume"),
    (["augcse", "adapt", "texts.txt", "--resume"], "augcse adapt texts.txt --resume"),
    (["augcse", "study", "grid.yaml", "--output", "runs/study"], "augcse study grid.yaml --output runs/study"),
    (["/venv/bin/pytest", "-q", "tests/test_train.py"], STORED),
    (["ipykernel_launcher.py", "-f", "kernel.json"], STORED),
    (["/venv/bin/augcse"], STORED),
]


@pytest.mark.parametrize("argv, line", ARGV, ids=[" ".join(a[1:]) or "bare" for a, _ in ARGV])
def test_the_stopped_line_names_the_users_own_command(argv, line):
    assert continue_command(argv, RUN) == line


@pytest.mark.parametrize("command", sorted(RESUME_FLAGS))
def test_every_command_that_trains_continues_with_its_own_command_and_never_a_placeholder(command):
    line = continue_command(["augcse", command, "input", "--overwrite"], RUN)
    assert line.startswith(f"augcse {command} input") and "--overwrite" not in line and "..." not in line
    assert line.count("--resume") == (RESUME_FLAGS[command] == "--resume")


def tiny_dev_recipe(tmp_path: Path, tiny_model_dir: Path, data_dir: Path, **training) -> Path:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join((data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:64]))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "r", "output_dir": str(tmp_path / "runs"), "seed": 3,
        "model": {"backbone": str(tiny_model_dir), "pooler": "cls", "max_seq_length": 16},
        "data": {"corpus": str(corpus)}, "loss": {"name": "simcse"},
        "eval": {"dev": "STSBenchmark-dev-original", "before": None, "after": None},
        "training": {"per_device_train_batch_size": 8, "logging_steps": 1, **training},
    }))
    return recipe


def finished(recipe: Path, data_dir: Path, *overrides: str) -> tuple[Path, dict]:
    from augcse.training.recipes.config import load_recipe
    from augcse.training.run import run

    loaded = load_recipe(recipe, overrides=list(overrides))
    run(loaded, data_dir)
    return loaded.run_dir, json.loads((loaded.run_dir / "summary.json").read_text())


@pytest.mark.parametrize("keep", [False, True], ids=["checkpoints-removed", "checkpoints-kept"])
def test_the_summary_names_only_a_checkpoint_that_is_there_and_no_empty_eval_folder_is_left(
        tmp_path, tiny_model_dir, data_dir, keep):
    recipe = tiny_dev_recipe(tmp_path, tiny_model_dir, data_dir, max_steps=4, eval_steps=2)
    run_dir, summary = finished(recipe, data_dir, f"keep_checkpoints={str(keep).lower()}")
    assert summary["best_step"] in (2, 4)
    best = summary["best_checkpoint"]
    assert (best is not None and Path(best).is_dir()) if keep else best is None
    assert not (run_dir / "eval").exists(), "the trainer's folder for evaluator files stays empty: removed"


# (rows, per-device batch, accumulation, drop_last) → optimizer steps in one epoch
STEPS = [((16, 8, 1, True), 2), ((20, 8, 1, True), 2), ((20, 8, 1, False), 3), ((40, 8, 4, True), 2),
         ((16, 8, 4, True), 1)]


@pytest.mark.parametrize("shape, steps", STEPS, ids=["-".join(map(str, s)) for s, _ in STEPS])
def test_total_steps_is_what_the_trainer_trains_and_a_corpus_under_one_global_batch_trains_one(
        tmp_path, tiny_model_dir, data_dir, shape, steps):
    """``total_steps`` (save cadence, budgets) counts as the trainer does: a dropped partial batch, a step on an
    epoch's partial accumulation; 16 rows under a global batch of 32 train one step, not none."""
    from augcse.training.build import total_steps
    from augcse.training.recipes.config import load_recipe

    rows, batch, accumulation, drop_last = shape
    recipe = tiny_dev_recipe(tmp_path, tiny_model_dir, data_dir, per_device_train_batch_size=batch,
                             gradient_accumulation_steps=accumulation, dataloader_drop_last=drop_last)
    overrides = [f"data.limit={rows}", "eval.dev=null"]
    assert total_steps(load_recipe(recipe, overrides=overrides), rows) == steps
    _, summary = finished(recipe, data_dir, *overrides)
    assert summary["global_step"] == steps


@pytest.mark.parametrize("processes", [1, 2])
def test_a_corpus_under_one_batch_on_every_process_is_refused_before_the_model_loads(
        tmp_path, tiny_model_dir, data_dir, monkeypatch, processes):
    import augcse.training.build as build
    from augcse.core.schema import RecipeError
    from augcse.training.recipes.config import load_recipe

    recipe = load_recipe(tiny_dev_recipe(tmp_path, tiny_model_dir, data_dir), overrides=[f"data.limit={8 * processes - 1}"])
    monkeypatch.setattr(build, "world_size", lambda: processes)
    monkeypatch.setattr(build, "build_model", lambda recipe: pytest.fail("the model was loaded"))
    with pytest.raises(RecipeError, match=rf"leaves {8 * processes - 1} usable rows .* fewer than one batch of "
                                          rf"{8 * processes}; .*lower training.per_device_train_batch_size$"):
        build.build_setup(recipe, None, tmp_path / "corpus.txt")


def test_views_that_leave_fewer_rows_than_a_batch_are_refused_in_one_line(tmp_path, tiny_model_dir, data_dir,
                                                                         monkeypatch):
    """A view that drops rows (``drop_unchanged``, DeCLUTR's short documents) below one batch: one line, no
    trainer that would train 0 steps."""
    import augcse.training.build as build
    from augcse.core.schema import RecipeError
    from augcse.training.recipes.config import load_recipe

    recipe = load_recipe(tiny_dev_recipe(tmp_path, tiny_model_dir, data_dir), overrides=["eval.dev=null"])
    few = lambda corpus, views, context: corpus.select(range(5)).rename_column("text", "anchor")  # noqa: E731
    monkeypatch.setattr("augcse.text.views.build_views", few)
    monkeypatch.setattr(build, "build_trainer", lambda *a: pytest.fail("a trainer was built"))
    with pytest.raises(RecipeError, match=r"^data.views \(none\) leave 5 training rows, fewer than one batch of 8; "):
        build.build_setup(recipe, None, tmp_path / "corpus.txt")


@pytest.mark.parametrize("argv, line", [(["augcse", "train", "{recipe}", "--overwrite"], "augcse train {recipe} --resume"),
                                        (["/venv/bin/pytest", "-q"], "augcse train {run}/recipe.yaml --resume")],
                         ids=["from-the-command-line", "from-python"])
def test_ctrl_c_prints_the_command_that_continues(tmp_path, tiny_model_dir, data_dir, monkeypatch, capsys, argv, line):
    import os
    import signal

    from transformers import TrainerCallback

    from augcse.training.recipes.config import load_recipe
    from augcse.training.run import run

    class CtrlC(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                os.kill(os.getpid(), signal.SIGINT)

    recipe = tiny_dev_recipe(tmp_path, tiny_model_dir, data_dir, max_steps=6)
    loaded = load_recipe(recipe, overrides=["eval.dev=null"])
    names = {"recipe": str(recipe), "run": str(loaded.run_dir)}
    monkeypatch.setattr("sys.argv", [word.format(**names) for word in argv])
    assert run(loaded, data_dir, callbacks=[CtrlC()])["stopped"]
    assert f"Continue with: {line.format(**names)}\n" in capsys.readouterr().out
