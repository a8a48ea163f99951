"""A two-node job simulated on one machine: two torchrun agents on localhost (``--nnodes 2 --nproc-per-node 2``, c10d
rendezvous), each started from its own command line in its own working directory with its own cache directory (as
node-local disks are), the run folder on storage both see. It trains AugCSE (whose augmentation cache each node builds
for itself), a worker of one node is SIGKILLed after the first checkpoint, both agents restart their workers
(``--max-restarts 1``), which resume with ``--auto-resume`` and end with the weights of the uninterrupted one-node
four-process run. Slow (about two minutes on two cores): ``pytest -m slow tests/test_two_nodes.py``."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from test_distributed import final_weights, first_failure, kill_after_checkpoint, rank_logs  # noqa: E402

pytestmark = pytest.mark.slow
STEPS = 8
LAUNCH = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def train_args(tiny_model_dir: Path, corpus: Path, output_dir: Path) -> list[str]:
    return ["-m", "augcse", "train", "--recipe", "augcse-minilm", f"model.backbone={tiny_model_dir}",
            f"data.corpus={corpus}", "data.limit=64", "training.per_device_train_batch_size=4",
            f"training.max_steps={STEPS}", "training.save_steps=2", "training.logging_steps=1",
            "training.learning_rate=1e-3", "eval.dev=null", "eval.before=null", "eval.after=null", "name=run",
            f"output_dir={output_dir}", "data.cache_dir=cache", "--auto-resume"]


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
       # a store per restart attempt (docs/SCALE.md, "Restarts")
       "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


@pytest.fixture(scope="module")
def corpus(data_dir, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()[:64]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def one_node(tiny_model_dir, corpus, tmp_path_factory) -> Path:
    """The reference: one node, four processes, uninterrupted."""
    root = tmp_path_factory.mktemp("one-node")
    result = subprocess.run([*LAUNCH[:-1], "4", "--standalone", "--log-dir", "logs", "--redirects", "3",
                             *train_args(tiny_model_dir, corpus, root / "runs")], cwd=root, env=ENV,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, first_failure(root / "logs")
    return root


def test_two_nodes_killed_on_one_restart_and_end_as_one_node(one_node, tiny_model_dir, corpus, tmp_path):
    from test_faults import logged_steps

    shared = tmp_path / "shared" / "runs"
    port, nodes = free_port(), [tmp_path / "node0", tmp_path / "node1"]
    agents = []
    for node in nodes:  # one command line per node, as srun starts it
        node.mkdir()
        agents.append(subprocess.Popen(
            [*LAUNCH, "--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"localhost:{port}",
             "--rdzv-id", "two-nodes", "--max-restarts", "1", "--log-dir", "logs", "--redirects", "3",
             *train_args(tiny_model_dir, corpus, shared)], cwd=node, env=ENV, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True))
    run = shared / "run"
    killed = kill_after_checkpoint(agents[1], run, "LOCAL_RANK")  # a worker of the second node
    outputs = [a.communicate(timeout=600)[0] for a in agents]
    assert killed is not None and killed < STEPS, "the run ended before the kill"
    for node, agent, output in zip(nodes, agents, outputs):
        assert agent.returncode == 0, output[-3000:] + first_failure(node / "logs")
    # every rank of both nodes resumed, after the restart, from the one checkpoint rank 0 chose
    resumed = [re.findall(r"resuming from \S*/(checkpoint-\d+)", text)
               for node in nodes for text in rank_logs(node / "logs", attempt=1).values()]
    assert len(resumed) == 4 and all(len(found) == 1 for found in resumed), resumed
    assert len({found[0] for found in resumed}) == 1, resumed
    assert logged_steps(run) == list(range(1, STEPS + 1))
    # each node built the augmentation cache on its own disk, under the key one node's run gives it
    keys = [sorted(p.name for p in (node / "cache" / "augment").iterdir() if not p.name.startswith(".")) for node in nodes]
    reference = sorted(p.name for p in (one_node / "cache" / "augment").iterdir() if not p.name.startswith("."))
    assert keys == [reference, reference] and len(reference) == 1
    got, want = final_weights(run), final_weights(one_node / "runs" / "run")
    for key in want:
        torch.testing.assert_close(got[key], want[key], rtol=0, atol=1e-6, msg=key)
