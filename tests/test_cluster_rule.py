"""``augcse cluster``'s stopping rule and collapse guard on hand-made assignment sequences (no model)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from augcse.training.cluster import RULE, RuleSettings, sample_indices, stopping_rule

K = 4
START = [0] * 25 + [1] * 25 + [2] * 25 + [3] * 25  # 100 texts, balanced


def moved(assignments: list[int], count: int, to: int = 3) -> list[int]:
    """``assignments`` with the first ``count`` texts not already in cluster ``to`` moved there."""
    out, left = list(assignments), count
    for i, a in enumerate(out):
        if left and a != to:
            out[i], left = to, left - 1
    return out


# (previous, current, losses) -> (stop, keep_start, reason's first word)
CASES = {
    "goes on": (START, moved(START, 10), (2.0, 1.5), (False, False, "")),
    "settled": (START, moved(START, 0), (2.0, 1.5), (True, False, "settled")),
    "settled just below 1 %": (START * 10, moved(START * 10, 9), (2.0, 1.5), (True, False, "settled")),
    "1 % changed is not settled": (START * 10, moved(START * 10, 10), (2.0, 1.5), (False, False, "")),
    "plateau": (START, moved(START, 10), (2.0, 1.99), (True, False, "plateau")),
    "no loss logged yet": (START, moved(START, 10), (None, 1.5), (False, False, "")),
    "collapse: one cluster holds most": (START, [3] * 60 + START[60:], (2.0, 1.5), (True, True, "collapse")),
    "half the texts in one cluster is not more than half": (START, [0] * 50 + [1] * 50, (2.0, 1.5),
                                                             (False, False, "")),
    "the guard comes before settled": (START, [3] * 60 + START[60:], (2.0, 2.0), (True, True, "collapse")),
}


@pytest.mark.parametrize("previous, current, losses, expected", CASES.values(), ids=CASES.keys())
def test_the_rule_on_sequences(previous, current, losses, expected):
    start = START * (len(previous) // len(START))
    verdict = stopping_rule(start, previous, current, K, losses)
    assert (verdict.stop, verdict.keep_start, verdict.reason.split(":")[0]) == expected
    assert verdict.measures["changed"] == pytest.approx(np.mean(np.array(previous) != np.array(current)))
    assert sum(verdict.measures["sizes"]) == len(current)


def test_emptied_clusters_trip_the_guard():
    """Ten clusters, six emptied, none holding more than half the texts."""
    start = [k for k in range(10) for _ in range(10)]
    current = [k for k in range(4) for _ in range(25)]
    verdict = stopping_rule(start, start, current, 10, (2.0, 1.5))
    assert verdict.keep_start and verdict.reason.startswith("collapse: 6 of the 10 clusters are empty")
    assert not stopping_rule(start, start, current[:50] + start[50:], 10, (2.0, 1.5)).keep_start  # 3 emptied


def test_a_start_already_lopsided_does_not_trip_the_guard():
    """Data whose largest topic holds 70 % at the start: staying there is no collapse; growing is."""
    start = [0] * 70 + [1] * 10 + [2] * 10 + [3] * 10
    assert not stopping_rule(start, start, moved(start, 5, to=1), K, (2.0, 1.0)).keep_start
    grown = [0] * 80 + [1] * 10 + [2] * 10
    verdict = stopping_rule(start, start, grown, K, (2.0, 1.0))
    assert verdict.keep_start and "80%" in verdict.reason and "70% at the start" in verdict.reason


@pytest.mark.parametrize("settings, stops", [
    (RuleSettings(min_change=0.2), True),  # 10 % changed is below a 20 % tolerance
    (RuleSettings(min_change=0.05), False),
    (RuleSettings(plateau=0.5), True),  # the loss moved 25 %
    (RuleSettings(max_share=0.2), True),  # the largest cluster holds 35 %
])
def test_each_threshold_is_read(settings, stops):
    verdict = stopping_rule(START, START, moved(START, 10), K, (2.0, 1.5), settings)
    assert verdict.stop is stops


def test_a_sequence_of_checks_stops_once_settled():
    """Checks as the callback makes them, each against the previous one: changes of 20, 5, 0.5 % stop at the third."""
    history, previous = [], list(START) * 10
    for count in (200, 50, 5):
        current = moved(previous, count, to=len(history) % K)
        verdict = stopping_rule(START * 10, previous, current, K, (None, None))
        history.append(verdict.stop)
        previous = current
    assert history == [False, False, True]


def test_the_rule_reads_no_labels():
    assert list(inspect.signature(stopping_rule).parameters) == ["start", "previous", "current", "clusters",
                                                                 "losses", "settings"]
    assert RULE == RuleSettings()


def test_the_checked_sample_is_seeded_and_bounded():
    assert sample_indices(50, 0).tolist() == list(range(50))
    first = sample_indices(10_000, 3)
    assert len(first) == 2000 and first.tolist() == sorted(first.tolist()) == sample_indices(10_000, 3).tolist()
    assert first.tolist() != sample_indices(10_000, 4).tolist()
