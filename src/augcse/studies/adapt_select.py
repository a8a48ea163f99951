"""The grid of the ``augcse adapt`` design study (``data/studies/adapt-select.yaml``): sets × seeds, each one
``augcse adapt`` command line with the set's labelled task recorded beside the criteria. :func:`plan` turns the
grid into those command lines (run nothing); ``python -m augcse.studies.adapt_select GRID`` prints them."""

from __future__ import annotations

import sys
from pathlib import Path

from augcse.core import textfile, yamlfile

KEYS = {"title", "seeds", "arguments", "sets"}


def plan(grid_path: str | Path, data_dir: Path | None = None) -> list[list[str]]:
    """One ``augcse adapt`` argument list per (set, seed); a texts file missing under ``data_dir`` is refused."""
    grid = yamlfile.load(textfile.read_text(grid_path, "grid file"))
    unknown = set(grid) - KEYS
    if unknown:
        raise ValueError(f"{grid_path}: unknown key(s) {', '.join(sorted(unknown))}; keys: {', '.join(sorted(KEYS))}")
    lines = []
    for name, spec in grid["sets"].items():
        texts = Path(data_dir) / spec["texts"] if data_dir else Path(spec["texts"])
        if data_dir and not texts.is_file():
            raise ValueError(f"{grid_path}: set {name}: {texts} does not exist")
        for seed in grid["seeds"]:
            lines.append(["adapt", str(texts), "--sample-task", spec["task"], *map(str, grid.get("arguments", [])),
                          f"name={name}-seed{seed}", f"seed={seed}"])
    return lines


if __name__ == "__main__":
    for line in plan(sys.argv[1]):
        print("augcse " + " ".join(line))
