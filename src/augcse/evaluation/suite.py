"""Run several registered tasks on one model with one shared encoding pass.

:func:`run_tasks` is what ``augcse eval`` calls; :class:`SuiteEvaluator` wraps it as a
sentence-transformers evaluator so the same tasks run during training (model selection, logging).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sentence_transformers.base.evaluation.evaluator import BaseEvaluator
from tqdm.auto import tqdm

from augcse.evaluation.encoding import EmbeddingCache
from augcse.evaluation.workers import StoredEmbeddings, score, score_in_workers
from augcse.evaluation.tasks import TASKS, get_task, is_average, load_builtin_tasks, resolve_tasks


def run_tasks(
    model,
    tasks: str | Sequence[str],
    data_dir: str | Path | None = None,
    fast: bool = False,
    batch_size: int = 64,
    progress: bool = True,
    cache: EmbeddingCache | None = None,
    seed: int = 0,
    workers: int = 1,
    timings: dict[str, float] | None = None,
) -> dict[str, dict[str, float]]:
    """Evaluate ``model`` on ``tasks`` (names or suites); returns ``{task: {metric: value}}``.

    Each result also carries ``"seconds"``: the task's own time, not counting the shared encoding.
    :func:`main_scores` turns the result into ``{task: headline score}`` with suite averages, as
    ``augcse eval`` prints it. ``data_dir`` is the data directory (``None``: the embedded STS-B
    files, else downloads); ``fast`` is the tasks' fast mode (fewer folds or seeds). With ``workers``
    > 1 the costly tasks (classifiers, K-means) are scored side by side in that many processes
    (:mod:`augcse.evaluation.workers`), with the same scores. ``timings``, when given, receives the
    wall seconds of ``loading``, ``encoding`` and ``scoring``, and the ``processes`` that scored.

    Example::

        from augcse import load_model
        from augcse.evaluation.suite import main_scores, run_tasks

        model = load_model("sentence-transformers/all-MiniLM-L6-v2")
        # the embedded STS-B dev set needs no data directory; "sts", "transfer", "all"… need one
        results = run_tasks(model, "STSBenchmark-dev-original", progress=False)
        scores = main_scores(results)  # {"STSBenchmark-dev-original": 86.…, "dev_avg": 86.…}
        assert 0 < scores["STSBenchmark-dev-original"] <= 100
    """
    clock = {"start": time.perf_counter()}
    by_name = {name: get_task(name) for name in resolve_tasks(tasks)}
    root = Path(data_dir) if data_dir is not None else None
    cache = cache or EmbeddingCache(model, batch_size=batch_size, show_progress=progress)
    loaded = {name: task.load(root) for name, task in by_name.items()}
    clock["loading"] = time.perf_counter()
    union = [s for name, task in by_name.items() for s in task.sentences(loaded[name])]
    cache.prefetch(union, desc="encoding")
    clock["encoding"] = time.perf_counter()
    apart = [name for name, task in by_name.items() if task.record.kind.costly] if workers > 1 else []
    if len(apart) < 2:
        apart = []
    results: dict[str, dict[str, float]] = {}
    with tqdm(total=len(by_name), desc="tasks", disable=not progress, leave=False) as bar:
        for name in (n for n in by_name if n not in apart):
            bar.set_postfix_str(name)
            results[name] = score(by_name[name], loaded[name], cache, fast, seed)
            bar.update()
        if apart:
            bar.set_postfix_str(f"{len(apart)} tasks on {min(workers, len(apart))} processes")
            jobs = [(name, by_name[name], loaded[name], _stored(cache, by_name[name], loaded[name])) for name in apart]
            for name, scores in score_in_workers(jobs, workers, fast, seed):
                results[name] = scores
                bar.set_postfix_str(f"{name} done")
                bar.update()
    if timings is not None:
        timings.update(loading=clock["loading"] - clock["start"], encoding=clock["encoding"] - clock["loading"],
                       scoring=time.perf_counter() - clock["encoding"],
                       processes=min(workers, len(apart)) if apart else 1)
    return {name: results[name] for name in by_name}


def _stored(cache: EmbeddingCache, task, data) -> StoredEmbeddings:
    """The embeddings of the sentences ``task`` scores, for a worker process."""
    sentences = list(dict.fromkeys(task.sentences(data)))
    return StoredEmbeddings(sentences, cache.encode(sentences) if sentences else np.zeros((0, cache.dimension)))


def main_scores(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """``{task: headline score}`` plus suite averages (``sts_avg``, ``transfer_avg``…), as plain floats."""
    return with_suite_averages({name: float(scores[get_task(name).main_metric]) for name, scores in results.items()})


def with_suite_averages(scores: dict[str, float]) -> dict[str, float]:
    """Task scores with every ``{suite}_avg`` recomputed over the registered tasks present.

    Secondary metrics named ``task/metric`` (e.g. ``AgNews/nmi``) get ``{suite}_avg/metric``.
    """
    load_builtin_tasks()
    out = {name: value for name, value in scores.items() if not is_average(name)}
    by_suite: dict[str, list[float]] = {}
    for name, value in out.items():
        task, _, metric = name.partition("/")
        for suite in TASKS[task].suites if task in TASKS else ():
            by_suite.setdefault(f"{suite}_avg/{metric}" if metric else f"{suite}_avg", []).append(value)
    for key, values in by_suite.items():
        out[key] = sum(values) / len(values)
    return out


def selection_metrics(names: Sequence[str]) -> dict[str, str]:
    """``{task: selection metric}``; ValueError naming every task that has no score free of test data."""
    load_builtin_tasks()
    metric = {n: get_task(n).selection_metric for n in names}
    missing = [n for n, m in metric.items() if m is None]
    if missing:
        raise ValueError(
            f"model selection needs a dev or held-out score, and {', '.join(missing)} only score(s) a test "
            f"split; use a dev task (e.g. STSBenchmark-dev) or the transfer/intent tasks"
        )
    return {n: str(m) for n, m in metric.items()}


class SuiteEvaluator(BaseEvaluator):
    """A sentence-transformers evaluator over registered tasks (e.g. ``"STSBenchmark-dev"`` during training).

    Model selection must never see a test split, so only each task's ``selection_metric`` is read
    (STS-B dev's Spearman, transfer ``devacc``, intent validation accuracy) and tasks without one are
    refused when the evaluator is built. It logs each of them (``task``, or ``task/metric`` when it is
    not the task's main metric, e.g. ``MR/devacc``) and ``score``
    (their mean), the primary metric used for model selection (``eval_<name>_score``).

    Args:
        tasks: task or suite names.
        data_dir: the data directory (None: embedded defaults / downloads).
        fast: the tasks' fast mode.
        batch_size: encoding batch size.
        name: prefix of the logged metrics.

    Example::

        from augcse import load_model
        from augcse.evaluation.suite import SuiteEvaluator

        model = load_model("sentence-transformers/all-MiniLM-L6-v2")
        evaluator = SuiteEvaluator("STSBenchmark-dev-original", name="dev")
        metrics = evaluator(model)  # {"dev_STSBenchmark-dev-original": 86.…, "dev_score": 86.…}
        assert evaluator.primary_metric == "dev_score" and "dev_score" in metrics  # model selection reads it
        # during training: SentenceTransformerTrainer(model=model, …, evaluator=evaluator)
    """

    def __init__(
        self,
        tasks: str | Sequence[str],
        data_dir: str | Path | None = None,
        fast: bool = True,
        batch_size: int = 64,
        name: str = "",
    ) -> None:
        super().__init__()
        self.task_names = resolve_tasks(tasks)
        self._tasks = {n: get_task(n) for n in self.task_names}
        self.selection = selection_metrics(self.task_names)
        self.data_dir = data_dir
        self.fast = fast
        self.batch_size = batch_size
        self.name = name
        self.primary_metric = "score"
        root = Path(data_dir) if data_dir is not None else None
        self._data: dict[str, Any] = {n: task.load(root) for n, task in self._tasks.items()}

    def __call__(self, model, output_path: str | None = None, epoch: int = -1, steps: int = -1) -> dict[str, float]:
        cache = EmbeddingCache(model, batch_size=self.batch_size)
        cache.prefetch([s for n, task in self._tasks.items() for s in task.sentences(self._data[n])])
        results = {n: task.evaluate(cache, self._data[n], fast=self.fast) for n, task in self._tasks.items()}
        metrics = {
            n if key == self._tasks[n].main_metric else f"{n}/{key}": float(results[n][key])
            for n, key in self.selection.items()
        }
        metrics["score"] = sum(metrics.values()) / len(metrics)
        metrics = self.prefix_name_to_metrics(metrics, self.name)
        self.store_metrics_in_model_card_data(model, metrics, epoch, steps)
        return metrics

    def get_config_dict(self) -> dict[str, Any]:
        return {"tasks": self.task_names, "fast": self.fast}
