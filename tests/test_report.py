"""Run reports and comparisons on fixture run directories (the layout training writes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from augcse.cli import main
from augcse.report.compare import build_comparison, group_key, group_runs
from augcse.report.document import Document, Image, Table
from augcse.report.plots import (
    analysis_scatter,
    confusion_matrix_plot,
    curve_series,
    embedding_projection,
    training_curves,
)
from augcse.report.run_report import flatten_scores, load_run


def make_run(root: Path, name: str, seed: int, after: dict, lr: float = 3e-5, records: bool = True) -> Path:
    run = root / f"{name}-s{seed}"
    run.mkdir(parents=True)
    recipe = {"name": f"{name}-s{seed}", "seed": seed, "model": {"name": "tiny"},
              "training": {"learning_rate": lr, "batch_size": 64}, "data": {"seed": seed}}
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    if records:
        lines = []
        for step in range(10, 110, 10):
            lines.append({"step": step, "epoch": step / 100, "loss": 1 / step, "loss_contrastive": 0.8 / step,
                          "loss_discriminator": 0.2, "disc_accuracy": min(1.0, step / 100), "learning_rate": lr})
            if step % 50 == 0:
                lines.append({"step": step, "eval_STSBenchmark-dev": 70 + step / 10, "eval_runtime": 1.0})
        text = "\n".join(json.dumps(r) for r in lines) + "\n{\"step\": 1"  # a line cut by a kill
        (run / "log.jsonl").write_text(text)
    (run / "eval.json").write_text(json.dumps({"before": {"STSBenchmark": 60.0, "sts_avg": 55.0}, "after": after}))
    return run


def test_flatten_scores_accepts_numbers_and_nested_dicts() -> None:
    flat = flatten_scores({"STS12": 70.0, "MR": {"acc": 80.0, "seconds": 3.0}, "bad": "x", "flag": True})
    assert flat == {"STS12": 70.0, "MR/acc": 80.0}


def test_curve_series_sorts_keys_into_panels() -> None:
    series = curve_series([{"step": 1, "loss": 1.0, "loss_contrastive": 0.5, "disc_accuracy": 0.6,
                            "learning_rate": 1e-5, "eval_dev_sts": 70.0, "eval_runtime": 3.0, "epoch": 0.1,
                            "contrastive": 0.4, "grad_norm": 3.0, "augcse/discriminator_accuracy": 0.5},
                           {"step": 2, "train_runtime": 9.0, "train_loss": 1.0, "total_flos": 0.0}])
    assert list(series) == ["losses", "dev score", "discriminator accuracy", "learning rate", "gradient norm"]
    assert set(series["losses"]) == {"loss", "loss_contrastive", "contrastive"}
    assert set(series["discriminator accuracy"]) == {"disc_accuracy", "augcse/discriminator_accuracy"}
    assert set(series["dev score"]) == {"eval_dev_sts"}
    assert set(series["learning rate"]) == {"learning_rate"}


def test_report_writes_markdown_html_and_curves(tmp_path: Path) -> None:
    run = make_run(tmp_path, "augcse", 0, {"STSBenchmark": 75.5, "sts_avg": 70.0, "MR": 80.0})
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    page = (run / "report.html").read_text()
    assert "| STSBenchmark | 60.00 | 75.50 | +15.50 |" in md
    assert "| MR | — | 80.00 | — |" in md  # missing "before" score shown as a dash
    assert "![training curves" in md and (run / "report" / "curves.png").stat().st_size > 5000
    assert "data:image/png;base64," in page and "<table>" in page
    assert "1 unreadable log line(s) skipped" in md
    assert "learning_rate: 3.0e-05" in md  # the recipe is shown


def test_report_tolerates_a_bare_run_directory(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 0
    md = (tmp_path / "empty" / "report.md").read_text()
    assert "No `eval.json` scores" in md and "No `log.jsonl` records" in md
    assert main(["report", str(tmp_path / "missing")]) == 2


def test_group_key_ignores_seeds_and_name_only() -> None:
    a = {"name": "x-s1", "seed": 1, "data": {"seed": 1, "limit": 10}}
    b = {"name": "x-s2", "seed": 2, "data": {"seed": 2, "limit": 10}}
    c = {"name": "x-s3", "seed": 3, "data": {"seed": 3, "limit": 20}}
    assert group_key(a) == group_key(b) != group_key(c)


def test_compare_pools_seeds_and_takes_deltas(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = [make_run(tmp_path, "simcse", s, {"STSBenchmark": 70.0 + s, "sts_avg": 60.0}, lr=3e-5, records=False)
            for s in (1, 2)]
    ours = [make_run(tmp_path, "augcse", s, {"STSBenchmark": 74.0 + 2 * s, "sts_avg": 61.0}, lr=1e-5, records=False)
            for s in (1, 2, 3)]
    runs = [load_run(p) for p in base + ours]
    groups = group_runs(runs)
    assert [(g.label, len(g.runs)) for g in groups] == [("simcse", 2), ("augcse", 3)]
    doc = build_comparison(runs, baseline=load_run(base[0]))
    md = doc.to_markdown(tmp_path)
    # simcse 71, 72 -> 71.50 ± 0.71; augcse 76, 78, 80 -> 78.00 ± 2.00; delta +6.50
    assert "| STSBenchmark | 71.50 ± 0.71 (n=2) | 78.00 ± 2.00 (n=3) | +6.50 |" in md
    assert main(["compare", *map(str, base + ours), "--baseline", str(base[0]), "--out", str(tmp_path / "cmp")]) == 0
    assert (tmp_path / "cmp" / "compare.html").read_text().count("<table>") == 2
    assert main(["compare", str(base[0])]) == 0
    assert "| STSBenchmark | 71.00 |" in capsys.readouterr().out


def test_pictures(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    orig = rng.normal(size=(30, 8))
    aug = orig + 0.1 * rng.normal(size=orig.shape)
    labels = ["delete"] * 10 + ["swap"] * 10 + ["insert"] * 10
    for method in ("pca", "tsne"):
        out = embedding_projection(orig, aug, labels, tmp_path / f"{method}.png", method=method)
        assert out.stat().st_size > 5000
    with pytest.raises(ValueError, match="same length"):
        embedding_projection(orig, aug[:5], labels, tmp_path / "x.png")
    assert confusion_matrix_plot(np.array([[5, 1], [0, 4]]), tmp_path / "cm.png", ["a", "b"]).is_file()
    rows = [{"augmentation": a, "similarity": s, "sts": t} for a, s, t in [("x", 0.9, 80), ("y", 0.5, 70), ("z", 0.7, 75)]]
    assert analysis_scatter(rows, "similarity", "sts", tmp_path / "sc.png").is_file()
    assert training_curves([{"epoch": 1}], tmp_path / "none.png") is None


def test_document_markdown_and_html_agree(tmp_path: Path) -> None:
    png = confusion_matrix_plot(np.eye(2), tmp_path / "img" / "a.png")
    doc = Document("T").add(Table(["k", "v"], [["a|b", "1.00"]]), Image(png, "pic"))
    md = doc.to_markdown(tmp_path)
    assert "| a\\|b | 1.00 |" in md and "![pic](img/a.png)" in md
    assert '<td class="num">1.00</td>' in doc.to_html()
