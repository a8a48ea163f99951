"""SentEval transfer: protocol pieces against hand-checked tiny cases, loaders against the real files."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest

from augcse.evaluation import transfer
from augcse.evaluation.tasks import TASKS, resolve_tasks
from augcse.evaluation.transfer import FAST, Protocol, folds, nested_cv_accuracy, pair_features


def test_mrpc_features_are_abs_difference_then_product() -> None:
    u = np.array([[1.0, -2.0], [0.5, 0.0]])
    v = np.array([[3.0, 1.0], [0.5, 2.0]])
    expected = np.array([[2.0, 3.0, 3.0, -2.0], [0.0, 2.0, 0.25, 0.0]])  # [|u-v|, u*v]
    np.testing.assert_allclose(pair_features(u, v), expected)
    full = pair_features(u, v, "full")
    np.testing.assert_allclose(full, np.hstack([u, v, expected]))
    with pytest.raises(ValueError, match="unknown pair feature layout"):
        pair_features(u, v, "concat")


def test_mrpc_task_builds_documented_features() -> None:
    sentences = {"a": [1.0, 2.0], "b": [3.0, -1.0]}
    task = TASKS["MRPC"] if "MRPC" in TASKS else transfer.MRPCTask()
    feats = task.features(lambda s: np.array([sentences[x] for x in s]), {"A": ["a"], "B": ["b"]})
    np.testing.assert_allclose(feats, [[2.0, 3.0, 3.0, -2.0]])


def test_folds_partition_the_data_and_are_stratified() -> None:
    y = np.array([0] * 30 + [1] * 20)
    seen = []
    for train, test in folds(y, 10, seed=0):
        assert not set(train) & set(test)
        assert sorted(np.bincount(y[test])) == [2, 3]
        seen += list(test)
    assert sorted(seen) == list(range(50))


def test_cross_validation_never_sees_the_test_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Identity features + random labels: a model that saw the test fold would memorise it (≈100 %);
    one that did not can only predict the majority class. Also spy on what selection receives."""
    n = 60
    X = np.eye(n)
    y = np.random.default_rng(0).integers(0, 2, n)
    seen_by_selection: list[set[int]] = []
    original = transfer.fit_selected

    def spy(Xs, ys, *args, **kwargs):
        seen_by_selection.append({int(np.argmax(row)) for row in Xs})  # identity rows name their sample
        return original(Xs, ys, *args, **kwargs)

    monkeypatch.setattr(transfer, "fit_selected", spy)
    proto = Protocol(folds=5, nested_grid=(1.0, 1000.0), kfold_grid=(1.0,))
    result = nested_cv_accuracy(X, y, proto, seed=0)
    test_folds = [set(test.tolist()) for _, test in folds(y, 5, 0)]
    assert len(seen_by_selection) == 5
    for seen, test in zip(seen_by_selection, test_folds):
        assert not seen & test
        assert len(seen) == n - len(test)
    assert result["acc"] < 75.0  # memorising the test fold would give 100


def test_nested_cv_separable_data_is_perfect() -> None:
    rng = np.random.default_rng(1)
    y = np.repeat([0, 1], 40)
    X = rng.normal(size=(80, 4)) + 6.0 * y[:, None]
    assert nested_cv_accuracy(X, y, FAST)["acc"] == 100.0


def test_split_accuracy_chooses_c_on_dev_only() -> None:
    rng = np.random.default_rng(2)
    Xtr = rng.normal(size=(40, 3))
    ytr = (Xtr[:, 0] > 0).astype(int)
    dev = (Xtr, ytr)
    test = (Xtr, 1 - ytr)  # adversarial test set: selection must not look at it
    out = transfer.split_accuracy((Xtr, ytr), dev, test, grid=(0.01, 1.0, 100.0))
    assert out["devacc"] > 90 and out["acc"] < 10


def test_transfer_suite_is_registered() -> None:
    assert resolve_tasks("transfer") == ["MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC"]
    assert all(TASKS[t].main_metric == "acc" for t in resolve_tasks("transfer"))


def test_loaders_keep_senteval_quirks(data_dir: Path) -> None:
    cr = TASKS["CR"].load(data_dir)
    assert len(cr["X"]) == 3775 and cr["X"].count("") == 4  # empty lines kept as samples
    assert list(cr["y"]).count(1) == 2407
    mpqa = TASKS["MPQA"].load(data_dir)
    assert len(mpqa["X"]) == 10606 and mpqa["X"].count("") == 3
    trec = TASKS["TREC"].load(data_dir)
    assert len(trec["train"][0]) == 5452 and len(trec["test"][0]) == 500
    assert any("sister\xf0city" in s for s in trec["train"][0])  # latin-1 byte decoded, not dropped
    assert sorted(set(trec["train"][1].tolist())) == [0, 1, 2, 3, 4, 5]
    assert "How did serfdom develop in and then leave Russia ?" in trec["train"][0]  # fine label dropped
    sst = TASKS["SST2"].load(data_dir)
    assert [len(sst[s][0]) for s in ("train", "dev", "test")] == [67349, 872, 1821]
    mrpc = TASKS["MRPC"].load(data_dir)
    assert len(mrpc["train"]["y"]) == 4076 and len(mrpc["test"]["y"]) == 1725
    assert int(mrpc["train"]["y"].sum()) == 2753
    assert not any("\ufeff" in s or "#1 String" in s for s in mrpc["train"]["A"])
    # SentEval order: by token count, then label
    lengths = [len(s.split()) for s in cr["X"]]
    assert lengths == sorted(lengths)


def test_transfer_tasks_run_fast_on_tiny_encoder(data_dir: Path) -> None:
    """End to end on real data with a cheap deterministic encoder (hashed bag of words)."""

    def encode(sentences):
        out = np.zeros((len(sentences), 64), dtype=np.float32)
        for i, s in enumerate(sentences):
            for w in s.split():
                out[i, zlib.crc32(w.encode()) % 64] += 1.0
        return out

    task = TASKS["TREC"]
    result = task.evaluate(encode, task.load(data_dir), fast=True)
    assert 40 < result["acc"] <= 100 and 40 < result["devacc"] <= 100


def test_selection_during_training_reads_no_test_score(tiny_st, monkeypatch: pytest.MonkeyPatch) -> None:
    """``eval.dev: transfer`` (AugCSE's Table 11 selection) ranks checkpoints on the mean transfer devacc:
    every test-split score is poisoned here, and the selection score must not see any of them."""
    from augcse.evaluation.suite import SuiteEvaluator

    names = resolve_tasks("transfer")
    dev = {name: 50.0 + i for i, name in enumerate(names)}
    for name in names:
        task = TASKS[name]
        monkeypatch.setattr(task, "load", lambda root: {})
        monkeypatch.setattr(task, "sentences", lambda data: ["a short sentence"])
        monkeypatch.setattr(task, "evaluate", lambda encode, data, fast=False, seed=0, _n=name:
                            {"acc": -1e6, "f1": -1e6, "devacc": dev[_n]})
    evaluator = SuiteEvaluator("transfer", None, name="dev")
    assert evaluator.selection == {name: "devacc" for name in names}
    metrics = evaluator(tiny_st)
    assert metrics["dev_score"] == pytest.approx(sum(dev.values()) / len(dev))
    assert all(value > 0 for value in metrics.values())  # no -1e6 test score anywhere
