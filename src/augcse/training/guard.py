"""The non-finite guard: the first NaN or infinite loss (or gradient norm) stops the run before it reaches the weights.

Without it the trainer logs ``loss: nan``, replaces it by the running mean in ``train_loss`` and saves a model
full of NaN as if the run had succeeded. The loss is checked as it leaves the loss module, before the backward
pass, so the weights (and every checkpoint already saved) still come from finite steps. A recipe may allow a
number of skipped steps (``skip_nonfinite_steps``), the way mixed-precision training skips overflowing steps:
a skipped step's gradients are dropped, so the optimizer leaves every weight and moment as it was.
"""

from __future__ import annotations

import logging
import math

import torch
from transformers import TrainerCallback

logger = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
    """A loss component or the gradient norm was NaN or infinite at ``step`` and no more skips were allowed.

    ``probe``: the run's first batch and its loss then, ``(inputs, loss)``, to tell a checkpoint whose
    weights still give a sound loss from one already wrecked (:func:`sound`)."""

    def __init__(self, step: int, what: str, value: float, probe: tuple[tuple, float] | None = None,
                 rank: int | None = None) -> None:
        super().__init__(f"step {step}: {what} is {value}")
        self.step, self.what, self.value, self.probe, self.rank = step, what, value, probe, rank


def _first_nonfinite(output) -> tuple[str, float] | None:
    """The first component of a loss output (a tensor or a dict of named tensors) that is not finite."""
    parts = output if isinstance(output, dict) else {"loss": output}
    for name, value in parts.items():
        if isinstance(value, torch.Tensor) and not bool(torch.isfinite(value.detach()).all()):
            bad = value.detach().float().reshape(-1)
            return (f"loss component {name!r}" if isinstance(output, dict) else "the loss"), float(bad[~torch.isfinite(bad)][0])
    return None


class NonFiniteGuard(TrainerCallback):
    """Stops (raises :class:`NonFiniteError`) at the first non-finite loss or gradient norm beyond ``allowed_skips``."""

    def __init__(self, loss: torch.nn.Module, allowed_skips: int = 0) -> None:
        self.loss = loss
        self.allowed_skips = allowed_skips
        self.skipped: list[int] = []
        self.step = 1
        self.bad: tuple[str, float] | None = None
        self.probe: tuple[tuple, float] | None = None  # the first batch and its loss (see NonFiniteError)
        self._hook = loss.register_forward_hook(self._check_loss)

    def remove(self) -> None:
        """Detach the hook (the loss object may outlive the run, e.g. in a notebook)."""
        self._hook.remove()

    def on_step_begin(self, args, state, control, **kwargs):
        self.step = state.global_step + 1
        self.bad = None

    def _check_loss(self, module: torch.nn.Module, inputs, output) -> None:
        if not module.training or self.bad is not None:
            return
        found, where = _on_any_rank(_first_nonfinite(output), output)
        if found is not None:
            self._record(*found, rank=where)
        elif self.probe is None:
            self.probe = (inputs, total(output))

    def _record(self, what: str, value: float, rank: int | None = None) -> None:
        if len(self.skipped) >= self.allowed_skips:
            raise NonFiniteError(self.step, what, value, self.probe, rank)
        self.bad = (what, value)

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        params = [p for p in self.loss.parameters() if p.grad is not None]
        if self.bad is None and params:
            norm = float(torch.nn.utils.get_total_norm([p.grad for p in params]))
            if not math.isfinite(norm):
                self._record("the gradient norm", norm)
        if self.bad is None:
            return
        for p in params:  # no gradient: AdamW/SGD leave the weight and its moments untouched
            p.grad = None
        self.skipped.append(self.step)
        logger.warning("step %d skipped: %s is %s (%d of %d allowed non-finite steps used)", self.step,
                       self.bad[0], self.bad[1], len(self.skipped), self.allowed_skips)


def _on_any_rank(found: tuple[str, float] | None, output) -> tuple[tuple[str, float] | None, int | None]:
    """The first rank's non-finite finding, on every rank, and that rank (None in one process).

    With several processes a NaN is usually met by one rank only; were it to stop alone, the others would wait
    in their next collective until its timeout (30 min for gloo). One all-reduce of one number per loss call
    (where the ranks meet anyway, in the loss's gather and DDP's backward) lets every rank stop, or skip, at
    the same step with the same finding."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return found, None
    world = dist.get_world_size()
    parts = output if isinstance(output, dict) else {"loss": output}
    device = next((v.device for v in parts.values() if isinstance(v, torch.Tensor)), torch.device("cpu"))
    first = torch.tensor([dist.get_rank() if found is not None else world], device=device)
    dist.all_reduce(first, op=dist.ReduceOp.MIN)
    source = int(first.item())
    if source == world:
        return None, None
    shared = [found]
    dist.broadcast_object_list(shared, src=source)
    return shared[0], source


def total(output) -> float:
    """The loss a trainer minimises: the sum of a loss module's named components (or the one tensor)."""
    parts = output.values() if isinstance(output, dict) else [output]
    return float(sum(float(v.detach().sum()) for v in parts))


# a checkpoint is sound when its weights give the first batch a finite loss no larger than this many times the
# loss that batch had at the first step, plus one nat (a wrecked encoder's loss is near log of the batch size)
SPIKE_FACTOR = 10.0


def sound(loss: torch.nn.Module, probe: tuple[tuple, float]) -> bool:
    """Whether ``loss`` (with the weights loaded into it) gives the probe batch a finite, unspiked loss.

    Evaluated without dropout and without gradients; the loss module is left in training mode again."""
    inputs, first = probe
    was_training = loss.training
    loss.eval()
    try:
        with torch.no_grad():
            value = total(loss(*inputs))
    finally:
        loss.train(was_training)
    return math.isfinite(value) and value <= SPIKE_FACTOR * abs(first) + 1.0


def all_finite(module: torch.nn.Module) -> bool:
    """True when every parameter of ``module`` is finite (checked before a model is saved as a result)."""
    return all(bool(torch.isfinite(p).all()) for p in module.parameters())


def safetensors_finite(path) -> bool:
    """True when every floating tensor stored in a ``.safetensors`` file is finite."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        for key in handle.keys():
            tensor = handle.get_tensor(key)
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                return False
    return True
