"""Augmentation analysis: statistics and correlations on plain inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from augcse.evaluation.analysis import (
    analysis_table,
    augmentation_stats,
    correlations,
    lm_difference,
    pair_similarity,
)


def test_pair_similarity_and_lm_difference() -> None:
    np.testing.assert_allclose(pair_similarity(np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([[2.0, 0.0], [-1.0, -1.0]])),
                               [1.0, -1.0])
    np.testing.assert_allclose(lm_difference([10.0, 20.0], [15.0, 18.0]), [5.0, -2.0])


def test_augmentation_stats_with_plain_callables() -> None:
    vectors = {"a": [1.0, 0.0], "a'": [1.0, 0.0], "b": [0.0, 1.0], "b'": [1.0, 0.0]}
    encode = lambda texts: np.array([vectors[t] for t in texts])  # noqa: E731
    ppl = lambda texts: [10.0 if "'" not in t else 13.0 for t in texts]  # noqa: E731
    stats = augmentation_stats({"copy": (["a"], ["a'"]), "flip": (["a", "b"], ["a'", "b'"])}, encode, ppl)
    assert stats["copy"] == {"similarity": 1.0, "n": 1.0, "lm_diff": 3.0}
    assert stats["flip"]["similarity"] == pytest.approx(0.5)


def test_correlations_hand_case() -> None:
    stats = {"x": {"similarity": 0.9, "lm_diff": 1.0}, "y": {"similarity": 0.5, "lm_diff": 5.0},
             "z": {"similarity": 0.7, "lm_diff": 3.0}, "only_stats": {"similarity": 0.1}}
    downstream = {"x": {"sts": 80.0, "transfer": 85.0}, "y": {"sts": 70.0, "transfer": 85.0},
                  "z": {"sts": 75.0, "transfer": 85.0}}
    out = {(c.statistic, c.downstream): c for c in correlations(stats, downstream)}
    assert out["similarity", "sts"].pearson == pytest.approx(1.0)
    assert out["lm_diff", "sts"].spearman == pytest.approx(-1.0)
    assert out["similarity", "sts"].n == 3
    assert math.isnan(out["similarity", "transfer"].pearson)  # constant downstream column
    rows = analysis_table(stats, downstream)
    assert rows[0] == {"augmentation": "x", "similarity": 0.9, "lm_diff": 1.0, "sts": 80.0, "transfer": 85.0}
