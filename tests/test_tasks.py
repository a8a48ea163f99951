"""A task is one record: complete for every registered task, refused when incomplete, and the one place the
listing, the selection guard, the model card, ``--original`` and ``eval.json``'s versions read."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import pytest

from augcse.commands.main import main
from augcse.assets.download import checksums
from augcse.evaluation.suite import selection_metrics
from augcse.evaluation.tasks import (
    SPLITS, TASK_TYPES, TASKS, Task, TaskRecord, load_builtin_tasks, register_task, variant_of,
)
from augcse.training.model_card import eval_results, task_kind

load_builtin_tasks()
STSB_DEV = "sts/senteval/downstream/STS/STSBenchmark/sts-dev.csv"


def test_every_registered_task_has_a_complete_record_matching_the_data(data_dir):
    """Type, split, metrics, citation, and every file with a recorded sha256 (equal to the data
    directory's copy, which the published figures were measured on) and a download source."""
    assert len(TASKS) == 49
    for name, task in TASKS.items():
        record = task.record
        assert record.name == name and record.type in TASK_TYPES and record.split in SPLITS
        assert record.main_metric and record.citation and record.files
        for file in record.data_files():
            assert file.source and file.sha256, (name, file)
            assert hashlib.sha256((data_dir / file.path).read_bytes()).hexdigest() == file.sha256, file.path


class _Stub(Task):
    def __init__(self, record: TaskRecord) -> None:
        self.record = record

    def load(self, data_dir):
        return None

    def sentences(self, data):
        return []

    def evaluate(self, encode, data, fast=False, seed=0):
        return {}


def test_a_task_without_a_complete_record_is_refused():
    good = TASKS["STSBenchmark-dev"].record
    with pytest.raises(ValueError, match="no sha256 or source") as err:
        register_task(_Stub(replace(good, name="New", files=("sts/new/file.txt",))))
    assert "data/checksums.sha256" in str(err.value) and "New" not in TASKS
    with pytest.raises(ValueError, match="split 'validation' is not one of test, dev, all"):
        replace(good, split="validation")
    with pytest.raises(ValueError, match="type 'retrieval' is not one of"):
        replace(good, type="retrieval")
    with pytest.raises(ValueError, match="needs main_metric, citation"):
        replace(good, main_metric="", citation="")
    with pytest.raises(ValueError, match="main metric is a test score and cannot select models"):
        replace(TASKS["STSBenchmark"].record, selection_metric="all")


def test_the_selection_guard_reads_the_record():
    assert selection_metrics(["STSBenchmark-dev", "MR", "BANKING77"]) == {
        "STSBenchmark-dev": "all", "MR": "devacc", "BANKING77": "10shot_devacc"}
    for name in ("STSBenchmark", "AgNews", "Geometry"):  # a test split, no split, a geometry score
        assert TASKS[name].record.selection_metric is None
        with pytest.raises(ValueError, match=f"{name} only score"):
            selection_metrics([name])


def test_original_files_are_found_by_record_not_by_name():
    assert variant_of("STSBenchmark-dev", "original") == "STSBenchmark-dev-original"
    assert variant_of("STS12", "original") == "STS12-original"
    assert variant_of("MR", "original") == "MR"  # no such variant: the task itself
    assert variant_of("MR", "sklearn") == "MR-sklearn"


def test_the_model_card_reads_type_metric_and_scale_from_the_record():
    assert task_kind("STSBenchmark") == ("Semantic Similarity", "spearman_cosine", 100.0)
    assert task_kind("Geometry") == ("Embedding Geometry", "score", 1.0)
    results = {score.name: (score.description, values) for score, values in
               eval_results({"AgNews": 62.5, "Geometry": -2.5, "sts_avg": 70.0}).items()}
    assert results == {"AgNews": ("Clustering", {"AgNews_accuracy": 0.625}),
                       "Geometry": ("Embedding Geometry", {"Geometry_score": -2.5})}


def test_eval_list_shows_each_record(capsys):
    assert main(["eval", "--list"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("STSBenchmark-dev "))
    assert row.split() == ["STSBenchmark-dev", "sts", "dev", "all", "all", "1"]
    row = next(line for line in out.splitlines() if line.startswith("AgNews "))
    assert row.split() == ["AgNews", "clustering", "all", "acc", "-", "1"]


def _labelled(path: Path, groups: dict[str, list[str]]) -> Path:
    path.write_text("text,label\n" + "".join(f"{t},{label}\n" for label, texts in groups.items() for t in texts))
    return path


def test_eval_save_to_records_library_model_and_data_versions(tiny_st, tmp_path, capsys):
    from augcse.report.run_report import load_run

    run = tmp_path / "run"
    tiny_st.save(str(run / "final"))
    (run / "recipe.yaml").write_text("name: run\n")
    first = _labelled(tmp_path / "a.csv", {"pets": ["a cat", "a dog", "two cats"], "cars": ["a car", "red cars"]})
    assert main(["eval", str(run / "final"), "--tasks", f"clustering:{first}", "--fast", "--save-to", str(run)]) == 0
    versions = json.loads((run / "eval.json").read_text())["versions"]["after"]
    assert set(versions["libraries"]) == {"augcse", "python", "torch", "transformers", "sentence-transformers"}
    weights = run / "final" / "model.safetensors"
    assert versions["model"]["sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    assert versions["data"] == {str(first.resolve()): {"sha256": digest, "as_recorded": False}}  # no record for it
    # a second task for the same model adds its file; the report and compare show scores only
    second = _labelled(tmp_path / "b.csv", {"x": ["one", "two"], "y": ["three", "four"]})
    assert main(["eval", str(run / "final"), "--tasks", f"clustering:{second}", "--fast", "--save-to", str(run)]) == 0
    data = json.loads((run / "eval.json").read_text())["versions"]["after"]["data"]
    assert set(data) == {str(first.resolve()), str(second.resolve())}
    assert set(load_run(run).scores) == {"after"}
    capsys.readouterr()
    assert main(["eval", str(run / "final"), "--tasks", f"clustering:{first}", "--save-to", str(run),
                 "--stage", "versions"]) == 2
    assert "--stage versions" in capsys.readouterr().err


def test_data_versions_are_the_files_read_checked_against_the_record(data_dir):
    from augcse.evaluation.versions import data_versions

    original = "sts/original/STSBenchmark/stsbenchmark/sts-dev.csv"
    assert data_versions(["STSBenchmark-dev", "STSBenchmark-dev-original"], data_dir) == {
        STSB_DEV: {"sha256": checksums()[STSB_DEV], "as_recorded": True},
        original: {"sha256": checksums()[original], "as_recorded": True}}


def test_a_record_lists_exactly_the_files_its_task_reads(data_dir, monkeypatch):
    """The record is not a second description that could drift: loading each task reads its files and no other."""
    import augcse.evaluation.clustering as clustering
    import augcse.evaluation.geometry as geometry
    import augcse.evaluation.sts as sts
    import augcse.evaluation.transfer as transfer
    from augcse.assets.resolve import resolve_data

    read: list[str] = []

    def spy(relpath, data_dir_=None, download=True):
        read.append(relpath)
        return resolve_data(relpath, data_dir_, download)

    for module in (sts, transfer, clustering, geometry):
        monkeypatch.setattr(module, "resolve_data", spy)
    for name, task in TASKS.items():
        if task.record.variant == "sklearn":  # the same loader as the default classifier's task
            assert task.record.files == TASKS[task.record.family].record.files
            continue
        read.clear()
        task.load(data_dir)
        assert set(read) == set(task.record.files), name
