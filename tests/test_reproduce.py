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

from augcse.commands.main import main
from augcse.studies.published import published
from augcse.studies.reproduce import papers, plan, torchrun_command

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
            shown = [suite for suite in row.suites if f"{suite}_avg" in ref.scores]
            for suite in shown:  # a row is shown with the published averages of its own suites only
                assert f"{suite}_avg {ref.scores[f'{suite}_avg']:.2f}" in line
            if not shown:  # a table without an average (VaSCL's intent) is shown task by task
                assert all(f"{task} {value:.2f}" in line for task, value in ref.scores.items())
            assert "transfer_avg" not in line or "transfer" in row.suites
    assert re.search(r"GPU-hours still to run: \d+\.\d at 417 sentences/s", out)
    assert "DIFFERS FROM THE TABLE" not in out  # every row, evaluated ones too, as its table records it
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
    assert command[5:8] == ["-m", "augcse", "train"] and command[-3:] == ["--data-dir", "/data", "--resume"]
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
    command = [sys.executable, "-m", "augcse", "reproduce", "simcse",
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
    (stopped / ".augcse-run").write_text("")  # claimed by augcse, as every run folder is
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
    from augcse.studies.reproduce import table_lines

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


def _fabricate(run, scores: dict[str, float]) -> None:
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / "summary.json").write_text("{}")
    (run.run_dir / "eval.json").write_text(json.dumps({"after": scores}))


def test_max_of_seeds_row_takes_every_task_from_one_run(tmp_path):
    """AugCSE's main figures are the best of five seeds: ours is the one run with the best STS average,
    every task from it, even where another seed scored higher on that task alone."""
    from augcse.studies.reproduce import build_document, table_lines

    paper = papers()["augcse"]
    row = next(r for r in paper.rows if r.name == "bert-base")
    runs = plan(paper, [row], [1, 2], tmp_path, [])
    first = {"STS12": 80.0, "STS13": 70.0, "sts_avg": 75.0}  # better average, worse STS13
    second = {"STS12": 60.0, "STS13": 76.0, "sts_avg": 68.0}
    _fabricate(runs[0], first)
    _fabricate(runs[1], second)
    lines = {(line.task, line.reference.id): line for line in table_lines(runs) if line.reference}
    best = lines["STS13", "augcse/bert-base"]
    assert best.values == [70.0, 76.0] and best.selected == 70.0 and best.ours == 70.0
    assert best.delta == pytest.approx(70.0 - 83.93)
    assert lines["STS12", "augcse/bert-base"].ours == 80.0 and lines["sts_avg", "augcse/bert-base"].ours == 75.0
    mean_line = lines["sts_avg", "augcse/bert-base-mean"]  # the mean ± sd figure (Table 12) is the mean
    assert mean_line.ours == pytest.approx(71.5)
    markdown = build_document(paper, runs).to_markdown(tmp_path)
    cells = _cells(markdown, "bert-base", "STS13")
    assert cells[4] == "70.00" and cells[5] == "-3.00" and cells[8] == "-13.93"


def test_sda_transfer_is_evaluated_through_the_average_of_the_last_two_layers(tmp_path, monkeypatch):
    """SDA §6.2: after training, the saved encoder is evaluated on transfer through avg_top2 (STS through the
    trained [CLS]); the run is finished only once both score files exist, and the table reads both."""
    import augcse.studies.runs as runs
    from augcse.studies.reproduce import execute, table_lines

    paper = papers()["sda"]
    row = next(r for r in paper.rows if r.name == "mv-roberta-base")
    (run,) = plan(paper, [row], [1], tmp_path, [])
    assert run.recipe.eval.after == "sts"
    _fabricate(run, {"STS12": 70.0, "sts_avg": 78.0})
    assert not run.done
    calls = []
    monkeypatch.setattr(runs, "evaluate_model", lambda model, pooler, tasks, data_dir, all_metrics=False:
                        calls.append((model, pooler, tasks)) or {"MR": 82.0, "transfer_avg": 86.0})
    assert execute(run, None)
    assert calls == [(str(run.run_dir / "final"), "avg_top2", "transfer")]
    assert run.done and run.scores() == {"STS12": 70.0, "sts_avg": 78.0, "MR": 82.0, "transfer_avg": 86.0}
    assert {line.task for line in table_lines([run])} >= {"MR", "transfer_avg", "sts_avg"}
    assert execute(run, None) and len(calls) == 1  # finished: nothing evaluated again


def test_vascl_rows_are_evaluated_on_its_clustering_and_intent_tables(tmp_path, capsys):
    paper = papers()["vascl"]
    row = next(r for r in paper.rows if r.name == "roberta-base")
    (run,) = plan(paper, [row], [1], tmp_path, [])
    assert run.recipe.eval.after == "sts,AgNews,SearchSnippets,StackOverflow,Biomedical,Tweet,GoogleNews-TS"
    (extra,) = run.extra_evaluations  # intent after training, every metric kept (5-, 10-, 20-shot)
    assert (extra.pooler, extra.tasks, extra.all_metrics) == (None, "intent", True)
    assert main(["reproduce", "vascl", "--dry-run", "--seeds", "1", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "roberta-base: vascl/roberta-base-clustering (VaSCL T2; single): clustering_avg 59.96" in out
    assert "SNIPS 85.34 ± 1.65, BANKING77 72.60 ± 0.94, CLINC150 78.83 ± 0.51, HWU64 73.70 ± 0.92" in out
    assert "SNIPS/5shot 78.97 ± 3.69" in out and "HWU64/20shot 77.66 ± 0.64" in out


def test_dry_run_json_lists_runs_figures_and_settings_by_kind(tmp_path, capsys):
    assert main(["reproduce", "cards", "--dry-run", "--json", "--seeds", "1", "--output", str(tmp_path)]) == 0
    plan_data = json.loads(capsys.readouterr().out)
    assert plan_data["paper"] == "cards" and len(plan_data["runs"]) == len(papers()["cards"].rows)
    assert plan_data["published"]["simcse-roberta-large"] == {"cards/simcse-roberta-large-ours": {"sts_avg": 78.74}}
    settings = {entry["row"]: entry for entry in plan_data["settings"]}
    (lr,) = [d for d in settings["roberta-large"]["code"] if d["key"] == "training.learning_rate"]
    assert lr["value"] == 7.5e-6 and "CARDS README" in lr["source"]
    (variant,) = [d for d in settings["roberta-large"]["deviation"] if d["key"] == "data.views[0].variant"]
    assert variant["stated"] == "v2" and variant["value"] == "v1" and "README" in variant["reason"]
    assert all(not entry["differs_from_table"] for entry in plan_data["settings"])
    held = {item["key"]: item for item in settings["roberta-base"]["paper"]}
    assert held["data.dedupe"] == {"key": "data.dedupe", "value": True,
                                   "source": "CARDS §3.1 (we deduplicate the Wiki-1m dataset)"}
    assert held["data.min_words"]["value"] == 3
    assert main(["reproduce", "cards", "--json", "--output", str(tmp_path)]) == 2
    assert "--json goes with --dry-run" in capsys.readouterr().err


def test_dry_run_names_a_command_line_override_that_leaves_the_paper(tmp_path, capsys):
    assert main(["reproduce", "vascl", "data.dedupe=false", "--rows", "roberta-base", "--dry-run", "--seeds", "1",
                 "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "DIFFERS FROM THE TABLE: vascl/roberta-base: data.dedupe is false, not the authors' code's true" in out
    for title in ("stated by the paper (", "from the authors' code or README (the paper is silent) (",
                  "open (neither says; the value taken and why) (", "deviations (and why) ("):
        assert title in out


def test_a_missing_corpus_is_refused_before_any_model_loads(data_dir, tmp_path, capsys, monkeypatch):
    """The data directory holds only SimCSE's 11,914-line slice: the row is refused, naming the file and the
    download command, and nothing is trained or loaded; the dry run says which file each row would read."""
    import augcse.studies.runs as runs

    monkeypatch.setattr(runs, "execute", lambda *a, **k: pytest.fail("a run started"))
    monkeypatch.setattr("augcse.models.load.load_model", lambda *a, **k: pytest.fail("a model loaded"))
    code = main(["reproduce", "simcse", "--rows", "bert-base", "--seeds", "1", "--output", str(tmp_path),
                 "--data-dir", str(data_dir)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "corpus/wiki1m_for_simcse.txt is not in the data directory" in err
    assert f"augcse download corpus --data-dir {data_dir}" in err and "data.corpus=FILE" in err
    assert not (tmp_path / "simcse" / "bert-base-s1").exists()

    assert main(["reproduce", "simcse", "--rows", "bert-base", "--seeds", "1", "--dry-run", "--json",
                 "--output", str(tmp_path), "--data-dir", str(data_dir)]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["corpus"] == {"name": "corpus/wiki1m_for_simcse.txt", "file": None, "lines": None,
                             "priced_lines": 1_000_000, "priced_on": "documented"}
    # a smaller corpus named on purpose: read, counted, priced, and shown as leaving the paper
    small = "corpus/wiki1m_for_simcse.first11914.txt"
    assert main(["reproduce", "simcse", f"data.corpus={small}", "--rows", "bert-base", "--seeds", "1", "--dry-run",
                 "--output", str(tmp_path), "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert f"reads {data_dir / small} (11,914 lines)" in out
    assert f"{11914 / 417 / 3600:.2f} GPU-h" in out
    # at CARDS' batch 512 the slice gives 23 steps, short of the first dev evaluation at 125: said
    assert main(["reproduce", "cards", f"data.corpus={small}", "--rows", "roberta-base", "--seeds", "1", "--dry-run",
                 "--output", str(tmp_path), "--data-dir", str(data_dir)]) == 0
    assert "WARNING: 23 steps, fewer than eval_steps 125" in capsys.readouterr().out
    assert f"DIFFERS FROM THE TABLE: simcse/bert-base: data.corpus is {small}, not the paper's" in out


def test_a_released_checkpoint_published_as_a_download_names_its_address(tmp_path, capsys):
    assert main(["reproduce", "cards", "--checkpoints", "--rows", "released-roberta-base", "--output",
                 str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "cards_roberta_base.zip" in err and "--checkpoint cards_roberta_base=FOLDER" in err


def test_coverage_table_is_generated_and_accounts_for_every_published_row():
    """docs/COVERAGE.md is what ``python -m augcse.studies.coverage`` writes; every published figure is either held
    to by a reproduce row or listed as not covered with its reason."""
    from augcse.studies import coverage
    from augcse.studies.published import published_table

    doc = Path(__file__).resolve().parents[1] / "docs" / "COVERAGE.md"
    assert doc.read_text() == coverage.document(), f"docs/COVERAGE.md is out of date; run: {coverage.COMMAND}"
    listed = {entry["published"] for entries in coverage.not_covered().values() for entry in entries
              if "published" in entry}
    assert set(published_table()) == set(coverage.covered()) | listed
    assert not set(coverage.covered()) & listed  # a figure is either run or not
    assert all(bool(entry.get("reason")) != bool(entry.get("held"))  # one reason or what holds the settings
               for entries in coverage.not_covered().values() for entry in entries)


def test_intent_rows_are_held_to_every_shot_setting(tiny_model_dir, data_dir, tmp_path, monkeypatch):
    """VaSCL Table 3 prints 5-, 10- and 20-shot accuracy: the evaluation keeps every intent metric as
    task/metric, and the table compares each with its figure (other metrics are not shown)."""
    import augcse.studies.reproduce as reproduce
    import augcse.studies.runs as runs
    from augcse.studies.reproduce import evaluate_model, table_lines

    # the same splits and metrics as SNIPS, with the faster scikit-learn classifier
    scores = evaluate_model(str(tiny_model_dir), "avg", "SNIPS-sklearn", str(data_dir), all_metrics=True)
    assert {"SNIPS-sklearn", "SNIPS-sklearn/5shot", "SNIPS-sklearn/20shot", "SNIPS-sklearn/5shot_std"} <= set(scores)
    assert scores["SNIPS-sklearn"] == scores["SNIPS-sklearn/10shot"]
    assert not any(k.endswith(("devacc", "seconds")) for k in scores)

    paper = papers()["vascl"]
    row = next(r for r in paper.rows if r.name == "roberta-base-mean-pooling")
    (run,) = plan(paper, [row], [1], tmp_path, [])
    calls = []
    monkeypatch.setattr(runs, "evaluate_model", lambda model, pooler, tasks, data_dir, all_metrics=False:
                        calls.append((pooler, tasks, all_metrics)) or ({"SNIPS": 80.0, "SNIPS/5shot": 70.0,
                                                                        "SNIPS/5shot_std": 2.0} if all_metrics else
                                                                       {"STS12": 50.0, "sts_avg": 55.0}))
    reproduce.execute(run, None)
    assert calls == [("avg", "sts,AgNews,SearchSnippets,StackOverflow,Biomedical,Tweet,GoogleNews-TS", False),
                     ("avg", "intent", True)]
    lines = {line.task: line for line in table_lines([run]) if line.reference}
    assert lines["SNIPS/5shot"].delta == pytest.approx(70.0 - 76.71) and lines["SNIPS"].figure == 85.63
    assert "SNIPS/5shot_std" not in {line.task for line in table_lines([run])}


def test_the_memory_estimate_predicts_what_was_measured():
    """The constants of data/reproduce.yaml against the GPU record they were derived from (within 8 %)."""
    import json

    from augcse.studies.reproduce import estimate_gib

    record = json.loads((Path(__file__).resolve().parents[1] / "docs/records/grad-cache-h200.json").read_text())
    shapes = {"bert-base": (110_000_000, 12, 768), "large": (335_000_000, 24, 1024)}
    for row in record["rows"]:
        alive = row["mini_batch"] or 2 * row["batch"]  # SimCSE: two texts per example; cached: one mini-batch
        assert estimate_gib(shapes[row["shape"]], 32, alive) == pytest.approx(row["peak_gib"], rel=0.08), row


def test_the_dry_run_names_the_mini_batch_that_fits_a_gpu(capsys, monkeypatch):
    from augcse.commands.main import main

    monkeypatch.delenv("AUGCSE_DATA", raising=False)
    assert main(["reproduce", "vascl", "--dry-run", "--gpu-memory", "40", "--rows", "roberta-base,roberta-large"]) == 0
    out = capsys.readouterr().out
    assert "roberta-base-s1  [main; to run; 3.33 GPU-h; ≈25.7 GiB/GPU]" in out
    assert "roberta-large-s1  [main; to run; 9.99 GPU-h; ≈68.8 GiB/GPU, over the budget: set " \
           "loss.params.mini_batch_size=1024]" in out
    assert "GPU memory per process against --gpu-memory 40 GiB: an estimate, derived from" in out
    assert main(["reproduce", "vascl", "loss.params.mini_batch_size=256", "--dry-run", "--json",
                 "--rows", "roberta-large"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["runs"][0]["gpu_memory"] == {"gib_estimate": 13.8, "fits": True, "mini_batch_size": 256,
                                             "mini_batch_size_to_fit": None}
    assert main(["reproduce", "vascl", "--gpu-memory", "40"]) == 2
    assert "--gpu-memory goes with --dry-run" in capsys.readouterr().err


def test_reproducing_md_is_the_dry_run(tmp_path):
    """docs/REPRODUCING.md's plan is the dry run's: each paper's run count and GPU-hours equal what
    ``--dry-run --json`` gives on a machine without the corpora (priced on their documented line counts),
    and a hand edit of the page's figures is undone by the generator."""
    from augcse.commands import docs
    from augcse.studies import reproduce_page
    from augcse.studies.reproduce import DEFAULT_SEEDS, papers, plan, plan_json

    for name, paper in papers().items():
        runs = plan(paper, list(paper.rows), list(DEFAULT_SEEDS), tmp_path / "runs", [])
        dry = plan_json(paper, runs, 1, data_dir=str(tmp_path))
        figures = reproduce_page.paper_plan(paper)
        assert (len(dry["runs"]), round(figures["gpu_hours"], 3)) == (figures["runs"], dry["gpu_hours_to_run"]), name
        priced = {run["corpus"]["priced_on"] for run in dry["runs"] if run["corpus"]}
        assert priced <= {"documented", "assumed"}, name
    text = (Path(__file__).resolve().parents[1] / "docs" / "REPRODUCING.md").read_text(encoding="utf-8")
    block = "\n".join(reproduce_page.plan_table())
    assert block in text
    row = next(line for line in block.splitlines() if line.startswith("| cards ("))
    edited = text.replace(row, row.replace("| 55 |", "| 40 |"))
    assert edited != text and docs.fill(edited) == text
