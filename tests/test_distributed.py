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


def test_training_runs_under_torchrun_on_cpu(tiny_model_dir, tmp_path, data_dir):
    """`torchrun -m augcse.train` on two CPU processes: real DDP (use_cpu), dev evaluation on rank 0
    shared with the other rank, one final model."""
    import json

    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:64]
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n")
    _run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "augcse.train",
          "--recipe", "quickstart", f"model.backbone={tiny_model_dir}", f"data.corpus={corpus}", "data.limit=64",
          "training.per_device_train_batch_size=8", "training.eval_steps=2", "training.max_steps=4",
          "eval.before=null", "eval.after=null", f"output_dir={tmp_path / 'runs'}", "--data-dir", str(data_dir)],
         tmp_path)
    run = tmp_path / "runs" / "quickstart"
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "eval_dev_score" in r] == [2, 4]
    assert (run / "final" / "modules.json").is_file()
