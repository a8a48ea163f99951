"""``training.report_to: [tensorboard]`` writes events TensorBoard's own reader loads; the run's card is complete."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest.importorskip("tensorboard", reason="the tensorboard extra: pip install augcse[tensorboard]")


def test_tiny_run_logs_to_tensorboard_and_writes_a_complete_card(tmp_path: Path, tiny_model_dir: Path,
                                                                 data_dir: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from augcse.training.recipes.config import load_recipe
    from augcse.training.run import run

    lines = (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()[:40]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n")
    recipe_file = tmp_path / "r.yaml"
    recipe_file.write_text(yaml.safe_dump({
        "name": "tb", "seed": 3, "output_dir": str(tmp_path / "runs"),
        "model": {"backbone": str(tiny_model_dir), "pooler": "cls", "max_seq_length": 16},
        "data": {"corpus": str(corpus), "limit": 32},
        "loss": {"name": "simcse", "params": {"temperature": 0.05, "head": "mlp"}},  # SimCSE's CLS head
        "eval": {"dev": None, "before": None, "after": "STSBenchmark-original"},
        "training": {"per_device_train_batch_size": 8, "max_steps": 4, "logging_steps": 1,
                     "report_to": ["tensorboard"], "save_strategy": "no"},
    }))
    summary = run(load_recipe(str(recipe_file), None, []), data_dir)
    assert summary["global_step"] == 4

    events = sorted((tmp_path / "runs" / "tb").rglob("events.out.tfevents.*"))
    assert events, "no TensorBoard event file written"
    accumulator = EventAccumulator(str(events[0].parent))
    accumulator.Reload()
    tags = accumulator.Tags()["scalars"]
    assert "train/loss" in tags, tags
    assert [event.step for event in accumulator.Scalars("train/loss")] == [1, 2, 3, 4]

    card = (tmp_path / "runs" / "tb" / "final" / "README.md").read_text()
    assert "corpus.txt" in card and "STSBenchmark-original" in card and "spearman_cosine" in card
    assert "the last step (no dev task selected a checkpoint)" in card
