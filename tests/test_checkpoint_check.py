"""A damaged checkpoint is named in one line before a resume reads it, and the intact older one offered; a
checkpoint written by another number of processes is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from augcse.commands.main import main
from conftest import tiny_cls_recipe


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory, tiny_model_dir, data_dir) -> Path:
    """A run with checkpoints at steps 1 and 2, as a stop after step 2's checkpoint leaves it."""
    folder = tmp_path_factory.mktemp("stopped")
    recipe = tiny_cls_recipe(folder, tiny_model_dir, data_dir, "r", {"dev": None, "before": None, "after": None},
                             {"max_steps": 3, "save_steps": 1, "save_total_limit": 3})
    assert main(["train", str(recipe), "keep_checkpoints=true"]) == 0
    run = folder / "runs" / "r"
    for name in ("summary.json", "final", "checkpoint-3"):
        shutil.rmtree(run / name) if (run / name).is_dir() else (run / name).unlink()
    return folder


def moved_recipe(folder: Path) -> Path:
    """The copy's recipe, writing into the copy (the corpus stays where the run read it)."""
    recipe = folder / "r.yaml"
    recipe.write_text(yaml.safe_dump({**yaml.safe_load(recipe.read_text()), "output_dir": str(folder / "runs")}))
    return recipe


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def two_processes(checkpoint: Path) -> None:
    state = checkpoint / "rng_state.pth"
    shutil.copy(state, checkpoint / "rng_state_1.pth")
    state.rename(checkpoint / "rng_state_0.pth")


DAMAGES = {
    "truncated weights": (lambda c: truncate(c / "model.safetensors"), "model.safetensors holds"),
    "garbage loss state": (lambda c: (c / "loss_state.pt").write_bytes(b"\x80garbage" * 10),
                           "loss_state.pt cannot be loaded"),
    "garbage trainer state": (lambda c: (c / "trainer_state.json").write_text("garbage"),
                              "trainer_state.json is not valid JSON"),
    "deleted RNG state": (lambda c: (c / "rng_state.pth").unlink(), "rng_state.pth missing"),
    "truncated optimizer": (lambda c: truncate(c / "optimizer.pt"), "optimizer.pt cannot be read"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_checkpoint_named_and_older_offered(stopped_run, tmp_path, capsys, damage):
    folder = tmp_path / "copy"
    shutil.copytree(stopped_run, folder)
    run = folder / "runs" / "r"
    spoil, said = DAMAGES[damage]
    spoil(run / "checkpoint-2")
    recipe = moved_recipe(folder)
    assert main(["train", str(recipe), "keep_checkpoints=true", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and "checkpoint-2 is damaged" in err[0], err
    assert "checkpoint-1 is intact" in err[0]
    # the offer works: with the damaged one moved away, the run resumes from checkpoint-1 and finishes
    (run / "checkpoint-2").rename(run / "damaged-checkpoint-2")
    assert main(["train", str(recipe), "keep_checkpoints=true", "--resume"]) == 0
    assert (run / "summary.json").is_file()


def test_resume_with_another_process_count_refused(stopped_run, tmp_path, capsys):
    folder = tmp_path / "copy"
    shutil.copytree(stopped_run, folder)
    two_processes(folder / "runs" / "r" / "checkpoint-2")
    recipe = moved_recipe(folder)
    assert main(["train", str(recipe), "keep_checkpoints=true", "--resume"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoint-2 was written by 2 process(es) and this run has 1" in err[0], err
