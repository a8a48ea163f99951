"""``augcse compare RUN…``: runs side by side, seeds pooled, deltas against a baseline.

Runs whose resolved recipes are equal once every ``seed`` key (and the top-level ``name``) is removed
form one group; a group's cell is mean ± sample standard deviation over its runs (n shown). With a
baseline run, each group also gets the difference of its mean to the baseline group's mean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from augcse.evaluation.tasks import is_average
from augcse.report.document import Document, Heading, Paragraph, Table
from augcse.report.run_report import Run, fmt, load_run

IGNORED_KEYS = frozenset({"seed", "output_dir", "run_dir"})
SEED_SUFFIX = re.compile(r"([-_.]?(seed|s)[-_]?\d+)$", re.IGNORECASE)


def _strip(value: Any, top: bool = True) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v, False) for k, v in value.items()
                if k not in IGNORED_KEYS and not (top and k == "name")}
    if isinstance(value, list):
        return [_strip(v, False) for v in value]
    return value


def group_key(recipe: dict[str, Any]) -> str:
    """The recipe with seeds and the run name removed, canonically serialised."""
    return json.dumps(_strip(recipe), sort_keys=True, default=str)


@dataclass
class Group:
    label: str
    runs: list[Run]

    def values(self, stage: str, task: str) -> list[float]:
        return [r.scores[stage][task] for r in self.runs if task in r.scores.get(stage, {})]

    def mean(self, stage: str, task: str) -> float | None:
        v = self.values(stage, task)
        return float(np.mean(v)) if v else None


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Groups in first-seen order; labels are run names without a trailing seed marker."""
    groups: dict[str, Group] = {}
    for run in runs:
        key = group_key(run.recipe) if run.recipe else f"path:{run.path}"
        if key not in groups:
            label = SEED_SUFFIX.sub("", run.name) or run.name
            taken = {g.label for g in groups.values()}
            suffix = 2
            base = label
            while label in taken:
                label, suffix = f"{base}#{suffix}", suffix + 1
            groups[key] = Group(label, [])
        groups[key].runs.append(run)
    return list(groups.values())


def mean_std(values: list[float]) -> str:
    if not values:
        return "—"
    if len(values) == 1:
        return fmt(values[0])
    return f"{np.mean(values):.2f} ± {np.std(values, ddof=1):.2f} (n={len(values)})"


def _tasks(runs: Sequence[Run], stage: str) -> list[str]:
    tasks = list(dict.fromkeys(t for r in runs for t in r.scores.get(stage, {})))
    return [t for t in tasks if not is_average(t)] + [t for t in tasks if is_average(t)]


def build_comparison(runs: Sequence[Run], baseline: Run | None = None, stage: str = "after") -> Document:
    doc = Document(f"Comparison of {len(runs)} runs ({stage} training)")
    all_runs = list(runs) + ([baseline] if baseline is not None and baseline.path not in {r.path for r in runs} else [])
    tasks = _tasks(all_runs, stage)
    if not tasks:
        return doc.add(Paragraph(f"No `{stage}` scores in these runs' `eval.json`."))
    groups = group_runs(all_runs)
    base_group = next((g for g in groups if baseline is not None and any(r.path == baseline.path for r in g.runs)), None)

    doc.add(Heading("Runs"))
    names = [f"{r.name} (seed {r.seed})" if r.seed is not None else r.name for r in all_runs]
    doc.add(Table(["task", *names], [[t, *[fmt(r.scores.get(stage, {}).get(t)) for r in all_runs]] for t in tasks]))

    doc.add(Heading("Groups (mean ± std over seeds)"))
    header = ["task"] + [g.label for g in groups]
    others = [g for g in groups if g is not base_group]
    if base_group is not None:
        header += [f"Δ {g.label} − {base_group.label}" for g in others]
    rows = []
    for t in tasks:
        row = [f"**{t}**" if is_average(t) else t] + [mean_std(g.values(stage, t)) for g in groups]
        if base_group is not None:
            b = base_group.mean(stage, t)
            for g in others:
                m = g.mean(stage, t)
                row.append("—" if m is None or b is None else f"{m - b:+.2f}")
        rows.append(row)
    doc.add(Table(header, rows))
    members = "; ".join(f"{g.label}: {', '.join(r.path.name for r in g.runs)}" for g in groups)
    doc.add(Paragraph(f"Groups (runs identical but for the seed): {members}."))
    if base_group is not None:
        doc.add(Paragraph(f"Baseline: {base_group.label}."))
    return doc


def compare(run_dirs: Sequence[str | Path], baseline: str | Path | None = None, stage: str = "after") -> Document:
    runs = [load_run(p) for p in run_dirs]
    base = load_run(baseline) if baseline is not None else None
    return build_comparison(runs, base, stage)
