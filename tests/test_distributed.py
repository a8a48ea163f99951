"""Two CPU processes (torchrun, gloo) give the loss and gradients of one process with the doubled batch, for
every loss configuration (hard negatives, ``diag`` and ``all`` blocks, the id mask, the symmetric form,
heads, discriminators, VaSCL, the composite), so in-batch keys really are gathered across processes with
gradients, and ``gather_across_devices: false`` really keeps them per process. The same two processes then
run ``augcse train`` with a train-only head, which must stay identical on both."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from dist_worker import CASES, all_cases  # noqa: E402
from augcse.training.rundir import latest_checkpoint  # noqa: E402

WORKER = Path(__file__).with_name("dist_worker.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


@pytest.fixture(scope="module")
def torchrun(tiny_model_dir, tiny_mlm_dir, data_dir, tmp_path_factory) -> Path:
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
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "DIST_GENERATOR": str(tiny_mlm_dir)}
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
def results(torchrun, tiny_model_dir, tiny_mlm_dir) -> tuple[dict, list[dict]]:
    """The one-process reference (whole batch) and each rank's results."""
    ranks = [torch.load(torchrun / f"rank{r}.pt") for r in (0, 1)]
    return all_cases(str(tiny_model_dir), str(tiny_mlm_dir)), ranks


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


# --------------------------------------------------------------------------- restarts and faults of one rank

def fault_recipe(root: Path, tiny_model_dir: Path, data_dir: Path, out: str) -> Path:
    """tests/test_faults.py's tiny SimCSE recipe (10 steps of 8 rows per process, a checkpoint every 2 steps)."""
    from test_faults import write_recipe

    return write_recipe(root, tiny_model_dir, data_dir, out)


def torchrun_train(root: Path, recipe: Path, *extra: str, launcher: tuple[str, ...] = (), worker: bool = False,
                   fault: str | None = None) -> tuple[subprocess.Popen, Path]:
    """Start ``torchrun … -m augcse train RECIPE EXTRA…`` (or through dist_worker.py, which can inject a fault
    and records what each rank writes); each rank's output goes to its own log under root/logs."""
    logs = root / "logs"
    # torch 2.13's torchrun keeps one store across restarts by default, and a restarted gloo group can read the
    # first attempt's addresses from it (pytorch/pytorch#135712): a store per attempt, as docs/SCALE.md says
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    if "--max-restarts" in launcher:
        env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    env.pop("DIST_FAULT", None)
    if fault:
        env["DIST_FAULT"] = fault
    target = [str(WORKER), "-", str(root)] if worker else ["-m", "augcse"]
    args = [*TORCHRUN, *launcher, "--log-dir", str(logs), "--redirects", "3", *target,
            *([] if worker else ["train"]), str(recipe), *extra]
    return subprocess.Popen(args, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True), logs


def rank_logs(logs: Path, attempt: int | None = None) -> dict[int, str]:
    """Each rank's stderr (the last attempt's, or ``attempt``'s)."""
    found = sorted(logs.rglob("stderr.log"), key=lambda p: (p.parent.parent.name, p.parent.name))
    if attempt is not None:
        found = [p for p in found if p.parent.parent.name == f"attempt_{attempt}"]
    return {int(p.parent.name): p.read_text() for p in found}


def final_weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run / "final" / "model.safetensors"))


def kill_after_checkpoint(agent: subprocess.Popen, run: Path, which: str, seconds: float = 400) -> int | None:
    """SIGKILL the first attempt's worker of torchrun ``agent`` whose ``which`` (RANK, LOCAL_RANK) is 1, once ``run``
    holds a complete checkpoint and step 3 is logged; returns the last step logged then (None: it ended first)."""
    import psutil
    from test_faults import logged_steps

    deadline = time.time() + seconds
    while agent.poll() is None and time.time() < deadline:
        if latest_checkpoint(run) is not None and max(logged_steps(run), default=0) >= 3:
            workers = [p for p in psutil.Process(agent.pid).children(recursive=True)
                       if p.environ().get(which) == "1" and p.environ().get("TORCHELASTIC_RESTART_COUNT") == "0"]
            if workers:
                killed = max(logged_steps(run))
                workers[0].send_signal(signal.SIGKILL)
                return killed
        time.sleep(0.05)
    return None


@pytest.fixture(scope="module")
def uninterrupted(tiny_model_dir, data_dir, tmp_path_factory) -> Path:
    """Two processes, ten steps, nothing in the way (the run folder)."""
    root = tmp_path_factory.mktemp("straight")
    proc, logs = torchrun_train(root, fault_recipe(root, tiny_model_dir, data_dir, "runs"), worker=True)
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output[-3000:] + first_failure(logs)
    return root


def test_an_elastic_restart_resumes_and_ends_with_the_uninterrupted_weights(uninterrupted, tiny_model_dir, data_dir,
                                                                            tmp_path):
    """torchrun --max-restarts 1 with --auto-resume: rank 1 SIGKILLed after a checkpoint, torchrun restarts both
    ranks, they resume from the one checkpoint rank 0 chose and finish with the weights of the run that was not
    interrupted (atol 1e-6 as tests/test_faults.py's kills: a resume restores weights, optimizer, schedule and
    every rank's RNG, so only the last float bits may differ) and each step logged once."""
    from test_faults import logged_steps

    recipe = fault_recipe(tmp_path, tiny_model_dir, data_dir, "runs")
    run = tmp_path / "runs" / "run"
    proc, logs = torchrun_train(tmp_path, recipe, "--auto-resume", launcher=("--max-restarts", "1"))
    killed = kill_after_checkpoint(proc, run, "RANK")
    output, _ = proc.communicate(timeout=600)
    assert killed is not None and killed < 10, "the run ended before the kill"
    assert proc.returncode == 0, output[-3000:] + first_failure(logs)
    second = rank_logs(logs, attempt=1)
    resumed = {r: re.findall(r"resuming from \S*/(checkpoint-\d+)", text) for r, text in second.items()}
    assert len(resumed[0]) == 1 and resumed[1] == resumed[0], resumed  # rank 0's choice, on both ranks
    got, reference = final_weights(run), final_weights(uninterrupted / "runs" / "run")
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], rtol=0, atol=1e-6, msg=key)
    assert logged_steps(run) == list(range(1, 11))


def test_only_rank_0_writes_the_run_files(uninterrupted):
    """The log, the records, the checkpoints' files and final/ with its card come from rank 0; rank 1 writes only
    its own RNG state into each checkpoint (the trainer's, needed to resume it exactly), making the folder if it is first,
    and its own loss state where the loss holds one (a queue, running statistics)."""
    run = uninterrupted / "runs" / "run"
    written = {r: json.loads((uninterrupted / f"writes{r}.json").read_text()) for r in (0, 1)}
    inside = {r: {Path(p).relative_to(run).as_posix() for p in paths if Path(p).is_relative_to(run)}
              for r, paths in written.items()}
    assert {"log.jsonl", "summary.json", "final/README.md"} <= inside[0]
    assert inside[1] and all(re.fullmatch(r"checkpoint-\d+(/rng_state_1\.pth|/loss_state_1\.pt)?", p) for p in inside[1]), inside[1]


@pytest.mark.parametrize("fault", ["nan:1:3", "enospc:0:4", "raise:1:3"])
def test_a_fault_on_one_rank_ends_every_rank_with_one_line(fault, tiny_model_dir, data_dir, tmp_path):
    """A NaN loss on rank 1, a full disk while rank 0 saves checkpoint-4, an exception on rank 1: both ranks end
    within 30 s of the fault (gloo's own timeout is 30 min) with the same one line, naming the rank, what
    happened and the checkpoint to resume from, and the job exits non-zero."""
    recipe = fault_recipe(tmp_path, tiny_model_dir, data_dir, "runs")
    proc, logs = torchrun_train(tmp_path, recipe, worker=True, fault=fault)
    output, _ = proc.communicate(timeout=600)
    ended = time.time()
    assert proc.returncode != 0, output[-3000:]
    seconds = ended - float((tmp_path / "fault.time").read_text())
    lines = {r: [line for line in text.splitlines() if line.startswith("augcse train: error:")]
             for r, text in rank_logs(logs).items()}
    print(f"{fault}: every rank ended {seconds:.1f} s after the fault: {lines[0]}")
    assert len(lines[0]) == 1 and lines[1] == lines[0], lines
    line = lines[0][0]
    kind, rank, _ = fault.split(":")
    assert line.startswith(f"augcse train: error: rank {rank}: "), line
    assert {"nan": "is nan", "enospc": "No space left on device", "raise": "injected fault at step 3"}[kind] in line
    assert "checkpoint-2" in line, line
    assert seconds < 30, seconds
