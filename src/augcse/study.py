"""``augcse study GRID``: a declared grid of runs (sets × rows × seeds), run resumably, tabled and plotted.

A grid file (YAML) declares, per *set* (a training corpus and the tasks it is scored on), *rows* (a recipe
plus overrides, trained once per seed) and an optional *starting model* (evaluated as it is, once per set),
and optionally *budgets*: the steps at which every trained run is also scored (:mod:`augcse.budgets`), so a
learning curve costs one run per seed. It runs through the machinery of ``augcse reproduce``
(:mod:`augcse.runs`): every recipe is loaded before anything runs, finished runs are skipped, an interrupted
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

import argparse
import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from augcse.runs import RESERVED_KEYS, Evaluate, Row, Run, check_overrides, plan_runs, run_all

START = "start"
GRID_KEYS = {"title", "seeds", "budgets", "overrides", "start", "sets", "rows", "recipe", "tasks"}
SET_KEYS = {"recipe", "tasks", "overrides"}
ROW_KEYS = {"recipe", "overrides"}
RESERVED = {**RESERVED_KEYS, "seed": "use seeds:", "output_dir": "use --output",
            "eval.after": "a set's runs are scored on its tasks:"}


class GridError(ValueError):
    """A grid file that cannot be run; the message names the file, the key and the fix."""


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
                                     (), item.tasks, budgets=self.budgets) for item in self.sets}


def _strings(where: str, value: Any) -> tuple[str, ...]:
    """A list of overrides; a key the grid sets per run (name, seed, output_dir, eval.after) is refused."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GridError(f"{where} must be a list of key=value strings")
    try:
        check_overrides(value, RESERVED)
    except ValueError as exc:
        raise GridError(f"{where}: {exc}") from None
    return tuple(value)


def _mapping(where: str, value: Any, allowed: set[str]) -> dict[str, Any]:
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise GridError(f"{where} must be a mapping")
    unknown = sorted(set(value) - allowed)
    if unknown:
        raise GridError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(allowed))}")
    return value


def _tasks(where: str, value: Any) -> str:
    from augcse.evaluation.tasks import resolve_tasks

    text = ",".join(value) if isinstance(value, list) else value
    if not isinstance(text, str) or not text.strip():
        raise GridError(f"{where} must name the evaluation tasks (e.g. SNIPS or sts)")
    try:
        resolve_tasks(text)
    except (KeyError, ValueError) as exc:
        raise GridError(f"{where}: {str(exc).strip(chr(34) + chr(39))}") from None
    return text


def load_grid(path: str | Path) -> Grid:
    """The grid file, checked; every problem is one line naming the key (:class:`GridError`)."""
    from augcse.budgets import check_budgets

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"grid file {str(path)!r} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise GridError(f"grid {path}: not valid YAML{where}; fix the file") from None
    top = _mapping(f"grid {path}", data, GRID_KEYS)
    seeds = top.get("seeds")
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds) \
            or len(set(seeds)) != len(seeds):
        raise GridError(f"grid {path}: seeds must be a list of distinct integers, e.g. [1, 2, 3]")
    try:
        budgets = check_budgets(top.get("budgets") or [])
    except ValueError as exc:
        raise GridError(f"grid {path}: {exc}") from None
    if "sets" in top:
        if "tasks" in top or "recipe" in top:
            raise GridError(f"grid {path}: give recipe/tasks per set under 'sets', or at the top without 'sets'")
        if not isinstance(top["sets"], dict):
            raise GridError(f"grid {path}: sets must map each set's name to its recipe, tasks and overrides")
        sets = [(str(name), _mapping(f"grid {path}: sets.{name}", spec, SET_KEYS)) for name, spec in top["sets"].items()]
    else:
        sets = [("", {k: top[k] for k in ("recipe", "tasks") if k in top})]
    if not sets:
        raise GridError(f"grid {path}: sets is empty; declare at least one set")
    parsed_sets = tuple(Set(str(name), _tasks(f"grid {path}: {'sets.' + name + '.' if name else ''}tasks", spec.get("tasks")),
                            spec.get("recipe"), _strings(f"grid {path}: sets.{name}.overrides", spec.get("overrides")))
                        for name, spec in sets)
    rows_spec = top.get("rows")
    if not isinstance(rows_spec, dict) or not rows_spec:
        raise GridError(f"grid {path}: rows must map each row's name to its recipe and overrides")
    rows = []
    for name, spec in rows_spec.items():
        spec = _mapping(f"grid {path}: rows.{name}", spec, ROW_KEYS)
        if name == START:
            raise GridError(f"grid {path}: rows.{START} is the starting model's name; use 'start:' or another name")
        if not spec.get("recipe") and any(item.recipe is None for item in parsed_sets):
            raise GridError(f"grid {path}: rows.{name} has no recipe and neither has its set; give recipe:")
        rows.append((str(name), spec.get("recipe"), _strings(f"grid {path}: rows.{name}.overrides", spec.get("overrides"))))
    start = None
    if "start" in top:
        spec = _mapping(f"grid {path}: start", top["start"], {"model", "pooler"})
        if not isinstance(spec.get("model"), str):
            raise GridError(f"grid {path}: start.model must name the starting model (a folder or Hub name)")
        start = Evaluate(spec["model"], spec.get("pooler"))
    return Grid(path, str(top.get("title") or path.stem), tuple(seeds), parsed_sets, tuple(rows), budgets,
                _strings(f"grid {path}: overrides", top.get("overrides")), start)


# --------------------------------------------------------------------------- the table

def curve_points(run: Run) -> dict[int, dict[str, float]]:
    """A finished run's scores by step: the budgets reached (``curve.json``), then its last step
    (``eval.json``); a starting-model run is step 0."""
    from augcse.budgets import read_curve

    if run.recipe is None:
        return {0: run.scores()}
    points = read_curve(run.run_dir)
    summary = json.loads((run.run_dir / "summary.json").read_text())
    points[int(summary.get("global_step", max(points, default=0)))] = run.scores()
    return points


def _stats(values: list[float]) -> dict[str, Any]:
    return {"values": values, "n": len(values), "mean": statistics.fmean(values) if values else None,
            "sd": statistics.stdev(values) if len(values) > 1 else None}


def summarise(runs: list[Run]) -> dict[str, Any]:
    """One set's figures: per row and task, the final scores over seeds and Δ against the starting model;
    per row, task and step, the scores over seeds (the learning curve)."""
    finished = [run for run in runs if run.done]
    rows = list(dict.fromkeys(run.row.name for run in runs))
    tasks = list(dict.fromkeys(task for run in finished for task in run.scores()))
    start = next((run.scores() for run in finished if run.recipe is None), {})
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
    return out


def _cell(stats: dict[str, Any]) -> str:
    from augcse.report.compare import mean_std

    return mean_std(stats["values"]) if stats else "—"


def build_document(grid: Grid, by_set: dict[str, list[Run]], folder: Path):
    """Per set: the final table (mean ± sd, n, Δ vs start), the scores at each budget, and the curve plot."""
    from augcse.report.curves import learning_curves
    from augcse.report.document import Document, Heading, Image, Paragraph, Table

    doc = Document(f"Study: {grid.title}")
    figures: dict[str, Any] = {}
    for name, runs in by_set.items():
        summary = figures[name or grid.name] = summarise(runs)
        tasks = summary["tasks"]
        if name:
            doc.add(Heading(f"Set {name}"))
        if not tasks:
            doc.add(Paragraph("No finished run yet."))
            continue
        has_start = grid.start is not None
        header = ["row", *tasks, *([f"Δ {t} vs {START}" for t in tasks] if has_start else [])]
        body = []
        for row, data in summary["rows"].items():
            cells = [_cell(data["final"][t]) for t in tasks]
            deltas = ["—" if row == START or data["final"][t]["delta"] is None else f"{data['final'][t]['delta']:+.2f}"
                      for t in tasks] if has_start else []
            body.append([row, *cells, *deltas])
        doc.add(Table(header, body))
        if grid.budgets:
            for task in tasks:
                steps = sorted({s for data in summary["rows"].values() for s in data["curve"][task]})
                doc.add(Paragraph(f"{task} by training step (mean ± sd over seeds; step 0 is the starting model, "
                                  "the last column of a row its final step):"))
                doc.add(Table(["row", *map(str, steps)],
                              [[row, *(_cell(data["curve"][task].get(s, {})) for s in steps)]
                               for row, data in summary["rows"].items()]))
            plot = learning_curves({row: data["curve"] for row, data in summary["rows"].items()},
                                   folder / f"curves{'-' + name if name else ''}.png",
                                   title=f"{grid.title}{': ' + name if name else ''}")
            doc.add(Image(plot, f"score against training steps{' on ' + name if name else ''}: mean ± sd over seeds"))
        if summary["pending"]:
            doc.add(Paragraph(f"Not finished yet ({len(summary['pending'])}): {', '.join(summary['pending'])}."))
    if grid.start is not None:
        doc.add(Paragraph(f"Δ = a row's mean − the starting model's score ({grid.start.model}, evaluated as it is). "
                          "Seeds: " + ", ".join(map(str, grid.seeds)) + "."))
    return doc, figures


def describe(grid: Grid, by_set: dict[str, list[Run]]) -> str:
    runs = [run for runs in by_set.values() for run in runs]
    trained = sum(run.recipe is not None for run in runs)
    out = [grid.title, "", f"{len(runs)} runs ({trained} trained, {len(runs) - trained} evaluated as they are)"
           + (f"; every trained run scored at steps {', '.join(map(str, grid.budgets))} and at its end" if grid.budgets
              else "") + ":"]
    if grid.overrides:
        out.append(f"  every trained run: {' '.join(grid.overrides)}")
    for name, item in zip(by_set, grid.sets):
        out.append(f"  set {name or grid.name}: tasks {item.tasks}")
        for run in by_set[name]:
            state = "done" if run.done else ("partial, resumes" if run.started else "to run")
            if run.recipe is not None:
                own = run.row.overrides[len(grid.overrides):]  # the grid-wide ones are listed above
                what = f"recipe {run.row.recipe} seed {run.seed}" + (f" + {' '.join(own)}" if own else "")
            else:
                pooler = run.row.evaluate.pooler or "the saved model's own"
                what = f"evaluate {run.model} (pooler: {pooler}) on {item.tasks}"
            out.append(f"    {run.run_dir}  [{state}]  {what}")
    return "\n".join(out)


# --------------------------------------------------------------------------- CLI

SUMMARY = "run a grid file (sets × rows × seeds, budgets); resumable; table and curves"
DESCRIPTION = ("Run every run of a grid file (YAML: sets, rows, seeds, budgets, starting model), skipping finished "
               "runs and resuming an interrupted one; then the table (mean ± sd over seeds, Δ vs the starting "
               "model) as study.md, study.html, study.json and curve plots.")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("study", help=SUMMARY, description=DESCRIPTION)
    parser.add_argument("grid", help="grid file (YAML), e.g. src/augcse/data/studies/adapt-curves.yaml")
    parser.add_argument("--output", default="runs/study", help="output folder (default: runs/study)")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA)")
    parser.add_argument("--dry-run", action="store_true", help="list the runs and their state; run nothing")
    parser.set_defaults(func=_study_cli)


def _study_cli(args: argparse.Namespace) -> int:
    grid = load_grid(args.grid)
    by_set = grid.plan(Path(args.output))
    if args.dry_run:
        print(describe(grid, by_set))
        return 0
    folder = Path(args.output) / grid.name
    code = run_all([run for runs in by_set.values() for run in runs], folder, args.data_dir)
    if code:
        return code
    doc, figures = build_document(grid, by_set, folder)
    print(doc.to_markdown(folder))
    md, page = doc.write(folder, "study")
    (folder / "study.json").write_text(json.dumps({"title": grid.title, "seeds": list(grid.seeds),
                                                   "budgets": list(grid.budgets), "sets": figures}, indent=2))
    print(f"wrote {md}\nwrote {page}\nwrote {folder / 'study.json'}")
    return 0
