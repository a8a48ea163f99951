"""What a score was computed with, saved beside it in ``eval.json``: libraries, model and data versions.

``eval.json`` holds ``{"before": {task: score}, "after": {...}, "versions": {stage: VERSIONS}}``, where
``VERSIONS`` is :func:`versions`: the library versions, the model (what was named, the folder it
resolved to and the sha256 of its weights file) and the sha256 of every data file the stage's tasks read,
with whether it is the file their record names. Two scores are comparable when these agree. A stage scored by
``augcse eval --save-to`` also says how each task was encoded (:func:`precision_record`): a stage may hold tasks
scored in float32 by training beside tasks scored again in bf16.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from augcse.core.version import __version__
from augcse.assets.resolve import resolve_data, resolve_model
from augcse.assets.download import checksums, sha256_file
from augcse.evaluation.tasks import get_task, resolve_tasks

VERSIONS_KEY = "versions"  # the eval.json key beside the stages' scores
LIBRARIES = ("torch", "transformers", "sentence-transformers")
WEIGHTS = ("model.safetensors", "pytorch_model.bin")  # the first one present is fingerprinted


def library_versions() -> dict[str, str]:
    """``{"augcse", "python", and each of LIBRARIES: version}``."""
    out = {"augcse": __version__, "python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def model_version(model: str | Path) -> dict[str, str]:
    """The model as named, the local folder it resolved to and its weights file's sha256 (when local)."""
    out = {"name": str(model)}
    folder = Path(resolve_model(str(model)))
    if folder.is_dir():
        out["path"] = str(folder.resolve())
        weights = next((folder / name for name in WEIGHTS if (folder / name).is_file()), None)
        if weights is not None:
            out["weights"] = weights.name
            out["sha256"] = sha256_file(weights)
    return out


def data_versions(tasks: Iterable[str], data_dir: Path | None) -> dict[str, dict[str, Any]]:
    """``{file: {"sha256": of the file read, "as_recorded": it is the file the task record names}}``."""
    recorded = checksums()
    out: dict[str, dict[str, Any]] = {}
    for name in tasks:
        for relpath in get_task(name).record.files:
            if relpath in out:
                continue
            path = Path(relpath) if Path(relpath).is_absolute() else resolve_data(relpath, data_dir, download=False)
            digest = sha256_file(path)
            out[relpath] = {"sha256": digest, "as_recorded": recorded.get(relpath) == digest}
    return out


def versions(model: str | Path, tasks: Iterable[str], data_dir: Path | None) -> dict[str, Any]:
    """Libraries, model and data versions for ``model`` scored on ``tasks`` (task names)."""
    return {"libraries": library_versions(), "model": model_version(model), "data": data_versions(tasks, data_dir)}


def record_versions(scores: dict[str, Any], stage: str, model: str | Path, specs: Iterable[str | None],
                    data_dir: Path | None) -> dict[str, Any]:
    """Set ``scores["versions"][stage]`` (the contents of an ``eval.json``) for the tasks of ``specs``
    (comma lists of task and suite names, as a recipe's ``eval`` section holds them; None skipped)."""
    tasks = dict.fromkeys(name for spec in specs if spec for name in resolve_tasks(spec))
    scores.setdefault(VERSIONS_KEY, {})[stage] = versions(model, tasks, data_dir)
    return scores


def precision_record(before: Mapping[str, Any], earlier: Iterable[str], scored: Iterable[str],
                     precision: str) -> dict[str, Any]:
    """A stage's precision entries once the tasks ``scored`` were encoded in ``precision``: ``precision_by_task``
    (each task's own, kept for the tasks ``earlier`` in the stage, from ``before``: the stage's versions until
    now, float32 unless they say otherwise) and ``precision``, one word when every task agrees and else which
    tasks were scored in which (``"bf16 for STS12; float32 for STS13, STS14"``)."""
    old = before.get("precision_by_task")
    if not isinstance(old, Mapping):
        old = dict.fromkeys(earlier, str(before.get("precision", "float32")))
    by_task = dict(sorted({**old, **dict.fromkeys(scored, precision)}.items()))
    groups: dict[str, list[str]] = {}
    for task, used in by_task.items():
        groups.setdefault(used, []).append(task)
    summary = (next(iter(groups)) if len(groups) == 1 else
               "; ".join(f"{used} for {', '.join(tasks)}" for used, tasks in sorted(groups.items()))) if groups \
        else precision
    return {"precision": summary, "precision_by_task": by_task}
