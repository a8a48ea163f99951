"""``augcse reproduce PAPER``: a paper's table as runs (recipe × seed), then ours beside the published figures.

The rows each paper needs live in ``data/reproduce.yaml`` (a built-in recipe plus overrides, or a model
evaluated as it is); the figures they are held to in ``data/published.csv`` (:mod:`augcse.studies.published`);
the settings each paper states for them in ``data/paper_settings.yaml`` (:mod:`augcse.studies.paper_settings`),
which ``--dry-run`` prints where a row deviates (``--json`` for tools).
A reproduction is a table of runs executed by :mod:`augcse.studies.runs`, the machinery ``augcse study`` shares:
a run whose folder holds ``summary.json`` and the ``after`` scores of ``eval.json`` is finished and
skipped, so an interrupted reproduction continues where it stopped (a started run resumes from its last
checkpoint), and a second process on the same paper's folder is refused. This module adds the papers'
rows, the published figures ours are held to and the plan's settings and GPU-hours (``--dry-run``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any


from augcse.core import yamlfile
from augcse.studies import paper_settings
from augcse.studies.published import SCORE_COLUMNS, Published, Reported, published
from augcse.training.recipes.config import Recipe, load_recipe
from augcse.text.corpus_source import find_corpus, how_to_get
from augcse.core.document import Document, Paragraph, Table
from augcse.studies.runs import (  # noqa: F401 (re-exported: a reproduction is a table of runs)
    PLAN_OVERRIDES, Evaluate, Evaluation, Row, Run, check_inputs, evaluate_model, execute, plan_runs, run_all,
    torchrun_command, write_scores,
)

DEFAULT_SEEDS = (1, 11, 42, 68, 421)
# the papers' tables: 7 STS tasks, 7 SentEval transfer tasks, VaSCL's short-text clustering and few-shot intent
PAPER_SUITES = ("sts", "transfer", "clustering", "intent")


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
    corpus_sentences: int  # assumed where a corpus's line count is known neither here nor in ``corpora``
    large_slowdown: float
    corpora: dict[str, dict[str, Any]] = field(default_factory=dict)  # corpus → {lines, source}


@dataclass(frozen=True)
class Memory:
    """The GPU-memory estimate's constants (``data/reproduce.yaml``, ``memory``) and where they come from."""

    bytes_per_parameter: float
    activation_gib: float
    source: str
    encoders: dict[str, list[float]]


def _row(paper: str, spec: dict[str, Any]) -> Row:
    spec = dict(spec)
    row = Row(name=spec.pop("name"), published=tuple(spec.pop("published")), recipe=spec.pop("recipe", None),
              overrides=tuple(spec.pop("overrides", ())),
              evaluate=Evaluate(**spec.pop("evaluate")) if "evaluate" in spec else None,
              suites=tuple(spec.pop("suites", ("sts",))), tasks=tuple(spec.pop("tasks", ())),
              eval_poolers=tuple(spec.pop("eval_poolers", {}).items()), all_metrics=tuple(spec.pop("all_metrics", ())),
              main=bool(spec.pop("main", True)))
    if spec:
        raise ValueError(f"reproduce.yaml {paper}/{row.name}: unknown keys {sorted(spec)}")
    if not row.suites or set(row.suites) - set(PAPER_SUITES):
        raise ValueError(f"reproduce.yaml {paper}/{row.name}: suites must be some of {', '.join(PAPER_SUITES)}")
    if row.trained == (row.evaluate is not None):
        raise ValueError(f"reproduce.yaml {paper}/{row.name}: give exactly one of recipe or evaluate")
    apart = {*dict(row.eval_poolers), *row.all_metrics}
    if apart - set(row.suites) or (row.trained and apart >= set(row.suites)) or \
            set(dict(row.eval_poolers)) & set(row.all_metrics):
        raise ValueError(f"reproduce.yaml {paper}/{row.name}: eval_poolers and all_metrics must name different "
                         f"suites of the row, not all of them")
    for row_id in row.published:
        published(row_id)  # every figure a row is compared with exists
    return row


@cache
def memory_model() -> Memory:
    data = yamlfile.load(resources.files("augcse").joinpath("data/reproduce.yaml").read_text(encoding="utf-8"))
    return Memory(**data["memory"])


@cache
def _plan_data() -> tuple[dict[str, Paper], Throughput]:
    text = resources.files("augcse").joinpath("data/reproduce.yaml").read_text(encoding="utf-8")
    data = yamlfile.load(text)
    papers = {
        name: Paper(name, spec["title"], tuple(_row(name, r) for r in spec["rows"]),
                    tuple(_row(name, r) for r in spec.get("checkpoints", ())))
        for name, spec in data["papers"].items()
    }
    return papers, Throughput(**data["throughput"], corpora=data["corpora"])


def papers() -> dict[str, Paper]:
    return _plan_data()[0]


def throughput() -> Throughput:
    return _plan_data()[1]


# --------------------------------------------------------------------------- the plan


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
    """Every run of ``rows`` in ``output/PAPER`` (:func:`augcse.studies.runs.plan_runs`)."""
    return plan_runs(rows, seeds, output / paper.name, overrides, tasks, checkpoint_paths)


def resolved(row: Row, recipe: Recipe | None = None) -> dict[str, Any]:
    """The values :mod:`augcse.studies.paper_settings` holds a row to: its resolved recipe (``recipe``, else the
    built-in recipe plus the row's overrides) and the pooler each suite is evaluated through; for an
    evaluation row, ``evaluate.model`` and ``evaluate.pooler``."""
    if not row.trained:
        whiten = row.evaluate.whiten
        return {"evaluate": {"model": row.evaluate.model, "pooler": row.evaluate.pooler,
                             **({"whiten": {"corpus": whiten.corpus, "dim": whiten.dim}} if whiten else {})}}
    from augcse.training.arguments import effective_training

    recipe = recipe or load_recipe(None, row.recipe, [*row.overrides, *PLAN_OVERRIDES])
    values = recipe.to_dict()
    values["training"] = {**values["training"], **effective_training(recipe)}
    values["eval_pooler"] = {suite: dict(row.eval_poolers).get(suite, recipe.model.pooler) for suite in row.suites}
    return values


@dataclass(frozen=True)
class CorpusFile:
    """The file a trained run would read here and its line count (None: not here), and the lines its GPU-hours
    are priced on: counted here, documented (``data/reproduce.yaml``, ``corpora``), or assumed (an estimate)."""

    path: Path | None
    lines: int | None
    priced: int = 0
    priced_on: str = "here"  # "here", "documented" or "assumed"


def documented_lines(corpus: str) -> CorpusFile:
    """A corpus not read here: priced on its documented line count, else on the assumed 10^6 (an estimate)."""
    spec = throughput()
    if corpus in spec.corpora:
        return CorpusFile(None, None, int(spec.corpora[corpus]["lines"]), "documented")
    return CorpusFile(None, None, spec.corpus_sentences, "assumed")


@cache
def _count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


def corpus_file(run: Run, data_dir: str | None) -> CorpusFile:
    """Where the run's ``data.corpus`` is on this machine and its lines; nothing downloaded or substituted."""
    path = find_corpus(run.recipe.data.corpus, data_dir)
    if path is None:
        return documented_lines(run.recipe.data.corpus)
    lines = _count_lines(path)
    return CorpusFile(path, lines, lines, "here")


def too_few_steps(run: Run, corpus_lines: int | None, nproc: int = 1) -> str | None:
    """A warning when the run's corpus gives fewer optimizer steps than its first dev evaluation needs (a
    corpus slice at the papers' batches of 512–1024 would never select a checkpoint)."""
    training = run.recipe.training
    eval_steps = training.get("eval_steps")
    if not corpus_lines or run.recipe.eval.dev is None or not eval_steps or training.get("max_steps", -1) > 0:
        return None
    lines = min(corpus_lines, run.recipe.data.limit or corpus_lines)
    batch = training.get("per_device_train_batch_size", 64) * nproc
    steps = int(lines // batch * training.get("num_train_epochs", 1))
    if steps >= eval_steps:
        return None
    return f"WARNING: {steps} steps, fewer than eval_steps {eval_steps}: no dev evaluation would select a checkpoint"


def gpu_hours(run: Run, nproc: int = 1, corpus_lines: int | None = None) -> float:
    """Training time at the documented throughput (:func:`throughput`) over ``corpus_lines`` (the lines a
    :class:`CorpusFile` prices; the assumed 10^6 when None); evaluation rows count as 0."""
    if run.recipe is None:
        return 0.0
    spec = throughput()
    training = run.recipe.training
    if training.get("max_steps", -1) and training.get("max_steps", -1) > 0:
        sentences = training["max_steps"] * training.get("per_device_train_batch_size", 64) * nproc
    else:
        lines = corpus_lines or spec.corpus_sentences
        corpus = min(lines, run.recipe.data.limit or lines)
        sentences = corpus * training.get("num_train_epochs", 1)
    speed = spec.sentences_per_second / (spec.large_slowdown if "large" in run.recipe.model.backbone else 1.0)
    return sentences / speed / 3600


def texts_per_example(recipe: Recipe) -> int | None:
    """How many texts the loss encodes per training example (its columns and dropout copies); None if unknown."""
    from augcse.losses import LOSSES
    from augcse.text.views import produced_columns

    produced = produced_columns(recipe.data.views)
    columns = ["anchor" if c == "text" else c for c, v in produced.items() if v is None]
    try:
        contract = LOSSES[recipe.loss.name].contract_for(recipe.loss.params)
        sources = contract.assign(columns, any(v is not None for v in produced.values()))
    except (KeyError, ValueError, NotImplementedError):
        return None
    return sum(len(s) for s in sources.values())


@dataclass(frozen=True)
class MemoryNeed:
    """Estimated GPU memory of one training process, and the gradient-caching mini-batch that fits a budget."""

    gib: float
    mini_batch_size: int | None  # what the recipe sets
    fits_with: int | None = None  # the largest power-of-two mini-batch that fits the budget (None: none needed)
    fits: bool = True


def estimate_gib(shape: Sequence[float], tokens: int, texts_alive: int) -> float:
    """Weights, gradients and optimizer state of an encoder of ``shape`` (parameters, layers, hidden units)
    plus the activations of ``texts_alive`` texts of ``tokens`` tokens (:class:`Memory`)."""
    spec = memory_model()
    parameters, layers, hidden = shape
    return parameters * spec.bytes_per_parameter / 2**30 + spec.activation_gib * texts_alive * tokens * layers * hidden


def gpu_memory(run: Run, budget_gib: float | None = None) -> MemoryNeed | None:
    """An estimate (:class:`Memory`), per process; None for an evaluation row or an encoder of unknown shape."""
    if run.recipe is None:
        return None
    spec = memory_model()
    shape = spec.encoders.get(run.recipe.model.backbone)
    texts = texts_per_example(run.recipe)
    if shape is None or texts is None:
        return None
    tokens = run.recipe.model.max_seq_length or 512
    batch = run.recipe.training.get("per_device_train_batch_size", 8)
    mini = run.recipe.loss.params.get("mini_batch_size") if isinstance(run.recipe.loss.params, dict) else None
    need = estimate_gib(shape, tokens, mini if mini else texts * batch)
    if budget_gib is None or need <= budget_gib:
        return MemoryNeed(round(need, 1), mini)
    fixed = estimate_gib(shape, tokens, 0)
    room = int((budget_gib - fixed) / (estimate_gib(shape, tokens, 1) - fixed))  # texts that fit beside the weights
    fits_with = 2 ** (room.bit_length() - 1) if room >= 1 else None
    return MemoryNeed(round(need, 1), mini, fits_with, False)


def describe_memory(need: MemoryNeed | None) -> str:
    if need is None:
        return "memory: no estimate"
    text = f"≈{need.gib:.1f} GiB/GPU"
    if need.mini_batch_size:
        text += f" with mini_batch_size {need.mini_batch_size}"
    if not need.fits:
        text += (f", over the budget: set loss.params.mini_batch_size={need.fits_with}" if need.fits_with
                 else ", over the budget even with gradient caching")
    return text


# --------------------------------------------------------------------------- executing


# --------------------------------------------------------------------------- the table

@dataclass
class Line:
    """Ours beside one published figure for one row and task.

    ``values`` are the task's scores over the finished seeds; ``selected`` is the task's score in the one run
    the row's statistic picks (the seed with the best headline average), so that every per-task figure of a
    max-of-seeds row comes from the same model, as in the paper.
    """

    row: str
    task: str
    values: list[float] = field(default_factory=list)
    reference: Published | None = None
    selected: float | None = None

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.values) if self.values else None

    @property
    def sd(self) -> float | None:
        return statistics.stdev(self.values) if len(self.values) > 1 else None

    @property
    def figure(self) -> float | None:
        return self.reference.scores.get(self.task) if self.reference else None

    @property
    def ours(self) -> float | None:
        """The statistic the paper printed: the best run's score for a max-of-seeds figure, else the mean."""
        if self.reference is not None and self.reference.reported is Reported.MAX:
            return self.selected
        return self.mean

    @property
    def delta(self) -> float | None:
        return None if self.ours is None or self.figure is None else self.ours - self.figure


def _task_order(names: set[str]) -> list[str]:
    known = [t for t in ("sts_avg", "transfer_avg", *SCORE_COLUMNS) if t in names]
    return list(dict.fromkeys(known)) + sorted(names - set(known))


def best_run(row: Row, finished: list[dict[str, float]]) -> dict[str, float]:
    """The one run a max-of-seeds figure stands for: the highest headline average (the row's first suite's
    ``*_avg``, e.g. ``sts_avg``); ties keep the earlier seed. Empty when no run has that average."""
    headline = f"{row.suites[0]}_avg"
    scored = [scores for scores in finished if headline in scores]
    return max(scored, key=lambda scores: scores[headline]) if scored else {}


def table_lines(runs: list[Run]) -> list[Line]:
    """One line per row, task and published figure it is compared with; ours over the finished seeds."""
    lines: list[Line] = []
    rows = list(dict.fromkeys(run.row for run in runs))
    for row in rows:
        finished = [run.scores() for run in runs if run.row == row and run.done]
        best = best_run(row, finished)
        references = [published(ref) for ref in row.published]
        # a secondary metric (``task/metric``) is shown only where a paper prints it
        tasks = {t for scores in finished for t in scores
                 if "/" not in t or any(t in ref.scores for ref in references)}
        for task in _task_order(tasks | {t for ref in references for t in ref.scores if t in row.averages}):
            values = [scores[task] for scores in finished if task in scores]
            matching = [ref for ref in references if task in ref.scores] or [None]
            lines += [Line(row.name, task, values, ref, best.get(task)) for ref in matching]
    return lines


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def build_document(paper: Paper, runs: list[Run]):
    """Ours (mean ± sd, the best seed's run, best − mean) beside each published figure, with Δ."""
    doc = Document(f"Reproduction: {paper.title}")
    header = ["row", "task", "seeds", "ours mean ± sd", "ours best seed", "best − mean", "published", "reported as",
              "Δ"]
    body = []
    for line in table_lines(runs):
        mean = _fmt(line.mean) + (f" ± {line.sd:.2f}" if line.sd is not None else "")
        spread = None if line.selected is None or line.mean is None else line.selected - line.mean
        ref = line.reference
        reported = f"{ref.reported.value} ({ref.id})" if ref else "—"
        sd = ref.sd.get(line.task) if ref else None
        figure = _fmt(line.figure) + (f" ± {sd:.2f}" if sd is not None else "")
        task = f"**{line.task}**" if line.task.endswith("_avg") else line.task
        body.append([line.row, task, str(len(line.values)), mean, _fmt(line.selected), _fmt(spread), figure, reported,
                     _fmt(line.delta, signed=True)])
    doc.add(Table(header, body))
    doc.add(Paragraph("Δ = ours − published, with ours the statistic the paper printed: for a max-of-seeds figure "
                      "the run of the seed with the best headline average (every task of the row from that one "
                      "run), the mean otherwise (a single run or a mean). \"best − mean\" is how far that run "
                      "sits above the mean of the seeds run here."))
    pending = [str(run.run_dir) for run in runs if not run.done]
    if pending:
        doc.add(Paragraph(f"Not finished yet ({len(pending)}): {', '.join(pending)}."))
    return doc


def headline_figures(row: Row, ref: Published) -> set[str]:
    """What a plan shows of a published row: its averages of the row's suites, or a suite's tasks where the
    paper prints no average (VaSCL's intent table)."""
    shown = row.averages & set(ref.scores)
    return shown or set(ref.scores)


def row_settings(paper: Paper, runs: list[Run]) -> list[dict[str, Any]]:
    """Per row: every setting by kind (:data:`augcse.studies.paper_settings.KINDS`: stated by the paper, taken
    from the authors' code, open, a deviation), and what the run's recipe (with the command line's
    overrides) holds differently from the table, or has that the table does not record."""
    out = []
    for row in dict.fromkeys(run.row for run in runs):
        recipe = next((run.recipe for run in runs if run.row == row and run.trained), None)
        values = resolved(row, recipe)
        differs = [str(finding) for finding in paper_settings.check(paper.name, row.name, values)]
        differs += [f"{paper.name}/{row.name}: {key} = {paper_settings.show(paper_settings.lookup(values, key))} "
                    "has no status in the table" for key in paper_settings.unrecorded(paper.name, row.name, values)]
        entry: dict[str, Any] = {"row": row.name, **{kind: [] for kind in paper_settings.KINDS}}
        for setting in paper_settings.settings(paper.name, row.name):
            item = {"key": setting.key, "value": setting.expected}
            if setting.basis:
                item.update({"source": setting.source} if setting.kind != "deviation" else
                            {"basis": setting.basis, "stated": setting.value, "source": setting.source})
            if setting.reason:
                item["reason"] = setting.reason
            entry[setting.kind].append(item)
        entry["differs_from_table"] = differs
        out.append(entry)
    return out


def _memory_json(need: MemoryNeed | None) -> dict[str, Any] | None:
    return None if need is None else {"gib_estimate": need.gib, "fits": need.fits,
                                       "mini_batch_size": need.mini_batch_size, "mini_batch_size_to_fit": need.fits_with}


def _corpora(runs: list[Run], data_dir: str | None) -> dict[int, CorpusFile]:
    return {id(run): corpus_file(run, data_dir) for run in runs if run.trained}


def plan_json(paper: Paper, runs: list[Run], nproc: int, gpu_memory_gib: float | None = None,
              data_dir: str | None = None) -> dict[str, Any]:
    """The dry run for tools: runs (with the corpus file each reads here and its lines), published figures,
    per-row settings by kind, GPU-hours and GPU memory."""
    rows = list(dict.fromkeys(run.row for run in runs))
    corpora = _corpora(runs, data_dir)

    def hours(run: Run) -> float:
        return gpu_hours(run, nproc, corpora[id(run)].priced if run.trained else None)

    def corpus(run: Run) -> dict[str, Any] | None:
        found = corpora.get(id(run))
        return None if found is None else {"name": run.recipe.data.corpus, "file": str(found.path) if found.path else None,
                                           "lines": found.lines, "priced_lines": found.priced,
                                           "priced_on": found.priced_on}

    return {
        "paper": paper.name, "title": paper.title,
        "runs": [{"row": run.row.name, "seed": run.seed, "run_dir": str(run.run_dir), "done": run.done,
                  "recipe": run.row.recipe, "overrides": list(run.row.overrides),
                  "evaluate": run.model, "tasks": run.tasks or run.row.tasks_spec(),
                  "eval_poolers": dict(run.row.eval_poolers), "all_metrics": list(run.row.all_metrics),
                  "main": run.row.main, "corpus": corpus(run),
                  "gpu_hours": round(hours(run), 3),
                  "gpu_memory": _memory_json(gpu_memory(run, gpu_memory_gib))} for run in runs],
        "published": {row.name: {ref: {k: v for k, v in published(ref).scores.items()
                                       if k in headline_figures(row, published(ref))} for ref in row.published}
                      for row in rows},
        "settings": row_settings(paper, runs),
        "gpu_hours_to_run": round(sum(hours(run) for run in runs if not run.done), 3),
        "gpu_memory_source": f"an estimate, {memory_model().source}",
    }


KIND_TITLES = {"paper": "stated by the paper", "code": "from the authors' code or README (the paper is silent)",
               "open": "open (neither says; the value taken and why)", "deviation": "deviations (and why)"}


def _absent_loss_models(run) -> list[str]:
    """The models the row's loss loads besides the backbone (DiffCSE's generator) that cannot load here."""
    from augcse.assets.resolve import AssetError, resolve_model
    from augcse.core.loss_parameters import loss_models

    absent = []
    for name in loss_models(run.recipe.loss.name, run.recipe.loss.params or {}):
        try:
            resolve_model(name)
        except AssetError:
            absent.append(name)
    return absent


def run_status(run: Run, state: str, hours: float, gpu_memory_gib: float | None = None) -> str:
    """A run's bracket in the dry run: main or baseline, its state, GPU-hours and (trained) GPU memory."""
    kind = "main" if run.row.main else "ablation/baseline"
    memory = f"; {describe_memory(gpu_memory(run, gpu_memory_gib))}" if run.trained else ""
    return f"[{kind}; {state}; {hours:.2f} GPU-h{memory}]"


def describe_settings(paper: Paper, runs: list[Run]) -> list[str]:
    """The dry run's settings per row: the stated and coded ones listed, open ones and deviations with their
    reasons, and what the run's recipe holds differently from the table."""
    out = []
    for entry in row_settings(paper, runs):
        out.append(f"  {entry['row']}:")
        by_key = {s.key: s for s in paper_settings.settings(paper.name, entry["row"])}
        for kind in paper_settings.KINDS:
            if not entry[kind]:
                continue
            if kind in ("paper", "code"):
                held = ", ".join(f"{item['key']}={paper_settings.show(item['value'])}" for item in entry[kind])
                out.append(f"    {KIND_TITLES[kind]} ({len(entry[kind])}): {held}")
            else:
                out.append(f"    {KIND_TITLES[kind]} ({len(entry[kind])}):")
                out += [f"      {by_key[item['key']].describe()}" for item in entry[kind]]
        out += [f"    DIFFERS FROM THE TABLE: {text}" for text in entry["differs_from_table"]]
    return out


def describe_plan(paper: Paper, runs: list[Run], nproc: int, gpu_memory_gib: float | None = None,
                  data_dir: str | None = None) -> str:
    spec = throughput()
    corpora = _corpora(runs, data_dir)
    out = [f"{paper.title}", "", f"{len(runs)} runs:"]
    for run in runs:
        state = "done" if run.done else ("partial, resumes" if run.started else "to run")
        if run.trained:
            what = f"recipe {run.row.recipe} seed {run.seed}" + (f" + {' '.join(run.row.overrides)}" if run.row.overrides else "")
            what += "".join(f"; {suite} evaluated through {pooler}" for suite, pooler in run.row.eval_poolers)
            what += "".join(f"; {suite} evaluated after training, every metric" for suite in run.row.all_metrics)
            found = corpora[id(run)]
            what += (f"; reads {found.path} ({found.lines:,} lines)" if found.path else
                     f"; corpus {run.recipe.data.corpus} NOT HERE ({how_to_get(run.recipe.data.corpus, data_dir)}; "
                     + (f"priced on its documented {found.priced:,} lines)" if found.priced_on == "documented" else
                        f"GPU-h an estimate on an assumed {found.priced:,} lines)"))
            what += "".join(f"; loss model {name} NOT HERE" for name in _absent_loss_models(run))
            if (short := too_few_steps(run, found.lines, nproc)) is not None:
                what += f"; {short}"
        else:
            what = f"evaluate {run.model} (pooler {run.row.evaluate.pooler}) on {run.tasks or run.row.tasks_spec()}"
            what += "".join(f"; {suite} with every metric" for suite in run.row.all_metrics)
        hours = gpu_hours(run, nproc, corpora[id(run)].priced if run.trained else None)
        out.append(f"  {run.run_dir}  {run_status(run, state, hours, gpu_memory_gib)}  {what}")
    out += ["", "Published figures compared with:"]
    for row in dict.fromkeys(run.row for run in runs):
        for ref in map(published, row.published):
            figures = ", ".join(f"{k} {v:.2f}" + (f" ± {ref.sd[k]:.2f}" if k in ref.sd else "")
                                for k, v in ref.scores.items() if k in headline_figures(row, ref))
            out.append(f"  {row.name}: {ref.id} ({ref.source}; {ref.reported.value}): {figures}")
    out += ["", "Settings per row (data/paper_settings.yaml), every effective key in one of four kinds:"]
    out += describe_settings(paper, runs)
    total = sum(gpu_hours(run, nproc, corpora[id(run)].priced if run.trained else None) for run in runs if not run.done)
    out += ["", f"GPU-hours still to run: {total:.1f} at {spec.sentences_per_second:g} sentences/s per GPU "
                f"(documented, not measured here: {spec.source}), over each corpus file's lines here, else its "
                f"documented line count (data/reproduce.yaml), else an assumed {spec.corpus_sentences:,} (an estimate)"]
    budget = f" against --gpu-memory {gpu_memory_gib:g} GiB" if gpu_memory_gib else " (--gpu-memory GiB checks them against a GPU)"
    out += [f"GPU memory per process{budget}: an estimate, {memory_model().source}"]
    return "\n".join(out)
