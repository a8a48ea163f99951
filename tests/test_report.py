"""Run reports and comparisons on fixture run directories (the layout training writes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from augcse.commands.main import main
from augcse.report.compare import build_comparison, group_key, group_runs
from augcse.core.document import Document, Image, Table
from augcse.report.plots import (
    analysis_scatter,
    confusion_matrix_plot,
    curve_series,
    embedding_projection,
    training_curves,
)
from augcse.report.run_report import flatten_scores, load_run


def make_run(root: Path, name: str, seed: int, after: dict, lr: float = 3e-5, records: bool = True,
             folder: str | None = None, summary: dict | None = None) -> Path:
    run = root / (folder or f"{name}-s{seed}")
    run.mkdir(parents=True)
    if summary is not None:
        (run / "summary.json").write_text(json.dumps(summary))
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
    flat = flatten_scores({"STS12": 70.0, "MR": {"acc": 80.0, "seconds": 3.0}, "flag": True})
    assert flat == {"STS12": 70.0, "MR/acc": 80.0}


@pytest.mark.parametrize("value", ["high", [70.0], None])
def test_a_score_that_is_not_a_number_is_named_not_read_as_no_scores(tmp_path: Path, capsys, value) -> None:
    run = make_run(tmp_path, "r", 1, {"STSBenchmark": value})
    for command in (["report", str(run)], ["compare", str(run), str(run)]):
        assert main(command) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"augcse {command[0]}: error: {run / 'eval.json'}: after: the score 'STSBenchmark' is "
                       f"{json.dumps(value)}, not a number: it was edited or damaged; restore it, or move it away "
                       "to report the run without it"]


def test_a_nan_score_shows_as_nan_not_as_missing(tmp_path: Path) -> None:
    run = make_run(tmp_path, "r", 1, {"STSBenchmark": float("nan")})
    assert main(["report", str(run)]) == 0
    row = next(line for line in (run / "report.md").read_text().splitlines() if line.startswith("| STSBenchmark "))
    assert row.split("|")[2:4] == [" 60.00 ", " NaN "]


def test_the_comparison_chart_shows_every_error_bar_whole(tmp_path: Path) -> None:
    """Two seeds far apart: mean ± sd reaches beyond both seeds' scores; the axis must hold it."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from augcse.report import plots

    seen = {}
    real_save = plots._save

    def keep(fig, path):
        seen["ylim"] = fig.axes[0].get_ylim()
        return real_save(fig, path)

    plots._save, groups = keep, {"wide": {"T": [50.0, 90.0]}, "narrow": {"T": [70.0, 70.2]}}
    try:
        plots.group_bars(groups, tmp_path / "bars.png")
    finally:
        plots._save = real_save
        plt.close("all")
    sd = float(np.std([50.0, 90.0], ddof=1))
    low, high = seen["ylim"]
    assert low <= 70.0 - sd and high >= 70.0 + sd


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
    run = make_run(tmp_path, "augcse", 0, {"STSBenchmark": 75.5, "STS12": 64.5, "sts_avg": 70.0, "MR": 80.0})
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    page = (run / "report.html").read_text()
    assert "| STSBenchmark | 60.00 | 75.50 | +15.50 |" in md
    assert "sts_avg" in md  # two STS tasks after training: a real average
    assert "| MR | — | 80.00 | — |" in md  # missing "before" score shown as a dash
    assert "![training curves" in md and (run / "report" / "curves.png").stat().st_size > 5000
    assert "data:image/png;base64," in page and "<table>" in page
    assert "1 unreadable log line(s) skipped" in md
    assert "learning_rate: 3.0e-05" in md  # the recipe is shown


def test_report_refuses_a_folder_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "empty").mkdir()
    final = tmp_path / "run" / "final"
    final.mkdir(parents=True)
    (final / "modules.json").write_text("[]")
    for folder in (tmp_path / "empty", final, tmp_path / "missing"):
        assert main(["report", str(folder)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(folder) in err[0]
    assert not list(tmp_path.rglob("report*"))
    assert main(["report", str(final)]) == 2 and "exported model" in capsys.readouterr().err


def test_report_tolerates_a_run_with_only_its_recipe(tmp_path: Path) -> None:
    run = tmp_path / "fresh"
    run.mkdir()
    (run / "recipe.yaml").write_text("name: fresh\nseed: 1\n")
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    assert "No `eval.json` scores" in md and "No `log.jsonl` records" in md and "no `summary.json`" in md


SUMMARY = {"name": "augcse-s0", "corpus": "/data/corpus/wiki1m_for_simcse.first11914.txt",
           "corpus_stats": {"read": 11914, "kept": 4096, "skipped": {"over_limit": 7818, "empty": 3}},
           "train_rows": 4096, "global_step": 64, "best_metric": 0.81234, "best_step": 48, "seconds": 612.0}


def test_report_tells_the_run_from_summary_json(tmp_path: Path) -> None:
    run = make_run(tmp_path, "augcse", 0, {"STSBenchmark": 75.5, "sts_avg": 75.5}, summary=SUMMARY)
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    assert "`/data/corpus/wiki1m_for_simcse.first11914.txt`" in md
    assert "read 11,914, kept 4,096; skipped: over limit 7,818, empty 3" in md
    assert "step 48 (dev score 0.8123)" in md and "10.2 min" in md and "| steps | 64" in md
    assert "sts_avg" not in md  # an average over one task is that task again
    assert "None" not in md


def test_report_without_a_dev_task_says_the_last_step_was_kept(tmp_path: Path) -> None:
    run = make_run(tmp_path, "simcse", 0, {"STSBenchmark": 70.0}, summary={**SUMMARY, "best_step": None,
                                                                          "best_metric": None})
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    assert "the last step: no dev task selected a checkpoint" in md and "None" not in md


def test_losses_spanning_decades_get_a_log_axis_and_identical_series_one_line(tmp_path: Path) -> None:
    from augcse.report.plots import spans_decades

    records = [{"step": s, "loss": 10.0 ** -s, "contrastive": 10.0 ** -s * 0.5, "eval_dev_score": 70.0 + s,
                "eval_dev_STSBenchmark-dev": 70.0 + s} for s in range(1, 7)]
    series = curve_series(records)
    assert list(series["dev score"]) == ["eval_dev_score = eval_dev_STSBenchmark-dev"]
    assert spans_decades(series["losses"]["loss"][1]) and not spans_decades([70.0, 75.0])
    import matplotlib.pyplot as plt

    seen = []
    original = plt.Axes.set_yscale
    plt.Axes.set_yscale = lambda self, value, **kw: (seen.append(value), original(self, value, **kw))[1]
    try:
        training_curves(records, tmp_path / "c.png")
    finally:
        plt.Axes.set_yscale = original
    assert seen == ["log"]  # the losses panel only; the dev panel stays linear


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
    assert "| STSBenchmark | 71.50 ± 0.71 (n=2) | 78.00 ± 2.00 (n=3) | +6.50 (p=" in md
    assert main(["compare", *map(str, base + ours), "--baseline", str(base[0]), "--out", str(tmp_path / "cmp")]) == 0
    page = (tmp_path / "cmp" / "compare.html").read_text()
    assert page.count("<table>") == 3 and "data:image/png;base64," in page
    assert (tmp_path / "cmp" / "compare" / "compare-bars.png").stat().st_size > 5000
    assert main(["compare", str(base[0])]) == 0
    assert "| STSBenchmark | 71.00 |" in capsys.readouterr().out


def test_compare_tests_against_the_baseline_and_shows_differing_keys(tmp_path: Path) -> None:
    from scipy import stats

    base = [make_run(tmp_path, "simcse", s, {"STSBenchmark": v}, records=False) for s, v in ((1, 70.0), (2, 71.0), (3, 70.5))]
    paired = [make_run(tmp_path, "augcse", s, {"STSBenchmark": v}, lr=1e-5, records=False)
              for s, v in ((1, 72.0), (2, 74.0), (3, 72.5))]
    md = build_comparison([load_run(p) for p in base + paired], baseline=load_run(base[0])).to_markdown(tmp_path)
    p = stats.ttest_rel([72.0, 74.0, 72.5], [70.0, 71.0, 70.5]).pvalue
    assert f"+2.33 (p={p:.3f}" in md and "paired t" in md
    assert "| `training.learning_rate` | 3.0e-05 | 1.0e-05 |" in md or "| `training.learning_rate` | 3e-05 | 1e-05 |" in md
    other = [make_run(tmp_path / "o", "augcse", s, {"STSBenchmark": v}, lr=1e-5, records=False)
             for s, v in ((4, 72.0), (5, 74.0))]
    md = build_comparison([load_run(p) for p in base + other], baseline=load_run(base[0])).to_markdown(tmp_path)
    welch = stats.ttest_ind([72.0, 74.0], [70.0, 71.0, 70.5], equal_var=False).pvalue
    assert f"(p={welch:.3f}" in md and "Welch t" in md and "paired t" not in md


def test_compare_refuses_repeats_and_folders_without_runs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    one = make_run(tmp_path, "simcse", 1, {"STSBenchmark": 70.0}, records=False, folder="a")
    two = make_run(tmp_path, "simcse", 1, {"STSBenchmark": 70.0}, records=False, folder="b")
    assert main(["compare", str(one), str(two)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "same recipe and seed 1" in err[0]
    (tmp_path / "nothing").mkdir()
    assert main(["compare", str(tmp_path / "nothing")]) == 2
    assert "neither a training run nor a folder of runs" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "a")]) == 0  # a single run is fine


def test_compare_finds_the_runs_inside_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for s in (1, 2):
        make_run(tmp_path / "runs", "simcse", s, {"STSBenchmark": 70.0 + s}, records=False)
    assert main(["compare", str(tmp_path / "runs")]) == 0
    assert "71.50 ± 0.71 (n=2)" in capsys.readouterr().out


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


@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("content", ['{"after": {"STSBenchmark": 8', "[1, 2]"])
def test_a_damaged_eval_json_is_an_error_naming_it(tmp_path: Path, capsys, command: str, content: str) -> None:
    from augcse.commands.main import main

    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text("name: run\nloss: {name: simcse}\n")
    (run / "eval.json").write_text(content)
    assert main([command, str(run)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"augcse {command}: error: {run / 'eval.json'} ") and "\n" not in err
    assert "restore it, or move it away" in err
