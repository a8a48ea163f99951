"""``augcse report RUN_DIR``: one training run as ``report.md`` and ``report.html`` in the run directory.

Reads what training writes — ``recipe.yaml`` (resolved recipe), ``summary.json`` (corpus actually used
and its counts, steps, kept checkpoint, runtime), ``log.jsonl`` (one JSON object per logging event),
``eval.json`` (``{"before": {task: score}, "after": {...}}``). A folder without ``recipe.yaml`` is not a
run and is refused; the other files may be missing or partial (a run still going, or killed).
Sections: the run (data, steps, kept model, time), scores before/after with deltas, curves (every loss
component, dev score, discriminator accuracy, learning rate; log scale where values span decades) with
a table of last and best values, every PNG in ``RUN_DIR/figures/``, and the recipe.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from augcse.evaluation.tasks import SUITES, is_average, load_builtin_tasks
from augcse.evaluation.versions import VERSIONS_KEY
from augcse.core.document import Code, Document, Heading, Image, Paragraph, Table
from augcse.report.plots import curve_series, training_curves
from augcse.core import yamlfile

BEST = {"losses": min, "dev score": max, "discriminator accuracy": max}  # panels whose values have a best
REPORT_DIR = "report"  # pictures written by the report
FIGURES_DIR = "figures"  # pictures made elsewhere, picked up by the report


@dataclass
class Run:
    """What a run directory holds (every part optional)."""

    path: Path
    recipe: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, Any] = field(default_factory=dict)
    skipped_lines: int = 0

    @property
    def name(self) -> str:
        return str(self.recipe.get("name") or self.path.name)

    @property
    def seed(self) -> Any:
        """The seed the trainer received (``summary.json``), else the recipe's."""
        return self.summary.get("seed", self.recipe.get("seed"))

    def precision(self, stage: str) -> str:
        """How the ``stage`` scores were encoded (``eval.json``'s versions), float32 unless recorded."""
        return str(self.versions.get(stage, {}).get("precision", "float32"))


class ScoreError(ValueError):
    """A score in ``eval.json`` that is not a number (a string, a list): the file was edited or damaged."""


def flatten_scores(scores: Any, prefix: str = "") -> dict[str, float]:
    """``{task: number}`` or ``{task: {metric: number}}`` -> ``{"task" | "task/metric": number}``; NaN stays NaN
    (a score that could not be computed), anything else that is not a number is a :class:`ScoreError` naming it."""
    out: dict[str, float] = {}
    if not isinstance(scores, dict):
        return out
    for key, value in scores.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            if key != "seconds":
                out[name] = float(value)
        elif isinstance(value, dict):
            out.update(flatten_scores(value, f"{name}/"))
        else:
            raise ScoreError(f"the score {name!r} is {json.dumps(value)}, not a number")
    return out


class NotARunError(ValueError):
    """A folder that is not a training run directory (no ``recipe.yaml``)."""


def is_run(path: Path) -> bool:
    return (path / "recipe.yaml").is_file()


def load_run(run_dir: str | Path) -> Run:
    """Read a run directory; a missing folder or one without ``recipe.yaml`` is refused."""
    path = Path(run_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"run directory {str(path)!r} does not exist")
    if not is_run(path):
        hint = " (that is the exported model; pass its parent)" if (path / "modules.json").is_file() else ""
        raise NotARunError(f"{str(path)!r} is not a training run: no recipe.yaml{hint}")
    run = Run(path.resolve())
    recipe_file = path / "recipe.yaml"
    if recipe_file.is_file():
        try:
            loaded = yamlfile.load(recipe_file.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise NotARunError(f"{recipe_file}: not a readable recipe ("
                               f"{yamlfile.describe(exc) if isinstance(exc, yaml.YAMLError) else exc}); augcse "
                               "writes it at a run's start: was it edited or damaged?") from None
        run.recipe = loaded if isinstance(loaded, dict) else {}
    log_file = path / "log.jsonl"
    if log_file.is_file():
        for line in log_file.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill: count it, keep the rest
                run.skipped_lines += 1
                continue
            if isinstance(record, dict):
                run.records.append(record)
    loaded = _read_json(path / "eval.json")
    for stage, values in loaded.items():
        if not isinstance(values, dict) or stage == VERSIONS_KEY:
            continue
        try:
            run.scores[stage] = single_task_averages_dropped(flatten_scores(values))
        except ScoreError as exc:
            raise ValueError(f"{path / 'eval.json'}: {stage}: {exc}: it was edited or damaged; restore it, or move it "
                             "away to report the run without it") from None
    run.summary = _read_json(path / "summary.json")
    run.versions = loaded.get(VERSIONS_KEY) if isinstance(loaded.get(VERSIONS_KEY), dict) else {}
    return run


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; ``{}`` when missing. A file that is there but unreadable is an error naming
    it: a damaged record must not read as a run without scores."""
    if not path.is_file():
        return {}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON ({str(exc).splitlines()[0]}): it was cut short or edited; "
                         "restore it, or move it away to report the run without it") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"{path} holds a JSON {type(loaded).__name__}, not the object augcse writes there; "
                         "restore it, or move it away to report the run without it")
    return loaded


def single_task_averages_dropped(scores: dict[str, float]) -> dict[str, float]:
    """Scores without suite averages taken over fewer than two tasks (an "average" of one task repeats it)."""
    load_builtin_tasks()
    tasks = {k.partition("/")[0] for k in scores if not is_average(k)}

    def members(key: str) -> int:
        suite = key.partition("/")[0][: -len("_avg")]
        return len(tasks & set(SUITES.get(suite, ())))

    return {k: v for k, v in scores.items() if not is_average(k) or members(k) >= 2}


def fmt(value: float | None, digits: int = 2) -> str:
    """A score; "—" where there is none, "NaN" where one was recorded but could not be computed."""
    if value is None:
        return "—"
    return "NaN" if isinstance(value, float) and math.isnan(value) else f"{value:.{digits}f}"


def _fmt_signed(value: float | None) -> str:
    if value is None:
        return "—"
    return "NaN" if math.isnan(value) else f"{value:+.2f}"


def score_table(scores: dict[str, dict[str, float]]) -> Table | None:
    """Tasks as rows; one column per stage (before, after…), plus after − before when both exist."""
    stages = [s for s in ("before", "after") if s in scores] + [s for s in scores if s not in ("before", "after")]
    tasks = list(dict.fromkeys(t for s in stages for t in scores[s]))
    if not tasks:
        return None
    delta = "before" in scores and "after" in scores
    header = ["task", *stages] + (["Δ after − before"] if delta else [])
    rows = []
    for task in tasks:
        row = [f"**{task}**" if is_average(task) else task]
        row += [fmt(scores[s].get(task)) for s in stages]
        if delta:
            b, a = scores["before"].get(task), scores["after"].get(task)
            row.append(_fmt_signed(a - b) if a is not None and b is not None else "—")
        rows.append(row)
    return Table(header, rows)


def training_summary(run: Run) -> Table | None:
    """Last value, and best value with its step, of every plotted series."""
    series = curve_series(run.records)
    if not series:
        return None
    rows = []
    for panel, lines in series.items():
        for key, (steps, values) in lines.items():
            row = [key, panel, f"{int(steps[-1])}", f"{values[-1]:.6g}", "—", "—"]
            if panel in BEST:  # a learning rate or a gradient norm has no "best"
                best_at = BEST[panel](range(len(values)), key=values.__getitem__)
                row[4:] = [f"{values[best_at]:.6g}", f"{int(steps[best_at])}"]
            rows.append(row)
    return Table(["series", "kind", "last step", "last", "best", "best step"], rows)


def run_facts(run: Run) -> Table:
    """What the run used and did: corpus and its counts, rows, steps, kept model, time."""
    summary, recipe = run.summary, run.recipe
    rows = [["run directory", f"`{run.path}`"]]
    if run.seed is not None:
        rows.append(["seed", str(run.seed)])
    loss = recipe.get("loss") or {}
    if loss:
        params = ", ".join(f"{k}={v}" for k, v in (loss.get("params") or {}).items())
        rows.append(["loss", f"`{loss.get('name')}`" + (f" ({params})" if params else "")])
    if (recipe.get("model") or {}).get("backbone"):
        rows.append(["base model", f"`{recipe['model']['backbone']}`"])
    corpus = summary.get("corpus") or (recipe.get("data") or {}).get("corpus")
    if corpus:
        named = (recipe.get("data") or {}).get("corpus")
        note = "" if not summary.get("corpus") or not named or Path(str(named)).name == Path(corpus).name else \
            f" (the recipe names `{named}`, not available)"
        rows.append(["corpus used", f"`{corpus}`{note}"])
    stats = summary.get("corpus_stats") or {}
    if stats:
        skipped = stats.get("skipped") or {}
        reasons = ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in skipped.items()) if skipped else "none"
        rows.append(["corpus lines", f"read {stats.get('read', 0):,}, kept {stats.get('kept', 0):,}; "
                                     f"skipped: {reasons}"])
    if summary.get("processes") is not None:
        rows.append(["processes × batch", f"{summary['processes']} process(es), global batch "
                                           f"{summary['global_batch']}, {summary['precision']}"])
    if summary.get("budgets_scored"):
        rows.append(["budgets scored", ", ".join(str(step) for step in summary["budgets_scored"])])
    if summary.get("train_rows") is not None:
        rows.append(["training rows", f"{summary['train_rows']:,}"])
    steps = [r["step"] for r in run.records if isinstance(r.get("step"), (int, float))]
    epochs = [r["epoch"] for r in run.records if isinstance(r.get("epoch"), (int, float))]
    if summary.get("global_step") is not None or steps:
        done = summary.get("global_step", max(steps) if steps else None)
        rows.append(["steps", f"{int(done)}" + (f" ({max(epochs):.2f} epochs)" if epochs else "")])
    rows.append(["kept model", kept_model(run)])
    if summary.get("seconds") is not None:
        rows.append(["time", run_time(summary["seconds"])])
    if not summary:
        rows.append(["status", "no `summary.json`: the run is still going, was stopped, or failed"])
    return Table(["run", run.name], rows, align_right=False)


def run_time(seconds: float) -> str:
    """``summary.json``'s ``seconds`` as the report and the model card show it."""
    return f"{seconds / 60:.1f} min (the whole run: data, evaluation before and after, training)"


def kept_model(run: Run) -> str:
    """Which step ``final/`` holds, said without "None"."""
    summary = run.summary
    where = " in `final/`" if (run.path / "final").is_dir() else ""
    if summary.get("best_step") is not None:
        metric = summary.get("best_metric")
        dev = f" (dev score {metric:.4f})" if isinstance(metric, (int, float)) else ""
        return f"step {summary['best_step']}{dev}{where}"
    if summary:
        return f"the last step: no dev task selected a checkpoint{where}"
    return "none yet" if not where else f"model{where}"


def build_report(run: Run) -> Document:
    doc = Document(f"Run report: {run.name}")
    doc.add(run_facts(run))

    doc.add(Heading("Scores"))
    table = score_table(run.scores)
    doc.add(table if table else Paragraph("No `eval.json` scores in this run directory."))

    doc.add(Heading("Training"))
    curves = training_curves(run.records, run.path / REPORT_DIR / "curves.png", title=run.name)
    if curves is not None:
        doc.add(Image(curves, "training curves: " + ", ".join(curve_series(run.records))))
    summary = training_summary(run)
    doc.add(summary if summary else Paragraph("No `log.jsonl` records to plot."))
    if run.skipped_lines:
        doc.add(Paragraph(f"{run.skipped_lines} unreadable log line(s) skipped."))

    figures = sorted((run.path / FIGURES_DIR).glob("*.png")) if (run.path / FIGURES_DIR).is_dir() else []
    if figures:
        doc.add(Heading("Figures"))
        doc.add(*[Image(f, f.stem.replace("_", " ")) for f in figures])

    doc.add(Heading("Recipe"))
    doc.add(Code(yaml.safe_dump(run.recipe, sort_keys=False, allow_unicode=True), "yaml"))
    return doc


def write_report(run_dir: str | Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into the run directory; returns their paths."""
    run = load_run(run_dir)
    return build_report(run).write(run.path, "report")
