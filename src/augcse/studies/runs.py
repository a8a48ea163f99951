"""Runs of a table: rows (a recipe trained per seed, or a model evaluated as it is), planned, executed, resumed.

The machinery ``augcse reproduce`` and ``augcse study`` share. A :class:`Row` is one line of a table; a
:class:`Run` is one row at one seed with its folder. A run whose folder holds ``summary.json`` and the
``after`` scores of ``eval.json`` (and of each extra evaluation) is finished and skipped, so an interrupted
table continues where it stopped; a started run resumes from its last complete checkpoint, and one stopped
before its first checkpoint starts again. :func:`run_all` executes a plan under one lock on the table's
folder (:mod:`augcse.training.rundir`), so a second process on the same table is refused.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from augcse.core.names import check_folder_name as folder_name
from augcse.core.outputs import write_text_atomically
from augcse.training.recipes.config import Recipe, RecipeError, builtin_recipes, load_recipe, parse_override

RESERVED_KEYS = {"name": "the run names come from the rows", "seed": "use --seeds", "output_dir": "use --output"}
# what a paper's planned run adds to its recipe, before the command line's overrides: a reproduction trains on the
# corpus its rows name, never on a fallback (a user who wants another corpus names it, and the row shows it). A
# study's grid is the user's: its runs find their corpus as ``augcse train`` does (the default one falls back)
PLAN_OVERRIDES = ("data.fallback=[]",)

@dataclass(frozen=True)
class Evaluate:
    """A model evaluated as it is, with the pooler it was published with (None: the saved model's own)."""

    model: str
    pooler: str | None
    url: str | None = None  # where a checkpoint that is not on the Hub is published (a download to unzip)
    whiten: Whiten | None = None  # BERT-whitening fitted on a corpus before evaluation (no training)

    def __post_init__(self) -> None:
        if isinstance(self.whiten, dict):
            object.__setattr__(self, "whiten", Whiten(**self.whiten))


@dataclass(frozen=True)
class Whiten:
    """BERT-whitening (:mod:`augcse.models.whitening`) fitted on ``corpus`` (data-directory relative or a file),
    keeping ``dim`` directions (None: all)."""

    corpus: str
    dim: int | None = None


@dataclass(frozen=True)
class Row:
    """One line of a paper's table: trained from ``recipe`` (per seed) or ``evaluate``\\ d as it is.

    ``suites`` are what the row is held to; ``tasks`` narrows them to the tasks the paper's table has
    (VaSCL's six clustering sets of augcse's eight); ``eval_poolers`` evaluates a suite of a trained row
    through another pooler of the saved encoder (SDA §6.2: transfer on the average of the last two layers);
    ``all_metrics`` keeps every metric of a suite's tasks as ``task/metric`` where the paper prints more
    than the headline (VaSCL Table 3: 5-, 10- and 20-shot intent accuracy).
    """

    name: str
    published: tuple[str, ...]
    recipe: str | None = None
    overrides: tuple[str, ...] = ()
    evaluate: Evaluate | None = None
    suites: tuple[str, ...] = ("sts",)  # what the row is evaluated on and held to
    tasks: tuple[str, ...] = ()  # the paper's tasks when a subset of the suites'
    eval_poolers: tuple[tuple[str, str], ...] = ()  # (suite, pooler) evaluated apart from the trained pooler
    all_metrics: tuple[str, ...] = ()  # suites evaluated apart, keeping every metric (``task/metric``)
    main: bool = True

    @property
    def trained(self) -> bool:
        return self.recipe is not None

    def tasks_of(self, suites: tuple[str, ...]) -> str:
        """The evaluation task list of ``suites``: the row's own tasks in them, or the whole suites."""
        from augcse.evaluation.tasks import SUITES, load_builtin_tasks

        load_builtin_tasks()
        return ",".join(",".join(t for t in self.tasks if t in SUITES[suite]) or suite for suite in suites)

    def tasks_spec(self) -> str:
        """What the trained (or evaluated) model is evaluated on with its own pooler."""
        apart = {*(dict(self.eval_poolers) if self.trained else {}), *self.all_metrics}
        return self.tasks_of(tuple(s for s in self.suites if s not in apart))

    @property
    def averages(self) -> set[str]:
        """The published averages the row is held to: its suites' (``sts_avg``, ``transfer_avg``)."""
        return {f"{suite}_avg" for suite in self.suites}



@dataclass(frozen=True)
class Evaluation:
    """One evaluation of a model written to ``path``: its pooler (None: the saved model's own), its tasks,
    and whether every metric is kept (``task/metric``) or only each task's headline."""

    model: str
    pooler: str | None
    tasks: str
    path: Path
    all_metrics: bool = False

    def run(self, data_dir: str | None) -> None:
        write_scores(self.path, evaluate_model(self.model, self.pooler, self.tasks, data_dir, self.all_metrics))


@dataclass
class Run:
    """One training or evaluation run of a row, with its folder under the output directory."""

    row: Row
    seed: int | None
    run_dir: Path
    recipe: Recipe | None = None
    model: str | None = None  # evaluated model (evaluation rows)
    tasks: str | None = None  # evaluation tasks when not the row's protocol (--tasks)

    def __post_init__(self) -> None:
        if self.trained != (self.recipe is not None):
            raise ValueError(f"{self.run_dir}: a trained row's run needs its recipe, an evaluation row's run none")

    @property
    def trained(self) -> bool:
        """Whether this run trains (its row's recipe); a starting-model or evaluation row's run does not."""
        return self.row.trained

    @property
    def extra_evaluations(self) -> list[Evaluation]:
        """The suites a trained run is evaluated on apart from training's own evaluation, after it."""
        if not self.trained or self.tasks is not None:
            return []
        final = str(self.run_dir / "final")
        return [*(Evaluation(final, pooler, self.row.tasks_of((suite,)), self.run_dir / f"eval-{pooler}.json")
                  for suite, pooler in self.row.eval_poolers),
                *(Evaluation(final, None, self.row.tasks_of((suite,)), self.run_dir / f"eval-{suite}.json", True)
                  for suite in self.row.all_metrics)]

    @property
    def done(self) -> bool:
        return ((self.run_dir / "summary.json").is_file() and "after" in _json_file(self.run_dir / "eval.json")
                and all("after" in _json_file(extra.path) for extra in self.extra_evaluations))

    @property
    def started(self) -> bool:
        return any(self.run_dir.glob("checkpoint-*"))

    def summary(self) -> dict[str, Any]:
        """The finished run's ``summary.json`` (steps, time), empty before it is written."""
        return _json_file(self.run_dir / "summary.json")

    def seconds(self) -> float:
        """A finished run's wall time over all its parts (training, the budgets' and the final evaluation)."""
        return float(self.summary().get("seconds", 0.0))

    def scores(self) -> dict[str, float]:
        merged = dict(_json_file(self.run_dir / "eval.json").get("after", {}))
        for extra in self.extra_evaluations:
            merged.update(_json_file(extra.path).get("after", {}))
        return merged


def _json_file(path: Path) -> dict[str, Any]:
    """A run's JSON record; empty when absent or half-written (a run killed while writing it is not finished)."""
    try:
        return json.loads(path.read_text()) if path.is_file() else {}
    except json.JSONDecodeError:
        return {}


def check_overrides(overrides: Sequence[str], reserved: dict[str, str] = RESERVED_KEYS) -> None:
    """Refuses an override of a key the plan sets per run (``reserved``: key → what to use instead)."""
    for text in overrides:
        key = ".".join(parse_override(text)[0])
        if key in reserved:
            raise RecipeError(f"override {text!r}: {key} is set per run; {reserved[key]}")


def check_folder_name(name: str, what: str) -> None:
    """A set or row name names a folder under the output: the run-name rule, so no plan reaches outside it."""
    folder_name(name, f"{what} name", "it names the folder of its runs under the output")


def plan_runs(rows: Sequence[Row], seeds: Sequence[int], root: Path, overrides: Sequence[str],
              tasks: str | None = None, models: dict[str, str] | None = None,
              budgets: tuple[int, ...] = (), planned: Sequence[str] = PLAN_OVERRIDES) -> list[Run]:
    """Every run of ``rows`` under ``root``: trained rows once per seed, evaluation rows once. Recipes are
    loaded (validated) here, before anything runs; ``models`` maps an evaluated model's name to a local
    folder; ``budgets`` are the steps each trained run is also scored at (its recipe's ``eval.budgets``);
    ``planned`` are the overrides every trained run gets after its row's, before the command line's
    (:data:`PLAN_OVERRIDES`)."""
    check_overrides(list(overrides))
    checkpoint_paths = models
    runs: list[Run] = []
    for row in rows:
        check_folder_name(row.name, "row")
        if not row.trained:
            model = (checkpoint_paths or {}).get(row.evaluate.model, row.evaluate.model)
            runs.append(Run(row, None, root / row.name, model=model, tasks=tasks))
            continue
        builtin = row.recipe in builtin_recipes()
        if not builtin and not Path(row.recipe).is_file():
            raise ValueError(f"row {row.name}: recipe {row.recipe!r} is neither built in nor a file; "
                             f"built in: {', '.join(builtin_recipes())}")
        for seed in seeds:
            name = f"{row.name}-s{seed}"
            extra = [f"eval.after={tasks or row.tasks_spec()}", *([f"eval.budgets=[{', '.join(map(str, budgets))}]"]
                                                                  if budgets else [])]
            recipe = load_recipe(None if builtin else row.recipe, row.recipe if builtin else None,
                                 [*row.overrides, *planned, *extra, *overrides, f"name={name}", f"seed={seed}",
                                  f"output_dir={root}"])
            runs.append(Run(row, seed, recipe.run_dir, recipe=recipe, tasks=tasks))
    return runs


def corpus_found(recipe: Recipe, data_dir: str | None) -> bool:
    """Whether the run finds its corpus here as ``augcse train`` does: the file it names, or, for the default
    corpus only, one of its ``data.fallback`` files."""
    from augcse.text.corpus_source import find_corpus
    from augcse.training.recipes.config import DEFAULT_CORPUS

    corpus = recipe.data.corpus
    candidates = [corpus, *(recipe.data.fallback if corpus == DEFAULT_CORPUS else [])]
    return any(find_corpus(name, data_dir) is not None for name in candidates)


def missing_inputs(runs: Sequence[Run], data_dir: str | None) -> list[str]:
    """What the unfinished runs name and this machine lacks, one line each: a corpus (with the command that
    fetches or makes it), a model that cannot load offline or is published only as a download,
    evaluation data. Checked before anything trains, so a table never starts on what it cannot finish."""
    from augcse.assets.download import source_for
    from augcse.assets.resolve import AssetError, data_dir as resolve_data_dir, has_data, resolve_model
    from augcse.core.loss_parameters import loss_models
    from augcse.evaluation.tasks import get_task, load_builtin_tasks, resolve_tasks
    from augcse.text.corpus_source import find_corpus, how_to_get

    load_builtin_tasks()
    root = resolve_data_dir(data_dir)
    shown = str(root) if root else "none given: --data-dir or $AUGCSE_DATA"
    target = str(root) if root else "DIR"
    found: dict[str, str] = {}
    for run in runs:
        if run.done:
            continue
        where = run.row.name
        if run.trained:
            corpus = run.recipe.data.corpus
            if not corpus_found(run.recipe, data_dir):
                found.setdefault(corpus, f"row {where}: corpus {corpus} is not in the data directory ({shown}); "
                                         f"{how_to_get(corpus, data_dir)}, or name another with data.corpus=FILE "
                                         f"(the row is then shown as deviating)")
            model = run.recipe.model.backbone
        else:
            model = run.model
        whiten = run.row.evaluate.whiten if run.row.evaluate is not None else None
        if whiten and find_corpus(whiten.corpus, data_dir) is None:
            found.setdefault(whiten.corpus, f"row {where}: whitening corpus {whiten.corpus} is not in the data "
                                            f"directory ({shown}); {how_to_get(whiten.corpus, data_dir)}")
        if run.row.evaluate is not None and run.row.evaluate.url and not Path(model).expanduser().is_dir():
            found.setdefault(model, f"row {where}: {model} is published as a download, not on the Hub: unzip "
                                    f"{run.row.evaluate.url} and pass --checkpoint {model}=FOLDER")
            continue
        try:
            resolve_model(model)
        except AssetError as exc:
            found.setdefault(model, f"row {where}: {exc}")
        for extra in loss_models(run.recipe.loss.name, run.recipe.loss.params or {}) if run.trained else []:
            try:
                resolve_model(extra)
            except AssetError as exc:
                found.setdefault(extra, f"row {where}: the loss loads {extra}: {exc}")
        # an evaluation row's suites kept apart with every metric (a trained run's are its extra_evaluations)
        apart = [run.row.tasks_of(run.row.all_metrics)] if not (run.trained or run.tasks) and run.row.all_metrics else []
        specs = [run.tasks or run.row.tasks_spec(), *apart, *(extra.tasks for extra in run.extra_evaluations)]
        for task in resolve_tasks(",".join(filter(None, specs))):
            lacking = [f for f in get_task(task).record.files if not has_data(f, data_dir)]
            if lacking:
                source = source_for(lacking[0])
                fetch = (f"`augcse download {source.group.value} --data-dir {target}`" if source
                         else "the data directory")
                found.setdefault(task, f"row {where}: task {task} needs {lacking[0]}, not in the data directory "
                                       f"({shown}); fetch it with {fetch}")
    return list(found.values())


def check_inputs(runs: Sequence[Run], data_dir: str | None) -> None:
    """Refuses, in one line, a table whose unfinished runs name what this machine lacks (:func:`missing_inputs`)."""
    missing = missing_inputs(runs, data_dir)
    if missing:
        more = f" (and {len(missing) - 1} more missing: {'; '.join(missing[1:3])}{' …' if len(missing) > 3 else ''})" \
            if len(missing) > 1 else ""
        raise MissingInput(missing[0] + more)


class MissingInput(ValueError):
    """A table's run names a corpus, model or data file that is not here; refused before anything trains."""


def torchrun_command(run: Run, nproc: int, data_dir: str | None, resume: bool, restart: bool = False) -> list[str]:
    """``torchrun`` over ``python -m augcse train`` with the run's fully resolved recipe file."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "augcse", "train", str(run.run_dir / "reproduce-recipe.yaml")]
    if data_dir:
        command += ["--data-dir", data_dir]
    return command + (["--resume"] if resume else []) + (["--overwrite"] if restart else [])


def execute(run: Run, data_dir: str | None, nproc: int = 1) -> bool:
    """Train (or resume) or evaluate one run; False when it was stopped (Ctrl-C) before finishing."""
    if not run.trained:
        _evaluate_model(run, data_dir)
        return True
    if not (run.run_dir / "summary.json").is_file() and not _train(run, data_dir, nproc):
        return False
    for extra in run.extra_evaluations:
        if "after" not in _json_file(extra.path):
            extra.run(data_dir)
    return True


def _train(run: Run, data_dir: str | None, nproc: int) -> bool:
    from augcse.training.run import latest_checkpoint
    from augcse.training.rundir import is_run_folder, mark_run_folder

    resume = latest_checkpoint(run.run_dir) is not None
    # a run stopped before its first complete checkpoint left nothing to keep: the plan owns its folders,
    # so it starts that run again (a run alive in the folder still holds its lock and is refused)
    restart = not resume and is_run_folder(run.run_dir) and any(run.run_dir.iterdir())
    if restart:
        print(f"{run.run_dir.name}: stopped before its first complete checkpoint; starting it again", flush=True)
    if nproc > 1 and run.recipe.eval.budgets:
        raise ValueError(f"{run.run_dir}: budgets are evaluated in one process; run with --nproc 1")
    if nproc > 1:
        mark_run_folder(run.run_dir)  # refuses a folder augcse did not make
        write_text_atomically(run.run_dir / "reproduce-recipe.yaml", run.recipe.to_yaml())
        completed = subprocess.run(torchrun_command(run, nproc, data_dir, resume, restart), check=False)
        if completed.returncode == 130:
            return False
        if completed.returncode != 0:
            raise RuntimeError(f"torchrun for {run.run_dir} exited with {completed.returncode}")
        return True
    from augcse.training.run import run as train

    return not train(run.recipe, data_dir, resume=resume, overwrite=restart).get(
        "stopped")


def evaluate_model(model: str, pooler: str | None, tasks: str, data_dir: str | None,
                   all_metrics: bool = False, whiten: Whiten | None = None) -> dict[str, float]:
    """Headline scores (and suite averages) of ``model``, rebuilt as its encoder with ``pooler`` unless
    None and whitened on ``whiten``'s corpus when given; ``all_metrics`` adds every other metric as
    ``task/metric`` (not timings or selection scores)."""
    from augcse.models.load import load_model
    from augcse.evaluation.suite import main_scores, run_tasks

    encoder = load_model(model, pooler=pooler)
    if whiten is not None:
        from augcse.assets.resolve import resolve_data
        from augcse.models.whitening import corpus_sentences, whiten_model

        path = whiten.corpus if Path(whiten.corpus).expanduser().is_file() else resolve_data(whiten.corpus, data_dir)
        encoder = whiten_model(encoder, corpus_sentences(path), whiten.dim)
    results = run_tasks(encoder, tasks, data_dir, batch_size=64)
    scores = main_scores(results)
    if all_metrics:
        scores.update({f"{task}/{metric}": float(value) for task, values in results.items()
                       for metric, value in values.items() if metric != "seconds" and not metric.endswith("devacc")})
    return scores


def write_scores(path: Path, scores: dict[str, float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path, json.dumps({"after": scores}, indent=2))


def _evaluate_model(run: Run, data_dir: str | None) -> None:
    """An evaluation row: the model with its published pooler on the row's tasks, every metric kept for
    its ``all_metrics`` suites."""
    pooler = run.row.evaluate.pooler
    tasks = run.tasks or run.row.tasks_spec()
    apart = run.row.tasks_of(run.row.all_metrics) if run.row.all_metrics and run.tasks is None else ""
    whiten = run.row.evaluate.whiten
    fitted = {"whiten": whiten} if whiten else {}
    scores = evaluate_model(run.model, pooler, tasks, data_dir, **fitted) if tasks else {}
    if apart:
        scores.update(evaluate_model(run.model, pooler, apart, data_dir, all_metrics=True, **fitted))
    write_scores(run.run_dir / "eval.json", scores)
    summary = {"name": run.row.name, "model": run.model, "pooler": pooler, "trained": False,
               **({"whiten": {"corpus": whiten.corpus, "dim": whiten.dim}} if whiten else {})}
    write_text_atomically(run.run_dir / "summary.json", json.dumps(summary, indent=2))



def _pace(runs: Sequence[Run]) -> str:
    """How many runs are left and what the finished trained ones took, so a long table's end can be judged."""
    left = sum(not run.done for run in runs)
    seconds = [run.seconds() for run in runs if run.done and run.trained]
    pace = (f"; {len(seconds)} trained run{'s' if len(seconds) > 1 else ''} finished, "
            f"{sum(seconds) / len(seconds) / 60:.1f} min each") if seconds else ""
    return f" ({left} left{pace})"


def run_all(runs: Sequence[Run], folder: Path, data_dir: str | None, nproc: int = 1) -> int:
    """Execute every unfinished run in order under one lock on ``folder``; 130 when stopped (Ctrl-C).

    A second process on the same folder is refused (:class:`augcse.training.rundir.RunFolderError`, a one-line
    ValueError naming the PID that holds it)."""
    from augcse.training.rundir import RunFolder, RunFolderError

    lock = RunFolder(folder / ".table")
    try:
        lock.claim({})
    except RunFolderError as exc:
        pid = str(exc).partition("(PID ")[2].partition(")")[0] or "unknown"
        raise RunFolderError(f"{folder} is being run by another process (PID {pid}); wait for it to finish, "
                             "or give another --output") from None
    try:
        for index, run in enumerate(runs, 1):
            if run.done:
                print(f"[{index}/{len(runs)}] {run.run_dir}: finished, skipped", flush=True)
                continue
            print(f"[{index}/{len(runs)}] {run.run_dir}: {'resuming' if run.started else 'running'}"
                  f"{_pace(runs)}", flush=True)
            if not execute(run, data_dir, nproc):
                print(f"stopped; run the same command again to continue from {run.run_dir}", flush=True)
                return 130
        return 0
    finally:
        lock.release()
