"""Geometry of an embedding space: alignment/uniformity, neighbourhood purity, isomorphism measures.

- :func:`alignment`, :func:`uniformity` (Wang & Isola 2020, used by SimCSE): computed on
  L2-normalised embeddings. Alignment = mean ``‖f(x) - f(y)‖^α`` over positive pairs (lower is
  better); uniformity = ``log mean exp(-t ‖f(x) - f(y)‖²)`` over distinct pairs (lower = more
  uniform; 0 when all vectors coincide).
- :func:`neighbour_stats` (VaSCL Fig. 2a): for each item, the share of its top-K neighbours with the
  same label and the mean distance to them, averaged over items, for several K.
- Isomorphism between two embedding samples X₁ (originals) and X₂ (augmentations), AugCSE App. A.13
  after Dubossarsky et al. (2020): :func:`cond_hm` (harmonic mean of effective condition numbers),
  :func:`singular_value_gap`, :func:`gromov_hausdorff` (bottleneck distance between Vietoris–Rips
  persistence diagrams; needs the optional ``gudhi`` package).

The registered task ``Geometry`` (suite ``"geometry"``) reports SimCSE's setting: alignment over
STS-B dev pairs with gold score ≥ 4, uniformity over all STS-B dev sentences (main metric
``uniformity``; both lower-is-better, so its suite average is not a quality score to maximise).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np

from augcse.assets.resolve import resolve_data
from augcse.evaluation.tasks import Encoder, Task, TaskRecord, register_task

EPS = 1e-10  # singular values this small are clamped, as in the reference analysis code


def normalize(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


# --------------------------------------------------------------------------- alignment / uniformity


def alignment(x: np.ndarray, y: np.ndarray, alpha: float = 2.0) -> float:
    """Mean ``‖x_i - y_i‖^α`` over positive pairs (rows of x and y), on normalised vectors."""
    diff = normalize(x) - normalize(y)
    return float(np.mean(np.linalg.norm(diff, axis=1) ** alpha))


def uniformity(x: np.ndarray, t: float = 2.0, max_items: int = 5000, seed: int = 0) -> float:
    """``log mean_{i<j} exp(-t ‖x_i - x_j‖²)`` on normalised vectors (a seeded sample beyond max_items)."""
    x = normalize(x)
    if len(x) > max_items:
        x = x[np.random.default_rng(seed).choice(len(x), max_items, replace=False)]
    if len(x) < 2:
        raise ValueError("uniformity needs at least two vectors")
    sq = np.maximum(2.0 - 2.0 * (x @ x.T), 0.0)  # squared distance between unit vectors
    iu = np.triu_indices(len(x), k=1)
    vals = -t * sq[iu]
    top = vals.max()
    return float(top + np.log(np.mean(np.exp(vals - top))))  # log-mean-exp, stable


# --------------------------------------------------------------------------- neighbourhoods


def neighbour_stats(
    embeddings: np.ndarray, labels: np.ndarray, ks: tuple[int, ...] = (1, 5, 10, 50, 100), chunk: int = 2048
) -> dict[int, dict[str, float]]:
    """For each K: ``purity`` (share of the top-K cosine neighbours, self excluded, with the item's label)
    and ``distance`` (their mean cosine distance 1 - cos), averaged over all items."""
    x = normalize(embeddings).astype(np.float32)
    labels = np.asarray(labels)
    kmax = min(max(ks), len(x) - 1)
    purity = {k: 0.0 for k in ks}
    dist = {k: 0.0 for k in ks}
    for start in range(0, len(x), chunk):
        sims = x[start : start + chunk] @ x.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf  # exclude self
        top = np.argpartition(-sims, kmax - 1, axis=1)[:, :kmax]
        order = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1)
        top = np.take_along_axis(top, order, axis=1)
        same = labels[top] == labels[start + rows][:, None]
        d = 1.0 - np.take_along_axis(sims, top, axis=1)
        for k in ks:
            kk = min(k, kmax)
            purity[k] += float(same[:, :kk].mean(axis=1).sum())
            dist[k] += float(d[:, :kk].mean(axis=1).sum())
    return {k: {"purity": purity[k] / len(x), "distance": dist[k] / len(x)} for k in ks}


# --------------------------------------------------------------------------- isomorphism (AugCSE A.13)


def singular_values(x: np.ndarray) -> np.ndarray:
    """Singular values, descending, with ~0 values clamped to 1e-10 (logs stay finite)."""
    s = np.linalg.svd(np.asarray(x, dtype=np.float64), compute_uv=False)
    return np.where(np.isclose(s, 0.0), EPS, s)


def effective_rank(x: np.ndarray) -> int:
    """``⌊exp(entropy of σ/Σσ)⌋`` (Roy & Vetterli 2007)."""
    s = singular_values(x)
    p = s / s.sum() + EPS
    return max(int(np.floor(np.exp(-np.sum(p * np.log(p))))), 1)


def effective_condition_number(x: np.ndarray) -> float:
    """``σ_1 / σ_er`` with er the effective rank."""
    s = singular_values(x)
    return float(s[0] / s[effective_rank(x) - 1])


def cond_hm(x1: np.ndarray, x2: np.ndarray) -> float:
    """COND-HM: harmonic mean of the two effective condition numbers."""
    a, b = effective_condition_number(x1), effective_condition_number(x2)
    return 2 * a * b / (a + b)


def singular_value_gap(x1: np.ndarray, x2: np.ndarray) -> float:
    """SVG: ``Σ_i (log σ_i(X₁) - log σ_i(X₂))²`` over the common number of singular values."""
    a, b = singular_values(x1), singular_values(x2)
    n = min(len(a), len(b))
    return float(np.sum((np.log(a[:n]) - np.log(b[:n])) ** 2))


def unit_distance_matrix(x: np.ndarray) -> np.ndarray:
    """Euclidean distances between L2-normalised rows: ``sqrt(2 - 2·clip(x xᵀ, -1, 1))``."""
    x = normalize(x)
    return np.sqrt(np.maximum(2.0 - 2.0 * np.clip(x @ x.T, -1.0, 1.0), 0.0))


def gromov_hausdorff(x1: np.ndarray, x2: np.ndarray, homology_dims: int = 1) -> float:
    """Bottleneck distance between Vietoris–Rips persistence diagrams of the two samples.

    ``homology_dims=1`` uses dimension 0 only (the reference code's ``range(homo_dim)``); with more,
    the smallest distance over dimensions is returned, as there. Unlike the reference code (which
    passes the distance matrix to gudhi as a *point cloud*), the matrix is passed as a distance matrix.
    Cost grows as n²: sample a few hundred to a few thousand rows.
    """
    try:
        import gudhi
    except ImportError:
        raise ImportError("gromov_hausdorff needs gudhi: pip install 'gudhi>=3.8'") from None

    def diagrams(x: np.ndarray) -> list[np.ndarray]:
        tree = gudhi.RipsComplex(distance_matrix=unit_distance_matrix(x)).create_simplex_tree(
            max_dimension=homology_dims
        )
        tree.persistence()
        return [tree.persistence_intervals_in_dimension(d) for d in range(homology_dims)]

    return float(min(gudhi.bottleneck_distance(a, b, e=0) for a, b in zip(diagrams(x1), diagrams(x2))))


def has_gudhi() -> bool:
    try:
        import gudhi  # noqa: F401
    except ImportError:
        return False
    return True


def isomorphism(x1: np.ndarray, x2: np.ndarray, gh: bool | None = None) -> dict[str, float]:
    """COND-HM, SVG and (when gudhi is installed, or ``gh=True``) GH between two samples."""
    out = {"cond_hm": cond_hm(x1, x2), "svg": singular_value_gap(x1, x2)}
    if gh or (gh is None and has_gudhi()):
        out["gh"] = gromov_hausdorff(x1, x2)
    return out


# --------------------------------------------------------------------------- task


class GeometryTask(Task):
    """Alignment (STS-B dev pairs with gold ≥ 4) and uniformity (all STS-B dev sentences)."""

    relpath = "sts/original/STSBenchmark/stsbenchmark/sts-dev.csv"
    threshold = 4.0
    record = TaskRecord(
        "Geometry", "geometry", "dev", "uniformity", None, (relpath,),
        "Wang and Isola 2020, Understanding Contrastive Representation Learning through Alignment and Uniformity "
        "on the Hypersphere; pairs from STS-B dev (Cer et al. 2017)", ("geometry",), scale=1.0)

    def load(self, data_dir: Path | None) -> dict[str, Any]:
        pairs, scores = [], []
        with open(resolve_data(self.relpath, data_dir), encoding="utf-8") as f:
            for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
                if len(row) >= 7:
                    pairs.append((row[5], row[6]))
                    scores.append(float(row[4]))
        return {"pairs": pairs, "scores": np.array(scores)}

    def sentences(self, data: dict[str, Any]) -> list[str]:
        return [s for pair in data["pairs"] for s in pair]

    def evaluate(self, encode: Encoder, data: dict[str, Any], fast: bool = False, seed: int = 0) -> dict[str, float]:
        pos = [p for p, s in zip(data["pairs"], data["scores"]) if s >= self.threshold]
        left, right = encode([p[0] for p in pos]), encode([p[1] for p in pos])
        every = encode(list(dict.fromkeys(self.sentences(data))))
        return {"alignment": alignment(left, right), "uniformity": uniformity(every, seed=seed)}


register_task(GeometryTask())
