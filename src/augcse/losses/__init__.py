"""augcse losses: one file per paper, all on :mod:`augcse.losses.infonce`; a registry for recipes."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from augcse.losses.base import ContrastiveLoss
from augcse.losses.infonce import KeyBlock, info_nce, symmetric_info_nce
from augcse.losses.simcse import SimCSELoss
from augcse.losses.augcse import AugCSELoss
from augcse.losses.cards import CARDSLoss
from augcse.losses.composite import CompositeLoss
from augcse.losses.sda import SDALoss
from augcse.losses.vascl import VaSCLLoss

LOSSES: dict[str, Callable[..., nn.Module]] = {
    "simcse": SimCSELoss,
    "augcse": AugCSELoss,
    "sda": SDALoss,
    "vascl": VaSCLLoss,
    "cards": CARDSLoss,
    "composite": CompositeLoss,
}


def register_loss(name: str, factory: Callable[..., nn.Module]) -> None:
    """Make a loss available to recipes under ``name``."""
    if name in LOSSES:
        raise ValueError(f"loss {name!r} is registered twice")
    LOSSES[name] = factory


__all__ = ["LOSSES", "AugCSELoss", "CARDSLoss", "CompositeLoss", "ContrastiveLoss", "KeyBlock", "SDALoss", "SimCSELoss",
           "VaSCLLoss", "info_nce", "register_loss", "symmetric_info_nce"]
