"""The topic-clustering pipelines people run on sentence embeddings, as peers for ``augcse cluster``'s clusters.

Given embeddings and K, each pipeline in :data:`PIPELINES` returns one labelling per seed:

- ``kmeans``: scikit-learn's K-means (K clusters) on the embeddings;
- ``umap+kmeans``: UMAP to 5 dimensions (15 neighbours, min_dist 0, cosine), then K-means (K);
- ``bertopic``: BERTopic's default clustering, the same UMAP then HDBSCAN (min_cluster_size 10, excess of mass);
  its noise points (label -1) count as one more cluster, so every text has a cluster, as in BERTopic's topic -1.

The UMAP and HDBSCAN settings are BERTopic's defaults (``BERTopic().umap_model`` / ``.hdbscan_model``, checked by a
test), built from the umap-learn and hdbscan packages (the ``cluster`` extra). A score is the mean over
:data:`SEEDS`. :func:`hungarian_accuracy` scores a labelling against labels, for studies only: ``augcse cluster``
never reads a label.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from augcse.evaluation.clustering import cluster_accuracy, kmeans_labels

SEEDS = (0, 1, 2)
UMAP_SETTINGS = {"n_neighbors": 15, "n_components": 5, "min_dist": 0.0, "metric": "cosine", "low_memory": False}
HDBSCAN_SETTINGS = {"min_cluster_size": 10, "metric": "euclidean", "cluster_selection_method": "eom",
                    "prediction_data": True}


def _needs(package: str):
    import importlib

    try:
        return importlib.import_module(package)
    except ImportError:
        raise ValueError(f"the {package} package is needed for this pipeline: pip install 'augcse[cluster]'") from None


def kmeans(embeddings: np.ndarray, clusters: int, seed: int, reduced: np.ndarray | None = None) -> np.ndarray:
    """The clustering task's K-means (:func:`augcse.evaluation.clustering.kmeans_labels`: 10 restarts)."""
    return kmeans_labels(embeddings, clusters, seed)


def reduce(embeddings: np.ndarray, seed: int) -> np.ndarray:
    """UMAP to 5 dimensions with BERTopic's default settings, seeded."""
    umap = _needs("umap")
    return umap.UMAP(**UMAP_SETTINGS, random_state=seed).fit_transform(embeddings)


def umap_kmeans(embeddings: np.ndarray, clusters: int, seed: int, reduced: np.ndarray | None = None) -> np.ndarray:
    """K-means on the UMAP reduction (``reduced``: that seed's :func:`reduce`, when already computed)."""
    return kmeans(reduce(embeddings, seed) if reduced is None else reduced, clusters, seed)


def bertopic_default(embeddings: np.ndarray, clusters: int, seed: int,
                     reduced: np.ndarray | None = None) -> np.ndarray:
    """BERTopic's clustering (K is not used: HDBSCAN finds its own number); noise becomes one cluster of its own."""
    hdbscan = _needs("hdbscan")
    labels = hdbscan.HDBSCAN(**HDBSCAN_SETTINGS).fit_predict(reduce(embeddings, seed) if reduced is None else reduced)
    return np.where(labels < 0, labels.max() + 1, labels)


PIPELINES: dict[str, Callable[..., np.ndarray]] = {
    "kmeans": kmeans,
    "umap+kmeans": umap_kmeans,
    "bertopic": bertopic_default,
}
ON_UMAP = ("umap+kmeans", "bertopic")  # the pipelines that share one UMAP reduction a seed


def run_pipelines(embeddings: np.ndarray, clusters: int, names: Sequence[str] = tuple(PIPELINES),
                  seeds: Sequence[int] = SEEDS) -> dict[str, list[np.ndarray]]:
    """Each named pipeline's labelling of ``embeddings`` for each seed; UMAP, the costly step, runs once a seed for
    all the pipelines that cluster its reduction."""
    unknown = [n for n in names if n not in PIPELINES]
    if unknown:
        raise ValueError(f"unknown pipeline {unknown[0]!r}; choose from {', '.join(PIPELINES)}")
    out: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for seed in seeds:
        reduced = reduce(embeddings, seed) if any(name in ON_UMAP for name in names) else None
        for name in names:
            out[name].append(PIPELINES[name](embeddings, clusters, seed, reduced))
    return out


def hungarian_accuracy(labels: Sequence, predicted: Sequence[int]) -> float:
    """Accuracy under the best one-to-one matching of clusters to labels (any label values; texts of a cluster
    left unmatched, when there are more clusters than labels, count as wrong)."""
    return cluster_accuracy(np.unique(np.asarray(labels), return_inverse=True)[1],
                            np.unique(np.asarray(predicted), return_inverse=True)[1])


def scores(labellings: dict[str, list[np.ndarray]], labels: Sequence) -> dict[str, dict[str, float]]:
    """Each pipeline's mean Hungarian accuracy and NMI against ``labels`` over its seeds (studies only)."""
    from sklearn.metrics import normalized_mutual_info_score

    return {name: {"accuracy": float(np.mean([hungarian_accuracy(labels, p) for p in runs])),
                   "nmi": float(np.mean([normalized_mutual_info_score(labels, p) for p in runs])),
                   "clusters": float(np.mean([len(np.unique(p)) for p in runs]))}
            for name, runs in labellings.items()}
