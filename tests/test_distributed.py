"""Two CPU processes (torchrun, gloo) give the loss and gradients of one process with the doubled batch,
so in-batch negatives really are gathered across processes (with gradients)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

WORKER = Path(__file__).with_name("dist_worker.py")


def _run(cmd: list[str], cwd: Path) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize("head", ["none", "mlp"])
def test_two_processes_equal_one_with_doubled_batch(tiny_model_dir, tmp_path, head):
    single, double = tmp_path / "single", tmp_path / "double"
    single.mkdir()
    double.mkdir()
    _run([sys.executable, str(WORKER), str(tiny_model_dir), str(single), head], tmp_path)
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
          str(WORKER), str(tiny_model_dir), str(double), head], tmp_path)
    ref = torch.load(single / "rank0.pt")
    for rank in (0, 1):
        got = torch.load(double / f"rank{rank}.pt")
        assert got["loss"].item() == pytest.approx(ref["loss"].item(), rel=1e-5)
        assert set(got["grads"]) == set(ref["grads"])
        for name, grad in ref["grads"].items():
            torch.testing.assert_close(got["grads"][name], grad, rtol=1e-4, atol=1e-6, msg=name)
