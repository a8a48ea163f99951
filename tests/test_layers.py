"""The layering holds: the import contracts in pyproject.toml (``lint-imports``) and no import cycle at all.

import-linter reads imports inside functions too, so a deferred import does not hide a dependency.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

import augcse

PACKAGE = Path(augcse.__file__).parent
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def lint_imports(package_root: Path) -> subprocess.CompletedProcess:
    """Run ``lint-imports`` with the project's contracts on the package found under ``package_root``."""
    code = ("import sys; from importlinter.cli import lint_imports; "
            f"sys.exit(lint_imports(config_filenames=({str(PYPROJECT)!r},), no_cache=True, no_logo=True))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(package_root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=package_root, timeout=120)


def test_import_contracts_hold() -> None:
    result = lint_imports(PACKAGE.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout and "KEPT" in result.stdout


def test_a_forbidden_import_breaks_its_contract(tmp_path: Path) -> None:
    """The check can fail: a loss that imports the augmentation library breaks 'losses never import augment'."""
    copy = tmp_path / "src" / "augcse"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    simcse = copy / "losses" / "simcse.py"
    simcse.write_text(simcse.read_text(encoding="utf-8") + "\n\ndef _names():\n"
                      "    from augcse.augment import resolve_names\n\n    return resolve_names('sda')\n",
                      encoding="utf-8")
    result = lint_imports(copy.parent)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "losses never import augment BROKEN" in result.stdout
    assert "augcse.losses.simcse -> augcse.augment" in result.stdout


def test_no_import_cycle_between_any_two_modules() -> None:
    """Stricter than the sibling contract: a package's ``__init__`` and its own modules form no cycle either."""
    graph = grimp.build_graph("augcse", cache_dir=None)
    modules = sorted(graph.modules)
    index = {m: i for i, m in enumerate(modules)}
    edges = [(index[m], index[t]) for m in modules for t in graph.find_modules_directly_imported_by(m)]
    rows, cols = zip(*edges)
    adjacency = csr_matrix((np.ones(len(edges)), (rows, cols)), shape=(len(modules), len(modules)))
    _, component = connected_components(adjacency, directed=True, connection="strong")
    cycles = [sorted(m for m in modules if component[index[m]] == c) for c in set(component)
              if list(component).count(c) > 1]
    assert not cycles, f"import cycles: {cycles}"
