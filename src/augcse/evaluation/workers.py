"""Scoring tasks side by side in worker processes, once the shared encoding is done.

Transfer classifiers, K-means and the intent classifier are small computations run many times; a
second *thread* on the same one mostly waits for the first (K-means of 11,108 texts, k = 152, on two
idle cores: 57.9 s on two threads against 61.3 s on one), while two *processes*, each scoring its own
task on one thread, take 38.1 s (docs/SPEED.md, "Scoring side by side"). Each worker gets the task, its loaded data and the
embeddings of its sentences (:class:`StoredEmbeddings`), never the model; each task seeds itself, so
its scores equal those of the same task scored in the main process (tests/test_workers.py).

Workers come from joblib's process pool (loky), which starts them once and reuses them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform reports it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class StoredEmbeddings:
    """An encoder answering from embeddings already computed: what a worker gets in place of the model."""

    def __init__(self, sentences: Sequence[str], embeddings: np.ndarray) -> None:
        self.index = {s: i for i, s in enumerate(sentences)}
        self.embeddings = np.asarray(embeddings, dtype=np.float32)

    def __call__(self, sentences: Sequence[str]) -> np.ndarray:
        return self.embeddings[np.array([self.index[s] for s in sentences], dtype=np.int64)]

    encode = __call__


class _NotATerminal:
    """``sys.stderr`` seen as a pipe, so the tasks' own progress bars (shown on a terminal only) stay quiet
    in a worker instead of overwriting each other and the main process's bar; everything else is written."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def score(task, data: Any, encode, fast: bool, seed: int) -> dict[str, float]:
    """``task.evaluate``, with the task's own time as ``"seconds"``."""
    start = time.perf_counter()
    scores = task.evaluate(encode, data, fast=fast, seed=seed)
    scores["seconds"] = time.perf_counter() - start
    return scores


def _score_in_worker(name: str, task, data: Any, encode, fast: bool, seed: int) -> tuple[str, dict[str, float]]:
    """A worker's job: one thread for torch and every native thread pool, so two workers share two cores."""
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    with threadpool_limits(limits=1), contextlib.redirect_stderr(_NotATerminal(sys.stderr)):
        return name, score(task, data, encode, fast, seed)


def score_in_workers(jobs: Sequence[tuple[str, Any, Any, StoredEmbeddings]], workers: int, fast: bool,
                     seed: int) -> Iterator[tuple[str, dict[str, float]]]:
    """``(name, scores)`` of each ``(name, task, data, embeddings)`` job as it finishes, on ``workers`` processes."""
    from joblib import Parallel, delayed

    parallel = Parallel(n_jobs=min(workers, len(jobs)), backend="loky", return_as="generator_unordered")
    yield from parallel(delayed(_score_in_worker)(name, task, data, encode, fast, seed)
                        for name, task, data, encode in jobs)
