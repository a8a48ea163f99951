"""augcse losses: one file per paper, all on :mod:`augcse.losses.infonce`; a registry for recipes.

Every loss follows :class:`~augcse.losses.base.RoleLoss`: it reads the dataset's columns by role and
states its label space, so :func:`validate_loss` checks a recipe against the columns its views will
write before any model loads, and :func:`bind_dataset` checks the built dataset before training.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from augcse.core.loss_parameters import LOSS_PARAMETERS, loss_settings
from augcse.losses.augcse import AugCSELoss
from augcse.losses.base import LABEL, Contract, ContrastiveLoss, LabelSpace, Role, RoleError, RoleLoss, check_label_space
from augcse.losses.cards import CARDSLoss
from augcse.losses.composite import CompositeLoss
from augcse.losses.consert import ConSERTLoss
from augcse.losses.diffcse import DiffCSELoss
from augcse.losses.contrastive_tension import CTOriginalLoss
from augcse.losses.declutr import DeCLUTRLoss
from augcse.losses.esimcse import ESimCSELoss
from augcse.losses.infonce import KeyBlock, contrast, info_nce, symmetric_info_nce
from augcse.losses.mlm import MLMLoss
from augcse.losses.peers import CTLoss, TSDAELoss
from augcse.losses.promptbert import PromptBERTLoss
from augcse.losses.registry import TERMS
from augcse.losses.sccl import SCCLLoss, kmeans_centroids
from augcse.losses.sda import SDALoss
from augcse.losses.simcse import SimCSELoss
from augcse.losses.vascl import VaSCLLoss
from augcse.core.schema import RecipeError

LOSSES: dict[str, Callable[..., RoleLoss]] = {**TERMS, "composite": CompositeLoss}
# the constructor parameter that states a loss's label space; left out of a recipe, it is passed on
# from the view that writes the label column (one source of truth)
LABEL_PARAMETERS: dict[str, str] = {"augcse": "augmentations"}


def register_loss(name: str, factory: Callable[..., RoleLoss]) -> None:
    """Make a loss available to recipes under ``name``."""
    if name in LOSSES:
        raise ValueError(f"loss {name!r} is registered twice")
    LOSSES[name] = factory
    LOSS_PARAMETERS[name] = getattr(factory, "Parameters", None)  # recipes know its name and parameters


def _pass_on_labels(name: str, params: dict[str, Any], produced: Mapping[str, Any]) -> dict[str, Any]:
    label = produced.get(LABEL)
    key = LABEL_PARAMETERS.get(name)
    if key and params.get(key) is None and isinstance(label, Mapping) and label.get("spec") is not None:
        params = {**params, key: label["spec"]}
    if name == "composite" and isinstance(params.get("terms"), list):
        terms = [{**t, "params": _pass_on_labels(t["loss"], dict(t.get("params") or {}), produced)}
                 if isinstance(t, dict) and t.get("loss") in LABEL_PARAMETERS else t for t in params["terms"]]
        params = {**params, "terms": terms}
    return params


def _parameters(name: str):
    return getattr(LOSSES[name], "Parameters", None)


def validate_loss(name: str, params: Mapping[str, Any], produced: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Check a recipe's loss against its declared parameters and the columns the views will write.

    ``produced``: column → ``None`` (text) or ``{size, names, spec}`` (a label column), as
    :func:`augcse.text.views.produced_columns` gives it; ``None`` skips the column checks. Returns the
    parameters with every default filled in and the view's label set passed on where the recipe leaves
    it out. Raises a one-line ``ValueError`` (:class:`~augcse.core.schema.RecipeError` or :class:`RoleError`).
    """
    factory = LOSSES[name]  # the name was checked by the recipe schema
    params = _pass_on_labels(name, dict(params), produced or {})
    filled = loss_settings(name, params, lookup=_parameters)
    try:
        contract = factory.contract_for(filled)
    except (ValueError, KeyError) as exc:
        raise RecipeError(f"recipe key 'loss.params': {exc}") from None
    if produced is not None:
        columns = [c for c in produced if c != LABEL]
        contract.assign(columns, LABEL in produced, f"loss {name!r}")
        label = produced.get(LABEL)
        if contract.labels is not None and isinstance(label, Mapping):
            check_label_space(contract.labels, LabelSpace(label["size"], label.get("names"), label.get("spec")),
                              f"loss {name!r}")
    return filled


def bind_dataset(loss: RoleLoss, dataset) -> None:
    """Bind the built training dataset to the loss by column name, check its labels lie in the label space, and
    let the loss compute what it needs from the texts before training (:meth:`RoleLoss.prepare`)."""
    loss.bind(dataset.column_names)
    labels = loss.contract.labels
    if labels is not None and labels.size and len(dataset):
        values = dataset.with_format(None)[LABEL]
        low, high = min(values), max(values)
        if low < 0 or high >= labels.size:
            raise RoleError(f"the {LABEL!r} column holds {low}…{high} but the loss has {labels.size} classes "
                            f"({labels.spec!r}); build the view and the loss from one augmentation set")
    loss.prepare(dataset)


__all__ = ["LABEL", "LOSSES", "AugCSELoss", "CARDSLoss", "CTLoss", "CTOriginalLoss", "CompositeLoss", "ConSERTLoss",
           "Contract", "ContrastiveLoss", "DeCLUTRLoss", "DiffCSELoss", "ESimCSELoss", "MLMLoss", "PromptBERTLoss",
           "KeyBlock", "LabelSpace", "Role", "RoleError", "RoleLoss", "SCCLLoss", "SDALoss", "SimCSELoss", "TSDAELoss", "VaSCLLoss",
           "bind_dataset",
           "contrast", "info_nce", "kmeans_centroids", "symmetric_info_nce", "validate_loss"]
