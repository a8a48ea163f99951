"""The non-finite guard: a loss that turns NaN stops the run in one line, before the weights see it.

The NaN is forced at a chosen step by a forward hook on the real SimCSE loss (the guard's own hook, registered
later, sees the hooked output), so the step is known exactly; one CLI run uses a huge learning rate instead.
"""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

import augcse.training.build
from augcse.training.recipes.config import load_recipe
from augcse.training.rundir import checkpoints, latest_checkpoint
from test_faults import write_recipe as fault_recipe

STEPS = 8


def write_recipe(tmp_path: Path, backbone: Path, data_dir: Path, **training) -> Path:
    """test_faults' tiny SimCSE recipe (CLS pooler, batch 8, a checkpoint every 2 steps), 8 steps long."""
    return fault_recipe(tmp_path, backbone, data_dir, "runs", **{"max_steps": STEPS, **training})


def nan_at(monkeypatch, steps: set[int]) -> None:
    """Make the loss NaN on the given training steps (1-based), through the real loss's output."""
    real = augcse.training.build.build_loss

    def build_loss(recipe, model):
        loss = real(recipe, model)
        calls = [0]

        def poison(module, inputs, output):
            if not module.training:
                return None
            calls[0] += 1
            if calls[0] not in steps:
                return None
            return {key: value * float("nan") for key, value in output.items()}

        loss.register_forward_hook(poison)
        return loss

    monkeypatch.setattr(augcse.training.build, "build_loss", build_loss)


def finite(folder: Path) -> bool:
    from augcse.training.guard import safetensors_finite

    files = list(folder.rglob("*.safetensors"))
    return bool(files) and all(safetensors_finite(f) for f in files)


def test_nan_at_step_5_stops_in_one_line_keeping_checkpoint_4(tmp_path, tiny_model_dir, data_dir, monkeypatch):
    from augcse.training.run import RunError, run

    nan_at(monkeypatch, {5})
    recipe = load_recipe(write_recipe(tmp_path, tiny_model_dir, data_dir))
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(RunError) as info:
        run(recipe)
    assert signal.getsignal(signal.SIGINT) is handler, "the SIGINT handler is restored after the run"
    message = str(info.value)
    run_dir = recipe.run_dir
    assert "\n" not in message
    assert message.startswith("the run stopped at step 5: loss component 'contrastive' is nan (likely: the learning rate (0.001) is too "
                              "high, the loss temperature (0.05) is too low, a batch is bad)")
    assert (f"checkpoint-4 is the last good checkpoint: continue from it with a lower rate, e.g. augcse train "
            f"{run_dir / 'recipe.yaml'} training.learning_rate=0.0001 --resume") in message
    assert not (run_dir / "final").exists() and not (run_dir / "summary.json").exists()
    assert [p.name for p in checkpoints(run_dir)] == ["checkpoint-2", "checkpoint-4"]
    assert finite(run_dir / "checkpoint-4")
    assert not (run_dir / ".lock").exists()
    logged = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    assert all(math.isfinite(r["loss"]) for r in logged if "loss" in r), "no NaN step reached the log"

    # the command the message gives: resume from checkpoint-4 with a lower learning rate
    monkeypatch.undo()
    changed = load_recipe(run_dir / "recipe.yaml", overrides=["training.learning_rate=0.0001"])
    summary = run(changed, resume=True)
    assert summary["global_step"] == STEPS and finite(run_dir / "final")
    assert (run_dir / "recipe.until-step-4.yaml").is_file()
    assert yaml.safe_load((run_dir / "recipe.yaml").read_text())["training"]["learning_rate"] == 1e-4
    rates = {r["step"]: r["learning_rate"] for r in map(json.loads, (run_dir / "log.jsonl").read_text().splitlines())
             if "learning_rate" in r}
    # linear decay from the peak over 8 steps: step s logs peak * (1 - (s - 1) / 8)
    assert rates[4] == pytest.approx(1e-3 * 5 / 8) and rates[5] == pytest.approx(1e-4 * 4 / 8)
    assert checkpoints(run_dir) == [], "a finished run keeps final/ only"
    parts = json.loads((run_dir / "time.json").read_text())["parts"]
    assert len(parts) == 2 and summary["seconds"] >= sum(parts), "the summary counts both parts of the run"


def test_skipped_steps_leave_the_weights_untouched(tmp_path, tiny_model_dir, data_dir, monkeypatch, caplog):
    from augcse.training.run import run

    nan_at(monkeypatch, {3})
    path = write_recipe(tmp_path, tiny_model_dir, data_dir, max_steps=4, save_steps=1, save_total_limit=4)
    recipe = load_recipe(path, overrides=["skip_nonfinite_steps=1", "keep_checkpoints=true"])
    run(recipe)
    run_dir = recipe.run_dir
    assert finite(run_dir / "final")
    assert any("step 3 skipped: loss component 'contrastive' is nan (1 of 1 allowed" in r.getMessage() for r in caplog.records)
    from safetensors.torch import load_file

    two = load_file(str(run_dir / "checkpoint-2" / "model.safetensors"))
    three = load_file(str(run_dir / "checkpoint-3" / "model.safetensors"))
    for key in two:
        assert torch.equal(two[key], three[key]), f"{key} changed on a skipped step"


def test_a_checkpoint_with_nonfinite_weights_is_never_kept(tmp_path, tiny_model_dir, data_dir, monkeypatch):
    from safetensors.torch import load_file, save_file

    from augcse.training.recovery import last_finite_checkpoint
    from augcse.training.run import RunError, run

    path = write_recipe(tmp_path, tiny_model_dir, data_dir, max_steps=4)
    recipe = load_recipe(path, overrides=["keep_checkpoints=true"])
    run(recipe)
    run_dir = recipe.run_dir
    spoiled = run_dir / "checkpoint-6"
    shutil.copytree(run_dir / "checkpoint-4", spoiled)
    weights = load_file(str(spoiled / "model.safetensors"))
    first = next(iter(weights))
    weights[first][0] = float("inf")
    save_file(weights, str(spoiled / "model.safetensors"))
    assert latest_checkpoint(run_dir) == spoiled
    assert last_finite_checkpoint(run_dir).name == "checkpoint-4" and not spoiled.exists()

    # and final/ is never written from non-finite weights, even when no loss showed it
    import augcse.training.guard

    monkeypatch.setattr(augcse.training.guard, "all_finite", lambda module: False)
    with pytest.raises(RunError, match=r"^the trained weights are not finite; no final/ was written"):
        run(recipe, overwrite=True)
    assert not (run_dir / "final").exists()


def test_a_diverging_cli_run_exits_1_with_one_line(tmp_path, tiny_model_dir, data_dir):
    path = write_recipe(tmp_path, tiny_model_dir, data_dir, learning_rate=1e6, max_grad_norm=0)
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "augcse", "train", str(path)], env=env, capture_output=True,
                            text=True, timeout=600)
    errors = [line for line in result.stderr.splitlines() if line.startswith("augcse train: error:")]
    assert result.returncode == 1, result.stderr[-2000:]
    assert len(errors) == 1 and "Traceback" not in result.stderr
    assert "the learning rate (1e+06) is too high" in errors[0]
    run_dir = tmp_path / "runs" / "run"
    assert not (run_dir / "final").exists()
    for folder in checkpoints(run_dir):
        assert finite(folder)


def test_a_diverging_rate_is_recovered_by_the_command_the_message_prints(tmp_path, tiny_model_dir, data_dir):
    """learning_rate=1e6 wrecks the weights at the first step; no checkpoint after it may be called good, and
    the command the one line prints (whatever it is) finishes with finite weights."""
    import re
    import subprocess
    import sys

    path = write_recipe(tmp_path, tiny_model_dir, data_dir, learning_rate=1e6, save_steps=1, save_total_limit=10)
    env = {**__import__("os").environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "augcse", "train", str(path)], env=env, capture_output=True,
                            text=True, timeout=600)
    errors = [line for line in result.stderr.splitlines() if line.startswith("augcse train: error:")]
    assert result.returncode == 1 and len(errors) == 1, result.stderr[-3000:]
    stopped = int(re.search(r"the run stopped at step (\d+)", errors[0]).group(1))
    assert f"checkpoint-{stopped - 1} is the last good checkpoint" not in errors[0]
    command = re.search(r"e\.g\. (augcse train \S+ training\.learning_rate=(\S+) --(resume|overwrite))", errors[0])
    assert command is not None and float(command.group(2)) <= 1e-4, errors[0]
    follow = subprocess.run([sys.executable, "-m", "augcse", *command.group(1).split()[1:]], env=env,
                            capture_output=True, text=True, timeout=600)
    assert follow.returncode == 0, follow.stderr[-3000:]
    run_dir = tmp_path / "runs" / "run"
    assert finite(run_dir / "final") and json.loads((run_dir / "summary.json").read_text())["global_step"] == STEPS


def test_a_loss_and_gradient_of_exactly_zero_for_ten_steps_is_reported_once(caplog):
    """Training nothing is said: ten steps of loss 0 and gradient 0 in a row give one warning naming them; a
    non-zero step in between starts the count again, and a tiny but non-zero loss is learning."""
    from types import SimpleNamespace

    from augcse.training.callbacks import NothingLearned

    def feed(callback, steps_and_losses):
        for step, loss in steps_and_losses:
            callback.on_log(None, SimpleNamespace(global_step=step), None,
                            logs={"loss": loss, "grad_norm": 0.0 if loss == 0.0 else 1.0})

    callback = NothingLearned(steps=10)
    with caplog.at_level("WARNING", logger="augcse.training.callbacks"):
        feed(callback, [(2, 0.0), (4, 0.0), (6, 1e-9), (8, 0.0), (10, 0.0), (12, 0.0), (14, 0.0)])
        assert not caplog.records  # steps 7-14 are eight zero steps
        feed(callback, [(16, 0.0), (18, 0.0), (20, 0.0)])
    (record,) = caplog.records
    assert record.getMessage().startswith("steps 7-16: the loss and its gradient are exactly 0")
