"""Geometry measures against hand-checked tiny cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from augcse.evaluation import geometry as g


def test_uniformity_of_identical_vectors_is_zero() -> None:
    assert g.uniformity(np.ones((6, 3))) == 0.0


def test_uniformity_of_two_opposite_vectors() -> None:
    # one pair at squared distance 4: log exp(-2 * 4) = -8
    assert g.uniformity(np.array([[1.0, 0.0], [-3.0, 0.0]])) == pytest.approx(-8.0)


def test_alignment_hand_case() -> None:
    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    y = np.array([[0.0, 1.0], [0.0, 5.0]])  # normalised: distance² 2 and 0 -> mean 1
    assert g.alignment(x, y) == pytest.approx(1.0)
    assert g.alignment(x, x) == 0.0


def test_neighbour_stats_hand_case() -> None:
    x = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])
    stats = g.neighbour_stats(x, np.array([0, 0, 1, 1]), ks=(1, 3))
    assert stats[1]["purity"] == 1.0
    assert stats[3]["purity"] == pytest.approx(1 / 3)
    assert stats[1]["distance"] == pytest.approx(1 - 1 / math.sqrt(1.01), rel=1e-4)


def test_effective_rank_and_condition_number() -> None:
    x = np.diag([4.0, 1.0, 1.0, 1.0])
    # p = [4,1,1,1]/7; exp(H) = 3.3 -> er 3; kappa = 4 / 1
    assert g.effective_rank(x) == 3
    assert g.effective_condition_number(x) == 4.0
    assert g.cond_hm(x, np.diag([2.0, 1.0, 1.0, 1.0])) == pytest.approx(2 * 4 * 2 / 6)


def test_singular_value_gap_hand_case() -> None:
    a, b = np.diag([math.e, 1.0]), np.diag([1.0, 1.0])
    assert g.singular_value_gap(a, b) == pytest.approx(1.0)
    assert g.singular_value_gap(a, a) == 0.0


def test_gromov_hausdorff_zero_for_same_sample_and_positive_otherwise() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5))
    assert g.gromov_hausdorff(x, x) == 0.0
    assert g.gromov_hausdorff(x, rng.normal(size=(40, 5))) > 0.0


def test_gromov_hausdorff_missing_gudhi_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake(name, *args, **kwargs):
        if name == "gudhi":
            raise ImportError("no gudhi")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ImportError, match="pip install 'gudhi>=3.8'"):
        g.gromov_hausdorff(np.eye(3), np.eye(3))
    assert "gh" not in g.isomorphism(np.eye(3), np.eye(3))


def test_geometry_task_on_sts_b_dev() -> None:
    task = g.GeometryTask()
    data = task.load(None)  # the embedded STS-B dev set
    assert len(data["pairs"]) == 1500
    rng = np.random.default_rng(0)
    table = {s: rng.normal(size=8) for s in task.sentences(data)}
    result = task.evaluate(lambda s: np.stack([table[x] for x in s]), data)
    assert 0 < result["alignment"] < 4 and result["uniformity"] < 0


def test_eval_prints_alignment_beside_uniformity(tiny_model_dir, tmp_path, capsys) -> None:
    """``augcse eval --tasks Geometry``: uniformity is the score, alignment (its other half) is shown and saved."""
    import json

    from augcse.commands.main import main

    assert main(["eval", str(tiny_model_dir), "--pooler", "avg", "--tasks", "Geometry", "--save-to", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if x.startswith("Geometry ")]
    assert "alignment " in line
    alignment = float(line.split("alignment ")[1])
    assert alignment > 0
    saved = json.loads((tmp_path / "eval.json").read_text())["after"]
    assert round(saved["Geometry/alignment"], 2) == alignment
