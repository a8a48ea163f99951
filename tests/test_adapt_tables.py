"""The adapt study's tables from hand-made records: Kendall's τ by hand, the kept score of each rule, the oracle,
and rules that never read a label (the generated pages are held to their records by tests/test_docs_generated.py)."""

from __future__ import annotations

import pytest

from augcse.studies import adapt_tables as at


def record(scores: list[float], losses: list[float], knn: list[float]) -> dict:
    """A run with the start and three candidates: step 16 at α 0.25, 0.5, 1."""
    steps = [(0, 0.0), (16, 0.25), (16, 0.5), (16, 1.0)]
    cands = [{"step": s, "alpha": a, "sample": {"Tweet": sc},
              "criteria": {"heldout_loss": lo, "knn_overlap": k, "rankme": 10.0 + i, "alignment": 0.1 * i,
                           "uniformity": -1.0 - i, "kmeans_stability": 0.5}}
             for i, ((s, a), sc, lo, k) in enumerate(zip(steps, scores, losses, knn))]
    return {"sample_task": "Tweet", "candidates": cands}


def test_tau_by_hand():
    # scores rise with every candidate; the loss falls with them: negated, it ranks them as the labels do (τ = 1)
    r = record([60.0, 61.0, 62.0, 63.0], [0.4, 0.3, 0.2, 0.1], [1.0, 0.9, 0.8, 0.7])
    tau = at.criteria_tau(r)
    assert tau["heldout_loss"] == pytest.approx(1.0)
    assert tau["knn_overlap"] == pytest.approx(-1.0)
    assert tau["alignment"] == pytest.approx(-1.0)  # alignment rises with i, read negated
    # one discordant pair of six: (6 − 2·1)/6 ... scipy's tau-b with no ties is (C − D)/6 = (5 − 1)/6
    r = record([60.0, 62.0, 61.0, 63.0], [0.4, 0.3, 0.2, 0.1], [1.0, 0.9, 0.8, 0.7])
    assert at.criteria_tau(r)["heldout_loss"] == pytest.approx(4 / 6)


def test_rules_keep_what_their_criteria_say_and_the_oracle_needs_labels():
    # the loss is lowest at α 1, but α 1 keeps only 60 % of the neighbours
    r = record([70.0, 71.0, 69.0, 50.0], [0.4, 0.3, 0.2, 0.1], [1.0, 0.95, 0.85, 0.6])
    by_set = {"tweet": [r, r]}
    assert at.kept_score(r, at.RULES["heldout_loss, knn ≥ 0.5"]) == 50.0
    assert at.kept_score(r, at.RULES["heldout_loss, knn ≥ 0.8"]) == 69.0
    assert at.kept_score(r, at.RULES["heldout_loss, knn ≥ 0.9"]) == 71.0
    assert at.kept_score(r, at.RULES["starting model"]) == 70.0
    gains = at.rule_gains(by_set, at.RULES["heldout_loss, knn ≥ 0.5"])["tweet"]
    assert gains["delta"] == -20.0 and gains["sd"] == 0.0 and gains["safe"] == 0.0
    assert at.oracle(by_set)["tweet"] == (71.0, 0.0)


def test_no_rule_reads_a_label():
    r = record([70.0, 71.0, 69.0, 50.0], [0.4, 0.3, 0.2, 0.1], [1.0, 0.95, 0.85, 0.6])
    inputs = [{k: c[k] for k in ("step", "alpha", "criteria")} for c in r["candidates"]]
    flipped = [{**c, "sample": {"Tweet": -c["sample"]["Tweet"]}} for c in r["candidates"]]
    for name, rule in at.RULES.items():
        assert rule(inputs) == rule([{k: c[k] for k in ("step", "alpha", "criteria")} for c in flipped]), name
