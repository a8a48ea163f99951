"""Few-shot intent classification: split sampling and the task on real data."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from augcse.evaluation.intent import sample_per_class
from augcse.evaluation.tasks import TASKS, resolve_tasks


def test_sample_per_class_is_balanced_disjoint_and_fixed() -> None:
    labels = np.repeat(np.arange(3), 12)
    train, val = sample_per_class(labels, 5, np.random.default_rng((5, 0)))
    assert np.bincount(labels[train]).tolist() == [5, 5, 5]
    assert np.bincount(labels[val]).tolist() == [5, 5, 5]
    assert not set(train) & set(val)
    again = sample_per_class(labels, 5, np.random.default_rng((5, 0)))
    np.testing.assert_array_equal(train, again[0])
    excl_train, excl_val = sample_per_class(labels, 5, np.random.default_rng(1), exclude=train)
    assert not set(excl_train) & set(train) and not set(excl_val) & set(train)


def test_small_classes_keep_a_validation_item() -> None:
    labels = np.array([0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    train, val = sample_per_class(labels, 5, np.random.default_rng(0))
    assert (labels[train] == 0).sum() == 2 and (labels[val] == 0).sum() == 1


def test_intent_splits_and_published_subsets(data_dir: Path) -> None:
    assert resolve_tasks("intent") == ["SNIPS", "BANKING77", "CLINC150", "HWU64"]
    data = TASKS["BANKING77"].load(data_dir)
    assert len(data["test_texts"]) == 3080
    train, val = data["splits"]["5shot"][0]
    assert len(train) == len(val) == 5 * 77
    pub_train, pub_val = data["splits"]["5shot_published"][0]
    assert len(pub_train) == 385 and not set(pub_train) & set(pub_val)
    assert [len(s) for s in data["splits"].values()] == [5, 5, 5, 1, 1]
    # the splits are fixed: a second load gives the same indices
    np.testing.assert_array_equal(TASKS["BANKING77"].load(data_dir)["splits"]["20shot"][3][0],
                                  data["splits"]["20shot"][3][0])
    clinc = TASKS["CLINC150"].load(data_dir)
    assert len(np.unique(clinc["labels"])) == 150 and "oos" not in clinc["texts"]


def test_intent_task_on_label_encoder(data_dir: Path) -> None:
    task = TASKS["SNIPS"]
    data = task.load(data_dir)
    label_of = dict(zip(data["texts"], data["labels"]))
    label_of.update(zip(data["test_texts"], data["test_labels"]))
    rng = np.random.default_rng(0)
    means = rng.normal(size=(7, 384))

    def encode(texts):  # a noisy oracle, unit norm like a sentence encoder's: nearly separable by class
        x = means[[label_of[t] for t in texts]] + rng.normal(scale=0.5, size=(len(texts), 384))
        return x / np.linalg.norm(x, axis=1, keepdims=True)

    result = task.evaluate(encode, data, fast=True)
    shots = ("5shot", "10shot", "20shot")
    assert set(result) == {f"{k}{suffix}" for k in shots for suffix in ("", "_std", "_devacc")}
    assert result["10shot"] > 95
    assert len(set(task.sentences(data))) < 4000  # only sampled pool rows + test are encoded
