"""Fault injection: training killed at random points, a full disk, a corpus of garbage, two runs at once.

Whatever happens, resuming ends with the model an uninterrupted run gives, and the log has each step once.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from augcse.training.recipes.config import load_recipe
from conftest import mounted_tmpfs
from augcse.training.rundir import latest_checkpoint

STEPS = 10


def write_recipe(tmp_path: Path, backbone: Path, data_dir: Path, out: str, **training) -> Path:
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:100]
    (tmp_path / "corpus.txt").write_text("\n".join(lines) + "\n")
    values = {
        "name": "run", "seed": 3, "output_dir": str(tmp_path / out),
        "model": {"backbone": str(backbone), "pooler": "cls", "max_seq_length": 16},
        "data": {"corpus": str(tmp_path / "corpus.txt"), "limit": 96},
        "loss": {"name": "simcse", "params": {"head": "mlp"}},  # SimCSE's CLS head, named (the pooler does not pick it)
        "eval": {"dev": None, "before": None, "after": None},
        "training": {"per_device_train_batch_size": 8, "max_steps": STEPS, "save_steps": 2, "logging_steps": 1,
                     "learning_rate": 1e-3, **training},
    }
    path = tmp_path / f"{out}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def command(recipe: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "augcse", "train", str(recipe), *extra]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run / "final" / "model.safetensors"))


def logged_steps(run: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run / "log.jsonl").read_text().splitlines() if '"loss"' in line]


def kill_at_step(recipe: Path, run: Path, step: int, extra: tuple[str, ...]) -> bool:
    """Start training, SIGKILL it once the log reaches ``step``; True when it finished first."""
    proc = subprocess.Popen(command(recipe, *extra), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while proc.poll() is None and time.time() < deadline:
        log = run / "log.jsonl"
        if log.is_file() and any(s >= step for s in logged_steps(run)):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    return (run / "summary.json").is_file()


@pytest.fixture(autouse=True)
def same_threads_as_the_reference():
    """The reference trains in a subprocess with one thread (``ENV``); a test that trains in this process and
    compares bit for bit with it trains with one thread too, since a reduction's order follows the thread
    count and so would the last bits of the weights on some CPUs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, tiny_model_dir, data_dir) -> dict[str, torch.Tensor]:
    tmp_path = tmp_path_factory.mktemp("reference")
    recipe = write_recipe(tmp_path, tiny_model_dir, data_dir, "straight")
    subprocess.run(command(recipe), env=ENV, check=True, capture_output=True, timeout=600)
    return weights(tmp_path / "straight" / "run")


@pytest.mark.parametrize("seed", [0, 1, *(pytest.param(s, marks=pytest.mark.slow) for s in range(2, 8))])
def test_sigkill_at_random_points_then_resume_equals_uninterrupted(seed, reference, tmp_path, tiny_model_dir,
                                                                   data_dir):
    recipe = write_recipe(tmp_path, tiny_model_dir, data_dir, "killed")
    run = tmp_path / "killed" / "run"
    rng = random.Random(seed)
    kills = 0
    finished = False
    while not finished:
        if (run / "recipe.yaml").is_file() and latest_checkpoint(run) is None:
            extra = ("--overwrite",)  # killed before the first complete checkpoint: start again, as the error says
        else:
            extra = ("--resume",) if run.exists() and any(run.iterdir()) else ()
        if kills < 3:
            done_steps = max(logged_steps(run), default=0) if (run / "log.jsonl").is_file() else 0
            # killed after its last step but before it finished (saving, evaluating): kill again at once
            finished = kill_at_step(recipe, run, rng.randint(min(done_steps + 1, STEPS), STEPS), extra)
            kills += not finished
        else:
            subprocess.run(command(recipe, *extra), env=ENV, check=True, capture_output=True, timeout=600)
            finished = True
    got = weights(run)
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], rtol=0, atol=1e-6, msg=key)
    assert logged_steps(run) == list(range(1, STEPS + 1)), "each step logged once after the resumes"
    print(f"seed {seed}: {kills} kills, final model identical")


def test_one_command_line_with_auto_resume_survives_every_restart(reference, tmp_path, tiny_model_dir, data_dir):
    """What a scheduler does (torchrun --max-restarts, a SLURM requeue): run the very same command again after
    each kill, at a random step, once before the first complete checkpoint too; the model equals the
    uninterrupted run's and each step is logged once."""
    recipe = write_recipe(tmp_path, tiny_model_dir, data_dir, "requeued")
    run = tmp_path / "requeued" / "run"
    rng = random.Random(5)
    assert not kill_at_step(recipe, run, 1, ("--auto-resume",))  # killed before its first checkpoint
    for _ in range(2):
        done_steps = max(logged_steps(run), default=0) if (run / "log.jsonl").is_file() else 0
        if kill_at_step(recipe, run, rng.randint(min(done_steps + 1, STEPS), STEPS), ("--auto-resume",)):
            break
    subprocess.run(command(recipe, "--auto-resume"), env=ENV, check=False, capture_output=True, timeout=600)
    got = weights(run)
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], rtol=0, atol=1e-6, msg=key)
    assert logged_steps(run) == list(range(1, STEPS + 1))
    again = subprocess.run(command(recipe, "--auto-resume"), env=ENV, capture_output=True, text=True, timeout=600)
    assert again.returncode == 2 and "holds a finished run" in again.stderr


def test_disk_full_is_one_line_and_the_last_checkpoint_resumes(reference, tmp_path, tiny_model_dir, data_dir,
                                                                monkeypatch):
    from augcse.training.run import RunError, run

    recipe = load_recipe(write_recipe(tmp_path, tiny_model_dir, data_dir, "full"))
    real_save = torch.save

    def full_disk(obj, f, *args, **kwargs):
        if "checkpoint-6" in str(f):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(RunError) as info:
        run(recipe)
    message = str(info.value)
    assert "\n" not in message and "No space left on device" in message and "MiB needed" in message
    assert "checkpoint-4, is still resumable" in message
    monkeypatch.setattr(torch, "save", real_save)
    run(recipe, resume=True)
    got = weights(tmp_path / "full" / "run")
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], rtol=0, atol=1e-6, msg=key)


def test_a_corpus_of_garbage_is_refused_and_skips_are_warned(tmp_path, tiny_model_dir, data_dir, caplog):
    from augcse.training.recipes.config import RecipeError
    from augcse.training.run import run

    recipe_path = write_recipe(tmp_path, tiny_model_dir, data_dir, "garbage")
    (tmp_path / "corpus.txt").write_bytes(b"one usable line here\n" + b"\n" * 300 + b"\xff\xfe\x00bad\n" * 200)
    with pytest.raises(RecipeError, match=r"leaves 1 usable rows .* fewer than one batch of 8"):
        run(load_recipe(recipe_path))
    assert not (tmp_path / "garbage").exists() or not any((tmp_path / "garbage").rglob("*"))
    latin = "Le café était très bon, à côté de la gare.\n".encode("latin-1") * 20 + b"plain ascii line\n" * 40
    (tmp_path / "corpus.txt").write_bytes(latin)
    from augcse.text.corpus import read_corpus

    with caplog.at_level(logging.WARNING, logger="augcse.text.corpus"):
        kept, stats = read_corpus(tmp_path / "corpus.txt")
    assert stats.skipped["undecodable"] == 20 and len(kept) == 40
    assert any(r.levelno == logging.WARNING and "undecodable 20" in r.getMessage() for r in caplog.records)


def test_two_runs_with_one_name_cannot_share_the_folder(tmp_path, tiny_model_dir, data_dir):
    recipe = write_recipe(tmp_path, tiny_model_dir, data_dir, "twice", max_steps=100_000, save_steps=100_000)
    run = tmp_path / "twice" / "run"
    first = subprocess.Popen(command(recipe), env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 300
        while not (run / "recipe.yaml").is_file() and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
        second = subprocess.run(command(recipe), env=ENV, capture_output=True, text=True, timeout=300)
        assert second.returncode == 2
        assert second.stderr.strip().splitlines() == [
            f"augcse train: error: {run} is in use by another augcse run (PID {first.pid}); wait for it to finish "
            "or choose another name="]
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert not (run / "summary.json").exists(), "the second run wrote nothing into the first one's folder"


def test_a_half_written_loss_state_is_not_left_looking_complete(reference, tmp_path, tiny_model_dir, data_dir,
                                                                monkeypatch):
    """The save of checkpoint-6 fails on its last file, after trainer_state.json: the partial folder goes."""
    from augcse.training.rundir import LOSS_STATE
    from augcse.training.run import RunError, run

    recipe = load_recipe(write_recipe(tmp_path, tiny_model_dir, data_dir, "half"))
    real_save = torch.save

    def full_disk(obj, f, *args, **kwargs):
        name = str(getattr(f, "name", f))  # the loss state is written through a handle on a temporary file
        if "checkpoint-6/" in name and LOSS_STATE in name:
            f.write(b"PK\x03\x04 half a zip")
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1472 vs 1360")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(RunError, match=r"^could not write a checkpoint in .* \(a write was cut short: the disk is "
                                       r"probably full\): about \d+ MiB "
                                       r"needed, \d+ MiB free; the last complete checkpoint, checkpoint-4, is still "
                                       r"resumable: free space and run again with --resume$"):
        run(recipe)
    run_dir = tmp_path / "half" / "run"
    assert not (run_dir / "checkpoint-6").exists() and latest_checkpoint(run_dir).name == "checkpoint-4"
    monkeypatch.setattr(torch, "save", real_save)
    run(recipe, resume=True)
    got = weights(run_dir)
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], rtol=0, atol=1e-6, msg=key)


def test_a_failed_final_save_leaves_no_final_and_resume_finishes(reference, tmp_path, tiny_model_dir, data_dir,
                                                                 monkeypatch):
    import transformers.modeling_utils

    from augcse.training.run import RunError, run

    recipe = load_recipe(write_recipe(tmp_path, tiny_model_dir, data_dir, "last"))
    real_save = transformers.modeling_utils.safe_save_file

    def full_disk(tensors, filename, *args, **kwargs):
        if "/run/final/" in str(filename):
            raise OSError(errno.ENOSPC, "No space left on device", str(filename))
        return real_save(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full_disk)
    with pytest.raises(RunError, match=r"^could not write final/ in .* \(No space left on device\): about \d+ MiB "
                                       r"needed, .*checkpoint-10, is still resumable"):
        run(recipe)
    run_dir = tmp_path / "last" / "run"
    assert not (run_dir / "final").exists() and not (run_dir / "summary.json").exists()
    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", real_save)
    summary = run(recipe, resume=True)
    assert summary["global_step"] == STEPS
    got = weights(run_dir)
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], rtol=0, atol=1e-6, msg=key)
    assert not list(run_dir.glob("checkpoint-*")) and not (run_dir / ".lock").exists(), "a finished run is tidy"


@pytest.fixture()
def small_disk(tmp_path):
    """A 16 MiB filesystem: the tiny model's first checkpoint (about 12 MiB) fits, the second does not."""
    disk = tmp_path / "disk"
    if not mounted_tmpfs(disk, "16m"):
        pytest.skip("mounting a tmpfs is not allowed here; the injected-error tests above cover the write path")
    yield disk
    subprocess.run(["umount", str(disk)], check=False)


def test_a_really_full_disk_is_one_line_and_resumes_after_freeing_space(small_disk, tmp_path, tiny_model_dir,
                                                                        data_dir):
    recipe = write_recipe(tmp_path, tiny_model_dir, data_dir, "unused", max_steps=6, save_steps=2)
    values = yaml.safe_load(recipe.read_text())
    values["output_dir"] = str(small_disk)
    recipe.write_text(yaml.safe_dump(values))
    result = subprocess.run(command(recipe), env=ENV, capture_output=True, text=True, timeout=600)
    errors = [line for line in result.stderr.splitlines() if line.startswith("augcse train: error:")]
    assert result.returncode == 1 and len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "No space left on device" in errors[0] and "MiB free" in errors[0]
    assert "checkpoint-2, is still resumable: free space and run again with --resume" in errors[0]
    run_dir = small_disk / "run"
    assert [p.name for p in run_dir.glob("checkpoint-*")] == ["checkpoint-2"], "no partial checkpoint is left"
    free = tmp_path / "roomy"
    subprocess.run(["cp", "-a", str(small_disk), str(free)], check=True)
    values["output_dir"] = str(free)
    recipe.write_text(yaml.safe_dump(values))
    moved = free / "run" / "recipe.yaml"  # the run moved to a disk with room: its stored recipe names the old place
    moved.write_text(moved.read_text().replace(str(small_disk), str(free)))
    subprocess.run(command(recipe, "--resume"), env=ENV, check=True, capture_output=True, timeout=600)
    assert (free / "run" / "final" / "model.safetensors").is_file()


def test_an_unwritable_output_folder_is_refused_before_anything_loads(tmp_path, tiny_model_dir, data_dir,
                                                                      read_only_dir, monkeypatch, capsys):
    import augcse.training.build
    from augcse.commands import main as cli

    recipe = write_recipe(tmp_path, tiny_model_dir, data_dir, "unused")
    values = yaml.safe_load(recipe.read_text())
    values["output_dir"] = str(read_only_dir / "runs")
    recipe.write_text(yaml.safe_dump(values))
    monkeypatch.setattr(augcse.training.build, "build_model", lambda recipe: pytest.fail("the model was loaded"))
    assert cli.main(["train", str(recipe)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"augcse train: error: recipe key 'output_dir': {read_only_dir / 'runs'}: cannot write there "
        "(Read-only file system); choose a writable folder"]


def test_too_little_free_space_is_warned_before_training(tmp_path, monkeypatch, caplog):
    from types import SimpleNamespace

    import augcse.training.recovery

    model = torch.nn.Linear(1024, 256)  # 1 MiB of float32 weights: a checkpoint of about 3 MiB with Adam's moments
    setup = SimpleNamespace(model=model, args=SimpleNamespace(save_total_limit=2))
    recipe = SimpleNamespace(run_dir=tmp_path / "run")
    monkeypatch.setattr(augcse.training.recovery, "free_bytes", lambda path: 5 * 2**20)
    with caplog.at_level(logging.WARNING, logger="augcse.training.recovery"):
        augcse.training.recovery.warn_if_short_of_space(recipe, setup)
    assert [r.getMessage() for r in caplog.records] == [
        f"only 5 MiB free in {tmp_path / 'run'}; this run needs about 10 MiB (3 checkpoints of 3 MiB and final/): "
        "free space now, or it will stop when a save fails"]
    caplog.clear()
    monkeypatch.setattr(augcse.training.recovery, "free_bytes", lambda path: 11 * 2**20)
    augcse.training.recovery.warn_if_short_of_space(recipe, setup)
    assert not caplog.records


def test_a_full_disk_while_logging_names_the_log(tmp_path, tiny_model_dir, data_dir, monkeypatch):
    from augcse.training.callbacks import JsonlLogger
    from augcse.training.run import RunError, run

    recipe = load_recipe(write_recipe(tmp_path, tiny_model_dir, data_dir, "log", max_steps=4))
    real_log = JsonlLogger.on_log

    def full_disk(self, args, state, control, logs=None, **kwargs):
        if state.global_step == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        return real_log(self, args, state, control, logs=logs, **kwargs)

    monkeypatch.setattr(JsonlLogger, "on_log", full_disk)
    with pytest.raises(RunError, match=r"^could not write log.jsonl in .* \(No space left on device\): .* the last "
                                       r"complete checkpoint, checkpoint-2, is still resumable"):
        run(recipe)


def test_reproduce_into_a_read_only_folder_is_refused_before_any_run(read_only_dir, capsys, monkeypatch):
    import augcse.studies.reproduce
    from augcse.commands import main as cli

    monkeypatch.setattr(augcse.studies.reproduce, "execute", lambda *a, **k: pytest.fail("a run was started"))
    assert cli.main(["reproduce", "simcse", "--rows", augcse.studies.reproduce.papers()["simcse"].rows[0].name,
                     "--output", str(read_only_dir / "out")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"augcse reproduce: error: --output {read_only_dir / 'out' / 'simcse'}: cannot write there (Read-only file system); "
        "choose a writable folder"]


def test_an_edited_recipe_yaml_is_refused_on_resume_and_the_checkpoints_own_recipe_finishes(
        reference, tmp_path, tiny_model_dir, data_dir):
    """A resume is held to the recipe stored inside the checkpoint, not to the run folder's editable copy."""
    recipe = write_recipe(tmp_path, tiny_model_dir, data_dir, "edit")
    run = tmp_path / "edit" / "run"
    assert not kill_at_step(recipe, run, 5, ())
    last = latest_checkpoint(run)
    assert last is not None and (last / "recipe.yaml").is_file()
    edited = yaml.safe_load((run / "recipe.yaml").read_text())
    edited["loss"]["params"]["temperature"] = 0.5
    edited["training"]["per_device_train_batch_size"] = 4
    (run / "recipe.yaml").write_text(yaml.safe_dump(edited, sort_keys=False))
    result = subprocess.run(command(run / "recipe.yaml", "--resume"), env=ENV, capture_output=True, text=True,
                            timeout=600)
    errors = [line for line in result.stderr.splitlines() if line.startswith("augcse train: error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr[-2000:]
    assert errors[0] == (f"augcse train: error: --resume: the recipe differs from the one {last.name} was trained "
                         "with: loss.params.temperature (0.05 → 0.5); training.per_device_train_batch_size (8 → 4); "
                         f"resume with that recipe (augcse train {last / 'recipe.yaml'} --resume) or start a new "
                         "run (a resume may change only training.learning_rate, training.max_grad_norm, "
                         "skip_nonfinite_steps, keep_checkpoints)")
    subprocess.run(command(last / "recipe.yaml", "--resume"), env=ENV, check=True, capture_output=True, timeout=600)
    got = weights(run)
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], rtol=0, atol=1e-6, msg=key)
