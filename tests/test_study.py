"""``augcse study GRID``: a grid on the tiny model runs, is killed, resumes skipping finished runs, refuses a
second process, and writes its table (mean ± sd over seeds, Δ vs the starting model, the scores at each
budget) as Markdown, HTML, JSON and a curve plot; bad grid files are refused in one line before anything runs."""

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
from types import SimpleNamespace

import pytest
import yaml

from augcse.commands.main import main
from augcse.training.rundir import RunFolder

SENTENCES = [f"sentence number {i} is about {w} and more {w}s" for i, w in
             enumerate(["cats", "dogs", "rain", "music", "trains", "bread", "rivers", "stars"] * 4)]
GRID = Path(__file__).resolve().parents[1] / "src" / "augcse" / "data" / "studies" / "adapt-curves.yaml"


def _grid(tmp_path: Path, tiny_model_dir: Path, **changes) -> Path:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n")
    spec = {
        "title": "tiny", "seeds": [1, 2], "budgets": [1, 2], "recipe": "simcse-bert-base", "tasks": "STSBenchmark",
        "overrides": [f"model.backbone={tiny_model_dir}", f"data.corpus={corpus}", "data.limit=16", "eval.dev=null",
                      "eval.before=null", "training.per_device_train_batch_size=4", "training.max_steps=3"],
        "start": {"model": str(tiny_model_dir), "pooler": "avg"},
        "rows": {"simcse": {}},
        **changes,
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_grid_runs_resumes_after_sigkill_refuses_a_second_process_and_writes_its_table(
        tiny_model_dir, data_dir, tmp_path):
    grid, out = _grid(tmp_path, tiny_model_dir), tmp_path / "out"
    command = [sys.executable, "-m", "augcse", "study", str(grid), "--output", str(out),
               "--data-dir", str(data_dir)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    folder = out / "tiny"
    first = folder / "simcse-s1" / "summary.json"
    # a second process on the same grid is refused while another holds it (here this one, so that the
    # refusal does not race the other's progress); it writes nothing
    holder = RunFolder(folder / ".table")
    holder.claim({})
    try:
        refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    finally:
        holder.release()
    assert refused.returncode == 2, refused.stderr[-3000:]
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{folder} is being run by another process (PID {os.getpid()})" in lines[0], lines
    assert not [p for p in folder.iterdir() if p.name != ".table"]  # no run was started

    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not first.is_file() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert first.is_file(), "the first trained run did not finish"
    process.send_signal(signal.SIGKILL)  # no graceful stop: as if the machine went away
    process.wait()
    stamp = first.stat().st_mtime_ns
    assert not (folder / "study.md").exists()
    # the table of what finished so far, running nothing
    assert main(["study", str(grid), "--output", str(out), "--table-only"]) == 0
    partial = (folder / "study.md").read_text()
    assert "Not finished yet (1)" in partial and "simcse-s2" in partial and "(n=1)" in partial
    assert "Time: 1 trained run finished in " in partial
    assert first.stat().st_mtime_ns == stamp and not (folder / "simcse-s2" / "summary.json").exists()

    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "simcse-s1: finished, skipped" in done.stdout and "start: finished, skipped" in done.stdout
    assert re.search(r"simcse-s2: (running|resuming) \(1 left; 1 trained run finished, \d+\.\d min each\)", done.stdout)
    assert first.stat().st_mtime_ns == stamp  # the finished run was not trained again

    start = json.loads((folder / "start" / "eval.json").read_text())["after"]["STSBenchmark"]
    finals, curves = [], []
    for seed in (1, 2):
        run_dir = folder / f"simcse-s{seed}"
        finals.append(json.loads((run_dir / "eval.json").read_text())["after"]["STSBenchmark"])
        curve = json.loads((run_dir / "curve.json").read_text())
        assert sorted(curve["steps"]) == ["1", "2"] and curve["tasks"] == "STSBenchmark"  # budgets, not the end
        assert json.loads((run_dir / "summary.json").read_text())["global_step"] == 3
        curves.append(curve["steps"])
    figures = json.loads((folder / "study.json").read_text())["sets"]["tiny"]
    assert figures["tasks"] == ["STSBenchmark"]  # its average repeats the one task, so it is not a column
    final = figures["rows"]["simcse"]["final"]["STSBenchmark"]
    assert final["n"] == 2 and final["mean"] == pytest.approx(statistics.fmean(finals))
    assert final["sd"] == pytest.approx(statistics.stdev(finals))
    assert final["delta"] == pytest.approx(statistics.fmean(finals) - start)
    by_step = figures["rows"]["simcse"]["curve"]["STSBenchmark"]
    assert sorted(by_step, key=int) == ["1", "2", "3"]
    assert by_step["1"]["mean"] == pytest.approx(statistics.fmean(c["1"]["STSBenchmark"] for c in curves))
    assert by_step["3"]["values"] == finals  # the last point is the run's final evaluation
    assert figures["rows"]["start"]["curve"]["STSBenchmark"]["0"]["values"] == [start]
    seconds = [json.loads((folder / f"simcse-s{seed}" / "summary.json").read_text())["seconds"] for seed in (1, 2)]
    assert figures["time"] == {"runs": 2, "seconds": pytest.approx(sum(seconds))}

    markdown = (folder / "study.md").read_text()
    lines = [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines() if line.startswith("| ")]
    header = next(cells for cells in lines if cells[0] == "row")
    cells = dict(zip(header, next(cells for cells in lines if cells[0] == "simcse")))
    mean, sd = statistics.fmean(finals), statistics.stdev(finals)
    assert cells["STSBenchmark"] == f"{mean:.2f} ± {sd:.2f} (n=2)"
    assert cells["Δ STSBenchmark vs start"] == f"{mean - start:+.2f}"
    assert (folder / "curves.png").stat().st_size > 0 and (folder / "study.html").is_file()
    assert "curves.png" in markdown and markdown.strip() in done.stdout
    assert "Time: 2 trained runs finished in " in markdown


@pytest.mark.parametrize(("change", "message"), [
    ({"seeds": [1, 1]}, "grid key 'seeds' must be distinct, got [1, 1]"),
    ({"seeds": []}, "grid key 'seeds'"),
    ({"budgets": [0, 2]}, "grid key 'budgets[0]' must be > 0, got 0"),
    ({"budgets": [2, 2]}, "grid key 'budgets' must be distinct step counts"),
    ({"tasks": "STS99"}, "grid key 'tasks': unknown task or suite 'STS99'"),
    ({"rows": {"simcse": {"recipie": "x"}}}, "unknown grid key 'rows.simcse.recipie' (did you mean 'recipe'?)"),
    ({"rows": {"simcse": {"overrides": ["training.learning_rat=1"]}}}, "learning_rat"),
    ({"rows": {"start": {}}}, "rows.start is the starting model's name"),
    ({"recipe": "no-such-recipe"}, "'no-such-recipe' is neither built in nor a file"),
    ({"overrides": ["seed=3"]}, "grid key 'overrides': override 'seed=3': seed is set per run; use seeds:"),
    ({"overrides": ["eval.budgets=[4]"]}, "eval.budgets is set per run; use budgets:"),
    ({"rows": {"simcse": {"overrides": ["eval.after=STS16"]}}}, "eval.after is set per run; a set's runs are"),
    ({"sets": {"a": {"tasks": "STSBenchmark"}}}, "give recipe/tasks per set under 'sets', or at the top"),
    ({"start": {"pooler": "avg"}}, "grid key 'start.model' is required"),
    ({"colour": "red"}, "unknown grid key 'colour'"),
])
def test_bad_grid_files_are_refused_in_one_line_before_anything_runs(change, message, tiny_model_dir, tmp_path, capsys):
    grid = _grid(tmp_path, tiny_model_dir, **change)
    assert main(["study", str(grid), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "out").exists()


def test_a_missing_or_broken_grid_file_is_refused(tmp_path, capsys):
    assert main(["study", str(tmp_path / "none.yaml")]) == 2
    assert "grid file" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("seeds: [1\nrows: {")
    assert main(["study", str(broken)]) == 2
    assert "not valid YAML" in capsys.readouterr().err


def test_adaptation_grid_plans_four_sets_eight_methods_three_seeds_and_the_starting_model(tmp_path, capsys):
    assert main(["study", str(GRID), "--dry-run", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "100 runs (96 trained, 4 evaluated as they are); every trained run scored at steps 16, 32, 64, 128" in out
    for name in ("snips", "hwu64", "tweet", "searchsnippets"):
        assert f"{tmp_path}/adapt-curves/{name}/start  [to run]" in out
        assert f"{tmp_path}/adapt-curves/{name}/tsdae-s3  [to run]" in out
    assert not list(tmp_path.iterdir())  # a dry run writes nothing


def test_a_table_says_how_many_runs_a_set_without_a_finished_run_has_to_run(tmp_path, capsys):
    folder = tmp_path / "adapt-curves"
    assert main(["study", str(GRID), "--output", str(tmp_path), "--table-only"]) == 2  # nothing to tabulate
    assert "holds no run of this grid yet" in capsys.readouterr().err and not folder.exists()
    folder.mkdir()  # a study whose first run has not finished
    assert main(["study", str(GRID), "--output", str(tmp_path), "--table-only"]) == 0
    assert (folder / "study.md").read_text().count("No finished run yet (25 to run).") == 4
    assert not [p for p in folder.iterdir() if p.is_dir()]  # nothing was run


def test_a_run_is_trained_exactly_when_its_row_has_a_recipe(tmp_path):
    """``Run.trained`` comes from the row; a run whose recipe disagrees with its row is refused when built."""
    from augcse.studies.runs import Evaluate, Row, Run

    trained, start = Row("simcse", (), recipe="simcse-minilm"), Row("start", (), evaluate=Evaluate("m", None))
    assert not Run(start, None, tmp_path / "start", model="m").trained
    assert Run(trained, 1, tmp_path / "simcse-s1", recipe=SimpleNamespace()).trained
    with pytest.raises(ValueError, match="needs its recipe"):
        Run(trained, 1, tmp_path / "simcse-s1")  # a trained row without its recipe
    with pytest.raises(ValueError, match="needs its recipe"):
        Run(start, None, tmp_path / "start", recipe=SimpleNamespace())  # an evaluation row with one


def test_compare_recipe_differences_print_a_dash_not_an_escape():
    """A key one group lacks is a dash in both the Markdown and the HTML of ``augcse compare``."""
    from augcse.report.compare import Group, recipe_differences
    from augcse.core.document import Document

    groups = [Group("a", [SimpleNamespace(recipe={"loss": {"name": "simcse"}, "name": "a"})]),
              Group("b", [SimpleNamespace(recipe={"loss": {"name": "sda", "params": {"margin": 0.5}}, "name": "b"})])]
    table = recipe_differences(groups)
    assert table.rows == [["`loss.name`", "simcse", "sda"], ["`loss.params.margin`", "—", "0.5"]]
    doc = Document("t").add(table)
    for text in (doc.to_markdown(Path(".")), doc.to_html()):
        assert "—" in text and "\\u2014" not in text


def test_budgets_are_a_recipe_key_checked_by_the_schema(tmp_path):
    """``eval.budgets`` is where a run's budgets live (its recipe.yaml shows them), checked like every key."""
    from augcse.training.recipes.config import RecipeError, load_recipe

    recipe = load_recipe(None, "quickstart", ["eval.budgets=[64, 16]"])
    assert recipe.eval.budgets == [16, 64] and yaml.safe_load(recipe.to_yaml())["eval"]["budgets"] == [16, 64]
    assert load_recipe(None, "quickstart", []).eval.budgets == []
    for override, message in [("eval.budgets=[0]", "recipe key 'eval.budgets[0]' must be > 0, got 0"),
                              ("eval.budgets=[8, 8]", "recipe key 'eval.budgets' must be distinct step counts"),
                              ("eval.budgets=8", "recipe key 'eval.budgets' must be a list, got 8")]:
        with pytest.raises(RecipeError, match=re.escape(message)):
            load_recipe(None, "quickstart", [override])
    with pytest.raises(RecipeError, match="budgets are scored on the 'after' tasks; give eval.after"):
        load_recipe(None, "quickstart", ["eval.budgets=[8]", "eval.after=null"])


def test_a_study_gives_its_budgets_to_each_run_as_its_recipe_key(tiny_model_dir, tmp_path):
    from augcse.studies.study import load_grid

    by_set = load_grid(_grid(tmp_path, tiny_model_dir)).plan(tmp_path / "out")
    trained = [run for runs in by_set.values() for run in runs if run.recipe is not None]
    assert trained and all(run.recipe.eval.budgets == [1, 2] for run in trained)


def test_a_misspelt_grid_key_is_named_with_the_right_one(tmp_path):
    from augcse.studies.study import GridError, load_grid

    grid = tmp_path / "g.yaml"
    grid.write_text("seeds: [1]\nrecipe: quickstart\ntasks: STSBenchmark\nrowz: {a: {}}\n")
    with pytest.raises(GridError, match=rf"^grid {grid}: unknown grid key 'rowz' \(did you mean 'rows'\?\)"):
        load_grid(grid)


@pytest.mark.parametrize("corpus", [None, "corpus/not-here.txt"])
def test_a_study_finds_its_corpus_as_train_does(corpus: str | None, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a data directory a quickstart grid trains on the default corpus's fallback, as ``augcse train
    --recipe quickstart`` does; a corpus a row names must be there. A reproduction never falls back."""
    from augcse.studies.runs import Row, missing_inputs, plan_runs
    from augcse.studies.study import load_grid

    monkeypatch.delenv("AUGCSE_DATA", raising=False)
    overrides = [f"data.corpus={corpus}"] if corpus else []
    grid = tmp_path / "g.yaml"
    grid.write_text(yaml.safe_dump({"seeds": [1], "recipe": "quickstart", "tasks": "STSBenchmark-dev-original",
                                    "rows": {"a": {"overrides": overrides}}}))
    runs = load_grid(grid).plan(tmp_path / "out")[""]
    assert runs[0].recipe.data.fallback  # the recipe's own fallback, as train reads it
    refused = [line for line in missing_inputs(runs, None) if "corpus" in line]
    assert bool(refused) == (corpus is not None), refused
    paper = plan_runs([Row("a", (), recipe="quickstart", overrides=tuple(overrides))], [1], tmp_path / "p", ())
    assert any("corpus" in line for line in missing_inputs(paper, None))
