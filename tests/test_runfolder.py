"""A run folder belongs to one run: the lock, the states and what train/--resume/--overwrite do with each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from augcse.training.rundir import RunFolder, RunFolderError, latest_checkpoint, recipe_differences

RECIPE = {"name": "r", "seed": 1, "training": {"learning_rate": 3e-5, "max_steps": 8}, "data": {"limit": 100}}


def checkpoint(run: Path, step: int, complete: bool = True) -> Path:
    """A checkpoint folder with every file a resume reads, each whole (``complete``: with its loss state)."""
    import torch
    from safetensors.torch import save_file

    folder = run / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    save_file({"weight": torch.zeros(2)}, str(folder / "model.safetensors"))
    (folder / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth", *(("loss_state.pt",) if complete else ())):
        torch.save({}, folder / name)
    return folder


def started(run: Path) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    import yaml

    (run / "recipe.yaml").write_text(yaml.safe_dump(RECIPE, sort_keys=False))
    return run


def test_new_folder_is_claimed_and_released_clean(tmp_path):
    folder = RunFolder(tmp_path / "run")
    assert folder.claim(RECIPE) is None
    assert (tmp_path / "run" / ".lock").read_text() == str(__import__("os").getpid())
    folder.release()
    assert not (tmp_path / "run").exists(), "a run refused before writing leaves no folder behind"


def test_second_process_is_refused_naming_the_pid(tmp_path):
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from augcse.training.rundir import RunFolder; f = RunFolder(sys.argv[1]); f.claim({}); "
        "print('held', flush=True); time.sleep(60)"), str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RunFolderError, match=rf"in use by another augcse run \(PID {holder.pid}\)"):
            RunFolder(run).claim({})
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    assert RunFolder(run).claim({}) is None, "a dead holder's lock is gone with its process"


def test_finished_run_needs_overwrite_which_empties_it(tmp_path):
    run = started(tmp_path / "run")
    (run / "summary.json").write_text("{}")
    (run / "log.jsonl").write_text('{"step": 1}\n')
    with pytest.raises(RunFolderError, match="holds a finished run; choose another name= or pass --overwrite"):
        RunFolder(run).claim(RECIPE)
    with pytest.raises(RunFolderError, match="nothing to resume"):
        RunFolder(run).claim(RECIPE, resume=True)
    folder = RunFolder(run)
    assert folder.claim(RECIPE, overwrite=True) is None
    assert sorted(p.name for p in run.iterdir()) == [".augcse-run", ".lock"]  # emptied; still augcse's run
    folder.release()


def test_unfinished_run_resumes_from_newest_complete_checkpoint_only(tmp_path):
    run = started(tmp_path / "run")
    checkpoint(run, 2)
    checkpoint(run, 4)
    checkpoint(run, 6, complete=False)  # killed while saving
    assert latest_checkpoint(run).name == "checkpoint-4"
    with pytest.raises(RunFolderError, match="pass --resume to continue from checkpoint-4"):
        RunFolder(run).claim(RECIPE)
    assert RunFolder(run).claim(RECIPE, resume=True).name == "checkpoint-4"


class Killed(BaseException):
    """Stands for SIGKILL arriving in the middle of a write (no ``except Exception`` may catch it)."""


def test_a_kill_while_the_loss_state_is_written_leaves_the_checkpoint_incomplete(tmp_path, monkeypatch):
    """The loss state is the last file of a checkpoint and its presence marks it complete: it appears whole,
    in one rename, or not at all (a truncated one would be resumed from and fail to load)."""
    from types import SimpleNamespace

    import torch

    from augcse.training.callbacks import LossStateCheckpoint

    run = started(tmp_path / "run")
    checkpoint(run, 2)
    folder = checkpoint(run, 4, complete=False)  # the trainer has written its files; the callback writes the last

    def cut_short(obj, f, *args, **kwargs):
        f.write(b"PK\x03\x04 the first bytes of a zip")
        raise Killed

    monkeypatch.setattr(torch, "save", cut_short)
    callback = LossStateCheckpoint(torch.nn.Linear(2, 2))
    args, state = SimpleNamespace(output_dir=str(run)), SimpleNamespace(global_step=4, is_world_process_zero=True)
    with pytest.raises(Killed):
        callback.on_save(args, state, None)
    assert not (folder / "loss_state.pt").exists()
    assert latest_checkpoint(run).name == "checkpoint-2"


def test_only_incomplete_checkpoints_give_the_same_answer_to_both(tmp_path):
    run = started(tmp_path / "run")
    checkpoint(run, 2, complete=False)
    with pytest.raises(RunFolderError, match="no complete checkpoint to resume from, or pass --overwrite"):
        RunFolder(run).claim(RECIPE)
    with pytest.raises(RunFolderError, match=r"no complete checkpoint in .* \(incomplete: checkpoint-2\); start "
                                             "again with --overwrite"):
        RunFolder(run).claim(RECIPE, resume=True)


def test_resume_refuses_a_changed_recipe_and_names_the_keys(tmp_path):
    run = started(tmp_path / "run")
    checkpoint(run, 2)
    changed = {**RECIPE, "training": {"learning_rate": 1e-5, "max_steps": 9}, "data": {"limit": 50}}
    with pytest.raises(RunFolderError, match=r"data.limit \(100 → 50\); training.max_steps \(8 → 9\); resume") as info:
        RunFolder(run).claim(changed, resume=True)
    assert "\n" not in str(info.value) and "learning_rate" not in str(info.value).split("; resume")[0]
    assert recipe_differences(RECIPE, RECIPE) == []


def test_resume_may_change_the_learning_rate_and_keeps_the_first_recipe(tmp_path):
    import yaml

    run = started(tmp_path / "run")
    checkpoint(run, 2)
    changed = {**RECIPE, "training": {"learning_rate": 1e-6, "max_steps": 8}, "skip_nonfinite_steps": 2}
    folder = RunFolder(run)
    assert folder.claim(changed, resume=True).name == "checkpoint-2"
    folder.release()
    assert folder.changes == {"training.learning_rate": (3e-5, 1e-6), "skip_nonfinite_steps": (None, 2)}
    assert yaml.safe_load((run / "recipe.until-step-2.yaml").read_text()) == RECIPE
    assert yaml.safe_load((run / "recipe.yaml").read_text()) == changed
    assert not (run / ".lock").exists()


def test_resume_and_overwrite_together_and_a_file_in_the_way(tmp_path):
    with pytest.raises(RunFolderError, match="contradict"):
        RunFolder(tmp_path / "run").claim(RECIPE, resume=True, overwrite=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunFolderError, match="exists and is not a folder"):
        RunFolder(tmp_path / "file").claim(RECIPE)
    assert not (tmp_path / "run").exists()


def test_every_cpu_recipe_saves_resumable_checkpoints():
    from augcse.training.recipes.config import builtin_recipes, load_recipe
    from augcse.training.arguments import training_arguments

    cpu = [name for name in builtin_recipes() if name == "quickstart" or name.endswith("-minilm")]
    assert len(cpu) >= 7
    for name in cpu:
        recipe = load_recipe(name=name)
        args = training_arguments(recipe, has_dev=recipe.eval.dev is not None, total_steps=32)
        assert args.save_strategy == "steps" and 1 <= args.save_steps <= 16, (name, args.save_steps)


def test_a_forked_child_does_not_keep_a_killed_runs_lock(tmp_path):
    """A dataloader worker is a forked child: once the run is killed, its lock must not live on in the worker."""
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import os, sys, time; from augcse.training.rundir import RunFolder; f = RunFolder(sys.argv[1]); f.claim({}); "
        "child = os.fork()\n"
        # the child says its PID once os.fork has returned in it, i.e. after the fork hooks ran (a loaded machine
        # may schedule the child late: the parent's line alone raced with them)
        "if child == 0:\n    print(os.getpid(), flush=True); time.sleep(60); os._exit(0)\n"
        "time.sleep(60)"), str(run)], stdout=subprocess.PIPE, text=True)
    child = int(holder.stdout.readline())
    try:
        holder.kill()
        holder.wait()
        os.kill(child, 0)  # the child is still alive
        assert RunFolder(run).claim({}) is None, "the killed run's forked child still holds the lock"
    finally:
        os.kill(child, signal.SIGKILL)


def test_resume_auto_starts_resumes_restarts_and_refuses_as_one_command_line(tmp_path):
    """``--resume auto`` is right for the first start and every restart: a new folder starts, a complete
    checkpoint resumes, a same-recipe run stopped before its first checkpoint starts again; a finished run
    and another recipe's folder are refused."""
    run = tmp_path / "run"
    folder = RunFolder(run)
    assert folder.claim(RECIPE, resume="auto") is None  # the first start
    folder.release()
    started(run)
    checkpoint(run, 4, complete=False)  # killed while saving its first checkpoint
    (run / "log.jsonl").write_text("{}\n")
    assert folder.claim(RECIPE, resume="auto") is None
    assert [p.name for p in run.iterdir() if p.name not in (".lock", ".augcse-run")] == []  # emptied: started again
    folder.release()
    started(run)
    checkpoint(run, 2)
    checkpoint(run, 4, complete=False)
    assert folder.claim(RECIPE, resume="auto") == run / "checkpoint-2"  # a restart continues
    folder.release()
    with pytest.raises(RunFolderError, match="--resume: the recipe differs"):
        folder.claim({**RECIPE, "seed": 2}, resume="auto")
    other = started(tmp_path / "other")
    (other / "log.jsonl").write_text("{}\n")
    with pytest.raises(RunFolderError, match="holds another run with no complete checkpoint"):
        RunFolder(other).claim({**RECIPE, "seed": 2}, resume="auto")
    assert (other / "log.jsonl").is_file()  # another run's folder is never emptied
    (run / "summary.json").write_text("{}")
    with pytest.raises(RunFolderError, match="holds a finished run"):
        folder.claim(RECIPE, resume="auto")
