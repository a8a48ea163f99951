"""``augcse compare RUN…``: runs side by side, seeds pooled, differences to a baseline tested.

Runs whose resolved recipes are equal once every ``seed`` key (and the top-level ``name``) is removed
form one group; a group's cell is mean ± sample standard deviation over its runs (n shown). Two runs of
one group with the same seed are repeats, not seeds, and are refused. With a baseline run, each group
gets the difference of its mean to the baseline group's mean and a two-sided t-test p-value over seeds:
paired (``scipy.stats.ttest_rel``) when both groups ran the same seeds, else Welch's unequal-variance
test (``scipy.stats.ttest_ind(equal_var=False)``); the table says which. The recipe keys that differ
between groups are listed, and with ``--out`` a bar chart shows every task's mean ± sd per group.
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
from augcse.core.document import Document, Heading, Image, Paragraph, Table
from augcse.report.plots import group_bars
from augcse.report.run_report import NotARunError, Run, fmt, is_run, load_run

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


def refuse_repeated_seeds(groups: Sequence[Group]) -> None:
    """Runs with one recipe and one seed are the same experiment twice: pooling them fakes a spread."""
    for group in groups:
        seen: dict[Any, Run] = {}
        for run in group.runs:
            if run.seed in seen:
                raise ValueError(f"runs {seen[run.seed].path.name!r} and {run.path.name!r} have the same recipe "
                                 f"and seed {run.seed}: repeats are not seeds; compare runs with different seeds")
            seen[run.seed] = run


@dataclass(frozen=True)
class Test:
    """A significance test of a group's scores against the baseline group's on one task."""

    name: str  # "paired t" or "Welch t"
    p_value: float


def significance(base: Group, other: Group, stage: str, task: str) -> Test | None:
    """Paired t-test when both groups ran the same seeds (pairs by seed), else Welch's; None below n=2."""
    from scipy import stats

    a = {r.seed: r.scores[stage][task] for r in base.runs if task in r.scores.get(stage, {})}
    b = {r.seed: r.scores[stage][task] for r in other.runs if task in r.scores.get(stage, {})}
    if len(a) < 2 or len(b) < 2:
        return None
    if set(a) == set(b):
        seeds = sorted(a, key=str)
        test = Test("paired t", float(stats.ttest_rel([b[s] for s in seeds], [a[s] for s in seeds]).pvalue))
    else:
        test = Test("Welch t", float(stats.ttest_ind(list(b.values()), list(a.values()), equal_var=False).pvalue))
    return None if np.isnan(test.p_value) else test  # no variance at all: nothing to test


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flatten(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def recipe_differences(groups: Sequence[Group]) -> Table | None:
    """Recipe keys (dotted) whose values differ between groups, one column per group."""
    flat = [_flatten(_strip(g.runs[0].recipe)) for g in groups]
    keys = sorted({k for f in flat for k in f})
    rows = [[f"`{k}`", *[_cell(f[k]) if k in f else "—" for f in flat]] for k in keys
            if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flat}) > 1]
    return Table(["recipe key", *[g.label for g in groups]], rows, align_right=False) if rows else None


def _cell(value: Any) -> str:
    """A recipe value as text: strings bare, anything else as JSON (non-ASCII kept as it is)."""
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def _tasks(runs: Sequence[Run], stage: str) -> list[str]:
    tasks = list(dict.fromkeys(t for r in runs for t in r.scores.get(stage, {})))
    return [t for t in tasks if not is_average(t)] + [t for t in tasks if is_average(t)]


def build_comparison(runs: Sequence[Run], baseline: Run | None = None, stage: str = "after",
                     figures: Path | None = None) -> Document:
    """The comparison document; with ``figures`` (a folder) the per-task bar chart is drawn there."""
    doc = Document(f"Comparison of {len(runs)} runs ({stage} training)")
    all_runs = list(runs) + ([baseline] if baseline is not None and baseline.path not in {r.path for r in runs} else [])
    groups = group_runs(all_runs)
    refuse_repeated_seeds(groups)
    tasks = _tasks(all_runs, stage)
    if not tasks:
        return doc.add(Paragraph(f"No `{stage}` scores in these runs' `eval.json`."))
    base_group = next((g for g in groups if baseline is not None and any(r.path == baseline.path for r in g.runs)), None)

    doc.add(Heading("Groups (mean ± sd over seeds)"))
    others = [g for g in groups if g is not base_group]
    header = ["task"] + [g.label for g in groups]
    if base_group is not None:
        header += [f"Δ {g.label} − {base_group.label} (p)" for g in others]
    tests_used: set[str] = set()
    rows = []
    for t in tasks:
        row = [f"**{t}**" if is_average(t) else t] + [mean_std(g.values(stage, t)) for g in groups]
        if base_group is not None:
            b = base_group.mean(stage, t)
            for g in others:
                m = g.mean(stage, t)
                test = significance(base_group, g, stage, t)
                if test is not None:
                    tests_used.add(test.name)
                p = f" (p={test.p_value:.3f}{'*' if test.p_value < 0.05 else ''})" if test else ""
                row.append("—" if m is None or b is None else f"{m - b:+.2f}{p}")
        rows.append(row)
    doc.add(Table(header, rows))
    if base_group is not None:
        how = " and ".join(sorted(tests_used)) if tests_used else "none (a group has fewer than 2 seeds)"
        doc.add(Paragraph(f"Baseline: {base_group.label}. p: two-sided t-test over seeds, {how} "
                          "(paired when both groups ran the same seeds, else Welch); * p < 0.05, "
                          "not corrected for the number of tasks."))
    if figures is not None:
        chart = group_bars({g.label: {t: g.values(stage, t) for t in tasks if not is_average(t)} for g in groups},
                           figures / "compare-bars.png", title=f"{stage} training: mean ± sd over seeds")
        doc.add(Image(chart, "per-task mean ± sd per group"))
    differences = recipe_differences(groups)
    doc.add(Heading("How the groups' recipes differ"))
    doc.add(differences if differences else Paragraph("The groups' recipes are identical but for seeds and names."))
    members = "; ".join(f"{g.label}: {', '.join(f'{r.path.name} (seed {r.seed})' for r in g.runs)}" for g in groups)
    doc.add(Paragraph(f"Groups (runs identical but for the seed): {members}."))
    reduced = [f"{r.path.name} ({r.precision(stage)})" for r in all_runs if r.precision(stage) != "float32"]
    if reduced:
        doc.add(Paragraph(f"Scored with reduced-precision encoding, not float32: {', '.join(reduced)}."))

    doc.add(Heading("Runs"))
    names = [f"{r.name} (seed {r.seed})" if r.seed is not None else r.name for r in all_runs]
    names = [name if r.precision(stage) == "float32" else f"{name}, {r.precision(stage)} scores"
             for name, r in zip(names, all_runs)]
    doc.add(Table(["task", *names], [[t, *[fmt(r.scores.get(stage, {}).get(t)) for r in all_runs]] for t in tasks]))
    return doc


def find_runs(paths: Sequence[str | Path]) -> list[Path]:
    """Run directories: each path is a run, or a folder whose sub-folders are runs."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            raise FileNotFoundError(f"run directory {str(path)!r} does not exist")
        inside = [path] if is_run(path) else sorted(p for p in path.iterdir() if p.is_dir() and is_run(p))
        if not inside:
            raise NotARunError(f"{str(path)!r} is neither a training run nor a folder of runs (no recipe.yaml)")
        found += [p for p in inside if p not in found]
    return found


def compare(run_dirs: Sequence[str | Path], baseline: str | Path | None = None, stage: str = "after",
            figures: Path | None = None) -> Document:
    runs = [load_run(p) for p in find_runs(run_dirs)]
    base = load_run(baseline) if baseline is not None else None
    return build_comparison(runs, base, stage, figures)
