"""The cluster study's runner on a tiny grid (the tiny random model, 64 texts of two sets, a few steps): a record
per set × seed, a resume that skips what is recorded, the command given texts only and the labels read after it;
the grid's refusals; the targets' marks; and the committed pages against their records."""

from __future__ import annotations

import csv
import inspect
import json
from pathlib import Path

import numpy as np
import pytest

from augcse.studies import cluster_study
from augcse.studies.cluster_study import Grid

ROOT = Path(__file__).resolve().parents[1]
FAST = ["training.per_device_train_batch_size=16", "training.save_steps=2", "training.max_steps=4",
        "training.logging_steps=1", "model.max_seq_length=16", "eval.batch_size=64"]
SETS = ["snips", "stackoverflow"]


@pytest.fixture(scope="module")
def study(tiny_model_dir: Path, data_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The study run once on two sets × one seed, with what the command was given and when labels were read."""
    from augcse.evaluation import topic_pipelines

    base = tmp_path_factory.mktemp("cluster-study")
    grid = Grid("tiny", SETS, [3], 64, 0, [f"model.backbone={tiny_model_dir}", *FAST])
    events: list[tuple[str, object]] = []
    command, scorer = cluster_study.run_command, cluster_study.check_scores

    def spied_command(texts_csv, clusters, seed, *args):
        with open(texts_csv, encoding="utf-8", newline="") as f:
            events.append(("command", (next(csv.reader(f)), clusters, seed, args)))
        return command(texts_csv, clusters, seed, *args)

    def spied_scorer(run_dir, labels, seed):
        events.append(("labels", run_dir))
        return scorer(run_dir, labels, seed)

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(base)
        patch.setattr(cluster_study, "run_command", spied_command)
        patch.setattr(cluster_study, "check_scores", spied_scorer)
        patch.setattr(topic_pipelines, "reduce", lambda embeddings, seed: embeddings[:, :5])  # UMAP is tested apart
        written = cluster_study.run_study(grid, base / "out", base / "work", data_dir)
    return grid, base, written, events


def test_a_record_per_set_and_seed(study):
    grid, base, written, _ = study
    assert [p.name for p in written] == ["snips-s3.json", "stackoverflow-s3.json"]
    for path in written:
        record = json.loads(path.read_text())
        assert record["texts"] == 64 and record["grid"]["sets"] == SETS and record["seed"] == 3
        assert set(record["start"]) == set(record["kept"]["pipelines"]) == {"kmeans", "umap+kmeans", "bertopic"}
        assert 0 <= record["own"]["accuracy"] <= 1 and record["checks"][0]["step"] == 0
        assert record["best_check"]["accuracy"] == max(c["accuracy"] for c in record["checks"])
        assert len(record["git"]["commit"]) == 40 and record["seconds"]["command"] > 0
    assert (base / "out" / "start" / "snips.json").is_file()
    assert "| design |" not in (base / "out" / "study.md").read_text()  # labelled by its folder's name
    assert "snips" in (base / "out" / "study.md").read_text()


def test_the_command_gets_texts_only_and_labels_are_read_after_it(study):
    _, _, _, events = study
    assert [kind for kind, _ in events] == ["command", "labels", "command", "labels"]
    for kind, (header, clusters, seed, args) in (e for e in events if e[0] == "command"):
        assert header == ["text"] and seed == 3 and isinstance(clusters, int)
        assert not any("label" in str(a) for a in args)
    assert clusters == len(set(cluster_study.read_sample(Path(args[2]), "stackoverflow", 64, 0).labels))


@pytest.mark.parametrize("function", ["augcse.training.cluster.stopping_rule", "augcse.training.cluster.ClusterWatch",
                                      "augcse.studies.cluster_study.run_command"])
def test_the_command_side_takes_no_labels(function):
    import importlib

    module, name = function.rsplit(".", 1)
    assert not [p for p in inspect.signature(getattr(importlib.import_module(module), name)).parameters if "label" in p]


def test_a_resumed_study_skips_what_is_recorded(study, data_dir, monkeypatch):
    grid, base, _, _ = study
    monkeypatch.chdir(base)
    monkeypatch.setattr(cluster_study, "run_command", lambda *a: pytest.fail("a recorded run ran again"))
    assert cluster_study.run_study(grid, base / "out", base / "work", data_dir) == []


GOOD = {"name": "g", "sets": ["snips"], "seeds": [1], "n": 100, "sample_seed": 0, "overrides": []}


@pytest.mark.parametrize("change, line", [
    ({"sets": ["agnews"]}, "unknown set 'agnews'; choose from tweet"),
    ({"sets": ["googlenews_t"]}, "unknown set 'googlenews_t'"),
    ({"n": 10}, "n must be at least 64"),
    ({"seeds": 1}, "seeds must be a list"),
    ({"extra": 1}, "needs exactly the keys name, sets"),
])
def test_a_wrong_grid_is_one_line_and_exit_2(tmp_path, capsys, change, line):
    import yaml

    grid = tmp_path / "g.yaml"
    grid.write_text(yaml.safe_dump({**GOOD, **change}))
    assert cluster_study.main([str(grid), "--output", str(tmp_path / "o"), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert line in err and err.count("\n") == 1 and str(grid) in err


def _records(gains: dict[str, list[float]], bertopic: float = 0.0) -> dict[str, list[dict]]:
    """Hand-made records: start K-means 0.5 on every set, the kept model 0.5 + gain (points / 100)."""
    def one(name, seed, gain):
        scores = {p: {"accuracy": 0.5} for p in cluster_study.PIPELINE_NAMES}
        kept = {**scores, "kmeans": {"accuracy": 0.5 + gain / 100}, "bertopic": {"accuracy": 0.5 + bertopic / 100}}
        return {"set": name, "seed": seed, "clusters": 4, "texts": 100, "start": scores, "kept": {"pipelines": kept},
                "own": {"accuracy": 0.4}, "best_check": {"step": 10, "accuracy": 0.6},
                "checks": [{"step": 0, "accuracy": 0.4}, {"step": 10, "accuracy": 0.6}], "command": {"steps": 10}}

    return {name: [one(name, s, g) for s, g in enumerate(values)] for name, values in gains.items()}


@pytest.mark.parametrize("gains, bertopic, marks", [
    ({"a": [6.0, 7.0], "b": [5.0, 6.0]}, 1.0, ["✓", "✓", "✓"]),
    ({"a": [-3.0, -2.0], "b": [20.0, 21.0]}, 1.0, ["✗", "✓", "✓"]),  # one set lost more than a seed sd
    ({"a": [1.0, 2.0], "b": [1.0, 2.0]}, 1.0, ["✓", "✗", "✓"]),
    ({"a": [6.0, 7.0], "b": [5.0, 6.0]}, -1.0, ["✓", "✓", "✗"]),
])
def test_the_targets_are_marked_from_the_records(gains, bertopic, marks):
    lines = cluster_study.summary_table({"design": _records(gains, bertopic)})
    assert [line.split()[1] for line in lines if line.startswith("  - ")] == marks


def test_a_changed_record_changes_the_table():
    """The block can go stale: one kept score moved changes the gain cell."""
    records = _records({"a": [6.0, 7.0]})
    before = cluster_study.summary_table({"design": records})
    records["a"][0]["kept"]["pipelines"]["kmeans"]["accuracy"] += 0.05
    assert cluster_study.summary_table({"design": records}) != before


@pytest.mark.parametrize("name", sorted(cluster_study.STUDY_LABELS))
def test_each_committed_study_page_is_what_its_records_give(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    folder = Path("docs/studies") / name
    if not (folder / cluster_study.RECORDS).is_dir():
        pytest.skip(f"{folder} has no records yet")
    assert (folder / cluster_study.PAGE).read_text(encoding="utf-8") == cluster_study.page(folder)


def test_check_scores_reads_the_trace(tmp_path):
    from augcse.training.cluster import TRACE

    (tmp_path / TRACE).write_text(json.dumps({"start": [0, 0, 1, 1], "checks": [
        {"step": 5, "assignments": [0, 1, 1, 1]}, {"step": 10, "assignments": [1, 1, 0, 0]}]}))
    found = cluster_study.check_scores(tmp_path, ["x", "x", "y", "y"], 0)
    assert [(c["step"], c["accuracy"]) for c in found] == [(0, 1.0), (5, 0.75), (10, 1.0)]
    assert np.isclose(max(c["accuracy"] for c in found), 1.0)


def test_a_record_names_the_commit_that_froze_its_grid():
    state = cluster_study.git_state(ROOT / "src/augcse/data/studies/cluster-heldout.yaml")
    assert len(state["grid_commit"]) == 40 and state["grid_changed"] is False and len(state["commit"]) == 40
