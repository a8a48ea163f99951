"""Short-text clustering (VaSCL §4.2, Table 2): K-means on frozen embeddings, Hungarian-matched accuracy.

Tasks (suite ``"clustering"``; files ``clustering/<file>.csv`` with columns ``text,label``):
AgNews, SearchSnippets, StackOverflow, Biomedical, Tweet, GoogleNews-TS, GoogleNews-T, GoogleNews-S.
VaSCL's table has a single GoogleNews column (11.1K texts, i.e. the title+snippet set, GoogleNews-TS);
T and S are the other two views of the same corpus used by SCCL.

Protocol, as in VaSCL's public evaluation code: scikit-learn ``KMeans`` with the true number of
clusters, ``n_init=10``, on the embeddings as the model outputs them (no extra normalisation), one
run per seed 0..9; each run's accuracy uses the one-to-one cluster→class assignment that maximises
agreement (Hungarian algorithm, :func:`scipy.optimize.linear_sum_assignment`). Metrics (×100):
``acc`` (main), ``acc_std``, ``nmi``, ``nmi_std``, means and sample standard deviations over the runs.
Fast mode: 3 seeds and ``n_init=3``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment
from sklearn.cluster import KMeans
from sklearn.metrics import normalized_mutual_info_score
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from augcse.assets.resolve import resolve_data
from augcse.core.sanity import check_header, check_labels
from augcse.core.textfile import read_text
from augcse.evaluation.tasks import FILE_TASKS, Encoder, Task, TaskRecord, register_task

RUNS, RUNS_FAST = 10, 3
N_INIT, N_INIT_FAST = 10, 3


def contingency(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Counts ``C[p, t]`` of items predicted in cluster p with true class t (both 0-based ints)."""
    y_true, y_pred = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    size = int(max(y_true.max(initial=0), y_pred.max(initial=0))) + 1
    counts = np.zeros((size, size), dtype=np.int64)
    np.add.at(counts, (y_pred, y_true), 1)
    return counts


def hungarian_mapping(y_true: np.ndarray, y_pred: np.ndarray) -> dict[int, int]:
    """The cluster→class assignment maximising the number of agreeing items."""
    counts = contingency(y_true, y_pred)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return dict(zip(rows.tolist(), cols.tolist()))


def cluster_accuracy(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Accuracy in [0, 1] after the best one-to-one relabelling of clusters (1.0 for any permutation)."""
    counts = contingency(y_true, y_pred)
    rows, cols = linear_sum_assignment(counts, maximize=True)
    return float(counts[rows, cols].sum() / max(len(y_true), 1))


def aligned_confusion(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    """Confusion matrix ``M[true, matched cluster]``: clusters reordered so the diagonal is the matching."""
    counts = contingency(y_true, y_pred)  # [pred, true]
    mapping = hungarian_mapping(y_true, y_pred)
    n_classes = int(np.max(y_true)) + 1
    out = np.zeros((n_classes, n_classes), dtype=np.int64)
    for cluster, klass in mapping.items():
        if klass < n_classes:
            out[:, klass] += counts[cluster, :n_classes]
    return out


def kmeans_labels(embeddings: np.ndarray, n_clusters: int, seed: int, n_init: int = N_INIT) -> np.ndarray:
    """One K-means run (Lloyd, k-means++ init) with a fixed seed, on one OpenMP thread.

    A second thread gains almost nothing on two idle cores (57.9 s against 61.3 s for K-means of 11,108
    texts, k = 152) and on a busy machine makes the threads wait on each other at every step, while a
    second process on another task runs beside it (docs/SPEED.md, "Scoring side by side"). The labels do not depend on the thread count (tests/test_clustering.py).
    """
    with threadpool_limits(limits=1):
        return KMeans(n_clusters=n_clusters, n_init=n_init, random_state=seed).fit_predict(embeddings)


def clustering_scores(
    embeddings: np.ndarray, labels: np.ndarray, seeds: list[int], n_init: int = N_INIT
) -> dict[str, float]:
    """Mean/std of accuracy and NMI (×100) over one K-means run per seed."""
    k = int(np.unique(labels).size)
    acc, nmi = [], []
    for seed in tqdm(seeds, desc=f"K-means k={k}, {len(labels)} texts", unit="run", leave=False, disable=None):
        pred = kmeans_labels(embeddings, k, seed, n_init)
        acc.append(100 * cluster_accuracy(labels, pred))
        nmi.append(100 * normalized_mutual_info_score(labels, pred))
    return {
        "acc": float(np.mean(acc)),
        "acc_std": float(np.std(acc, ddof=1)) if len(acc) > 1 else 0.0,
        "nmi": float(np.mean(nmi)),
        "nmi_std": float(np.std(nmi, ddof=1)) if len(nmi) > 1 else 0.0,
    }


def labelled_rows(path: Path, label: str) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a CSV; ValueError naming it (``label``) when it is not UTF-8 text or a row is
    broken (a cell over the csv module's limit, 128 KiB), rather than a codec or csv error naming no file."""
    line = 0  # the last line handed to the reader: its own count misses the line it fails on

    def lines() -> Iterator[str]:
        nonlocal line
        for line, text in enumerate(io.StringIO(read_text(path, label), newline=""), 1):
            yield text

    reader = csv.DictReader(lines())
    try:
        return list(reader.fieldnames or []), list(reader)
    except csv.Error as exc:
        raise ValueError(f"{label} line {line}: {exc}; fix the row") from None


def read_labelled_csv(relpath: str, data_dir: Path | None) -> tuple[list[str], np.ndarray, list[str]]:
    """``text,label`` CSV -> texts, 0-based int labels, label names (sorted)."""
    path = resolve_data(relpath, data_dir)
    rows = labelled_rows(path, str(path))[1]
    names, labels = np.unique([r["label"] for r in rows], return_inverse=True)
    return [r["text"] for r in rows], labels.astype(np.int64), [str(n) for n in names]


class ClusteringTask(Task):
    """One short-text clustering set: K-means accuracy over the whole set (no split; no selection score)."""

    def __init__(self, name: str, relpath: str, citation: str, suites: tuple[str, ...] = ("clustering",),
                 in_all: bool = True) -> None:
        self.relpath = relpath
        self.record = TaskRecord(name, "clustering", "all", "acc", None, (relpath,), citation, suites, in_all)

    def load(self, data_dir: Path | None) -> dict[str, Any]:
        texts, labels, names = read_labelled_csv(self.relpath, data_dir)
        return {"texts": texts, "labels": labels, "names": names}

    def sentences(self, data: dict[str, Any]) -> list[str]:
        return data["texts"]

    def evaluate(self, encode: Encoder, data: dict[str, Any], fast: bool = False, seed: int = 0) -> dict[str, float]:
        runs, n_init = (RUNS_FAST, N_INIT_FAST) if fast else (RUNS, N_INIT)
        seeds = [seed + i for i in range(runs)]
        return clustering_scores(encode(data["texts"]), data["labels"], seeds, n_init)


class ClusteringFileTask(ClusteringTask):
    """K-means on a user's own ``text,label`` CSV (``clustering:sample.csv``), e.g. a labelled sample of the
    texts a model was adapted to; in no suite.

    The file is checked when the task is named, before any model loads: it must exist, have the columns
    ``text,label`` and at least two distinct labels (with one, every clustering is perfect: 100.00).
    """

    def __init__(self, path: str) -> None:
        file = Path(path).expanduser()
        if not file.is_file():
            raise ValueError(f"clustering:{path}: no such file")
        header, rows = labelled_rows(file, f"clustering:{path}")
        check_header(header, f"clustering:{path}")
        if not {"text", "label"} <= set(header):
            raise ValueError(f"clustering:{path}: needs the columns text,label (it has: {', '.join(header)})")
        check_labels(f"clustering:{path}", [row["label"] or "" for row in rows])
        super().__init__(f"clustering:{path}", str(file.resolve()), f"user file {file.resolve()}", (), False)

    def load(self, data_dir: Path | None) -> dict[str, Any]:
        texts, labels, names = read_labelled_csv(Path(self.relpath).name, Path(self.relpath).parent)
        return {"texts": texts, "labels": labels, "names": names}  # the file itself, wherever the data directory is


FILE_TASKS["clustering"] = ClusteringFileTask

SCCL = ("prepared by Rakib et al. 2020, Enhancement of Short Text Clustering by Iterative Classification, as "
        "used by SCCL (Zhang et al. 2021)")
XU = "Xu et al. 2017, Self-taught convolutional neural networks for short text clustering"
YIN = "Yin and Wang 2016, A model-based approach for text clustering with outlier detection"
for _name, _file, _citation in (
    ("AgNews", "agnews", "Zhang et al. 2015, Character-level convolutional networks for text classification"),
    ("SearchSnippets", "searchsnippets", "Phan et al. 2008, Learning to classify short and sparse text & web "
                                         "with hidden topics from large-scale data collections"),
    ("StackOverflow", "stackoverflow", XU),
    ("Biomedical", "biomedical", XU),
    ("Tweet", "tweet", YIN),
    ("GoogleNews-TS", "googlenews_ts", YIN),
    ("GoogleNews-T", "googlenews_t", YIN),
    ("GoogleNews-S", "googlenews_s", YIN),
):
    register_task(ClusteringTask(_name, f"clustering/{_file}.csv", f"{_citation}; {SCCL}"))
