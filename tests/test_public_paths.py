"""Every ``augcse.…`` path the README, the docs and the package's docstrings name resolves: a module, or an
attribute of one (CHANGELOG.md names the old paths on purpose and is not read)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

import augcse

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(augcse.__file__).parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PATH = re.compile(r"(?<![\w./-])augcse(?:\.[A-Za-z_]\w*)+")
# the paths users write, named by the README: each must keep working whatever the layout
PUBLIC = ["augcse.load_model", "augcse.losses.SimCSELoss", "augcse.evaluation.suite.run_tasks",
          "augcse.evaluation.suite.main_scores", "augcse.evaluation.suite.SuiteEvaluator", "augcse.trainer.Trainer"]


def resolves(path: str) -> bool:
    """True when ``path`` is a module or an attribute (chain) of the longest importable module prefix."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def named_paths() -> dict[str, str]:
    """path → the first file that names it, from the docs and from every module's text."""
    found: dict[str, str] = {}
    for source in [*DOCS, *sorted(PACKAGE.rglob("*.py"))]:
        for match in PATH.finditer(source.read_text(encoding="utf-8")):
            path = match.group(0).rstrip(".")
            if path.endswith(("_py", ".py", ".yaml", ".md")):  # a file name, not a module path
                continue
            found.setdefault(path, str(source.relative_to(ROOT)))
    return found


def test_the_public_paths_resolve() -> None:
    assert [p for p in PUBLIC if not resolves(p)] == []


def test_every_named_path_resolves() -> None:
    found = named_paths()
    assert len(found) > 100  # the scan reads what it should
    broken = {path: where for path, where in found.items() if not resolves(path)}
    assert broken == {}, f"paths named in the docs or docstrings that do not resolve: {broken}"


@pytest.mark.parametrize("path", ["augcse.train.run", "augcse.modules.POOLERS", "augcse.losses.NoSuchLoss"])
def test_an_old_or_wrong_path_does_not_resolve(path: str) -> None:
    assert not resolves(path)
