"""The label-free criteria against hand computations on small arrays, and WiSE-FT interpolation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from augcse.evaluation import label_free as lf


def test_rankme_is_the_exponential_entropy_of_the_singular_values():
    x = np.diag([3.0, 1.0, 0.0])  # singular values 3, 1, 0 -> p = 3/4, 1/4, 0
    by_hand = math.exp(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert lf.rankme(x) == pytest.approx(by_hand, rel=1e-5)
    assert lf.rankme(np.eye(4)) == pytest.approx(4.0, rel=1e-5)


def test_alignment_over_views_by_hand():
    v1 = np.array([[1.0, 0.0], [0.0, 2.0]])
    v2 = np.array([[0.0, 1.0], [0.0, 5.0]])  # unit: (1,0)-(0,1) -> |d|^2 = 2; identical -> 0
    assert lf.alignment_over_views(v1, v2) == pytest.approx(1.0)


def test_uniformity_by_hand():
    x = np.array([[1.0, 0.0], [-1.0, 0.0]])  # one pair at squared distance 4
    assert lf.uniformity(x) == pytest.approx(-8.0)


def test_knn_overlap_by_hand():
    line = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])  # neighbours: 0<->1, 2<->3
    assert lf.knn_overlap(line, line, k=1) == 1.0
    swapped = line[[0, 2, 1, 3]]  # now 0<->2 and 1<->3 are close: every neighbour changed
    assert lf.knn_overlap(line, swapped, k=1) == 0.0


def test_heldout_contrastive_loss_by_hand():
    v = np.eye(2)
    logit = 1 / 0.05  # cosine 1 with itself, 0 with the other
    by_hand = -math.log(math.exp(logit) / (math.exp(logit) + 1.0))
    assert lf.heldout_contrastive_loss(v, v) == pytest.approx(by_hand)
    assert lf.heldout_contrastive_loss(v, v[::-1]) == pytest.approx(by_hand + logit)


def test_kmeans_stability():
    rng = np.random.default_rng(0)
    blobs = np.concatenate([rng.normal(c, 0.01, (10, 3)) for c in np.eye(3)])
    assert lf.kmeans_stability(blobs, 3) == pytest.approx(1.0)
    assert lf.kmeans_stability(rng.normal(size=(60, 8)), 6, seeds=range(4)) < 0.9


def test_interpolation_is_wise_ft():
    import torch

    from augcse.training.interpolate import interpolate

    start = {"w": torch.tensor([0.0, 2.0]), "ids": torch.tensor([1, 2])}
    adapted = {"w": torch.tensor([4.0, 4.0]), "ids": torch.tensor([1, 2])}
    mixed = interpolate(start, adapted, 0.25)
    assert torch.equal(mixed["w"], torch.tensor([1.0, 2.5])) and torch.equal(mixed["ids"], start["ids"])
    with pytest.raises(ValueError, match="keys differ"):
        interpolate(start, {"w": adapted["w"]}, 0.5)
