"""``augcse cluster`` end to end on 200 real StackOverflow titles with the tiny random model and a few steps:
clusters.csv in input order, the report's verdict line, cluster.json, final/ loading in plain sentence-transformers
and in BERTopic, the collapse guard keeping the starting model, a resume after an interrupt and after a finish,
and a labels column that is never read."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from augcse.commands.main import main

FAST = ["training.per_device_train_batch_size=16", "training.save_steps=2", "training.max_steps=6",
        "training.logging_steps=1", "model.max_seq_length=16", "eval.batch_size=64"]
K = 5
NEVER_STOPS = {"min_change": -1.0, "plateau": -1.0}  # the rule's thresholds that let a run reach its cap


@pytest.fixture(scope="module")
def titles(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """201 StackOverflow titles with their labels (text,label), one of them blanked: 200 texts."""
    with open(data_dir / "clustering/stackoverflow.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:201]
    rows[7]["text"] = "  "
    path = tmp_path_factory.mktemp("titles") / "so.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return path


class KeysRead(dict):
    """A CSV row that records which of its columns were read."""

    read: set[str] = set()

    def __getitem__(self, key):
        KeysRead.read.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        KeysRead.read.add(key)
        return super().get(key, default)


@pytest.fixture(scope="module")
def finished(titles: Path, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """One run (its folder and what it printed), the CSV reader spied on."""
    import augcse.training.adapt as readers

    class SpiedReader(csv.DictReader):
        def __next__(self):
            return KeysRead(super().__next__())

    folder = tmp_path_factory.mktemp("cluster-run")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        patch.setattr(readers.csv, "DictReader", SpiedReader)
        KeysRead.read = set()
        code = main(["cluster", str(titles), "--clusters", str(K), f"model.backbone={tiny_model_dir}", "name=so",
                     *FAST])
    return code, folder / "runs" / "so", set(KeysRead.read)


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_clusters_csv_has_one_row_per_text_in_input_order(finished, titles):
    code, run, _ = finished
    assert code == 0
    given = [r["text"] for r in _rows(titles) if r["text"].strip()]
    rows = _rows(run / "clusters.csv")
    assert [r["text"] for r in rows] == given and len(rows) == 200
    assert {int(r["cluster"]) for r in rows} <= set(range(K))
    assert all(1 / K <= float(r["confidence"]) <= 1 for r in rows)


def test_cluster_json_records_what_ran(finished, titles):
    import hashlib

    record = json.loads((finished[1] / "cluster.json").read_text())
    assert record["texts_file"] == str(titles.resolve())
    assert record["sha256"] == hashlib.sha256(titles.read_bytes()).hexdigest()
    assert (record["column"], record["clusters"], record["texts"], record["skipped_empty"]) == ("text", K, 200, 1)
    assert record["method"] == "sccl" and record["recipe"] == "cluster" and 0 < record["steps"] <= 6
    assert record["stopping_reason"] and record["kept"] == "the trained model"
    assert record["rule"]["function"] == "augcse.training.cluster.stopping_rule"
    assert {"min_change", "plateau", "max_share", "max_empty", "checked_texts"} <= set(record["rule"])
    assert record["start"]["seed"] == 42 and Path(record["start"]["folder"], "centroids.npy").is_file()
    assert sum(record["sizes_before"]) == sum(record["sizes_after"]) == 200
    trace = record["trace"]
    assert trace and [c["step"] for c in trace] == list(range(2, 2 * len(trace) + 1, 2))
    assert trace[-1]["stop"] or trace[-1]["step"] == 6
    assert all(set(c["measures"]) >= {"changed", "largest_share", "empty", "loss", "sizes"} for c in trace)
    assert trace[0]["measures"]["loss"] is not None  # the clustering loss was logged and read


def test_the_report_opens_with_the_verdict(finished, capsys):
    run = finished[1]
    verdict = json.loads((run / "cluster.json").read_text())["verdict"]
    assert verdict.startswith(f"200 texts in {K} clusters after ")
    md = (run / "clusters.md").read_text()
    assert md.splitlines()[0] == f"# {verdict}"
    assert "| cluster | before | after | top words | representative texts |" in md
    assert "## Stopping rule" in md
    assert "PCA" in md and (run / "clusters-map.png").stat().st_size > 1000
    assert verdict in (run / "clusters.html").read_text()


def test_final_loads_in_plain_sentence_transformers_and_bertopic(finished):
    from bertopic import BERTopic
    from sentence_transformers import SentenceTransformer
    from sklearn.cluster import KMeans
    from sklearn.decomposition import PCA

    final = finished[1] / "final"
    model = SentenceTransformer(str(final))
    assert model.encode(["How do I page a LINQ query?"]).shape == (1, 32)
    docs = [r["text"] for r in _rows(finished[1] / "clusters.csv")]
    topics = BERTopic(embedding_model=SentenceTransformer(str(final)), umap_model=PCA(n_components=5),
                      hdbscan_model=KMeans(n_clusters=K, n_init=1, random_state=0)).fit_transform(docs)[0]
    assert len(topics) == len(docs)


def test_the_labels_column_is_never_read(finished):
    assert finished[2] == {"text"}


def test_the_collapse_guard_keeps_the_starting_model(titles, tiny_model_dir, tmp_path, monkeypatch):
    """A guard that trips at the first check (every cap at 0 %): final/ holds the starting weights, clusters.csv
    the starting model's K-means clusters, and the verdict says so."""
    import torch
    from sentence_transformers import SentenceTransformer

    from augcse.training import cluster

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cluster, "RULE", cluster.RuleSettings(max_share=0.0, max_empty=0.0))
    monkeypatch.setattr(cluster, "stopping_rule", _always_worse(cluster.stopping_rule))
    assert main(["cluster", str(titles), "--clusters", str(K), f"model.backbone={tiny_model_dir}", "name=g",
                 *FAST]) == 0
    run = tmp_path / "runs" / "g"
    record = json.loads((run / "cluster.json").read_text())
    assert record["verdict"].startswith("kept the starting model (collapse: ")
    assert record["kept"] == "the starting model" and record["sizes_after"] == record["sizes_before"]
    start = SentenceTransformer(str(tiny_model_dir)).state_dict()
    final = SentenceTransformer(str(run / "final")).state_dict()
    assert all(torch.equal(final[k], v) for k, v in start.items())
    assert (run / "clusters.md").read_text().startswith("# kept the starting model")


def _always_worse(rule):
    """The rule with the start made perfectly balanced, so any cluster is larger than at the start."""
    def worse(start, previous, current, clusters, losses, settings=None):
        balanced = [i % clusters for i in range(len(start))]
        return rule(balanced, previous, current, clusters, losses, settings)
    return worse


def test_resume_after_an_interrupt_and_after_the_finish(titles, tiny_model_dir, tmp_path, monkeypatch):
    """Stopped after step 3 (checkpoint 2 kept, one check made): --resume trains to the cap with the checks
    continuing where they were; --resume on the finished run redoes the outputs without training."""
    from augcse.training import cluster

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cluster, "RULE", cluster.RuleSettings(**NEVER_STOPS))
    args = ["cluster", str(titles), "--clusters", str(K), f"model.backbone={tiny_model_dir}", "name=r", *FAST]

    def interrupt(self, args_, state, control, **kwargs):
        if state.global_step == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(cluster.ClusterWatch, "on_step_end", interrupt, raising=False)
    assert main(args) == 130
    run = tmp_path / "runs" / "r"
    assert not (run / "summary.json").exists()
    assert [c["step"] for c in cluster.read_trace(run)["checks"]] == [2]
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cluster, "RULE", cluster.RuleSettings(**NEVER_STOPS))
    assert main([*args, "--resume"]) == 0
    record = json.loads((run / "cluster.json").read_text())
    assert [c["step"] for c in record["trace"]] == [2, 4, 6] and record["steps"] == 6
    assert record["stopping_reason"].startswith("step cap: 6 of at most 6 steps")
    before = (run / "clusters.csv").read_text()
    (run / "clusters.csv").unlink()
    monkeypatch.setattr("augcse.training.run.run", _no_training)
    assert main([*args, "--resume"]) == 0
    assert (run / "clusters.csv").read_text() == before


def _no_training(*args, **kwargs):
    raise AssertionError("a finished run is not trained again")
