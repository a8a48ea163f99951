"""augcse losses: one file per paper, all on :mod:`augcse.losses.infonce`; a registry for recipes."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from augcse.losses.base import ContrastiveLoss
from augcse.losses.infonce import KeyBlock, info_nce, symmetric_info_nce
from augcse.losses.simcse import SimCSELoss

LOSSES: dict[str, Callable[..., nn.Module]] = {"simcse": SimCSELoss}


def register_loss(name: str, factory: Callable[..., nn.Module]) -> None:
    """Make a loss available to recipes under ``name``."""
    if name in LOSSES:
        raise ValueError(f"loss {name!r} is registered twice")
    LOSSES[name] = factory


__all__ = ["LOSSES", "ContrastiveLoss", "KeyBlock", "SimCSELoss", "info_nce", "register_loss", "symmetric_info_nce"]
