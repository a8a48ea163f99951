"""Trainer callbacks of an augcse run: the JSONL log, the loss's own state in checkpoints, the views' draw epoch,
a graceful stop, a changed learning rate on resume."""

from __future__ import annotations

import json
import logging
import os
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
import yaml
from transformers import TrainerCallback

from augcse.core.outputs import append_line, write_atomically, write_text_atomically
from augcse.training.rundir import LOSS_STATE, RECIPE

logger = logging.getLogger(__name__)


class ComponentMeter:
    """Running sums of the loss's named components, at full precision.

    The trainer logs each component rounded to 4 decimals, so a component of 1e-6 reads 0.0; a forward hook
    on the loss keeps the exact values between two log events instead.
    """

    def __init__(self, loss: torch.nn.Module) -> None:
        self.sums: dict[str, float] = defaultdict(float)
        self.calls = 0
        loss.register_forward_hook(self._record)

    def _record(self, module: torch.nn.Module, inputs, output) -> None:
        if not module.training:
            return
        parts = output if isinstance(output, dict) else {"loss": output}
        for key, value in parts.items():
            self.sums[key] += float(value.detach().float().mean())
        self.calls += 1

    def pop(self) -> dict[str, float]:
        """Mean of each component since the last call (averaged over processes when distributed)."""
        keys = sorted(self.sums)
        values = torch.tensor([self.sums[k] for k in keys] + [float(self.calls)], dtype=torch.float64)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            values = values.to("cuda" if torch.distributed.get_backend() == "nccl" else "cpu")
            torch.distributed.all_reduce(values)
        self.sums, self.calls = defaultdict(float), 0
        calls = float(values[-1])
        return {k: float(v) / calls for k, v in zip(keys, values[:-1].tolist())} if calls else {}


class JsonlLogger(TrainerCallback):
    """Every trainer log event (named loss components at full precision, learning rate, dev score) as one JSON line."""

    def __init__(self, path: Path, loss: torch.nn.Module) -> None:
        self.path = path
        self.loss = loss
        self.meter = ComponentMeter(loss)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs:
            return
        exact = self.meter.pop() if "loss" in logs else {}  # every process takes part in the reduction
        if not state.is_world_process_zero:
            return
        exact = {k: v for k, v in exact.items() if k in logs}
        if exact and "loss" not in exact:
            exact["loss"] = sum(exact.values())
        logs.update(exact)  # the console and TensorBoard, called after this callback, show them unrounded
        metrics = getattr(self.loss, "pop_metrics", None)
        record = {"step": state.global_step, "epoch": state.epoch, **logs, **exact, **(metrics() if metrics else {})}
        append_line(self.path, json.dumps(record))  # never through a link


class NothingLearned(TrainerCallback):
    """One warning when the loss and its gradient norm have been exactly 0 for ``steps`` steps in a row: a run
    that trains nothing (a batch with nothing to contrast, every term weighted 0) would otherwise end quietly.

    Reads the trainer's log events after :class:`JsonlLogger` has put the exact loss in them.
    """

    def __init__(self, steps: int = 10) -> None:
        self.steps = steps
        self.last_step = 0  # the step of the previous log event
        self.first_zero: int | None = None
        self.warned = False

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs:
            return
        zero = logs["loss"] == 0.0 and logs.get("grad_norm", 0.0) == 0.0
        self.first_zero = (self.first_zero or self.last_step + 1) if zero else None
        self.last_step = state.global_step
        if zero and not self.warned and state.global_step - self.first_zero + 1 >= self.steps:
            self.warned = True
            logger.warning("steps %d-%d: the loss and its gradient are exactly 0, so nothing is being learned; "
                           "check that each batch has something to contrast (its size, the views' columns) and "
                           "that the loss's terms are not all weighted 0", self.first_zero, state.global_step)


def truncate_log(path: Path, step: int) -> None:
    """Keep the log records up to ``step``: a resumed run replays the steps after its checkpoint."""
    if not path.is_file():
        return
    kept = [line for line in path.read_text().splitlines() if line.strip() and json.loads(line).get("step", 0) <= step]
    write_text_atomically(path, "".join(line + "\n" for line in kept))


class LossStateCheckpoint(TrainerCallback):
    """Save the loss's own parameters (train-only heads, discriminators) into each checkpoint, so resume is exact,
    and the recipe the steps so far were trained with, which a resume is held to (the run folder's
    ``recipe.yaml`` is the user's to read and copy, and may be edited)."""

    def __init__(self, loss: torch.nn.Module, recipe: dict | None = None) -> None:
        self.loss = loss
        self.recipe = recipe

    def on_save(self, args, state, control, **kwargs):
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            own = own_loss_state(self.loss)  # its own queue (ESimCSE's), its head's statistics
            if own and not state.is_world_process_zero:
                folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
                write_atomically(folder / rank_loss_state(dist.get_rank()), lambda handle: torch.save(own, handle))
            # every rank writes its own RNG state into the checkpoint: it is complete (the loss state, written
            # last) only once they all have, or a resume would silently draw other dropout masks on that rank
            dist.barrier()
        if state.is_world_process_zero:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if self.recipe is not None:  # before the loss state, whose presence marks the checkpoint complete
                write_text_atomically(folder / RECIPE, yaml.safe_dump(self.recipe, sort_keys=False))
            state_dict = {k: v for k, v in self.loss.state_dict().items() if not k.startswith("model.")}
            # in one rename: a kill while writing must not leave a truncated file that marks the folder complete
            write_atomically(folder / LOSS_STATE, lambda handle: torch.save(state_dict, handle))


class DrawEpoch(TrainerCallback):
    """Tell the training set's transform which epoch starts (a view whose draws are keyed by seed, epoch and
    row, e.g. CARDS'), so a resumed run redraws what it drew before. Called before the epoch's dataloader
    workers start, which copy the transform; ``dataloader_persistent_workers`` would keep epoch 0's."""

    def on_epoch_begin(self, args, state, control, train_dataloader=None, **kwargs):
        dataset = getattr(train_dataloader, "dataset", None)
        transform = (getattr(dataset, "format", None) or {}).get("format_kwargs", {}).get("transform")
        if hasattr(transform, "set_epoch"):
            transform.set_epoch(int(state.epoch + 1e-9))  # state.epoch is a whole number at an epoch's start


class SyncLossGradients(TrainerCallback):
    """Average the gradients of the loss's own parameters (train-only heads, discriminators) over processes
    before every optimizer step, as DDP does for the model it wraps; otherwise each process trains its own head."""

    def __init__(self, loss: torch.nn.Module) -> None:
        self.loss = loss

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        dist = torch.distributed
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return
        shared = {id(p) for p in self.loss.model.parameters()} if hasattr(self.loss, "model") else set()
        own = [p for p in self.loss.parameters() if p.requires_grad and id(p) not in shared]
        if not own:
            return
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in own])
        dist.all_reduce(flat)
        flat /= dist.get_world_size()
        for p, grad in zip(own, flat.split([p.numel() for p in own])):
            if p.grad is not None or grad.any():
                p.grad = grad.view_as(p).clone()


class GracefulStop(TrainerCallback):
    """On SIGINT/SIGTERM finish the current step, save a resumable checkpoint and stop.

    The handlers it installs replace the caller's until :meth:`restore` (a notebook's Ctrl-C works again after).
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested = False
        self._previous = {sig: signal.getsignal(sig) for sig in self.SIGNALS}
        for sig in self.SIGNALS:
            signal.signal(sig, self._request)

    def restore(self) -> None:
        """Put back the signal handlers that were there before."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def _request(self, signum, frame) -> None:
        if self.requested:  # a second Ctrl-C stops at once
            raise KeyboardInterrupt
        self.requested = True
        logger.warning("stop requested: saving a checkpoint after this step (Ctrl-C again to abort)")

    def on_step_end(self, args, state, control, **kwargs):
        if self.requested:
            control.should_save = True
            control.should_training_stop = True
        return control


class AlreadyTrained(Exception):
    """Raised by :class:`SkipWhenTrained`: the resumed checkpoint is the last step; the model holds its weights."""


class SkipWhenTrained(TrainerCallback):
    """A resume from the checkpoint of the last step trains nothing (the trainer would take one step more).

    It stops the trainer right after it loaded the checkpoint; with ``load_best_model_at_end`` the trainer runs
    on, as the best model it loads at its end replaces whatever that extra step did.
    """

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step > 0 and state.global_step >= state.max_steps and not args.load_best_model_at_end:
            raise AlreadyTrained


class ScaleLearningRate(TrainerCallback):
    """Bring the learning rate restored from a checkpoint to this run's ``learning_rate`` (a resume that changed it).

    The trainer restores the checkpoint's optimizer and schedule, whose rates come from the recipe the run
    started with; every rate is scaled by new peak / old peak (the first group's base rate), so the schedule's
    shape (warm-up, decay) continues at the new peak. A resume with the same rate scales by exactly 1.
    """

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        base = getattr(lr_scheduler, "base_lrs", None)
        if optimizer is None or not base or not base[0] or base[0] == args.learning_rate:
            return
        factor = args.learning_rate / base[0]
        for group in optimizer.param_groups:
            group["lr"] *= factor
            if "initial_lr" in group:
                group["initial_lr"] *= factor
        lr_scheduler.base_lrs = [rate * factor for rate in base]
        # what get_last_lr() (and so the log of this step) reports until the scheduler's next step
        lr_scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
        logger.info("learning rate brought from the checkpoint's %g to %g", base[0], args.learning_rate)


def rank_loss_state(rank: int) -> str:
    """The file of a checkpoint holding rank ``rank``'s own loss state (rank 0's is in ``loss_state.pt``)."""
    return f"loss_state_{rank}.pt"


def own_loss_state(loss: torch.nn.Module) -> dict[str, Any]:
    """What of the loss's state a process holds for itself: its buffers and extra state (ESimCSE's queue of its own
    batches, a BN head's running statistics). Its parameters are the same on every process (gradients averaged)."""
    parameters = {name for name, _ in loss.named_parameters()}
    return {k: v for k, v in loss.state_dict().items() if not k.startswith("model.") and k not in parameters}


def restore_loss_state(loss: torch.nn.Module, checkpoint: Path) -> None:
    """The loss's state from ``checkpoint``: rank 0's, then this rank's own where it saved one."""
    rank = int(os.environ.get("RANK", "0"))
    for path in [checkpoint / LOSS_STATE, *([checkpoint / rank_loss_state(rank)] if rank else [])]:
        if not path.is_file():
            continue
        result = loss.load_state_dict(torch.load(path, map_location="cpu", weights_only=True), strict=False)
        if result.unexpected_keys:
            raise RuntimeError(
                f"checkpoint {checkpoint} has loss parameters this loss lacks: {result.unexpected_keys[:3]}")
