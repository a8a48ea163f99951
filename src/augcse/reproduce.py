"""``augcse reproduce PAPER``: a paper's table as runs (recipe × seed), then ours beside the published figures.

The rows each paper needs live in ``data/reproduce.yaml`` (a built-in recipe plus overrides, or a model
evaluated as it is); the figures they are held to in ``data/published.csv`` (:mod:`augcse.published`).
A run whose folder holds ``summary.json`` and the ``after`` scores of ``eval.json`` is finished and
skipped, so an interrupted reproduction continues where it stopped (a started run resumes from its last
checkpoint). ``--dry-run`` lists the plan with the published figures and an estimate of GPU-hours.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from augcse.published import SCORE_COLUMNS, Published, Reported, published
from augcse.recipes.config import Recipe, RecipeError, builtin_recipes, load_recipe, parse_override
from augcse.report.document import Document, Paragraph, Table

DEFAULT_SEEDS = (1, 11, 42, 68, 421)
PAPER_SUITES = ("sts", "transfer")  # the papers' tables: 7 STS tasks, 7 SentEval transfer tasks
RESERVED_KEYS = {"name": "the run names come from the rows", "seed": "use --seeds", "output_dir": "use --output"}


@dataclass(frozen=True)
class Evaluate:
    """A model evaluated as it is, with the pooler it was published with."""

    model: str
    pooler: str


@dataclass(frozen=True)
class Row:
    """One line of a paper's table: trained from ``recipe`` (per seed) or ``evaluate``\\ d as it is."""

    name: str
    published: tuple[str, ...]
    recipe: str | None = None
    overrides: tuple[str, ...] = ()
    evaluate: Evaluate | None = None
    suites: tuple[str, ...] = ("sts",)  # what the row is evaluated on and held to
    main: bool = True

    @property
    def trained(self) -> bool:
        return self.recipe is not None

    def tasks(self) -> str:
        return ",".join(self.suites)

    @property
    def averages(self) -> set[str]:
        """The published averages the row is held to: its suites' (``sts_avg``, ``transfer_avg``)."""
        return {f"{suite}_avg" for suite in self.suites}


@dataclass(frozen=True)
class Paper:
    name: str
    title: str
    rows: tuple[Row, ...]
    checkpoints: tuple[Row, ...] = ()


@dataclass(frozen=True)
class Throughput:
    sentences_per_second: float
    source: str
    corpus_sentences: int
    large_slowdown: float


def _row(paper: str, spec: dict[str, Any]) -> Row:
    spec = dict(spec)
    row = Row(name=spec.pop("name"), published=tuple(spec.pop("published")), recipe=spec.pop("recipe", None),
              overrides=tuple(spec.pop("overrides", ())),
              evaluate=Evaluate(**spec.pop("evaluate")) if "evaluate" in spec else None,
              suites=tuple(spec.pop("suites", ("sts",))), main=bool(spec.pop("main", True)))
    if spec:
        raise ValueError(f"reproduce.yaml {paper}/{row.name}: unknown keys {sorted(spec)}")
    if not row.suites or set(row.suites) - set(PAPER_SUITES):
        raise ValueError(f"reproduce.yaml {paper}/{row.name}: suites must be some of {', '.join(PAPER_SUITES)}")
    if row.trained == (row.evaluate is not None):
        raise ValueError(f"reproduce.yaml {paper}/{row.name}: give exactly one of recipe or evaluate")
    for row_id in row.published:
        published(row_id)  # every figure a row is compared with exists
    return row


@cache
def _plan_data() -> tuple[dict[str, Paper], Throughput]:
    text = resources.files("augcse").joinpath("data/reproduce.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    papers = {
        name: Paper(name, spec["title"], tuple(_row(name, r) for r in spec["rows"]),
                    tuple(_row(name, r) for r in spec.get("checkpoints", ())))
        for name, spec in data["papers"].items()
    }
    return papers, Throughput(**data["throughput"])


def papers() -> dict[str, Paper]:
    return _plan_data()[0]


def throughput() -> Throughput:
    return _plan_data()[1]


# --------------------------------------------------------------------------- the plan

@dataclass
class Run:
    """One training or evaluation run of a row, with its folder under the output directory."""

    row: Row
    seed: int | None
    run_dir: Path
    recipe: Recipe | None = None
    model: str | None = None  # evaluated model (evaluation rows)
    tasks: str | None = None  # evaluation tasks when not the row's protocol (evaluation rows)

    @property
    def done(self) -> bool:
        return (self.run_dir / "summary.json").is_file() and "after" in _scores_file(self.run_dir)

    @property
    def started(self) -> bool:
        return any(self.run_dir.glob("checkpoint-*"))

    def scores(self) -> dict[str, float]:
        return _scores_file(self.run_dir).get("after", {})


def _scores_file(run_dir: Path) -> dict[str, Any]:
    path = run_dir / "eval.json"
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        return {}


def _check_overrides(overrides: list[str]) -> None:
    for text in overrides:
        key = parse_override(text)[0][0]
        if key in RESERVED_KEYS:
            raise RecipeError(f"override {text!r}: {key} is set per run; {RESERVED_KEYS[key]}")


def select_rows(paper: Paper, names: list[str] | None, checkpoints: bool) -> list[Row]:
    pool = paper.checkpoints if checkpoints else paper.rows
    if checkpoints and not pool:
        raise ValueError(f"--checkpoints: no released checkpoints are listed for {paper.name}")
    if not names:
        return list(pool)
    known = {row.name: row for row in pool}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown row {unknown[0]!r} for {paper.name}; rows: {', '.join(known)}")
    return [known[n] for n in names]


def plan(paper: Paper, rows: list[Row], seeds: list[int], output: Path, overrides: list[str],
         tasks: str | None = None, checkpoint_paths: dict[str, str] | None = None) -> list[Run]:
    """Every run of ``rows``: trained rows once per seed, evaluation rows once. Recipes are validated here."""
    _check_overrides(overrides)
    root = output / paper.name
    runs: list[Run] = []
    for row in rows:
        if not row.trained:
            model = (checkpoint_paths or {}).get(row.evaluate.model, row.evaluate.model)
            runs.append(Run(row, None, root / row.name, model=model, tasks=tasks))
            continue
        if row.recipe not in builtin_recipes():
            raise ValueError(f"row {row.name}: recipe {row.recipe!r} is not built in")
        for seed in seeds:
            name = f"{row.name}-s{seed}"
            extra = [f"eval.after={tasks or row.tasks()}"]
            recipe = load_recipe(None, row.recipe, [*row.overrides, *extra, *overrides, f"name={name}",
                                                     f"seed={seed}", f"output_dir={root}"])
            runs.append(Run(row, seed, recipe.run_dir, recipe=recipe))
    return runs


def gpu_hours(run: Run, nproc: int = 1) -> float:
    """Training time at the documented throughput (:func:`throughput`); evaluation rows count as 0."""
    if run.recipe is None:
        return 0.0
    spec = throughput()
    training = run.recipe.training
    if training.get("max_steps", -1) and training.get("max_steps", -1) > 0:
        sentences = training["max_steps"] * training.get("per_device_train_batch_size", 64) * nproc
    else:
        corpus = min(spec.corpus_sentences, run.recipe.data.limit or spec.corpus_sentences)
        sentences = corpus * training.get("num_train_epochs", 1)
    speed = spec.sentences_per_second / (spec.large_slowdown if "large" in run.recipe.model.backbone else 1.0)
    return sentences / speed / 3600


# --------------------------------------------------------------------------- executing

def torchrun_command(run: Run, nproc: int, data_dir: str | None, resume: bool, restart: bool = False) -> list[str]:
    """``torchrun`` over ``augcse.train`` with the run's fully resolved recipe file."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "augcse.train", str(run.run_dir / "reproduce-recipe.yaml")]
    if data_dir:
        command += ["--data-dir", data_dir]
    return command + (["--resume"] if resume else []) + (["--overwrite"] if restart else [])


def execute(run: Run, data_dir: str | None, nproc: int = 1) -> bool:
    """Train (or resume) or evaluate one run; False when it was stopped (Ctrl-C) before finishing."""
    if run.recipe is None:
        _evaluate_model(run, data_dir)
        return True
    from augcse.train import latest_checkpoint

    resume = latest_checkpoint(run.run_dir) is not None
    # a run stopped before its first complete checkpoint left nothing to keep: the plan owns its folders,
    # so it starts that run again (a run alive in the folder still holds its lock and is refused)
    restart = not resume and run.run_dir.is_dir() and any(run.run_dir.iterdir())
    if restart:
        print(f"{run.run_dir.name}: stopped before its first complete checkpoint; starting it again", flush=True)
    if nproc > 1:
        run.run_dir.mkdir(parents=True, exist_ok=True)
        (run.run_dir / "reproduce-recipe.yaml").write_text(run.recipe.to_yaml())
        completed = subprocess.run(torchrun_command(run, nproc, data_dir, resume, restart), check=False)
        if completed.returncode == 130:
            return False
        if completed.returncode != 0:
            raise RuntimeError(f"torchrun for {run.run_dir} exited with {completed.returncode}")
        return True
    from augcse.train import run as train

    return not train(run.recipe, data_dir, resume=resume, overwrite=restart).get("stopped")


def _evaluate_model(run: Run, data_dir: str | None) -> None:
    from augcse.evaluation.suite import main_scores, run_tasks
    from augcse.modules import build_sentence_transformer

    pooler = run.row.evaluate.pooler
    model = build_sentence_transformer(run.model, pooler, max_seq_length=None)
    scores = main_scores(run_tasks(model, run.tasks or run.row.tasks(), data_dir, batch_size=64))
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / "eval.json").write_text(json.dumps({"after": scores}, indent=2))
    summary = {"name": run.row.name, "model": run.model, "pooler": pooler, "trained": False}
    (run.run_dir / "summary.json").write_text(json.dumps(summary, indent=2))


# --------------------------------------------------------------------------- the table

@dataclass
class Line:
    """Ours beside one published figure for one row and task."""

    row: str
    task: str
    values: list[float] = field(default_factory=list)
    reference: Published | None = None

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def sd(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None

    @property
    def best(self) -> float | None:
        return max(self.values) if self.values else None

    @property
    def figure(self) -> float | None:
        return self.reference.scores.get(self.task) if self.reference else None

    @property
    def ours(self) -> float | None:
        """The statistic the paper printed: the maximum for a max-of-seeds figure, else the mean."""
        if self.reference is not None and self.reference.reported is Reported.MAX:
            return self.best
        return self.mean

    @property
    def delta(self) -> float | None:
        return None if self.ours is None or self.figure is None else self.ours - self.figure


def _task_order(names: set[str]) -> list[str]:
    known = [t for t in ("sts_avg", "transfer_avg", *SCORE_COLUMNS) if t in names]
    return list(dict.fromkeys(known)) + sorted(names - set(known))


def table_lines(runs: list[Run]) -> list[Line]:
    """One line per row, task and published figure it is compared with; ours over the finished seeds."""
    lines: list[Line] = []
    rows = list(dict.fromkeys(run.row for run in runs))
    for row in rows:
        finished = [run.scores() for run in runs if run.row == row and run.done]
        tasks = {t for scores in finished for t in scores if not t.startswith("seconds")}
        references = [published(ref) for ref in row.published]
        for task in _task_order(tasks | {t for ref in references for t in ref.scores if t in row.averages}):
            values = [scores[task] for scores in finished if task in scores]
            matching = [ref for ref in references if task in ref.scores] or [None]
            lines += [Line(row.name, task, values, ref) for ref in matching]
    return lines


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def build_document(paper: Paper, runs: list[Run]):
    """Ours (mean ± sd, max over seeds, max − mean) beside each published figure, with Δ."""
    doc = Document(f"Reproduction: {paper.title}")
    header = ["row", "task", "seeds", "ours mean ± sd", "ours max", "max − mean", "published", "reported as", "Δ"]
    body = []
    for line in table_lines(runs):
        mean = _fmt(line.mean) + (f" ± {line.sd:.2f}" if line.sd is not None else "")
        spread = None if line.best is None or line.mean is None else line.best - line.mean
        ref = line.reference
        reported = f"{ref.reported.value} ({ref.id})" if ref else "—"
        sd = ref.sd.get(line.task) if ref else None
        figure = _fmt(line.figure) + (f" ± {sd:.2f}" if sd is not None else "")
        task = f"**{line.task}**" if line.task.endswith("_avg") else line.task
        body.append([line.row, task, str(len(line.values)), mean, _fmt(line.best), _fmt(spread), figure, reported,
                     _fmt(line.delta, signed=True)])
    doc.add(Table(header, body))
    doc.add(Paragraph("Δ = ours − published, with ours the statistic the paper printed: the maximum over seeds "
                      "for a max-of-seeds figure, the mean otherwise (a single run or a mean). \"max − mean\" is "
                      "how far the best seed sits above the mean of the seeds run here."))
    pending = [str(run.run_dir) for run in runs if not run.done]
    if pending:
        doc.add(Paragraph(f"Not finished yet ({len(pending)}): {', '.join(pending)}."))
    return doc


def describe_plan(paper: Paper, runs: list[Run], nproc: int) -> str:
    spec = throughput()
    out = [f"{paper.title}", "", f"{len(runs)} runs:"]
    for run in runs:
        state = "done" if run.done else ("partial, resumes" if run.started else "to run")
        if run.recipe is not None:
            what = f"recipe {run.row.recipe} seed {run.seed}" + (f" + {' '.join(run.row.overrides)}" if run.row.overrides else "")
        else:
            what = f"evaluate {run.model} (pooler {run.row.evaluate.pooler})"
        kind = "main" if run.row.main else "ablation/baseline"
        out.append(f"  {run.run_dir}  [{kind}; {state}; {gpu_hours(run, nproc):.2f} GPU-h]  {what}")
    out += ["", "Published figures compared with:"]
    for row in dict.fromkeys(run.row for run in runs):
        for ref in map(published, row.published):
            figures = ", ".join(f"{k} {v:.2f}" + (f" ± {ref.sd[k]:.2f}" if k in ref.sd else "")
                                for k, v in ref.scores.items() if k in row.averages)
            out.append(f"  {row.name}: {ref.id} ({ref.source}; {ref.reported.value}): {figures}")
    total = sum(gpu_hours(run, nproc) for run in runs if not run.done)
    out += ["", f"GPU-hours still to run: {total:.1f} at {spec.sentences_per_second:g} sentences/s per GPU "
                f"(documented, not measured here: {spec.source})"]
    return "\n".join(out)


# --------------------------------------------------------------------------- CLI

def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds takes comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"--seeds needs distinct integers, got {text!r}")
    return seeds


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--nproc takes a positive integer, got {text!r}")
    return int(text)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce", help="train and evaluate a paper's table over seeds; ours beside the published figures",
        description="Reproduce a paper's table: each row's recipe over seeds, evaluated with the paper's protocol, "
                    "compared with the published figures. key=value arguments override every run's recipe.")
    parser.add_argument("paper", choices=sorted(papers()), help="which paper")
    parser.add_argument("overrides", nargs="*", help="recipe overrides for every run, e.g. model.backbone=DIR")
    parser.add_argument("--rows", help="comma-separated row names (default: all rows of the paper)")
    parser.add_argument("--seeds", type=_seeds, default=list(DEFAULT_SEEDS),
                        help=f"comma-separated seeds (default: {','.join(map(str, DEFAULT_SEEDS))})")
    parser.add_argument("--output", default="runs/reproduce", help="output folder (default: runs/reproduce)")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA)")
    parser.add_argument("--tasks", help="evaluate on these tasks instead of the paper's protocol (e.g. STSBenchmark)")
    parser.add_argument("--nproc", type=_positive, default=1, help="processes (GPUs) per run, through torchrun")
    parser.add_argument("--dry-run", action="store_true", help="list the runs, published figures and GPU-hours")
    parser.add_argument("--checkpoints", action="store_true",
                        help="evaluate the paper's released checkpoints with their published pooler instead")
    parser.add_argument("--checkpoint", action="append", default=[], metavar="NAME=PATH",
                        help="a local folder for a released checkpoint named NAME (offline copies)")
    parser.set_defaults(func=_reproduce_cli)


def _reproduce_cli(args: argparse.Namespace) -> int:
    paper = papers()[args.paper]
    if args.tasks:
        from augcse.evaluation.tasks import resolve_tasks

        resolve_tasks(args.tasks)  # an unknown task is refused before any run starts
    rows = select_rows(paper, [r for r in (args.rows or "").split(",") if r] or None, args.checkpoints)
    mapping: dict[str, str] = {}
    for item in args.checkpoint:
        name, sep, path = item.partition("=")
        if not sep or not Path(path).is_dir():
            raise ValueError(f"--checkpoint {item!r} must be NAME=FOLDER with an existing folder")
        mapping[name] = path
    known = {row.evaluate.model for row in rows if row.evaluate}
    if set(mapping) - known:
        raise ValueError(f"--checkpoint names {sorted(set(mapping) - known)} are not models of these rows: {sorted(known)}")
    output = Path(args.output) / ("checkpoints" if args.checkpoints else "")
    runs = plan(paper, rows, args.seeds, output, list(args.overrides), args.tasks, mapping)
    if args.dry_run:
        print(describe_plan(paper, runs, args.nproc))
        return 0
    for index, run in enumerate(runs, 1):
        if run.done:
            print(f"[{index}/{len(runs)}] {run.run_dir}: finished, skipped", flush=True)
            continue
        print(f"[{index}/{len(runs)}] {run.run_dir}: {'resuming' if run.started else 'running'}", flush=True)
        if not execute(run, args.data_dir, args.nproc):
            print(f"stopped; run the same command again to continue from {run.run_dir}", flush=True)
            return 130
    doc = build_document(paper, runs)
    print(doc.to_markdown(output / paper.name))
    md, page = doc.write(output / paper.name, "reproduce")
    print(f"wrote {md}\nwrote {page}")
    return 0
