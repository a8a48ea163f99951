"""``augcse study GRID``: a declared grid of runs (sets × rows × seeds), run resumably, tabled and plotted.

A grid file (YAML) declares, per *set* (a training corpus and the tasks it is scored on), *rows* (a recipe
plus overrides, trained once per seed) and an optional *starting model* (evaluated as it is, once per set),
and optionally *budgets*: the steps at which every trained run is also scored (:mod:`augcse.training.budgets`), so a
learning curve costs one run per seed. It runs through the machinery of ``augcse reproduce``
(:mod:`augcse.studies.runs`): every recipe is loaded before anything runs, finished runs are skipped, an interrupted
grid resumes, a second process on the same grid is refused. The table (mean ± sd over seeds with n, Δ
against the starting model, and the scores at each budget) goes through the writer of ``augcse compare``
and is saved as ``study.md``, ``study.html``, ``study.json`` and one curve plot per set.

The format, with every key::

    title: what the grid asks            # optional
    seeds: [1, 2, 3]
    budgets: [16, 64, 256]               # optional: steps each trained run is also scored at
    overrides: [eval.before=null]        # optional: every trained run
    start: {model: NAME_OR_FOLDER, pooler: null}   # optional: the starting model, evaluated as it is
    sets:                                # optional; without it, one set from top-level recipe/tasks
      snips: {recipe: adapt-snips, tasks: SNIPS, overrides: [data.limit=8192]}
    rows:
      simcse: {}                         # the set's recipe as it is
      ct: {overrides: [loss.name=ct]}    # or {recipe: NAME_OR_FILE, overrides: [...]}
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union

import yaml
from pydantic import AfterValidator, Field, model_validator

from augcse.studies.runs import (RESERVED_KEYS, Evaluate, Row, Run, check_folder_name, check_overrides, plan_runs,
                                 run_all)
from augcse.core.schema import Budgets, RecipeError, Section, validate
from augcse.core import textfile, yamlfile
from augcse.core.names import check_folder_name as folder_name

START = "start"
RESERVED = {**RESERVED_KEYS, "seed": "use seeds:", "output_dir": "use --output",
            "eval.after": "a set's runs are scored on its tasks:", "eval.budgets": "use budgets:"}


class GridError(ValueError):
    """A grid file that cannot be run; the message names the file, the key and the fix."""


# ---------------------------------------------------------------- the grid file's schema (augcse.core.schema)

def _no_reserved(overrides: list[str]) -> list[str]:
    try:
        check_overrides(overrides, RESERVED)  # a key the grid sets per run: name, seed, output_dir, eval.after
    except RecipeError as exc:
        raise ValueError(str(exc)) from None  # worded under the grid key that holds it
    return overrides


def _resolvable(tasks: str | list[str]) -> str:
    from augcse.evaluation.tasks import resolve_tasks

    text = ",".join(tasks) if isinstance(tasks, list) else tasks
    if not text.strip():
        raise ValueError("must name the evaluation tasks (e.g. SNIPS or sts)")
    try:
        resolve_tasks(text)
    except (KeyError, ValueError) as exc:
        raise ValueError(str(exc).strip("\"'")) from None
    return text


def _distinct(values: list[int]) -> list[int]:
    if len(set(values)) != len(values):
        raise ValueError(f"must be distinct, got {values}")
    return values


Overrides = Annotated[list[str], AfterValidator(_no_reserved)]
Tasks = Annotated[Union[str, list[str]], AfterValidator(_resolvable)]


class StartSpec(Section):
    model: str  # the starting model (a folder or Hub name), evaluated as it is
    pooler: str | None = None  # None: the saved model's own pooling


class SetSpec(Section):
    tasks: Tasks  # what the set's runs are scored on
    recipe: str | None = None  # the set's recipe (a row may name its own)
    overrides: Overrides = Field(default_factory=list)


class RowSpec(Section):
    recipe: str | None = None  # None: the set's recipe
    overrides: Overrides = Field(default_factory=list)


class GridSpec(Section):
    """A grid file: every key, its type and range; one set from top-level ``recipe``/``tasks`` without ``sets``."""

    title: str | None = None
    seeds: Annotated[list[int], Field(min_length=1), AfterValidator(_distinct)]
    budgets: Budgets = Field(default_factory=list)
    overrides: Overrides = Field(default_factory=list)  # every trained run
    start: StartSpec | None = None
    sets: dict[str, SetSpec] | None = None
    rows: Annotated[dict[str, RowSpec], Field(min_length=1)]
    recipe: str | None = None
    tasks: Tasks | None = None

    @model_validator(mode="after")
    def _consistent(self) -> GridSpec:
        if self.sets is not None and (self.tasks is not None or self.recipe is not None):
            raise ValueError("give recipe/tasks per set under 'sets', or at the top without 'sets'")
        if self.sets is not None and not self.sets:
            raise ValueError("sets is empty; declare at least one set")
        if self.sets is None and self.tasks is None:
            raise ValueError("tasks is required without 'sets' (e.g. tasks: SNIPS)")
        if START in self.rows:
            raise ValueError(f"rows.{START} is the starting model's name; use 'start:' or another name")
        for kind, names in (("set", self.sets or {}), ("row", self.rows)):
            for name in names:
                check_folder_name(name, kind)
        recipes = [item.recipe for item in self.sets.values()] if self.sets is not None else [self.recipe]
        bare = next((name for name, row in self.rows.items() if not row.recipe and None in recipes), None)
        if bare is not None:
            raise ValueError(f"rows.{bare} has no recipe and neither has its set; give recipe:")
        return self


@dataclass(frozen=True)
class Set:
    """A training corpus and the tasks its runs are scored on (through a recipe and overrides)."""

    name: str
    tasks: str
    recipe: str | None = None
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Grid:
    path: Path
    title: str
    seeds: tuple[int, ...]
    sets: tuple[Set, ...]
    rows: tuple[tuple[str, str | None, tuple[str, ...]], ...]  # (name, recipe, overrides)
    budgets: tuple[int, ...] = ()
    overrides: tuple[str, ...] = ()
    start: Evaluate | None = None

    @property
    def name(self) -> str:
        return self.path.stem

    def set_rows(self, item: Set) -> list[Row]:
        """The rows of one set: the starting model (if any), then each trained row, its overrides after the
        set's, after the grid's (the more specific wins)."""
        rows = [Row(START, (), evaluate=self.start)] if self.start else []
        for name, recipe, overrides in self.rows:
            rows.append(Row(name, (), recipe=recipe or item.recipe,
                            overrides=(*self.overrides, *item.overrides, *overrides)))
        return rows

    def plan(self, output: Path) -> dict[str, list[Run]]:
        """Every run, by set; every recipe is loaded here (a bad key or file is refused before anything runs)."""
        root = output / self.name
        return {item.name: plan_runs(self.set_rows(item), self.seeds, root / item.name if len(self.sets) > 1 else root,
                                     (), item.tasks, budgets=self.budgets, planned=()) for item in self.sets}


def load_grid(path: str | Path) -> Grid:
    """The grid file, validated by :class:`GridSpec`; every problem is one line naming the key (:class:`GridError`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"grid file {str(path)!r} does not exist")
    try:  # the file's name is the study's folder under --output: "...yaml" would be ".."
        folder_name(path.stem, f"grid file {path}: its name", "it names the study's folder under --output; "
                    "rename the file")
    except ValueError as exc:
        raise GridError(str(exc)) from None
    try:
        data = yamlfile.load(textfile.read_text(path, f"grid {path}"))
    except (yamlfile.DuplicateKeyError, yamlfile.AliasBombError) as exc:
        raise GridError(f"grid {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise GridError(f"grid {path}: not valid YAML: {yamlfile.describe(exc)}; fix the file") from None
    try:
        spec = validate(GridSpec, data, subject="grid key")
    except RecipeError as exc:
        raise GridError(f"grid {path}: {exc}") from None
    named = spec.sets if spec.sets is not None else {"": SetSpec(tasks=spec.tasks, recipe=spec.recipe)}
    sets = tuple(Set(name, item.tasks, item.recipe, tuple(item.overrides)) for name, item in named.items())
    rows = tuple((name, row.recipe, tuple(row.overrides)) for name, row in spec.rows.items())
    start = Evaluate(spec.start.model, spec.start.pooler) if spec.start else None
    return Grid(path, spec.title or path.stem, tuple(spec.seeds), sets, rows, tuple(spec.budgets),
                tuple(spec.overrides), start)


# --------------------------------------------------------------------------- the table

def curve_points(run: Run) -> dict[int, dict[str, float]]:
    """A finished run's scores by step: the budgets reached (``curve.json``), then its last step
    (``eval.json``); a starting-model run is step 0."""
    from augcse.training.budgets import read_curve

    if not run.trained:
        return {0: run.scores()}
    points = read_curve(run.run_dir)
    points[int(run.summary().get("global_step", max(points, default=0)))] = run.scores()
    return points


def _stats(values: list[float]) -> dict[str, Any]:
    return {"values": values, "n": len(values), "mean": statistics.fmean(values) if values else None,
            "sd": statistics.stdev(values) if len(values) > 1 else None}


def summarise(runs: list[Run]) -> dict[str, Any]:
    """One set's figures: per row and task, the final scores over seeds and Δ against the starting model;
    per row, task and step, the scores over seeds (the learning curve)."""
    from augcse.evaluation.tasks import is_average

    finished = [run for run in runs if run.done]
    rows = list(dict.fromkeys(run.row.name for run in runs))
    tasks = list(dict.fromkeys(task for run in finished for task in run.scores()))
    named = [task for task in tasks if not is_average(task)]
    tasks = named if len(named) == 1 else tasks  # an average of one task only repeats it
    start = next((run.scores() for run in finished if not run.trained), {})
    out: dict[str, Any] = {"tasks": tasks, "rows": {}}
    for row in rows:
        own = [run for run in finished if run.row.name == row]
        final = {}
        for task in tasks:
            stats = _stats([run.scores()[task] for run in own if task in run.scores()])
            stats["delta"] = (stats["mean"] - start[task]) if stats["mean"] is not None and task in start else None
            final[task] = stats
        points = [curve_points(run) for run in own]
        steps = sorted({step for point in points for step in point})
        curve = {task: {step: _stats([p[step][task] for p in points if task in p.get(step, {})]) for step in steps}
                 for task in tasks}
        out["rows"][row] = {"final": final, "curve": curve}
    out["pending"] = [str(run.run_dir) for run in runs if not run.done]
    seconds = [run.seconds() for run in finished if run.trained]
    out["time"] = {"runs": len(seconds), "seconds": sum(seconds)}
    return out


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def _cell(stats: dict[str, Any]) -> str:
    """mean ± sd (n=…), as ``augcse compare`` writes it; a single seed says n=1 too, since a study's table
    may be read while seeds are still running."""
    from augcse.report.compare import mean_std

    if not stats or not stats["values"]:
        return "—"
    return mean_std(stats["values"]) + (" (n=1)" if len(stats["values"]) == 1 else "")


def set_tables(summary: dict[str, Any], has_start: bool, by_step: bool) -> list:
    """One set's tables from its figures (:func:`summarise`, or the same read back from ``study.json``): the
    final scores (mean ± sd, n, Δ vs start) and, where the runs were scored at budgets, the scores by step."""
    from augcse.core.document import Paragraph, Table

    tasks = summary["tasks"]
    header = ["row", *tasks, *([f"Δ {t} vs {START}" for t in tasks] if has_start else [])]
    body = []
    for row, data in summary["rows"].items():
        cells = [_cell(data["final"][t]) for t in tasks]
        deltas = ["—" if row == START or data["final"][t]["delta"] is None else f"{data['final'][t]['delta']:+.2f}"
                  for t in tasks] if has_start else []
        body.append([row, *cells, *deltas])
    blocks: list = [Table(header, body)]
    for task in tasks if by_step else []:
        steps = sorted({int(s) for data in summary["rows"].values() for s in data["curve"][task]})
        curves = {row: {int(s): stats for s, stats in data["curve"][task].items()} for row, data in summary["rows"].items()}
        blocks.append(Paragraph(f"{task} by training step (mean ± sd over seeds; step 0 is the starting model, "
                                "the last column of a row its final step):"))
        blocks.append(Table(["row", *map(str, steps)],
                            [[row, *(_cell(curve.get(s, {})) for s in steps)] for row, curve in curves.items()]))
    return blocks


def build_document(grid: Grid, by_set: dict[str, list[Run]], folder: Path):
    """Per set: the final table (mean ± sd, n, Δ vs start), the scores at each budget, and the curve plot."""
    from augcse.report.curves import learning_curves
    from augcse.core.document import Document, Heading, Image, Paragraph

    doc = Document(f"Study: {grid.title}")
    figures: dict[str, Any] = {}
    for name, runs in by_set.items():
        summary = figures[name or grid.name] = summarise(runs)
        tasks = summary["tasks"]
        if name:
            doc.add(Heading(f"Set {name}"))
        if not tasks:
            doc.add(Paragraph(f"No finished run yet ({len(runs)} to run)."))
            continue
        doc.add(*set_tables(summary, grid.start is not None, bool(grid.budgets)))
        if grid.budgets:
            plot = learning_curves({row: data["curve"] for row, data in summary["rows"].items()},
                                   folder / f"curves{'-' + name if name else ''}.png",
                                   title=f"{grid.title}{': ' + name if name else ''}")
            doc.add(Image(plot, f"score against training steps{' on ' + name if name else ''}: mean ± sd over seeds"))
        spent = summary["time"]
        if spent["runs"]:
            runs_word = "run" if spent["runs"] == 1 else "runs"
            doc.add(Paragraph(f"Time: {spent['runs']} trained {runs_word} finished in {_duration(spent['seconds'])} "
                              f"({_duration(spent['seconds'] / spent['runs'])} each: training and every "
                              "evaluation, the runs' summary.json `seconds`)."))
        if summary["pending"]:
            doc.add(Paragraph(f"Not finished yet ({len(summary['pending'])}): {', '.join(summary['pending'])}."))
    if grid.start is not None:
        doc.add(Paragraph(f"Δ = a row's mean − the starting model's score ({grid.start.model}, evaluated as it is). "
                          "Seeds: " + ", ".join(map(str, grid.seeds)) + "."))
    return doc, figures


def describe(grid: Grid, by_set: dict[str, list[Run]]) -> str:
    runs = [run for runs in by_set.values() for run in runs]
    trained = sum(run.trained for run in runs)
    out = [grid.title, "", f"{len(runs)} runs ({trained} trained, {len(runs) - trained} evaluated as they are)"
           + (f"; every trained run scored at steps {', '.join(map(str, grid.budgets))} and at its end" if grid.budgets
              else "") + ":"]
    if grid.overrides:
        out.append(f"  every trained run: {' '.join(grid.overrides)}")
    for name, item in zip(by_set, grid.sets):
        out.append(f"  set {name or grid.name}: tasks {item.tasks}")
        for run in by_set[name]:
            state = "done" if run.done else ("partial, resumes" if run.started else "to run")
            if run.trained:
                own = run.row.overrides[len(grid.overrides):]  # the grid-wide ones are listed above
                what = f"recipe {run.row.recipe} seed {run.seed}" + (f" + {' '.join(own)}" if own else "")
            else:
                pooler = run.row.evaluate.pooler or "the saved model's own"
                what = f"evaluate {run.model} (pooler: {pooler}) on {item.tasks}"
            out.append(f"    {run.run_dir}  [{state}]  {what}")
    return "\n".join(out)
