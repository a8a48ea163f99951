"""Label-free criteria of an embedding space, computed on a user's texts alone (no labels anywhere).

Each criterion is one small function on arrays, so it can be checked by hand on small inputs:

- :func:`rankme` (Garrido et al. 2023, "RankMe"): the exponential of the entropy of the normalised singular
  values, a smooth effective rank; higher means the embeddings use more directions.
- :func:`alignment_over_views` and :func:`uniformity` (Wang & Isola 2020): alignment between two dropout views
  of the same texts (lower is better) and the uniformity of the embeddings (lower is more uniform).
- :func:`knn_overlap`: the share of each text's k nearest neighbours that the starting model also lists,
  averaged; 1.0 means the neighbourhoods did not move.
- :func:`heldout_contrastive_loss`: SimCSE's InfoNCE between two dropout views of texts not trained on
  (Gao et al. 2021); lower means the training objective generalises to unseen texts of the domain.
- :func:`kmeans_stability`: the mean adjusted Rand index between K-means partitions from different seeds
  (stability as a clustering criterion, Ben-Hur et al. 2002); 1.0 means every seed finds the same clusters.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

from augcse.evaluation.geometry import alignment, normalize, uniformity

__all__ = ["alignment_over_views", "heldout_contrastive_loss", "kmeans_stability", "knn_overlap", "rankme",
           "uniformity"]


def rankme(x: np.ndarray, eps: float = 1e-7) -> float:
    """``exp(-Σ p_k log p_k)`` with ``p_k = σ_k / Σσ + eps`` over the singular values σ of ``x`` (RankMe, eq. 1)."""
    s = np.linalg.svd(np.asarray(x, dtype=np.float64), compute_uv=False)
    p = s / max(s.sum(), eps) + eps
    return float(np.exp(-np.sum(p * np.log(p))))


def alignment_over_views(view1: np.ndarray, view2: np.ndarray) -> float:
    """Wang & Isola's alignment (α = 2) between two dropout views of the same texts, row by row."""
    return alignment(view1, view2, alpha=2.0)


def knn_overlap(x: np.ndarray, reference: np.ndarray, k: int = 10) -> float:
    """Mean share of each row's ``k`` cosine nearest neighbours in ``x`` that are also among them in ``reference``."""
    if len(x) != len(reference) or len(x) <= k:
        raise ValueError(f"knn_overlap needs the same texts in both and more than k={k} of them")

    def neighbours(e: np.ndarray) -> np.ndarray:
        e = normalize(e)
        sim = e @ e.T
        np.fill_diagonal(sim, -np.inf)
        return np.argsort(-sim, axis=1, kind="stable")[:, :k]

    a, b = neighbours(x), neighbours(reference)
    return float(np.mean([len(set(r) & set(s)) / k for r, s in zip(a, b)]))


def heldout_contrastive_loss(view1: np.ndarray, view2: np.ndarray, temperature: float = 0.05) -> float:
    """Mean cross-entropy of picking row i of ``view2`` for row i of ``view1`` among all rows (cosine / τ)."""
    logits = normalize(view1) @ normalize(view2).T / temperature
    top = logits.max(axis=1, keepdims=True)
    log_z = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    return float(np.mean(log_z - np.diag(logits)))


def kmeans_stability(x: np.ndarray, clusters: int, seeds: Sequence[int] = (0, 1, 2)) -> float:
    """Mean adjusted Rand index over pairs of K-means partitions of ``x`` (unit vectors), one per seed."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score

    x = normalize(x)
    parts = [KMeans(n_clusters=clusters, n_init=1, random_state=s).fit_predict(x) for s in seeds]
    return float(np.mean([adjusted_rand_score(a, b) for a, b in combinations(parts, 2)]))
