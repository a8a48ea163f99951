"""The losses a recipe or a composite term names, by name; :data:`augcse.losses.LOSSES` adds ``composite``.

The composite reads its terms from here, so it imports neither the package that registers it nor itself.
"""

from __future__ import annotations

from collections.abc import Callable

from augcse.losses.augcse import AugCSELoss
from augcse.losses.base import RoleLoss
from augcse.losses.cards import CARDSLoss
from augcse.losses.consert import ConSERTLoss
from augcse.losses.diffcse import DiffCSELoss
from augcse.losses.contrastive_tension import CTOriginalLoss
from augcse.losses.declutr import DeCLUTRLoss
from augcse.losses.esimcse import ESimCSELoss
from augcse.losses.mlm import MLMLoss
from augcse.losses.peers import PEERS
from augcse.losses.promptbert import PromptBERTLoss
from augcse.losses.sccl import SCCLLoss
from augcse.losses.sda import SDALoss
from augcse.losses.simcse import SimCSELoss
from augcse.losses.vascl import VaSCLLoss

TERMS: dict[str, Callable[..., RoleLoss]] = {
    "simcse": SimCSELoss,
    "augcse": AugCSELoss,
    "sda": SDALoss,
    "vascl": VaSCLLoss,
    "cards": CARDSLoss,
    "esimcse": ESimCSELoss,
    "declutr": DeCLUTRLoss,
    "ct_original": CTOriginalLoss,  # Carlsson et al.'s two encoders and binary pairs
    "promptbert": PromptBERTLoss,
    "consert": ConSERTLoss,
    "diffcse": DiffCSELoss,
    "mlm": MLMLoss,
    "sccl": SCCLLoss,  # clustering-aware: instance-wise contrast plus K trained centroids
    **PEERS,  # sentence-transformers' TSDAE and CT
}
