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


# The layers, top to bottom, as pyproject.toml states them; members of one layer are independent.
LAYERS = [("commands",), ("studies",), ("training",), ("report",), ("evaluation", "losses", "text", "models"),
          ("assets",), ("core",)]
# what is not a layer: the package's own entry points and the public path of the trainer
ENTRY_POINTS = {"__init__.py", "__main__.py", "trainer.py"}


def _break(tmp_path: Path, module: str, imported: str) -> subprocess.CompletedProcess:
    """A copy of the package where ``module`` (a path under augcse/) imports ``imported`` inside a function."""
    copy = tmp_path / "src" / "augcse"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "data"))
    target = copy / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n\ndef _late():\n    import {imported}\n\n"
                      f"    return {imported}\n", encoding="utf-8")
    return lint_imports(copy.parent)


def test_the_contracts_state_the_layers_of_the_folder_list() -> None:
    """pyproject's one layers contract names exactly the package's folders, in the order above."""
    import tomllib

    contracts = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    stated = [tuple(sorted(m.strip().removeprefix("augcse.") for m in layer.split("|"))) for layer in layers]
    assert stated == [tuple(sorted(layer)) for layer in LAYERS]
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    assert folders == {name for layer in LAYERS for name in layer}
    loose = {p.name for p in PACKAGE.glob("*.py")}
    assert loose == ENTRY_POINTS, f"modules outside a layer: {sorted(loose - ENTRY_POINTS)}"


def test_an_import_across_a_layer_breaks_the_contract(tmp_path: Path) -> None:
    """The check can fail: a loss that imports the augmentation library (a sibling layer member)."""
    result = _break(tmp_path, "losses/simcse.py", "augcse.text.augment")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "each layer imports only the layers below it BROKEN" in result.stdout
    assert "augcse.losses.simcse -> augcse.text.augment" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """Training reaching the command line (as ``python -m augcse.train`` once did) is refused."""
    result = _break(tmp_path, "training/run.py", "augcse.commands.main")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "augcse.training.run -> augcse.commands.main" in result.stdout


def test_the_package_root_reaches_only_the_base_and_the_model_loader() -> None:
    """``import augcse`` stays light: the version from the base, ``load_model`` from the model side."""
    graph = grimp.build_graph("augcse", cache_dir=None)
    assert graph.find_modules_directly_imported_by("augcse") == {"augcse.core.version", "augcse.models.load"}


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
