"""Every built-in recipe family under ``torchrun --nproc_per_node 2`` (CPU, gloo), generated from the recipe registry:
a new recipe with a new loss or views is in the matrix without anyone adding it. One torchrun job trains every
family in turn (tests/matrix_worker.py); per family, from fresh folders: four steps straight; stopped after step 2
(SIGTERM's path: a checkpoint, then exit) and resumed with ``--resume``, ending with the straight run's weights;
two steps with gradient caching where the loss takes it. One process per recipe is tests/test_recipes_methods.py;
a SIGKILLed rank restarted by torchrun with ``--auto-resume`` is tests/test_distributed.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from matrix_worker import STEPS, STOP_AT, families  # noqa: E402
from test_distributed import TORCHRUN, final_weights, first_failure  # noqa: E402

from augcse.training.recipes.config import builtin_recipes, load_recipe  # noqa: E402

WORKER = Path(__file__).with_name("matrix_worker.py")
FAMILIES = families()


@pytest.fixture(scope="module")
def matrix(tiny_model_dir, tiny_mlm_dir, data_dir, tmp_path_factory) -> tuple[Path, dict, str]:
    """The job's folder, rank 0's record of every recipe and mode, and the ranks' log tails (for a failure)."""
    root = tmp_path_factory.mktemp("matrix")
    corpus = root / "corpus.txt"
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()[:64]
    corpus.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    logs = root / "logs"
    result = subprocess.run([*TORCHRUN, "--log-dir", str(logs), "--redirects", "3", str(WORKER), str(tiny_model_dir),
                             str(tiny_mlm_dir), str(corpus), str(root)], cwd=root, env=env, capture_output=True,
                            text=True, timeout=600)
    records = [json.loads(p.read_text()) if p.is_file() else {} for p in (root / "matrix0.json", root / "matrix1.json")]
    untimed = [{name: {mode: {k: v for k, v in got.items() if k != "seconds"} for mode, got in modes.items()}
                for name, modes in record.items()} for record in records]
    assert untimed[0] == untimed[1] or result.returncode != 0, "the two ranks disagree on what happened"
    failure = "" if result.returncode == 0 else first_failure(logs)
    return root, records[0], failure


def modes(matrix, name: str) -> dict:
    root, record, failure = matrix
    assert name in record, f"{name} was not reached: {failure}"
    return record[name]


def test_one_recipe_per_family_from_the_registry():
    """Every built-in recipe's family (loss, views) is in the matrix, through a CPU recipe where it has one."""
    assert len(FAMILIES) >= 14
    assert len(set(FAMILIES.values())) == len(FAMILIES)  # one recipe per family
    for name in builtin_recipes():
        recipe = load_recipe(name=name)
        assert (recipe.loss.name, tuple(v["name"] for v in recipe.data.views)) in FAMILIES.values(), name
    assert {"augcse-minilm", "sda-minilm", "cards-minilm", "esimcse-minilm", "declutr-minilm"} <= set(FAMILIES)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_trains_on_two_processes_from_a_fresh_folder(matrix, name):
    straight = modes(matrix, name)["straight"]
    assert straight["outcome"] == "finished" and straight["steps"] == STEPS, straight
    assert (matrix[0] / name / "straight" / "final" / "model.safetensors").is_file()
    # the process count comes from the environment (torchrun's WORLD_SIZE): the record says what ran
    summary = json.loads((matrix[0] / name / "straight" / "summary.json").read_text())
    assert (summary["processes"], summary["global_batch"], summary["seed"]) == (2, 2 * 4, 42), summary


@pytest.mark.parametrize("name", list(FAMILIES))
def test_stopped_and_resumed_ends_with_the_straight_weights(matrix, name):
    """Stopped after step 2 and resumed on two processes: weights, optimizer, schedule, every rank's RNG and the
    views' draws restored, so the final weights are the straight run's (atol 1e-6: as tests/test_distributed.py)."""
    record = modes(matrix, name)
    assert record["stop"]["outcome"] == "stopped" and record["stop"]["steps"] == STOP_AT, record["stop"]
    assert record["resume"]["outcome"] == "finished" and record["resume"]["steps"] == STEPS, record["resume"]
    got, want = (final_weights(matrix[0] / name / mode) for mode in ("stopped", "straight"))
    assert set(got) == set(want)
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-6, msg=key)


@pytest.mark.parametrize("name", list(FAMILIES))
def test_gradient_caching_trains_on_two_processes_where_the_loss_takes_it(matrix, name):
    cached = modes(matrix, name)["cached"]
    if cached["outcome"].startswith("not applicable"):
        assert "mini_batch_size" in cached["outcome"], cached  # the loss's own refusal, not another error
        return
    assert cached["outcome"] == "finished" and cached["steps"] == 2, cached
