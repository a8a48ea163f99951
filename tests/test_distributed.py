"""Two CPU processes (torchrun, gloo) give the loss and gradients of one process with the doubled batch, for
every loss configuration (hard negatives, ``diag`` and ``all`` blocks, the id mask, the symmetric form,
heads, discriminators, VaSCL, the composite), so in-batch keys really are gathered across processes with
gradients, and ``gather_across_devices: false`` really keeps them per process. The same two processes then
run ``augcse train`` with a train-only head, which must stay identical on both."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from dist_worker import CASES, all_cases  # noqa: E402

WORKER = Path(__file__).with_name("dist_worker.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


@pytest.fixture(scope="module")
def torchrun(tiny_model_dir, data_dir, tmp_path_factory) -> Path:
    """One pair of processes: every loss case on half the batch each, then two-step training (quickstart with
    SimCSE's train-only MLP head on the tiny model, dev evaluation every 2 steps)."""
    root = tmp_path_factory.mktemp("dist")
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:64]
    corpus = root / "c.txt"
    corpus.write_text("\n".join(lines) + "\n")
    train = ["--recipe", "quickstart", f"model.backbone={tiny_model_dir}", "model.pooler=cls", "loss.params.head=mlp",
             f"data.corpus={corpus}", "data.limit=64", "training.per_device_train_batch_size=8",
             "training.eval_steps=2", "training.max_steps=4", "training.learning_rate=1e-3", "eval.before=null",
             "eval.after=null", f"output_dir={root / 'runs'}", "--data-dir", str(data_dir)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    logs = root / "logs"
    result = subprocess.run([*TORCHRUN, "--log-dir", str(logs), "--redirects", "3", str(WORKER), str(tiny_model_dir),
                             str(root), *train], cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, first_failure(logs)
    return root


def first_failure(logs: Path) -> str:
    """Each rank's own last lines (torchrun prints the rank that failed last, often not the one that failed first)."""
    tails = [f"--- {log.relative_to(logs)}:\n{log.read_text()[-2500:]}" for log in sorted(logs.rglob("stderr.log"))]
    return "\n".join(tails) or f"no log under {logs}"


@pytest.fixture(scope="module")
def results(torchrun, tiny_model_dir) -> tuple[dict, list[dict]]:
    """The one-process reference (whole batch) and each rank's results."""
    return all_cases(str(tiny_model_dir)), [torch.load(torchrun / f"rank{r}.pt") for r in (0, 1)]


@pytest.mark.parametrize("case", list(CASES))
def test_two_processes_equal_one_with_doubled_batch(results, case):
    reference, ranks = results
    ref = reference[case]
    assert ref["grads"], "the reference computed no gradient"
    assert any(name.startswith("model.") for name in ref["grads"])
    for got in (r[case] for r in ranks):
        assert set(got["components"]) == set(ref["components"])
        for key, value in ref["components"].items():
            assert got["components"][key].item() == pytest.approx(value.item(), rel=1e-10), key
        assert set(got["grads"]) == set(ref["grads"])
        for name, grad in ref["grads"].items():  # float64: equal to rounding
            torch.testing.assert_close(got["grads"][name], grad, rtol=1e-7, atol=1e-12, msg=name)


def test_the_cases_tell_their_settings_apart(results):
    """Gathered and per-process keys, masked and unmasked retrieved keys give different numbers on this batch."""
    reference, _ = results
    for one, other in [("simcse-hard-negatives", "simcse-hard-negatives-no-gather"),
                       ("simcse-symmetric", "simcse-symmetric-no-gather"), ("cards-id-mask", "cards-no-mask")]:
        a, b = (reference[c]["components"]["contrastive"].item() for c in (one, other))
        assert a != pytest.approx(b, rel=1e-3), (one, other)


def test_training_runs_under_torchrun_on_cpu(torchrun):
    """`augcse train` on two CPU processes: real DDP (use_cpu), dev evaluation on rank 0 shared with the other
    rank, one final model, and the train-only head (outside DDP's model) trained alike on both processes."""
    run = torchrun / "runs" / "quickstart"
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "eval_dev_score" in r] == [2, 4]
    assert (run / "final" / "modules.json").is_file()
    heads = [torch.load(torchrun / f"heads{r}.pt") for r in (0, 1)]
    assert set(heads[0]) == {"head.dense.weight", "head.dense.bias"}
    assert heads[0]["head.dense.bias"].abs().sum() > 0  # initialised to zero: it was trained
    for name, weight in heads[0].items():
        torch.testing.assert_close(heads[1][name], weight, rtol=0, atol=0, msg=name)


def test_only_the_first_process_writes_checkpoints(torchrun):
    """Two processes writing one checkpoint's files at once mix them (and the first may load a half-written one as
    the best model): the trainer's own log names each save, and only rank 0 may make one."""
    saves = {}
    for log in (torchrun / "logs").rglob("stderr.log"):
        rank = int(log.parent.name)
        saves[rank] = [line for line in log.read_text().splitlines() if "Saving model checkpoint to" in line]
    assert len(saves[0]) == 2, saves[0]  # steps 2 and 4
    assert saves[1] == [], saves[1]
