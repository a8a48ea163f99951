"""The recipe matrix's slow column: every built-in recipe family (tests/matrix_worker.py's, from the registry) under
``torchrun --nproc_per_node 2 --max-restarts 1 … --auto-resume`` from a fresh folder, rank 1 SIGKILLed once a
checkpoint exists and step 3 is logged: torchrun restarts both ranks, they resume from one checkpoint and end with
the weights of the same job left alone (atol 1e-6, as tests/test_distributed.py's elastic restart). Two torchrun
jobs per family, about a minute and a half each on two shared cores: ``pytest -m slow tests/test_recipe_matrix_kill.py``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from matrix_worker import families, overrides  # noqa: E402
from test_distributed import TORCHRUN, final_weights, first_failure, kill_after_checkpoint, rank_logs  # noqa: E402


pytestmark = pytest.mark.slow
STEPS = 8
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


def start(name: str, root: Path, mode: str, tiny: Path, mlm: Path, corpus: Path) -> subprocess.Popen:
    args = [a for a in overrides(name, str(tiny), str(mlm), corpus, root, mode) if not a.startswith("training.")]
    args += ["training.per_device_train_batch_size=4", f"training.max_steps={STEPS}", "training.save_steps=2",
             "training.logging_steps=1", "training.learning_rate=1e-3"]
    return subprocess.Popen([*TORCHRUN, "--max-restarts", "1", "--log-dir", str(root / f"logs-{mode}"), "--redirects",
                             "3", "-m", "augcse", "train", "--recipe", name, *args, "--auto-resume"], cwd=root, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.parametrize("name", list(families()))
def test_killed_rank_restarts_and_ends_as_left_alone(name, tiny_model_dir, tiny_mlm_dir, data_dir, tmp_path):
    from test_faults import logged_steps

    corpus = tmp_path / "corpus.txt"
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()[:64]
    corpus.write_text("\n".join(lines) + "\n")
    alone = start(name, tmp_path, "alone", tiny_model_dir, tiny_mlm_dir, corpus)
    output, _ = alone.communicate(timeout=600)
    assert alone.returncode == 0, output[-2000:] + first_failure(tmp_path / "logs-alone")
    proc, run = start(name, tmp_path, "killed", tiny_model_dir, tiny_mlm_dir, corpus), tmp_path / "killed"
    killed = kill_after_checkpoint(proc, run, "RANK")
    output, _ = proc.communicate(timeout=600)
    assert killed is not None and killed < STEPS, "the run ended before the kill"
    assert proc.returncode == 0, output[-2000:] + first_failure(tmp_path / "logs-killed")
    resumed = [re.findall(r"resuming from \S*/(checkpoint-\d+)", text)
               for text in rank_logs(tmp_path / "logs-killed", attempt=1).values()]
    assert len(resumed) == 2 and all(len(r) == 1 for r in resumed) and resumed[0] == resumed[1], resumed
    assert logged_steps(run) == list(range(1, STEPS + 1))
    got, want = final_weights(run), final_weights(tmp_path / "alone")
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-6, msg=key)
