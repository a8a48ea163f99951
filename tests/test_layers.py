"""The view builders (text → columns) and the losses (columns → a number) are separate layers."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import augcse

PACKAGE = Path(augcse.__file__).parent


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize(("layer", "other"), [("views", "losses"), ("losses", "views")])
def test_a_layer_imports_nothing_of_the_other(layer: str, other: str) -> None:
    files = sorted((PACKAGE / layer).glob("*.py"))
    assert files
    offending = {f.name: sorted(m for m in imported_modules(f) if m == f"augcse.{other}" or
                                m.startswith(f"augcse.{other}.")) for f in files}
    assert not {f: m for f, m in offending.items() if m}, f"augcse.{layer} imports augcse.{other}"
