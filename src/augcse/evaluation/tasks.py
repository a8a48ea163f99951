"""The task registry: every evaluation (STS, transfer, clustering, intent…) is a registered :class:`Task`.

A task loads its data once (:meth:`Task.load`), names the sentences it needs (so the suite can encode
the union once, see :mod:`augcse.evaluation.encoding`) and scores an encoder. Suites are named lists of
tasks. ``augcse eval --tasks`` and :class:`augcse.evaluation.suite.SuiteEvaluator` only ever go through
this registry, so a new evaluation is one module that calls :func:`register_task` (named once in
:data:`TASK_MODULES`). What a task is (type, split, metrics, files with checksums and sources,
citation) is its :class:`TaskRecord`, which every other part reads.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from augcse.assets.download import checksums, source_of
from augcse.core.names import suggest

Encoder = Callable[[Sequence[str]], np.ndarray]

# the modules that register tasks, in the order listings and the recipe reference show them
TASK_MODULES = ("sts", "transfer", "clustering", "intent", "geometry")


@dataclass(frozen=True)
class TaskType:
    """A kind of evaluation, named as a model card's ``model-index`` names it."""

    description: str
    metric: str  # the model-index metric that a task's main score is
    # scoring trains classifiers or runs K-means (seconds to minutes): worth a worker process of its own
    # (augcse.evaluation.workers); cosine similarities and geometry take milliseconds and stay in-process
    costly: bool = False


TASK_TYPES: dict[str, TaskType] = {
    "sts": TaskType("Semantic Similarity", "spearman_cosine"),
    "transfer": TaskType("Text Classification", "accuracy", costly=True),
    "clustering": TaskType("Clustering", "accuracy", costly=True),
    "intent": TaskType("Few Shot Intent Classification", "accuracy", costly=True),
    "geometry": TaskType("Embedding Geometry", "score"),
}
# the split a task's main score is computed on; "all": an unsupervised score over the whole set
SPLITS = ("test", "dev", "all")


@dataclass(frozen=True)
class DataFile:
    """One file a task reads: its data-directory path, recorded sha256 and where it is downloaded from."""

    path: str
    sha256: str | None
    source: str | None


@dataclass(frozen=True)
class TaskRecord:
    """Everything known about a task before it runs, stated once.

    The selection guard, the model card, the recipe reference, ``augcse eval --list`` and
    ``augcse download`` read these fields; nothing about a task is recovered from its name.

    Attributes:
        name: registry name (``"STS12"``, ``"MR-sklearn"``…).
        type: a key of :data:`TASK_TYPES`.
        split: the split the main score is computed on (:data:`SPLITS`).
        main_metric: key of the task's result that is its headline score.
        selection_metric: key of the score computed without any test split (a dev set, training
            folds, a held-out validation sample), the only one model selection may read; None when
            there is none (model selection then refuses the task).
        files: data-directory paths the task reads (checksums and sources: :meth:`data_files`).
        citation: where the data set was published.
        suites: suites the task belongs to; every task with ``in_all`` is also in ``"all"``.
        in_all: False for dev splits and variants, which suite ``"all"`` leaves out.
        scale: what the score is multiplied by (×100 for Spearman and accuracy; 1 for geometry).
        family: the data set the task scores, shared by its splits and variants (default: ``name``).
        variant: which file set or classifier (``"original"``, ``"sklearn"``; ``""``: the default).
    """

    name: str
    type: str
    split: str
    main_metric: str
    selection_metric: str | None
    files: tuple[str, ...]
    citation: str
    suites: tuple[str, ...] = ()
    in_all: bool = True
    scale: float = 100.0
    family: str = ""
    variant: str = ""

    def __post_init__(self) -> None:
        if self.type not in TASK_TYPES:
            raise ValueError(f"task {self.name!r}: type {self.type!r} is not one of {', '.join(TASK_TYPES)}")
        if self.split not in SPLITS:
            raise ValueError(f"task {self.name!r}: split {self.split!r} is not one of {', '.join(SPLITS)}")
        empty = [key for key in ("name", "main_metric", "citation", "files") if not getattr(self, key)]
        if empty:
            raise ValueError(f"task {self.name!r}: the record needs {', '.join(empty)}")
        if self.split == "test" and self.selection_metric == self.main_metric:
            raise ValueError(f"task {self.name!r}: its main metric is a test score and cannot select models")
        if not self.family:
            object.__setattr__(self, "family", self.name)

    @property
    def kind(self) -> TaskType:
        return TASK_TYPES[self.type]

    def data_files(self) -> tuple[DataFile, ...]:
        """Every file with its recorded sha256 and source (None where ``augcse download`` has none)."""
        return tuple(DataFile(path, checksums().get(path), source_of(path)) for path in self.files)

    def check_complete(self) -> None:
        """ValueError naming every file without a recorded checksum or download source."""
        missing = []
        for file in self.data_files():
            lacks = [key for key, value in (("sha256", file.sha256), ("source", file.source)) if value is None]
            if lacks:
                missing.append(f"{file.path} (no {' or '.join(lacks)})")
        if missing:
            raise ValueError(f"task {self.name!r}: record these files in data/checksums.sha256 and "
                             f"data/downloads.yaml: {', '.join(missing)}")


class Task(ABC):
    """One evaluation task, described by its :class:`TaskRecord` (``name``, ``suites``… read it)."""

    record: TaskRecord

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def suites(self) -> tuple[str, ...]:
        return self.record.suites

    @property
    def main_metric(self) -> str:
        return self.record.main_metric

    @property
    def selection_metric(self) -> str | None:
        return self.record.selection_metric

    @property
    def in_all(self) -> bool:
        return self.record.in_all

    @abstractmethod
    def load(self, data_dir: Path | None) -> Any:
        """Read the task's data (raise :class:`augcse.assets.resolve.AssetError` when missing)."""

    @abstractmethod
    def sentences(self, data: Any) -> list[str]:
        """Every sentence :meth:`evaluate` will encode, for one shared encoding pass."""

    @abstractmethod
    def evaluate(self, encode: Encoder, data: Any, fast: bool = False, seed: int = 0) -> dict[str, float]:
        """Score an encoder; the result contains ``main_metric``."""


TASKS: dict[str, Task] = {}
SUITES: dict[str, list[str]] = {"all": []}
# kinds of task a user's own labelled file can be scored as, ``KIND:PATH`` (e.g. ``clustering:sample.csv``)
FILE_TASKS: dict[str, Callable[[str], Task]] = {}


def register_task(task: Task) -> Task:
    """Add ``task`` to the registry and to its suites (and to ``all`` unless ``task.in_all`` is False).

    A task whose files have no recorded checksum or download source is refused: its scores could not
    be traced to the data they came from.
    """
    task.record.check_complete()
    if task.name in TASKS:
        raise ValueError(f"task {task.name!r} is registered twice")
    TASKS[task.name] = task
    for suite in (*task.suites, *(("all",) if task.in_all else ())):
        SUITES.setdefault(suite, []).append(task.name)
    return task


def is_average(key: str) -> bool:
    """Whether a score key is a suite average (``sts_avg``, ``clustering_avg/nmi``) rather than a task's."""
    return key.partition("/")[0].endswith("_avg")


def resolve_tasks(spec: str | Sequence[str]) -> list[str]:
    """Task names from a comma-separated list of task and suite names (case-insensitive); look them up
    with :func:`get_task`."""
    load_builtin_tasks()
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    by_lower = {name.lower(): name for name in TASKS}
    out: list[str] = []
    for raw in (item.strip() for item in items):
        if not raw:
            continue
        kind, colon, path = raw.partition(":")
        if colon and kind.lower() in FILE_TASKS:
            name = f"{kind.lower()}:{path}"
            get_task(name)  # a missing or malformed file is refused here
            names = [name]
        elif raw.lower() in SUITES:
            names = SUITES[raw.lower()]
        elif raw.lower() in by_lower:
            names = [by_lower[raw.lower()]]
        else:
            raise ValueError(f"unknown task or suite {raw!r}{suggest(raw, [*TASKS, *SUITES])}; "
                             f"tasks: {', '.join(TASKS)}; suites: {', '.join(SUITES)}")
        out += [n for n in names if n not in out]
    return out


def get_task(name: str) -> Task:
    """The registered task ``name``, or a task built for a user's file (``clustering:PATH``).

    A file's task is built afresh on every call and never registered: it would otherwise join the
    listing, suites and reference of the whole process, and a later call from another working directory
    would score the first file of that relative name.
    """
    load_builtin_tasks()
    if name in TASKS:
        return TASKS[name]
    kind, colon, path = name.partition(":")
    if colon and kind in FILE_TASKS:
        return FILE_TASKS[kind](path)
    raise KeyError(f"no task {name!r}")


def variant_of(name: str, variant: str) -> str:
    """The registered task scoring the same data set and split as ``name`` in another variant (e.g.
    ``"original"``: the untokenised files), or ``name`` itself when there is none."""
    load_builtin_tasks()
    record = TASKS[name].record
    wanted = (record.family, record.type, record.split, variant)
    return next((t.name for t in TASKS.values() if (t.record.family, t.record.type, t.record.split,
                                                    t.record.variant) == wanted), name)


def load_builtin_tasks() -> None:
    """Import the task modules so they register themselves (idempotent)."""
    for module in TASK_MODULES:
        try:
            importlib.import_module(f"augcse.evaluation.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"augcse.evaluation.{module}":
                raise
