"""Short-text clustering: Hungarian accuracy, K-means protocol, loaders."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from augcse.evaluation.clustering import (
    aligned_confusion,
    cluster_accuracy,
    clustering_scores,
    hungarian_mapping,
)
from augcse.evaluation.tasks import TASKS, resolve_tasks


def test_permuted_labelling_has_accuracy_one() -> None:
    y = np.array([0, 0, 1, 1, 1, 2, 2, 3])
    perm = np.array([2, 3, 0, 1])
    assert cluster_accuracy(y, perm[y]) == 1.0
    assert hungarian_mapping(y, perm[y]) == {2: 0, 3: 1, 0: 2, 1: 3}


def test_hand_checked_partial_accuracy() -> None:
    # clusters: {0,1,2} -> class 0 has 2 of them; {3,4,5} -> class 1 has 3; best matching: 5 of 6 correct
    y_true = np.array([0, 0, 1, 1, 1, 1])
    y_pred = np.array([5, 5, 5, 7, 7, 7])
    assert cluster_accuracy(y_true, y_pred) == 5 / 6
    # one cluster for everything: only one class can be matched
    assert cluster_accuracy(y_true, np.zeros(6, dtype=int)) == 4 / 6


def test_aligned_confusion_puts_matches_on_the_diagonal() -> None:
    y_true = np.array([0, 0, 1, 1, 2])
    y_pred = np.array([2, 2, 0, 0, 1])
    np.testing.assert_array_equal(aligned_confusion(y_true, y_pred), np.diag([2, 2, 1]))


def test_kmeans_recovers_well_separated_blobs() -> None:
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(4), 25)
    centres = 10 * np.eye(4, 6)
    x = centres[labels] + rng.normal(scale=0.3, size=(100, 6))
    scores = clustering_scores(x, labels, seeds=[0, 1, 2], n_init=2)
    assert scores["acc"] == 100.0 and abs(scores["nmi"] - 100.0) < 1e-6 and scores["acc_std"] == 0.0


def test_kmeans_labels_do_not_depend_on_the_thread_count() -> None:
    """kmeans_labels pins one thread for speed on shared machines; the thread count never changes the labels."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    from augcse.evaluation.clustering import kmeans_labels

    rng = np.random.default_rng(1)  # overlapping clusters in 64 dimensions: many Lloyd iterations
    x = (rng.normal(size=(3000, 64)) + 1.5 * rng.normal(size=(8, 64))[rng.integers(0, 8, 3000)]).astype(np.float32)
    with threadpool_limits(limits=2):
        two = KMeans(n_clusters=8, n_init=3, random_state=0).fit_predict(x)
    np.testing.assert_array_equal(kmeans_labels(x, 8, seed=0, n_init=3), two)


def test_clustering_suite_and_loaders(data_dir: Path) -> None:
    names = resolve_tasks("clustering")
    assert names == ["AgNews", "SearchSnippets", "StackOverflow", "Biomedical", "Tweet",
                     "GoogleNews-TS", "GoogleNews-T", "GoogleNews-S"]
    expected = {"AgNews": (8000, 4), "Tweet": (2472, 89), "GoogleNews-TS": (11109, 152), "StackOverflow": (20000, 20)}
    for name, (rows, k) in expected.items():
        data = TASKS[name].load(data_dir)
        assert len(data["texts"]) == rows and len(np.unique(data["labels"])) == k


def test_clustering_task_fast_mode(data_dir: Path) -> None:
    task = TASKS["Tweet"]
    data = task.load(data_dir)
    rng = np.random.default_rng(0)
    encode = lambda texts: np.eye(89)[data["labels"]] * 5 + rng.normal(scale=0.1, size=(len(texts), 89))  # noqa: E731
    result = task.evaluate(encode, data, fast=True)
    assert result["acc"] > 90 and set(result) == {"acc", "acc_std", "nmi", "nmi_std"}


def test_clustering_cannot_select_models(data_dir: Path) -> None:
    """Clustering scores come from the labels of the very texts clustered: a training evaluator refuses them."""
    from augcse.evaluation.suite import SuiteEvaluator

    with pytest.raises(ValueError, match="Tweet only score"):
        SuiteEvaluator("Tweet", data_dir, fast=True, name="dev")


def test_tasks_run_on_a_model(tiny_st, data_dir: Path) -> None:
    """The clustering task on a tiny random model through the evaluation API (fast mode)."""
    from augcse.evaluation.suite import run_tasks

    scores = run_tasks(tiny_st, ["Tweet"], data_dir, fast=True, progress=False)["Tweet"]
    assert 0 < scores["acc"] <= 100 and 0 <= scores["nmi"] <= 100


@pytest.mark.parametrize("rows, found", [("a cat,pets\na dog,pets\n", "only 'pets'"), ("", "no rows")])
def test_a_file_with_fewer_than_two_labels_is_refused_before_the_model_loads(tmp_path, capsys, rows, found) -> None:
    """With one label every clustering is perfect (it scored 100.00): refused in one line, exit 2. The model
    named does not exist, so an error about the file proves it came first."""
    from augcse.commands.main import main

    path = tmp_path / "one.csv"
    path.write_text("text,label\n" + rows)
    assert main(["eval", str(tmp_path / "no-model"), "--tasks", f"clustering:{path}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"augcse eval: error: clustering:{path}: needs at least 2 distinct labels to score a clustering, "
                     f"found {found}; label the rows by group"]
