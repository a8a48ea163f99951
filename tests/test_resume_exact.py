"""Exact resume of a recipe whose view draws at random while training: ``cards-minilm`` (retrieved negatives
sampled per epoch) killed with SIGKILL mid-training and resumed ends bit-identical to an uninterrupted run,
across an epoch boundary, and with two dataloader workers against none."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

STEPS = 10  # 4 steps per epoch (32 rows, batch 8): the run crosses two epoch boundaries


def command(tmp_path: Path, backbone: Path, corpus: Path, out: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "augcse", "train", "--recipe", "cards-minilm", f"model.backbone={backbone}",
            "model.max_seq_length=16", f"data.corpus={corpus}", "data.limit=32", f"training.max_steps={STEPS}",
            "training.per_device_train_batch_size=8", "training.save_strategy=steps", "training.save_steps=1",
            "training.logging_steps=1", "training.learning_rate=1e-3", "eval.dev=null", "eval.before=null",
            "eval.after=null", f"output_dir={tmp_path / out}", *extra]


ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def weights(run: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(run / "final" / "model.safetensors"))


def losses(run: Path) -> dict[int, float]:
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    return {r["step"]: r["contrastive"] for r in records if "contrastive" in r}


def test_cards_sigkill_then_resume_equals_uninterrupted(tmp_path, tiny_model_dir, data_dir):
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:80]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    subprocess.run(command(tmp_path, tiny_model_dir, corpus, "straight"), env=ENV, check=True, capture_output=True,
                   timeout=600)
    straight = tmp_path / "straight" / "cards-minilm"

    workers = ("training.dataloader_num_workers=2",)
    killed = tmp_path / "killed" / "cards-minilm"
    proc = subprocess.Popen(command(tmp_path, tiny_model_dir, corpus, "killed", *workers), env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    marker = killed / "checkpoint-5" / "loss_state.pt"  # in the second epoch
    deadline = time.time() + 300
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert marker.exists(), "the run never wrote checkpoint-5"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "final").exists(), "killed before the end"
    resumed = subprocess.run(command(tmp_path, tiny_model_dir, corpus, "killed", *workers, "--resume"), env=ENV,
                             capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-4000:]

    a, b = weights(straight), weights(killed)
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=0, atol=0, msg=key)
    assert losses(killed) == pytest.approx(losses(straight), rel=1e-6)
    assert sorted(losses(straight)) == list(range(1, STEPS + 1))


def test_each_epoch_reaches_the_cards_transform(tmp_path, tiny_model_dir, data_dir, monkeypatch):
    """The trainer's epochs reach the view's transform (else every epoch would redraw epoch 0's values)."""
    from augcse.training.recipes.config import load_recipe
    from augcse.training.run import run
    from augcse.text.views.cards import CardsDraws

    seen: list[int] = []
    original = CardsDraws.set_epoch
    monkeypatch.setattr(CardsDraws, "set_epoch", lambda self, epoch: (seen.append(epoch), original(self, epoch)))
    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:80]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    overrides = command(tmp_path, tiny_model_dir, corpus, "epochs")[6:]
    recipe = load_recipe(name="cards-minilm", overrides=[o for o in overrides if "max_steps" not in o and
                                                         "save_steps" not in o] + ["training.max_steps=9"])
    run(recipe, data_dir)
    assert seen == [0, 1, 2]  # 9 steps of 4 per epoch
