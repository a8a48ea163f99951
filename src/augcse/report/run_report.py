"""``augcse report RUN_DIR``: one training run as ``report.md`` and ``report.html`` in the run directory.

Reads what training writes — ``recipe.yaml`` (resolved recipe), ``log.jsonl`` (one JSON object per
logging event), ``eval.json`` (``{"before": {task: score}, "after": {...}}``) — and tolerates any of
them missing or partial. Sections: configuration, training summary, curves (losses per component,
dev score, discriminator accuracy, learning rate), scores before/after with deltas, and every PNG
found in ``RUN_DIR/figures/`` (projections, confusion matrices made by other commands).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from augcse.evaluation.tasks import is_average
from augcse.report.document import Code, Document, Heading, Image, Paragraph, Table
from augcse.report.plots import curve_series, training_curves

REPORT_DIR = "report"  # pictures written by the report
FIGURES_DIR = "figures"  # pictures made elsewhere, picked up by the report


@dataclass
class Run:
    """What a run directory holds (every part optional)."""

    path: Path
    recipe: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    scores: dict[str, dict[str, float]] = field(default_factory=dict)
    skipped_lines: int = 0

    @property
    def name(self) -> str:
        return str(self.recipe.get("name") or self.path.name)

    @property
    def seed(self) -> Any:
        return self.recipe.get("seed")


def flatten_scores(scores: Any, prefix: str = "") -> dict[str, float]:
    """``{task: number}`` or ``{task: {metric: number}}`` -> ``{"task" | "task/metric": number}``."""
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
    return out


def load_run(run_dir: str | Path) -> Run:
    """Read a run directory; raises FileNotFoundError only when the folder itself is missing."""
    path = Path(run_dir)
    if not path.is_dir():
        raise FileNotFoundError(f"run directory {str(path)!r} does not exist")
    run = Run(path.resolve())
    recipe_file = path / "recipe.yaml"
    if recipe_file.is_file():
        loaded = yaml.safe_load(recipe_file.read_text(encoding="utf-8"))
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
    eval_file = path / "eval.json"
    if eval_file.is_file():
        try:
            loaded = json.loads(eval_file.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            loaded = {}
        if isinstance(loaded, dict):
            run.scores = {stage: flatten_scores(v) for stage, v in loaded.items() if isinstance(v, dict)}
    return run


def fmt(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def _fmt_signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


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
            best_at = max(range(len(values)), key=values.__getitem__) if panel != "losses" else \
                min(range(len(values)), key=values.__getitem__)
            rows.append([key, panel, f"{int(steps[-1])}", f"{values[-1]:.4g}", f"{values[best_at]:.4g}",
                         f"{int(steps[best_at])}"])
    return Table(["series", "kind", "last step", "last", "best", "best step"], rows)


def build_report(run: Run) -> Document:
    doc = Document(f"Run report: {run.name}")
    facts = [f"Run directory: `{run.path}`"]
    if run.seed is not None:
        facts.append(f"seed {run.seed}")
    steps = [r["step"] for r in run.records if isinstance(r.get("step"), (int, float))]
    if steps:
        facts.append(f"{int(max(steps))} logged steps")
    epochs = [r["epoch"] for r in run.records if isinstance(r.get("epoch"), (int, float))]
    if epochs:
        facts.append(f"{max(epochs):.2f} epochs")
    if (run.path / "final").is_dir():
        facts.append("model in `final/`")
    doc.add(Paragraph("; ".join(facts) + "."))

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

    doc.add(Heading("Configuration"))
    if run.recipe:
        doc.add(Code(yaml.safe_dump(run.recipe, sort_keys=False, allow_unicode=True), "yaml"))
    else:
        doc.add(Paragraph("No `recipe.yaml` in this run directory."))
    return doc


def write_report(run_dir: str | Path) -> tuple[Path, Path]:
    """Write ``report.md`` and ``report.html`` into the run directory; returns their paths."""
    run = load_run(run_dir)
    return build_report(run).write(run.path, "report")
