"""Details of what a user shares after a run: the card's usage snippet, exact losses and evaluator line, the
card rendered as the Hub would, and report tables and curves that read well."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import yaml
from conftest import tiny_cls_recipe

from augcse.losses import LOSSES
from augcse.training.model_card import exact_training_losses, render_html, write_model_card
from augcse.training.recipes.config import load_recipe
from augcse.report.run_report import build_report, load_run, run_facts, training_summary

SCORES = {"before": {"STSBenchmark": 70.0}, "after": {"STSBenchmark": 74.5}}
SUMMARY = {"corpus": "corpus.txt", "train_rows": 64, "global_step": 8, "best_step": None}


def test_card_usage_loads_the_run_folder_and_names_the_evaluation(tiny_st, tmp_path: Path) -> None:
    final = tmp_path / "runs" / "quickstart" / "final"
    tiny_st.save(str(final))
    write_model_card(final, load_recipe(None, "quickstart", []), SCORES, SUMMARY, LOSSES["simcse"](tiny_st))
    text = (final / "README.md").read_text()
    assert f'SentenceTransformer("{final}")' in text and "sentence_transformers_model_id" not in text
    assert "TaskScore" not in text and "augcse.evaluation.suite.run_tasks" in text


def test_card_training_losses_keep_four_significant_digits(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in [{"step": 1, "loss": 0.004844988}, {"step": 2, "loss": 9.637e-06},
                                                     {"step": 2, "eval_dev_score": 80.0}]) + "\n{cut")
    data = SimpleNamespace(training_logs=[{"Epoch": 0.5, "Step": 1, "Training Loss": 0.0048},
                                          {"Epoch": 1.0, "Step": 2, "Training Loss": 0.0, "dev_score": 80.0}])
    exact_training_losses(data, log)
    assert [row["Training Loss"] for row in data.training_logs] == ["0.004845", "9.637e-06"]


def test_rendered_card_shows_front_matter_nested_tables_and_hides_comments() -> None:
    card = ("---\nbase_model: some/model\ntags:\n- augcse\n---\n\n# Title\n\n<!-- hidden note -->\n\n"
            "* Samples:\n  | anchor |\n  |:--|\n  | <code>A cat.</code> |\n* Loss:\n  ```json\n  {\"a\": 1}\n  ```\n")
    page = render_html(card)
    assert "base_model: some/model" in page and "<h1>Title</h1>" in page
    assert "<table>" in page and "<code>A cat.</code>" in page and '{&quot;a&quot;: 1}' in page
    assert "hidden note" not in page.replace("<!-- hidden note -->", "")


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "r1"
    run.mkdir()
    (run / "recipe.yaml").write_text(yaml.safe_dump({"name": "r1", "seed": 1, "loss": {"name": "simcse"}}))
    records = [{"step": s, "epoch": s / 4, "loss": 10.0 ** -s, "contrastive": 10.0 ** -s, "learning_rate": 3e-5 / s,
                "grad_norm": 1.0 / s} for s in range(1, 5)] + [{"step": 4, "eval_dev_score": 80.0}]
    (run / "log.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    return run


def test_report_best_values_only_where_a_best_exists(tmp_path: Path) -> None:
    rows = {row[0]: row for row in training_summary(load_run(_run(tmp_path))).rows}
    assert rows["loss = contrastive"][4:] == ["0.0001", "4"]
    assert rows["eval_dev_score"][4:] == ["80", "4"]
    assert rows["learning_rate"][4:] == ["—", "—"] and rows["grad_norm"][4:] == ["—", "—"]


def test_report_facts_are_headed_by_the_run_name_and_curves_are_two_panels_a_row(tmp_path: Path) -> None:
    from PIL import Image

    run = load_run(_run(tmp_path))
    assert run_facts(run).header == ["run", "r1"]
    build_report(run)
    width, height = Image.open(run.path / "report" / "curves.png").size
    assert width < 2.2 * height  # four panels in a 2 × 2 grid, not a strip of four


def test_card_scores_leave_out_an_average_of_one_task() -> None:
    from augcse.training.model_card import score_markdown

    table = score_markdown({"after": {"STSBenchmark-original": 80.0, "sts-original_avg": 80.0}})
    assert "STSBenchmark-original" in table and "sts-original_avg" not in table
    both = score_markdown({"after": {"STS12": 70.0, "STS13": 80.0, "sts_avg": 75.0}})
    assert "**sts_avg**" in both


def test_tensorboard_and_console_get_the_loss_components_unrounded(tmp_path: Path, tiny_model_dir: Path,
                                                                    data_dir: Path, capsys) -> None:
    import pytest

    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from augcse.training.run import run

    recipe = tiny_cls_recipe(tmp_path, tiny_model_dir, data_dir, "exact", {"dev": None, "before": None, "after": None},
                             {"max_steps": 3, "report_to": ["tensorboard"], "save_strategy": "no"})
    run(load_recipe(str(recipe), None, []), data_dir)
    folder = tmp_path / "runs" / "exact"
    exact = [json.loads(line)["contrastive"] for line in (folder / "log.jsonl").read_text().splitlines()
             if "contrastive" in json.loads(line)]
    events = EventAccumulator(str(sorted(folder.rglob("events.out.tfevents.*"))[0].parent))
    events.Reload()
    logged = [event.value for event in events.Scalars("train/contrastive")]
    assert len(logged) == len(exact) == 3
    assert all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(logged, exact)), (logged, exact)  # not round(x, 4)
    assert any(round(value, 4) != value for value in exact)
