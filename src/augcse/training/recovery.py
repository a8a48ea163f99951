"""Recovery: the faults a run stops with in one line, and what it can continue from.

A non-finite loss (:mod:`augcse.training.guard`) or a failed write (:mod:`augcse.core.outputs`) ends the run
with :class:`RunError`, naming the last good checkpoint; a checkpoint is good when its weights are finite and
still train the run's first batch soundly. The disk is checked before training for room for the checkpoints.
"""

from __future__ import annotations

import logging
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from augcse.core.outputs import free_bytes, mib
from augcse.training.ranks import from_rank_0, on_every_rank, rank, world_size
from augcse.training.recipes.config import Recipe
from augcse.training.rundir import RECIPE as RECIPE_FILE, latest_checkpoint

if TYPE_CHECKING:  # the guard imports torch: not at start-up (``augcse train --help`` stays light)
    from augcse.training.build import Setup
    from augcse.training.guard import NonFiniteError

logger = logging.getLogger(__name__)


class RunError(RuntimeError):
    """A run stopped for a reason outside the recipe (a full disk); the message says what is still resumable."""


def resumable(run_dir: Path) -> str:
    """What a stopped run can be continued from (read only: every rank may ask)."""
    last = latest_checkpoint(run_dir)
    return (f"{last.name} is resumable: run the same command with --auto-resume (or --resume)" if last
            else "no complete checkpoint was saved yet: start again with --overwrite")


# the commands that train through :func:`augcse.training.run.run`, and the flag that continues a stopped run
# (a study continues its started runs by itself: the same command again)
RESUME_FLAGS: dict[str, str | None] = {"train": "--resume", "adapt": "--resume", "study": None}
ALREADY_RESUMING = ("--resume", "--auto-resume")


def continue_command(argv: Sequence[str], run_dir: Path) -> str:
    """The command line that continues a stopped run, shell-quoted: the user's own (``sys.argv`` of ``augcse
    train``, ``adapt`` or ``study``) with ``--overwrite`` dropped and the command's resume flag added unless it
    is there; for a run started otherwise (from Python), ``augcse train`` on the run's stored recipe."""
    program = Path(argv[0]) if argv else Path()
    words = [word for word in argv[1:] if word != "--overwrite"]
    command = next((word for word in words if not word.startswith("-")), None)
    if "augcse" not in (program.name, program.parent.name) or command not in RESUME_FLAGS:
        return shlex.join(["augcse", "train", str(run_dir / RECIPE_FILE), "--resume"])
    flag = RESUME_FLAGS[command]
    if flag is not None and not any(word in ALREADY_RESUMING for word in words):
        words.append(flag)
    return shlex.join(["augcse", *words])


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def fault_line(run_dir: Path, exc: BaseException) -> str:
    """This rank's line for a fault that ends a multi-process run (:func:`augcse.training.ranks.every_ranks_line`):
    a :class:`RunError` as it is, anything else as its type, first line and what is resumable."""
    return str(exc) if isinstance(exc, RunError) else f"{type(exc).__name__}: {first_line(exc)}; {resumable(run_dir)}"


def checkpoint_bytes(run_dir: Path, model) -> int:
    """The size of one checkpoint: the last one saved, else the weights and two Adam moments."""
    last = latest_checkpoint(run_dir)
    if last is not None:
        return sum(f.stat().st_size for f in last.rglob("*") if f.is_file())
    return 3 * sum(p.numel() * p.element_size() for p in model.parameters())


def warn_if_short_of_space(recipe: Recipe, setup: Setup) -> None:
    """Warn before training when the disk cannot hold the checkpoints kept at once and the final model."""
    one = checkpoint_bytes(recipe.run_dir, setup.model)
    kept = (setup.args.save_total_limit or 2) + 1  # the kept ones and the one being written
    needed = kept * one + one // 3
    free = free_bytes(recipe.run_dir)
    if free < needed:
        logger.warning("only %s free in %s; this run needs about %s (%d checkpoints of %s and final/): free space "
                       "now, or it will stop when a save fails", mib(free), recipe.run_dir, mib(needed), kept, mib(one))


def last_finite_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint whose weights are all finite; newer non-finite ones are removed."""
    from augcse.training.guard import safetensors_finite

    while (last := latest_checkpoint(run_dir)) is not None:
        if all(safetensors_finite(f) for f in last.rglob("*.safetensors")):
            return last
        logger.warning("removing %s: its weights are not finite", last)
        shutil.rmtree(last)
    return None


# a suggested learning rate never exceeds this: above every rate the papers fine-tune with
HIGHEST_SUGGESTED_RATE = 1e-4


def recovery_checkpoint(run_dir: Path, setup: Setup, probe: tuple[tuple, float] | None) -> Path | None:
    """The newest checkpoint whose weights still train soundly (:func:`augcse.training.guard.sound` on the run's
    first batch); newer ones, finite but wrecked, are set aside as ``diverged-checkpoint-N`` so ``--resume``
    continues from the sound one. Without a probe, the newest finite checkpoint."""
    while (last := from_rank_0(lambda: last_finite_checkpoint(run_dir))) is not None:
        # with several processes every rank probes its own first batch (the loss gathers across them), and a
        # checkpoint is sound when it is sound for all; only rank 0 touches the folder
        if on_every_rank(probe is None or _sound_checkpoint(last, setup, probe)):
            return last
        aside = last.with_name(f"diverged-{last.name}")
        if rank() == 0:
            shutil.rmtree(aside, ignore_errors=True)
            last.rename(aside)
            logger.warning("%s gives the first batch a non-finite or exploded loss: set aside as %s", last.name,
                           aside.name)
    return None


def _sound_checkpoint(checkpoint: Path, setup: Setup, probe: tuple[tuple, float]) -> bool:
    """The checkpoint's encoder weights and loss state loaded into the live model and loss, then probed. A
    checkpoint whose weights do not match the encoder cannot be probed and is judged by finiteness alone."""
    from safetensors.torch import load_file

    from augcse.training.callbacks import restore_loss_state
    from augcse.training.guard import sound

    encoder = setup.model[0].auto_model
    device = str(next(encoder.parameters()).device)
    state = {k: v for file in checkpoint.glob("*.safetensors") for k, v in load_file(str(file), device=device).items()}
    loaded = encoder.load_state_dict(state, strict=False)
    if not state or loaded.missing_keys or loaded.unexpected_keys:
        return True
    restore_loss_state(setup.loss, checkpoint)
    return sound(setup.loss, probe)


def nonfinite_error(recipe: Recipe, setup: Setup, exc: NonFiniteError) -> RunError:
    """One line: the step, what was not finite, the likely causes, and how to continue from the last good checkpoint."""
    causes = [f"the learning rate ({setup.args.learning_rate:g}) is too high"]
    temperature = getattr(setup.loss, "temperature", None)
    if isinstance(temperature, (int, float)):
        causes.append(f"the loss temperature ({temperature:g}) is too low")
    causes.append("a batch is bad")
    setup.loss.model = setup.model  # probed without the trainer's distributed wrapper
    last = recovery_checkpoint(recipe.run_dir, setup, exc.probe)
    lower = f"training.learning_rate={min(setup.args.learning_rate / 10, HIGHEST_SUGGESTED_RATE):g}"
    stored = recipe.run_dir / RECIPE_FILE
    if last is not None:
        how = (f"{last.name} is the last good checkpoint: continue from it with a lower rate, e.g. augcse train "
               f"{stored} {lower} --resume, or allow skipped steps with skip_nonfinite_steps=N")
    else:
        how = (f"no checkpoint was saved before the weights went wrong: start again with a lower rate, e.g. augcse "
               f"train {stored} {lower} --overwrite, or allow skipped steps with skip_nonfinite_steps=N")
    who = f"rank {exc.rank}: " if exc.rank is not None else ""
    return RunError(f"{who}the run stopped at {exc} (likely: {', '.join(causes)}); the weights were not updated "
                    f"from it and no final/ was written; {how}")


def write_error(recipe: Recipe, setup: Setup, reason: str, writing: str, size: int) -> RunError:
    """One line: what could not be written, how much was needed and is free, what can still be resumed."""
    last = latest_checkpoint(recipe.run_dir)
    resumable = (f"the last complete checkpoint, {last.name}, is still resumable: free space and run again with "
                 "--resume") if last else "no complete checkpoint was saved yet: free space and start again with --overwrite"
    who = f"rank {rank()}: " if world_size() > 1 else ""
    return RunError(f"{who}could not write {writing} in {recipe.run_dir} ({reason}): about {mib(size)} needed, "
                    f"{mib(free_bytes(recipe.run_dir))} free; {resumable}")


def resume_hint(run_dir: Path) -> str:
    last = last_finite_checkpoint(run_dir)
    return f"{last.name} is resumable with --resume" if last else "start again with --overwrite"
