"""The task registry: every evaluation (STS, transfer, clustering, intent…) is a registered :class:`Task`.

A task loads its data once (:meth:`Task.load`), names the sentences it needs (so the suite can encode
the union once, see :mod:`augcse.evaluation.encoding`) and scores an encoder. Suites are named lists of
tasks. ``augcse eval --tasks`` and :class:`augcse.evaluation.suite.SuiteEvaluator` only ever go through
this registry, so a new evaluation is one module that calls :func:`register_task`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from augcse.names import suggest

Encoder = Callable[[Sequence[str]], np.ndarray]


class Task(ABC):
    """One evaluation task.

    Attributes:
        name: registry name (``"STS12"``, ``"MR"``…).
        suites: suites the task belongs to (``"sts"``, ``"transfer"``…); every task is also in ``"all"``.
        main_metric: key of :meth:`evaluate`'s result that is the task's headline score.
        selection_metric: key of the score computed without any test split (a dev set, training
            folds, a held-out validation sample), the only one model selection may read; None when
            the task has no such score (model selection then refuses it).
    """

    name: str = ""
    suites: tuple[str, ...] = ()
    main_metric: str = "score"
    selection_metric: str | None = None
    in_all: bool = True  # False for model-selection splits (dev sets), which suite "all" leaves out

    @abstractmethod
    def load(self, data_dir: Path | None) -> Any:
        """Read the task's data (raise :class:`augcse.assets.AssetError` when missing)."""

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
    """Add ``task`` to the registry and to its suites (and to ``all`` unless ``task.in_all`` is False)."""
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


def load_builtin_tasks() -> None:
    """Import the task modules so they register themselves (idempotent)."""
    import importlib

    for module in ("sts", "transfer", "clustering", "intent", "geometry"):
        try:
            importlib.import_module(f"augcse.evaluation.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"augcse.evaluation.{module}":
                raise
