"""What ``augcse adapt`` is given, checked before anything loads, and recorded as given and as used.

A run of adapt is told by its flags and files; a flag refused only after training (a sample with one label) or
quietly dropped (``--alphas 0``) leaves a run folder that says something else happened. So every flag, the texts
file and the labelled sample are checked here first, each refusal one line naming the flag or the user's file and
what to give instead, and :func:`inputs_record` writes what was given beside what was used (``adapt.json``,
``inputs``). The texts trained on are copied into the run folder (:data:`TEXTS`), with a record of the file they
came from (its path, absolute path and sha256), so the run folder holds what ran, and a resumed run is held to
the same texts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from augcse.core.names import suggest
from augcse.core.outputs import write_text_atomically
from augcse.core.paths import expect_file

# each flag's default as a user would type it: "given" stays null in the record when the flag was not passed
DEFAULTS: dict[str, str] = {"method": "simcse", "budgets": "16,64,128", "alphas": "0.25,0.5,1", "held_out": "256",
                            "clusters": "10", "column": "text"}
MIN_HELD_OUT = 16  # held-out texts: enough for 10 nearest neighbours each and a K-means of a few clusters
# recipe keys adapt sets itself from its flags: an override of one would quietly replace what the flags say
SET_BY_ADAPT: dict[str, str] = {
    "data.corpus": "adapt trains on its copy of the texts file: give the texts as the first argument",
    "data.column": "name the text column with --column",
    "training.max_steps": "the run is as long as the largest of --budgets: set --budgets",
}
TEXTS = "texts"  # the run folder's copy of what it trains on and scores on, and where the texts came from
TRAIN_TEXTS, HELD_OUT_TEXTS, SOURCE = "train.txt", "held-out.txt", "source.json"


def _items(text: str, flag: str, what: str, example: str) -> list[str]:
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise ValueError(f"{flag}: give at least one {what} (e.g. {flag} {example})")
    return items


def _distinct(values: Sequence[Any], text: str, flag: str) -> None:
    repeated = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if repeated is not None:
        raise ValueError(f"{flag} {text}: {repeated:g} is given twice; give each value once")


def parse_budgets(text: str) -> tuple[int, ...]:
    """``--budgets``: distinct positive step counts, ascending."""
    steps = []
    for item in _items(text, "--budgets", "step count", DEFAULTS["budgets"]):
        if not item.isdigit() or int(item) == 0:
            raise ValueError(f"--budgets {text}: {item!r} is not a positive whole number of steps (e.g. --budgets "
                             f"{DEFAULTS['budgets']})")
        steps.append(int(item))
    _distinct(steps, text, "--budgets")
    return tuple(sorted(steps))


def parse_alphas(text: str) -> tuple[float, ...]:
    """``--alphas``: distinct weights in (0, 1], ascending; 0 is the starting model, always a candidate anyway."""
    alphas = []
    for item in _items(text, "--alphas", "weight", DEFAULTS["alphas"]):
        try:
            alpha = float(item)
        except ValueError:
            alpha = math.nan
        if not 0 < alpha <= 1:
            raise ValueError(f"--alphas {text}: {item!r} is not a weight above 0 and at most 1 (0 is the starting "
                             "model, always a candidate); give e.g. --alphas 0.25,0.5,1")
        alphas.append(alpha)
    _distinct(alphas, text, "--alphas")
    return tuple(sorted(alphas))


def parse_count(text: str, flag: str, minimum: int) -> int:
    """A whole number of at least ``minimum`` (``--held-out``, ``--clusters``)."""
    if not text.strip().isdigit() or int(text) < minimum:
        raise ValueError(f"{flag} {text}: give a whole number of at least {minimum}")
    return int(text)


def check_method(name: str, methods: Sequence[str]) -> str:
    if name not in methods:
        raise ValueError(f"--method {name}: unknown{suggest(name, methods)}; one of {', '.join(methods)}")
    return name


def check_overrides(overrides: Sequence[str]) -> None:
    """An override of a key adapt sets from its flags is refused: it would replace them without a word."""
    from augcse.training.recipes.config import refuse_reserved

    refuse_reserved(overrides, SET_BY_ADAPT, "adapt")


def check_sample(path: str) -> str:
    """``--sample``: a CSV with rows of text,label and at least two labels; the task that scores it."""
    from augcse.evaluation.tasks import resolve_tasks

    file = expect_file(path, "--sample", "a labelled CSV with the columns text,label")
    if file.stat().st_size == 0:
        raise ValueError(f"--sample {path}: is empty; give a CSV whose first line is text,label and whose rows are "
                         "labelled texts")
    try:
        (task,) = resolve_tasks(f"clustering:{file}")
    except ValueError as exc:  # the task's own check, worded for the flag the user gave
        raise ValueError(str(exc).replace(f"clustering:{file}", f"--sample {path}", 1)) from None
    return f"clustering:{file.resolve()}"


def check_sample_task(name: str) -> str:
    """``--sample-task``: one registered task (a suite would score several; the record keeps one score)."""
    from augcse.evaluation.tasks import resolve_tasks

    try:
        tasks = resolve_tasks(name)
    except ValueError as exc:
        raise ValueError(f"--sample-task {name}: {str(exc).split(';')[0]}; e.g. --sample-task SNIPS (augcse eval "
                         "--help lists the tasks)") from None
    if len(tasks) != 1 or ":" in tasks[0]:
        raise ValueError(f"--sample-task {name}: names {len(tasks)} tasks; name one registered task (e.g. SNIPS), "
                         "or give your own labelled file with --sample")
    return tasks[0]


def check_sizes(where: str, texts: int, held_out: int, clusters: int, batch: int) -> None:
    """Enough texts for ``held_out`` kept out and one batch to train on; fewer ``clusters`` than held-out texts."""
    if clusters >= held_out:
        raise ValueError(f"--clusters {clusters}: must be fewer than the {held_out} held-out texts (--held-out)")
    if texts - held_out < batch:
        most = texts - batch
        fix = (f"lower --held-out to at most {most}" if most >= MIN_HELD_OUT else
               f"give at least {MIN_HELD_OUT + batch} texts")
        raise ValueError(f"--held-out {held_out}: {where} has {texts} texts, which leaves {max(0, texts - held_out)} "
                         f"to train on, fewer than one batch of {batch} (training.per_device_train_batch_size); {fix}")


def file_record(path: str | Path) -> dict[str, str]:
    """A file as the user named it, where it is, and its sha256 (read in blocks)."""
    from augcse.assets.download import sha256_file

    return {"given": str(path), "absolute": str(Path(path).resolve()), "sha256": sha256_file(Path(path))}


@dataclass(frozen=True)
class Texts:
    """The texts of one run: where they came from, the share trained on and the held-out share."""

    source: dict[str, Any]  # file_record of the texts file, with the column read, the held-out size and the seed
    train: list[str]
    held: list[str]


def source_mismatch(run_dir: Path, source: dict[str, Any]) -> str | None:
    """Why the texts of a run folder started earlier are not ``source`` (one line), or None when they are (or
    when the folder has no record of its texts: the run folder's own checks say what it holds)."""
    path = Path(run_dir) / TEXTS / SOURCE
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text(encoding="utf-8"))
    if recorded["sha256"] != source["sha256"]:
        return (f"--resume: {source['given']} is not the texts file this run started with "
                f"({recorded['absolute']}, sha256 {recorded['sha256'][:12]}…; now {source['sha256'][:12]}…); resume "
                "with those texts, or start again with --overwrite")
    changed = [f"{key} {recorded[key]} → {source[key]}" for key in ("column", "held_out", "seed")
               if recorded.get(key) != source[key]]
    if changed:
        return (f"--resume: this run split its texts with other settings ({'; '.join(changed)}); resume with the "
                "same ones, or start again with --overwrite")
    return None


def write_texts(run_dir: Path, texts: Texts) -> Path:
    """The training texts, the held-out texts and their source into ``run_dir/texts/``; the training file."""
    folder = Path(run_dir) / TEXTS
    folder.mkdir(exist_ok=True)
    for name, part in ((TRAIN_TEXTS, texts.train), (HELD_OUT_TEXTS, texts.held)):
        write_text_atomically(folder / name, "".join(t.replace("\n", " ").replace("\r", " ") + "\n" for t in part))
    write_text_atomically(folder / SOURCE, json.dumps(texts.source, indent=2))
    return folder / TRAIN_TEXTS


def given_and_used(given: Any, used: Any) -> dict[str, Any]:
    return {"given": given, "used": list(used) if isinstance(used, tuple) else used}


def inputs_record(texts: Texts, read: int, given: dict[str, Any], used: dict[str, Any],
                  sample: dict[str, Any]) -> dict[str, Any]:
    """``adapt.json``'s ``inputs``: the texts file, how many texts it gave and where their copy is, then each flag
    as given (null: left at its default) and as used, then the labelled sample's file or task."""
    copy = {"train": f"{TEXTS}/{TRAIN_TEXTS}", "held_out": f"{TEXTS}/{HELD_OUT_TEXTS}"}
    return {"texts": {**texts.source, "texts_read": read, "train_texts": len(texts.train), "copy": copy},
            **{key: given_and_used(given[key], value) for key, value in used.items()}, **sample}


def prepare_texts(run_dir: Path, texts: Texts, checkpoint: Path | None) -> Path:
    """The run's training file, once its folder is claimed (emptied first with ``--overwrite``): a new run writes
    its copy of the texts; a resumed one trains on the copy it started with, the same texts or refused."""
    if checkpoint is None:
        return write_texts(run_dir, texts)
    copy = Path(run_dir) / TEXTS / TRAIN_TEXTS
    if not copy.is_file() or not (Path(run_dir) / TEXTS / SOURCE).is_file():
        raise ValueError(f"--resume: {run_dir} holds no copy of the texts it trained on ({TEXTS}/{TRAIN_TEXTS}); "
                         "start again with --overwrite")
    why = source_mismatch(run_dir, texts.source)
    if why:
        raise ValueError(why)
    return copy
