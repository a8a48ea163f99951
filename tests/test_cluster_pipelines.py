"""The peer pipelines of ``augcse cluster`` (K-means, UMAP + K-means, BERTopic's UMAP + HDBSCAN) on separable
blobs, their settings held to BERTopic's own defaults, and the Hungarian accuracy on hand-made labellings."""

from __future__ import annotations

import numpy as np
import pytest

from augcse.evaluation.topic_pipelines import (HDBSCAN_SETTINGS, PIPELINES, UMAP_SETTINGS, hungarian_accuracy,
                                               run_pipelines, scores)


@pytest.fixture(scope="module")
def blobs() -> tuple[np.ndarray, np.ndarray]:
    """Three well-separated groups of 40 points in 16 dimensions, labels 7, 8, 9."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 16)) * 10
    labels = np.repeat([7, 8, 9], 40)
    return (centres[labels - 7] + rng.normal(size=(120, 16))).astype(np.float32), labels


@pytest.mark.parametrize("name", list(PIPELINES))
def test_each_pipeline_finds_separable_groups(blobs, name):
    embeddings, labels = blobs
    runs = run_pipelines(embeddings, 3, [name], seeds=(0, 1))[name]
    assert len(runs) == 2 and all(len(r) == len(labels) and r.min() >= 0 for r in runs)
    assert scores({name: runs}, labels)[name]["accuracy"] == pytest.approx(1.0)


def test_the_umap_and_hdbscan_settings_are_bertopics_defaults():
    from bertopic import BERTopic

    default = BERTopic()
    assert {k: default.umap_model.get_params()[k] for k in UMAP_SETTINGS} == UMAP_SETTINGS
    assert {k: getattr(default.hdbscan_model, k) for k in HDBSCAN_SETTINGS} == HDBSCAN_SETTINGS


def test_noise_is_one_more_cluster(monkeypatch):
    import hdbscan

    from augcse.evaluation import topic_pipelines

    monkeypatch.setattr(topic_pipelines, "reduce", lambda embeddings, seed: embeddings)
    monkeypatch.setattr(hdbscan.HDBSCAN, "fit_predict", lambda self, x: np.array([0, 1, -1, 1, -1]))
    assert topic_pipelines.bertopic_default(np.zeros((5, 2)), 3, 0).tolist() == [0, 1, 2, 1, 2]


@pytest.mark.parametrize("labels, predicted, accuracy", [
    (["a", "a", "b", "b"], [1, 1, 0, 0], 1.0),  # a permutation
    (["a", "a", "b", "b"], [0, 0, 0, 0], 0.5),  # one cluster
    (["a", "a", "a", "b"], [0, 1, 2, 3], 0.5),  # more clusters than labels: two texts unmatched
    ([3, 3, 5, 5, 5, 9], [2, 2, 2, 0, 0, 1], 5 / 6),
])
def test_hungarian_accuracy(labels, predicted, accuracy):
    assert hungarian_accuracy(labels, predicted) == pytest.approx(accuracy)


def test_an_unknown_pipeline_is_named():
    with pytest.raises(ValueError, match="unknown pipeline 'hdbscan'; choose from kmeans, umap\\+kmeans, bertopic"):
        run_pipelines(np.zeros((4, 2)), 2, ["hdbscan"])


def test_the_peers_are_described_beside_the_commands_clusters(blobs):
    """``augcse cluster --peers``: every pipeline on both models, agreeing fully with clusters that are the groups."""
    from augcse.training.cluster import compare_peers

    embeddings, labels = blobs
    rows = compare_peers(embeddings, embeddings + 1, labels - 7, 3)
    assert [(r["model"], r["pipeline"]) for r in rows] == [(m, p) for m in ("starting", "kept") for p in PIPELINES]
    assert all(r["nmi_with_ours"] == pytest.approx(1.0) and r["clusters"] == 3 for r in rows)
    assert all(r["largest_share"] == pytest.approx(1 / 3) for r in rows)


def test_peers_without_their_packages_is_one_line(tmp_path, monkeypatch, capsys):
    import importlib.util

    from augcse.commands.main import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "hdbscan" else real(name, *a))
    (tmp_path / "t.txt").write_text("".join(f"text {i}\n" for i in range(100)))
    monkeypatch.chdir(tmp_path)
    assert main(["cluster", "t.txt", "--clusters", "3", "--peers"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--peers needs the hdbscan package(s): pip install 'augcse[cluster]'" in err[0]


def test_umap_runs_once_a_seed_for_the_pipelines_on_it(monkeypatch):
    """UMAP + K-means and BERTopic's clustering share each seed's reduction: one UMAP fit a seed, not one each."""
    from augcse.evaluation import topic_pipelines

    fits = []
    monkeypatch.setattr(topic_pipelines, "reduce", lambda embeddings, seed: fits.append(seed) or embeddings[:, :2])
    embeddings = np.random.default_rng(0).normal(size=(40, 4)).astype(np.float32)
    runs = run_pipelines(embeddings, 2, ["umap+kmeans", "bertopic"], seeds=(0, 1))
    assert fits == [0, 1] and [len(r) for r in runs.values()] == [2, 2]
