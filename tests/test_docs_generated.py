"""Every table of the docs that comes from records is what its records give: the generated pages and blocks
(``python -m augcse.commands.docs --check``), and each committed study's ``study.json`` against its runs."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from augcse.commands import docs
from augcse.studies.study import load_grid, summarise

ROOT = Path(__file__).resolve().parents[1]
GRIDS = ROOT / "src" / "augcse" / "data" / "studies"
COMMITTED = sorted(p.parent.name for p in (ROOT / "docs" / "studies").glob("*/study.json"))


def _close(a, b) -> bool:
    """Equal JSON trees, floats to 1e-9 (study.json went through a JSON round trip)."""
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return a == b


def test_the_docs_are_what_their_records_give(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    docs.study.cache_clear()
    assert docs.main(["--check"]) == 0, f"a generated page is out of date; run: {docs.COMMAND}"


def test_a_hand_edited_figure_is_caught(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture) -> None:
    """The check can fail: one cell of a page's generated table (ADAPTATION.md's grid) changed by hand."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs", ignore=shutil.ignore_patterns("*.png", "*.html"))
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    page = (ROOT / "docs" / "ADAPTATION.md").read_text(encoding="utf-8")
    start = page.index("<!-- generated: adapt-grid -->")
    row = page.index("\n| SimCSE |", start) + 1
    edited = page[:row] + "| SimCSE | +9.99 ± 0.00 | 0 | 0 | 0 |" + page[page.index("\n", row):]
    (tmp_path / "docs" / "ADAPTATION.md").write_text(edited, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    docs.study.cache_clear()
    assert docs.main(["--check"]) == 1
    assert "ADAPTATION.md" in capsys.readouterr().err
    assert docs.main([]) == 0  # writing puts the records' figure back
    assert (tmp_path / "docs" / "ADAPTATION.md").read_text(encoding="utf-8") == page
    docs.study.cache_clear()


@pytest.mark.parametrize("name", COMMITTED)
def test_a_committed_study_json_is_what_its_runs_give(name: str) -> None:
    """records → study.json: the runs' own eval.json/curve.json/summary.json give the committed figures."""
    grid = load_grid(GRIDS / f"{name}.yaml")
    by_set = grid.plan(ROOT / "docs" / "studies")
    committed = json.loads((ROOT / "docs" / "studies" / name / "study.json").read_text(encoding="utf-8"))
    for set_name, runs in by_set.items():
        figures = json.loads(json.dumps(summarise(runs)))  # the same JSON round trip the file went through
        figures["pending"] = [Path(p).name for p in figures["pending"]]
        stored = committed["sets"][set_name or grid.name]
        stored = {**stored, "pending": [Path(p).name for p in stored["pending"]]}
        assert _close(figures, stored), f"docs/studies/{name}/study.json differs from its runs (set {set_name})"
