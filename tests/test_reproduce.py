"""``augcse reproduce``: the plan of every paper, an interrupted and resumed reproduction on the tiny model,
and the released-checkpoint check with a local folder standing in for the Hub name."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from augcse.cli import main
from augcse.published import published
from augcse.reproduce import papers, plan, torchrun_command

SENTENCES = [f"sentence number {i} is about {w} and more {w}s" for i, w in
             enumerate(["cats", "dogs", "rain", "music", "trains", "bread", "rivers", "stars"] * 4)]


@pytest.mark.parametrize("paper", ["simcse", "augcse", "sda", "vascl", "cards"])
def test_dry_run_lists_every_row_with_its_published_figures(paper, tmp_path, capsys):
    assert main(["reproduce", paper, "--dry-run", "--seeds", "1,2", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for row in papers()[paper].rows:
        if row.trained:
            assert f"{tmp_path}/{paper}/{row.name}-s1 " in out and f"{row.name}-s2 " in out
        for ref in map(published, row.published):
            (line,) = [x for x in out.splitlines() if x.strip().startswith(f"{row.name}: {ref.id} (")]
            for suite in row.suites:  # a row is shown with the published averages of its own suites only
                assert f"{suite}_avg {ref.scores[f'{suite}_avg']:.2f}" in line
            assert "transfer_avg" not in line or "transfer" in row.suites
    assert re.search(r"GPU-hours still to run: \d+\.\d at 417 sentences/s", out)
    assert not list(tmp_path.iterdir())  # a dry run writes nothing


def test_bad_inputs_are_refused_before_anything_runs(tmp_path, capsys):
    assert main(["reproduce", "simcse", "--rows", "bert-large", "--output", str(tmp_path)]) == 2
    assert "unknown row 'bert-large'" in capsys.readouterr().err
    assert main(["reproduce", "simcse", "name=x", "--output", str(tmp_path)]) == 2
    assert main(["reproduce", "simcse", "--tasks", "STS99", "--output", str(tmp_path)]) == 2
    assert main(["reproduce", "vascl", "--checkpoints", "--output", str(tmp_path)]) == 2
    with pytest.raises(SystemExit):
        main(["reproduce", "simcse", "--nproc", "0"])
    assert not list(tmp_path.iterdir())


def test_several_processes_go_through_torchrun(tmp_path):
    paper = papers()["simcse"]
    run = plan(paper, [paper.rows[0]], [7], tmp_path, [])[0]
    command = torchrun_command(run, 4, "/data", resume=True)
    assert command[1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    assert command[5:7] == ["-m", "augcse.train"] and command[-3:] == ["--data-dir", "/data", "--resume"]
    assert run.recipe.seed == 7 and run.recipe.name == "bert-base-s7"


def _cells(markdown: str, row: str, task: str) -> list[str]:
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:2] == [row, task]:
            return cells
    raise AssertionError(f"no line for {row}/{task} in\n{markdown}")


def test_interrupted_reproduction_resumes_and_reports_the_runs_own_scores(tiny_model_dir, data_dir, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    out = tmp_path / "out"
    command = [sys.executable, "-m", "augcse.cli", "reproduce", "simcse",
               f"model.backbone={tiny_model_dir}", f"data.corpus={corpus}", "data.limit=8", "eval.dev=null",
               "training.per_device_train_batch_size=4", "training.max_steps=1",
               "--rows", "bert-base,roberta-base", "--seeds", "1,2", "--output", str(out), "--data-dir", str(data_dir),
               "--tasks", "STSBenchmark"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    first = out / "simcse" / "bert-base-s1" / "summary.json"
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not first.is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)  # no graceful stop: as if the machine went away
    process.wait()
    assert first.is_file(), "the first run did not finish"
    stamp = first.stat().st_mtime_ns
    assert not (out / "simcse" / "reproduce.md").exists()

    stopped = out / "simcse" / "roberta-base-s2"  # as if killed before its first complete checkpoint
    stopped.mkdir(parents=True, exist_ok=True)
    (stopped / "log.jsonl").write_text("")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bert-base-s1: finished, skipped" in done.stdout
    assert "roberta-base-s2: stopped before its first complete checkpoint; starting it again" in done.stdout
    assert first.stat().st_mtime_ns == stamp  # the finished run was not trained again

    markdown = (out / "simcse" / "reproduce.md").read_text()
    assert markdown.strip() in done.stdout or "STSBenchmark" in done.stdout
    reference = published("simcse/bert-base").scores["STSBenchmark"]
    for row in ("bert-base", "roberta-base"):
        values = [json.loads((out / "simcse" / f"{row}-s{s}" / "eval.json").read_text())["after"]["STSBenchmark"]
                  for s in (1, 2)]
        mean, sd, best = statistics.fmean(values), statistics.stdev(values), max(values)
        cells = _cells(markdown, row, "STSBenchmark")
        assert cells[2] == "2"
        assert cells[3] == f"{mean:.2f} ± {sd:.2f}" and cells[4] == f"{best:.2f}"
        assert cells[5] == f"{best - mean:.2f}"
    cells = _cells(markdown, "bert-base", "STSBenchmark")
    assert cells[6] == f"{reference:.2f}" and cells[8] == f"{statistics.fmean(values_of(out, 'bert-base')) - reference:+.2f}"
    assert (out / "simcse" / "reproduce.html").is_file()


def values_of(out: Path, row: str) -> list[float]:
    return [json.loads((out / "simcse" / f"{row}-s{s}" / "eval.json").read_text())["after"]["STSBenchmark"]
            for s in (1, 2)]


def test_released_checkpoint_is_evaluated_with_its_published_pooler(tiny_model_dir, data_dir, tmp_path, capsys):
    name = "princeton-nlp/unsup-simcse-bert-base-uncased"
    code = main(["reproduce", "simcse", "--checkpoints", "--rows", "unsup-simcse-bert-base-uncased",
                 "--checkpoint", f"{name}={tiny_model_dir}", "--tasks", "STSBenchmark",
                 "--output", str(tmp_path), "--data-dir", str(data_dir)])
    assert code == 0
    run_dir = tmp_path / "checkpoints" / "simcse" / "unsup-simcse-bert-base-uncased"
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["pooler"] == "cls_before_pooler" and summary["model"] == str(tiny_model_dir)
    score = json.loads((run_dir / "eval.json").read_text())["after"]["STSBenchmark"]
    cells = _cells(capsys.readouterr().out, "unsup-simcse-bert-base-uncased", "STSBenchmark")
    assert cells[3] == f"{score:.2f}" and cells[6] == "76.85" and cells[8] == f"{score - 76.85:+.2f}"


def test_augcse_transfer_rows_are_the_table_11_setting_selected_on_transfer_dev(tmp_path):
    """AugCSE's transfer figures come from their own setting (Table 11) and checkpoint: rows of their own,
    selected on the mean transfer devacc, held to the transfer columns only."""
    from augcse.evaluation.suite import selection_metrics
    from augcse.evaluation.tasks import resolve_tasks
    from augcse.reproduce import table_lines

    rows = {row.name: row for row in papers()["augcse"].rows}
    table_11 = {"bert-base-transfer": (1e-4, 2e-5), "roberta-base-transfer": (1e-2, 7e-6)}
    for name, (weight, lr) in table_11.items():
        row = rows[name]
        assert row.suites == ("transfer",) and rows[name.removesuffix("-transfer")].suites == ("sts",)
        (run,) = plan(papers()["augcse"], [row], [1], tmp_path, [])
        recipe = run.recipe
        assert recipe.loss.params["discriminator_weight"] == weight and recipe.training["learning_rate"] == lr
        assert recipe.eval.dev == "transfer" and recipe.eval.after == "transfer"
        assert set(selection_metrics(resolve_tasks(recipe.eval.dev)).values()) == {"devacc"}
        run.run_dir.mkdir(parents=True)
        (run.run_dir / "summary.json").write_text("{}")
        (run.run_dir / "eval.json").write_text(json.dumps({"after": {"MR": 80.0, "transfer_avg": 85.0}}))
        tasks = {line.task for line in table_lines([run])}
        assert tasks == {"MR", "transfer_avg"}  # no STS column for a transfer-only setting
