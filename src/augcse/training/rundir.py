"""A run folder belongs to one run: a lock while it is alive, no silent overwrite, no resume of another recipe.

The states a folder can be in, and what ``augcse train`` does with each:

* new or empty: a fresh run starts;
* locked by a live process: refused, naming its PID (two runs never write one folder);
* finished (``summary.json``): refused unless ``--overwrite``, which empties it first;
* unfinished: ``--resume`` continues from the newest *complete* checkpoint, and only with the same recipe
  except the keys of :data:`RESUMABLE_CHANGES` (what a stopped diverging run needs changed: the learning rate,
  gradient clipping, skipped non-finite steps); without ``--resume`` it is refused (``--overwrite`` starts again);
* ``--auto-resume`` (one command line for the first start and every restart: torchrun ``--max-restarts``, a
  SLURM requeue, a replaced node): starts a new or empty folder, continues an unfinished one from its newest
  complete checkpoint as ``--resume`` does, and starts again a folder of the *same* recipe that was stopped
  before its first complete checkpoint; a finished run or another recipe's folder is refused as above.

Only a run augcse made is ever emptied or written into again: a folder holding the run marker (``.augcse-run``,
written when a run claims a new or empty folder), or, for runs made before the marker, a ``recipe.yaml`` beside
one of the records only a run writes (:data:`RUN_RECORDS`: its log, summary, scores or time, or a checkpoint
with its trainer state). A ``recipe.yaml`` alone proves nothing: a user keeps recipes in their own folders. Any
other folder with files in it is refused in one line, with ``--overwrite`` too, and emptying never follows a
link.

Nothing is written through a symbolic link (:mod:`augcse.core.outputs`): a run folder that is a link, or holds a
link (or a pipe, a device) at its top level or in the folders augcse writes (``final/``, ``checkpoint-*/``, …),
is refused when it is claimed, before the lock is taken or anything is written; the lock is opened without
following a link, and the marker and records are written as new files renamed into place. :data:`WRITTEN` lists
the names augcse writes at a run folder's top level.

On success the run ends with ``final/`` and ``summary.json``; its checkpoints are removed unless the recipe sets
``keep_checkpoints``, and the lock file goes with the lock.

A checkpoint is complete when the files written last by a save are there (the trainer state, then the
loss state); a process killed or out of disk while saving leaves an incomplete one, which every check ignores.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import yaml
from augcse.core import yamlfile
from augcse.core.folder_lock import LOCK_NAME as LOCK, LockHeld, take_lock  # one lock file name for every folder
from augcse.core.outputs import LinkRefused, refuse_links, write_text_atomically
from augcse.training.checkpoint_check import resume_refusal

logger = logging.getLogger(__name__)

LOSS_STATE = "loss_state.pt"
MARKER = ".augcse-run"  # written into every folder a run claims: what makes a folder one augcse may empty
RECIPE = "recipe.yaml"
FINISHED = "summary.json"
# records only a run writes: beside a recipe.yaml they prove a folder made before the marker is a run
RUN_RECORDS = ("log.jsonl", FINISHED, "eval.json", "time.json")
# every name augcse writes at the top of a run folder (train, --resume, report, eval --save-to, a study's run):
# the lock, marker, recipe, records, kept model, a checkpoint (checkpoint-N), the trainer's eval/, budgets' curve,
# a resume's kept recipe, the report and its figures, a study's recipe for torchrun
WRITTEN = (LOCK, MARKER, RECIPE, *RUN_RECORDS, "curve.json", "final", "checkpoint-4", "eval",
           "recipe.until-step-4.yaml", "report.md", "report.html", "report", "reproduce-recipe.yaml")
# recipe keys a resumed run may change; the recipe it started with is kept as recipe.until-step-N.yaml
RESUMABLE_CHANGES = ("training.learning_rate", "training.max_grad_norm", "skip_nonfinite_steps", "keep_checkpoints")
# where the run folder and its caches are, not how it trains: a run moved to another disk resumes from its new place
LOCATION = ("output_dir", "data.cache_dir")


# The lock files this process holds. A forked child (a dataloader worker) closes its copies at once: an
# ``flock`` lasts while any copy of the descriptor is open, so a worker outliving a killed run would
# otherwise keep the folder locked for seconds and refuse the ``--resume`` that follows.
_HELD: set[Any] = set()


def _close_held_in_child() -> None:
    for handle in _HELD:
        handle.close()
    _HELD.clear()


os.register_at_fork(after_in_child=_close_held_in_child)


class RunFolderError(ValueError):
    """The run folder cannot be used as asked; the message says why and what to pass instead."""


def checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoint folders, oldest first."""
    found = [p for p in run_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def is_complete(checkpoint: Path) -> bool:
    return (checkpoint / "trainer_state.json").is_file() and (checkpoint / LOSS_STATE).is_file()


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint, or None."""
    complete = [p for p in checkpoints(run_dir) if is_complete(p)]
    return complete[-1] if complete else None


def checkpoint_step(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[-1])


def _used(run_dir: Path) -> bool:
    return run_dir.is_dir() and any(p.name not in (LOCK, MARKER) for p in run_dir.iterdir())


def _regular_file(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def is_run_folder(path: Path) -> bool:
    """Whether augcse made ``path`` as a run folder: its marker, or its recipe.yaml beside a run's record (see the
    module docstring); never through a link."""
    if not path.is_dir() or path.is_symlink():
        return False
    if _regular_file(path / MARKER):
        return True
    records = any(_regular_file(path / name) for name in RUN_RECORDS) or any(
        _regular_file(c / "trainer_state.json") for c in checkpoints(path))
    return _regular_file(path / RECIPE) and records


def refuse_foreign(path: Path) -> None:
    """RunFolderError unless ``path`` may hold a run: absent, empty, or a run folder augcse made, with no link
    in it (nor a link itself)."""
    if path.is_symlink():
        raise RunFolderError(f"{path} is a symbolic link; augcse writes and removes runs only in folders it made: "
                             "choose another name= or output_dir=")
    if path.exists() and not path.is_dir():
        raise RunFolderError(f"{path} exists and is not a folder; choose another name= or output_dir=")
    if _used(path) and not is_run_folder(path):
        raise RunFolderError(f"{path} holds files but is not an augcse run (no {MARKER}, nor a {RECIPE} with a "
                             "run's records); augcse never writes into or removes a folder it did not make, "
                             "--overwrite included: choose another name= or output_dir=")
    try:
        refuse_links(path, "run folder")
    except LinkRefused as exc:
        raise RunFolderError(str(exc)) from None


def mark_run_folder(path: Path) -> None:
    """Create ``path`` (if needed) and mark it as a run folder augcse made."""
    refuse_foreign(path)
    path.mkdir(parents=True, exist_ok=True)
    write_text_atomically(path / MARKER, "an augcse run folder: augcse may empty it on --overwrite\n")


def changed_keys(stored: dict, current: dict, prefix: str = "") -> dict[str, tuple[Any, Any]]:
    """``{dotted key: (stored value, current value)}`` for every key whose value differs."""
    out: dict[str, tuple[Any, Any]] = {}
    for key in sorted(set(stored) | set(current)):
        a, b = stored.get(key), current.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out.update(changed_keys(a, b, f"{prefix}{key}."))
        elif a != b:
            out[f"{prefix}{key}"] = (a, b)
    return out


def recipe_differences(stored: dict, current: dict) -> list[str]:
    """Dotted keys whose values differ between two resolved recipes, with both values."""
    return [f"{key} ({a!r} → {b!r})" for key, (a, b) in changed_keys(stored, current).items()]


class RunFolder:
    """Claims ``run_dir`` for this process (see the module docstring); keep the object alive for the run."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir)
        self._handle: Any = None
        self.changes: dict[str, tuple[Any, Any]] = {}  # the RESUMABLE_CHANGES a --resume made

    def claim(self, recipe: dict, resume: bool | str = False, overwrite: bool = False) -> Path | None:
        """Lock the folder and check it fits the request; returns the checkpoint to resume from, if any.
        ``resume``: True (continue, or refuse), ``"auto"`` (continue when there is a complete checkpoint,
        start otherwise), False."""
        if resume and overwrite:
            raise RunFolderError("--resume and --overwrite contradict each other; pass one")
        refuse_foreign(self.path)
        self._lock()
        try:
            refuse_foreign(self.path)  # again under the lock: the folder may have changed in between
            checkpoint = self._check(recipe, resume, overwrite)
            mark_run_folder(self.path)
            return checkpoint
        except RunFolderError:
            self.release()
            raise

    def _check(self, recipe: dict, resume: bool, overwrite: bool) -> Path | None:
        finished = (self.path / FINISHED).is_file()
        used = _used(self.path)
        if overwrite:
            self._empty()
            return None
        if resume == "auto":
            return self._auto(recipe, finished, used)
        if resume:
            return self._resumable(recipe, finished)
        if finished:
            raise RunFolderError(f"{self.path} holds a finished run; choose another name= or pass --overwrite to "
                                 "replace it")
        if used:
            last = latest_checkpoint(self.path)
            how = (f"pass --resume to continue from {last.name}" if last
                   else "it has no complete checkpoint to resume from")
            raise RunFolderError(f"{self.path} holds an unfinished run; {how}, or pass --overwrite to start again")
        return None

    def _auto(self, recipe: dict, finished: bool, used: bool) -> Path | None:
        """``--auto-resume``: resume when a complete checkpoint is there, start when the folder is new, and
        start again when this recipe's run stopped before its first complete checkpoint."""
        if finished:
            raise RunFolderError(f"--auto-resume: {self.path} holds a finished run; there is nothing to resume "
                                 "(pass --overwrite to train it again)")
        if not used:
            return None
        if latest_checkpoint(self.path) is not None:
            return self._resumable(recipe, finished)
        stored_file = self.path / RECIPE
        stored = yamlfile.load(stored_file.read_text()) or {} if stored_file.is_file() else None
        current = yaml.safe_load(yaml.safe_dump(recipe, sort_keys=False))
        changes = {k for k in changed_keys(stored, current) if k not in LOCATION} if stored is not None else {"?"}
        if changes:
            raise RunFolderError(f"--auto-resume: {self.path} holds another run with no complete checkpoint "
                                 "(its recipe differs or is missing); choose another name= or pass --overwrite")
        logger.warning("--auto-resume: %s stopped before its first complete checkpoint; starting it again", self.path)
        self._empty()
        return None

    def _resumable(self, recipe: dict, finished: bool) -> Path:
        if finished:
            raise RunFolderError(f"--resume: {self.path} holds a finished run; there is nothing to resume")
        if not _used(self.path):
            raise RunFolderError(f"--resume: {self.path} holds no run yet; there is nothing to resume: start it "
                                 "without --resume")
        last = latest_checkpoint(self.path)
        if last is None:
            partial = [p.name for p in checkpoints(self.path)]
            seen = f" (incomplete: {', '.join(partial)})" if partial else ""
            raise RunFolderError(f"--resume: no complete checkpoint in {self.path}{seen}; start again with "
                                 "--overwrite")
        older = [p for p in checkpoints(self.path) if checkpoint_step(p) < checkpoint_step(last)]
        refusal = resume_refusal(last, older, LOSS_STATE, int(os.environ.get("WORLD_SIZE", "1")))
        if refusal:
            raise RunFolderError(refusal)
        stored_file = self.path / RECIPE
        # the recipe the checkpoint's steps were trained with; a checkpoint written before checkpoints held their
        # recipe is held to the run folder's copy
        trained_with = last / RECIPE if (last / RECIPE).is_file() else stored_file
        if trained_with.is_file():
            stored = yamlfile.load(trained_with.read_text()) or {}
            current = yaml.safe_load(yaml.safe_dump(recipe, sort_keys=False))
            changes = {k: v for k, v in changed_keys(stored, current).items() if k not in LOCATION}
            refused = [f"{key} ({a!r} → {b!r})" for key, (a, b) in changes.items() if key not in RESUMABLE_CHANGES]
            if refused:
                raise RunFolderError(f"--resume: the recipe differs from the one {last.name} was trained with: "
                                     f"{'; '.join(refused)}; resume with that recipe "
                                     f"(augcse train {trained_with} --resume) or start a new run (a resume may "
                                     f"change only {', '.join(RESUMABLE_CHANGES)})")
            if changes:
                self.changes = changes
                logger.warning("--resume with a changed recipe: %s (the first is kept as recipe.until-step-%d.yaml)",
                               "; ".join(f"{k} {a!r} → {b!r}" for k, (a, b) in changes.items()), checkpoint_step(last))
                os.replace(stored_file, self.path / f"recipe.until-step-{checkpoint_step(last)}.yaml")
                write_text_atomically(stored_file, yaml.safe_dump(recipe, sort_keys=False))
        return last

    def _lock(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            handle = take_lock(self.path / LOCK)
        except LockHeld as held:
            raise RunFolderError(f"{self.path} is in use by another augcse run (PID {held.holder}); wait for it to "
                                 "finish or choose another name=") from None
        except LinkRefused as exc:
            raise RunFolderError(str(exc)) from None
        self._handle = handle
        _HELD.add(handle)

    def _empty(self) -> None:
        refuse_foreign(self.path)
        for child in self.path.iterdir():
            if child.name in (LOCK, MARKER):
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def release(self) -> None:
        """Unlock and remove the lock file; a folder left with nothing else (a run refused before writing) goes too."""
        if self._handle is None:
            return
        (self.path / LOCK).unlink(missing_ok=True)  # still held: no other run can take it in between
        if not _used(self.path):
            (self.path / MARKER).unlink(missing_ok=True)
            try:
                self.path.rmdir()
            except OSError:
                pass
        _HELD.discard(self._handle)
        self._handle.close()
        self._handle = None
