"""Rank agreement: what the processes of a multi-process run decide together.

Rank 0 alone touches the run folder; the others take its answer (the checkpoint to resume from, a refusal, a
checkpoint's verdict), so ranks never train on apart. A fault ends every rank with the same line, the one the
first failing rank published in the process group's store.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from augcse.training.arguments import training_arguments
from augcse.training.recipes.config import Recipe
from augcse.training.rundir import RunFolder, RunFolderError


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def join_process_group(recipe: Recipe) -> None:
    """Set up the trainer's own process group now, through its arguments (so its backend and ``ddp_timeout`` are
    the ones training uses), so that rank 0's decision about the run folder reaches the other ranks."""
    training_arguments(recipe, has_dev=recipe.eval.dev is not None, total_steps=1)


def agreed_checkpoint(folder: RunFolder, recipe: Recipe, resume: bool | str, overwrite: bool) -> Path | None:
    """The checkpoint every rank resumes from: rank 0's decision in :meth:`RunFolder.claim`, broadcast.

    Other ranks do not look at the folder themselves: rank 0 may empty it (``--overwrite``, a restart of an
    ``--auto-resume`` run stopped before its first checkpoint) or finish a checkpoint while they would read it,
    and ranks that resumed from different checkpoints would train on, silently apart. A refusal is broadcast
    too, so every rank ends with the same line (:class:`RunFolderError`, exit 2)."""
    if world_size() == 1:
        return folder.claim(recipe.to_dict(), resume=resume, overwrite=overwrite)
    import torch.distributed as dist

    join_process_group(recipe)
    decision: list[Any] = [None]
    if dist.get_rank() == 0:
        try:
            found = folder.claim(recipe.to_dict(), resume=resume, overwrite=overwrite)
            decision = [("resume", str(found) if found else None)]
        except RunFolderError as exc:
            decision = [("refused", str(exc))]
    dist.broadcast_object_list(decision, src=0)
    kind, value = decision[0]
    if kind == "refused":
        raise RunFolderError(value)
    return Path(value) if value else None


def _fault_key() -> str:
    # the store outlives a torchrun restart: each attempt has its own key
    return f"augcse/fault/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


def _fault_store():
    """The key-value store the process group was set up with (the launcher's), or None."""
    import torch.distributed as dist

    try:
        return dist.distributed_c10d._get_default_store() if dist.is_initialized() else None
    except (RuntimeError, ValueError):
        return None


def every_ranks_line(own: Callable[[], str]) -> str:
    """The one line every rank of a multi-process run ends with, whichever rank met the fault first; ``own()``
    is this rank's line (:func:`augcse.training.recovery.fault_line`), asked for once SIGTERM is ignored.

    A rank that fails publishes its line (which rank, what, the resumable checkpoint) in the process group's
    store before it exits; its exit breaks the collective the other ranks wait in (gloo reports a closed
    connection at once), and they end with the line published first instead of their own broken connection.
    A non-finite step is met by every rank at the same step (:class:`augcse.training.guard.NonFiniteGuard`
    combines their verdicts), so its line is the same on each. The store is in memory, so a full disk does not
    stop the line from reaching the others; a rank killed without a word (SIGKILL, out of memory) leaves the
    others their own line. The launcher's SIGTERM to the remaining ranks is ignored from here on, so that it
    cannot cut the line short (torchrun sends SIGKILL 30 s later anyway)."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    line = own()
    own_line = line if line.startswith("rank ") else f"rank {rank()}: {line}"
    store = _fault_store()
    if store is None:
        return own_line
    try:
        published = store.compare_set(_fault_key(), "", own_line)  # the first line published wins
    except (RuntimeError, ValueError):  # the store's host is gone too
        return own_line
    return published.decode() if isinstance(published, bytes) else str(published)


def _distributed() -> bool:
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def from_rank_0(decide):
    """``decide()`` on rank 0 (which may change the folder), its answer on every rank."""
    if not _distributed():
        return decide()
    import torch.distributed as dist

    answer = [decide() if dist.get_rank() == 0 else None]
    dist.broadcast_object_list(answer, src=0)
    return answer[0]


def on_every_rank(flag: bool) -> bool:
    """Whether ``flag`` holds on every rank."""
    if not _distributed():
        return flag
    import torch
    import torch.distributed as dist

    device = "cuda" if dist.get_backend() == "nccl" else "cpu"
    value = torch.tensor([int(flag)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MIN)
    return bool(value.item())
