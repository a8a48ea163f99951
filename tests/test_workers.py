"""Costly tasks scored side by side in worker processes give the scores they give in the main process."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from augcse.evaluation.suite import run_tasks
from augcse.evaluation.workers import StoredEmbeddings


def _without_seconds(results: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {task: {k: v for k, v in scores.items() if k != "seconds"} for task, scores in results.items()}


def test_two_processes_give_the_scores_of_one(tiny_st, data_dir: Path) -> None:
    tasks = ["TREC", "STSBenchmark-dev", "Tweet", "SNIPS"]  # transfer, STS (in-process), clustering, intent
    one, two = {}, {}
    serial = run_tasks(tiny_st, tasks, data_dir, fast=True, progress=False, timings=one)
    side_by_side = run_tasks(tiny_st, tasks, data_dir, fast=True, progress=False, workers=2, timings=two)
    assert list(side_by_side) == tasks  # in the order asked, whichever finished first
    assert _without_seconds(side_by_side) == _without_seconds(serial)  # equal to the bit
    assert all(side_by_side[t]["seconds"] > 0 for t in tasks)
    for timings in (one, two):
        assert set(timings) == {"loading", "encoding", "scoring", "processes"} and min(timings.values()) >= 0
    assert one["processes"] == 1 and two["processes"] == 2


def test_stored_embeddings_answer_in_the_order_asked() -> None:
    vectors = np.arange(6, dtype=np.float32).reshape(3, 2)
    stored = StoredEmbeddings(["a", "b", "c"], vectors)
    np.testing.assert_array_equal(stored(["c", "a", "c"]), vectors[[2, 0, 2]])
    assert stored([]).shape == (0, 2)
    with pytest.raises(KeyError):
        stored(["not encoded"])
