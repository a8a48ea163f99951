"""The design study of ``augcse adapt``'s label-free choice (``data/studies/adapt-select.yaml``, and the held-out
``adapt-heldout.yaml``): sets × seeds, each one ``augcse adapt`` command line with the set's labelled score recorded
beside the criteria (never used to choose).

- :func:`plan` turns a grid into those command lines (runs nothing);
- :func:`run` runs the missing ones one after another, each in its own process, a log per run;
- :mod:`augcse.studies.adapt_tables` reads the records and writes the tables (criteria's τ, the rules' gains).

A set names its labelled score either as a registered task (``task: SNIPS``) or, for a clustering file too large to
score at every candidate on a CPU, as a seeded subsample of its rows (``sample_rows: 4000``): the rows are written
once to ``OUT/samples/<set>.csv`` and scored as ``--sample`` (clustering accuracy, as ``clustering:PATH``).

    python -m augcse.studies.adapt_select GRID                       # print the plan
    python -m augcse.studies.adapt_select GRID --run --out DIR       # run what is missing
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from augcse.core import textfile, yamlfile
from augcse.core.outputs import write_text_atomically

KEYS = {"title", "seeds", "arguments", "sets", "rule_commit"}
SET_KEYS = {"texts", "task", "sample_rows"}
SAMPLE_SEED = 0


def load_grid(grid_path: str | Path) -> dict:
    grid = yamlfile.load(textfile.read_text(grid_path, "grid file"))
    if not isinstance(grid, dict):
        raise ValueError(f"{grid_path}: a grid is a mapping with keys {', '.join(sorted(KEYS))}")
    unknown = set(grid) - KEYS
    if unknown:
        raise ValueError(f"{grid_path}: unknown key(s) {', '.join(sorted(unknown))}; keys: {', '.join(sorted(KEYS))}")
    for name, spec in grid["sets"].items():
        bad = set(spec) - SET_KEYS
        if bad or ("task" in spec) == ("sample_rows" in spec):
            raise ValueError(f"{grid_path}: set {name}: give texts and either task or sample_rows "
                             f"(unknown: {', '.join(sorted(bad)) or 'none'})")
    return grid


def sample_file(texts: Path, rows: int, out: Path) -> Path:
    """``rows`` rows of the labelled CSV ``texts`` drawn with a fixed seed, in file order, written once to ``out``."""
    if not out.is_file():
        with open(texts, encoding="utf-8", newline="") as f:
            table = [(r["text"], r["label"]) for r in csv.DictReader(f)]
        keep = sorted(random.Random(SAMPLE_SEED).sample(range(len(table)), min(rows, len(table))))
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(["text", "label"])
        writer.writerows(table[i] for i in keep)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(out, buffer.getvalue())
    return out


def plan(grid_path: str | Path, data_dir: Path | None = None, out: Path | None = None) -> list[list[str]]:
    """One ``augcse adapt`` argument list per (set, seed); a texts file missing under ``data_dir`` is refused."""
    grid = load_grid(grid_path)
    per_set = []
    for name, spec in grid["sets"].items():
        texts = Path(data_dir) / spec["texts"] if data_dir else Path(spec["texts"])
        if data_dir and not texts.is_file():
            raise ValueError(f"{grid_path}: set {name}: {texts} does not exist")
        if "task" in spec:
            score = ["--sample-task", spec["task"]]
        else:
            where = (Path(out) if out else Path("OUT")) / "samples" / f"{name}.csv"
            if data_dir and out:
                sample_file(texts, int(spec["sample_rows"]), where)
            score = ["--sample", str(where)]
        per_set.append((name, texts, score))
    # seed by seed, every set in each: a study stopped part-way has the same seeds of every set
    return [["adapt", str(texts), *score, *map(str, grid.get("arguments", [])), f"name={name}-seed{seed}", f"seed={seed}"]
            for seed in grid["seeds"] for name, texts, score in per_set]


def run(grid_path: str | Path, data_dir: Path, out: Path) -> None:
    """Run every planned line whose ``adapt.json`` is missing, in ``out/runs``; one log per run in ``out/logs``."""
    out = Path(out).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    started = out / "started.json"  # when the study began and under which frozen rule: written once
    if not started.is_file():
        grid = load_grid(grid_path)
        write_text_atomically(started, json.dumps({"grid": str(grid_path), "title": grid["title"],
                                                   "rule_commit": grid.get("rule_commit"),
                                                   "started": datetime.now(timezone.utc).isoformat(timespec="seconds")},
                                                  indent=2))
    for line in plan(grid_path, data_dir, out):
        name = next(a for a in line if a.startswith("name="))[5:]
        if (out / "runs" / name / "adapt.json").is_file():
            continue
        resume = ["--resume"] if (out / "runs" / name).is_dir() else []
        with open(out / "logs" / f"{name}.log", "a", encoding="utf-8") as log:
            code = subprocess.call([sys.executable, "-m", "augcse", *line, *resume, "--data-dir", str(data_dir),
                                    f"output_dir={out / 'runs'}"], stdout=log, stderr=subprocess.STDOUT)
        print(f"{name}: exit {code}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m augcse.studies.adapt_select", description=__doc__.splitlines()[0])
    parser.add_argument("grid")
    parser.add_argument("--run", action="store_true", help="run the missing runs (else print the plan)")
    parser.add_argument("--out", type=Path, help="the study folder (runs/, logs/, samples/)")
    parser.add_argument("--data-dir", type=Path, help="data directory (default: $AUGCSE_DATA)")
    args = parser.parse_args(argv)
    from augcse.assets.resolve import data_dir as resolve_data_dir

    data = resolve_data_dir(args.data_dir)
    if args.run:
        if args.out is None or data is None:
            parser.error("--run needs --out and a data directory")
        run(args.grid, data, args.out)
        return 0
    for line in plan(args.grid, None, args.out):
        print("augcse " + " ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
