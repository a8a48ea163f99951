"""Learning-rate schedules the trainer does not have, named by ``training.lr_scheduler_type`` like its own.

``piecewise_constant`` is TensorFlow's ``PiecewiseConstantDecay``, which Contrastive Tension's released code
trains with (the rate steps down at fixed steps); the trainer's schedules (linear, cosine, constant, …) cannot
express it. Its arguments are ``training.lr_scheduler_kwargs``: ``boundaries`` (increasing steps) and
``factors`` (the rate from each boundary on, as a multiple of ``training.learning_rate``, which stays the one
place the base rate is stated):

    lr_scheduler_type: piecewise_constant
    lr_scheduler_kwargs: {boundaries: [500, 1000, 1500, 2000], factors: [0.8, 0.6, 0.4, 0.2]}
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PIECEWISE = "piecewise_constant"


def check_piecewise(kwargs: Mapping[str, Any] | None) -> tuple[list[int], list[float]]:
    """``(boundaries, factors)`` from ``lr_scheduler_kwargs``; a wrong table is one ``ValueError`` naming the key."""
    key = "recipe key 'training.lr_scheduler_kwargs'"
    if not isinstance(kwargs, Mapping) or set(kwargs) != {"boundaries", "factors"}:
        raise ValueError(f"{key}: {PIECEWISE} needs exactly {{boundaries: [steps…], factors: [multiples of "
                         f"learning_rate…]}}, got {kwargs!r}")
    boundaries, factors = kwargs["boundaries"], kwargs["factors"]
    if not (isinstance(boundaries, Sequence) and isinstance(factors, Sequence)) or len(boundaries) != len(factors) \
            or not boundaries:
        raise ValueError(f"{key}: boundaries and factors must be two lists of the same length, one factor a boundary")
    if any(not isinstance(b, int) or isinstance(b, bool) or b <= 0 for b in boundaries) \
            or any(b >= c for b, c in zip(boundaries, boundaries[1:])):
        raise ValueError(f"{key}: boundaries must be increasing positive steps, got {list(boundaries)}")
    if any(not isinstance(f, (int, float)) or isinstance(f, bool) or not f > 0 for f in factors):
        raise ValueError(f"{key}: factors must be positive numbers, got {list(factors)}")
    return list(boundaries), [float(f) for f in factors]


def piecewise_factor(boundaries: Sequence[int], factors: Sequence[float]) -> Callable[[int], float]:
    """The multiple of the base rate at each step: 1 before the first boundary, ``factors[i]`` from ``boundaries[i]``."""
    table = [1.0, *factors]
    return lambda step: table[bisect_right(boundaries, step)]


def piecewise_constant(optimizer: torch.optim.Optimizer, kwargs: Mapping[str, Any]) -> torch.optim.lr_scheduler.LambdaLR:
    import torch

    return torch.optim.lr_scheduler.LambdaLR(optimizer, piecewise_factor(*check_piecewise(kwargs)))


# augcse's schedules by ``lr_scheduler_type`` name: (optimizer, lr_scheduler_kwargs) -> scheduler; and their checks
SCHEDULES: dict[str, Callable[[torch.optim.Optimizer, Mapping[str, Any]], torch.optim.lr_scheduler.LRScheduler]] = {
    PIECEWISE: piecewise_constant}
CHECKS: dict[str, Callable[[Mapping[str, Any] | None], object]] = {PIECEWISE: check_piecewise}
