"""What every augcse loss shares: the columns it reads by role, one embedding pass, the train-only head.

The contract (see ``docs/METHODS-IMPLEMENTATION.md``):

* :meth:`ContrastiveLoss.contract` declares, from the constructor parameters alone, the **roles** the
  loss reads (``anchor``, ``positive``, ``negation``…) and its **label space** (AugCSE's augmentation
  types), so a recipe is checked against the views before any model loads;
* :meth:`ContrastiveLoss.bind` maps a dataset's column names onto those roles *by name*, refusing a
  missing or an extra one; a role that is absent never shifts another (an absent positive is a second
  dropout pass of the anchor only where the role says so);
* :meth:`ContrastiveLoss.compute_loss` is the single maths entry: pooled encoder embeddings by role
  (before the head), the labels, and the token features by role. ``forward`` and the composite loss
  both call it.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from sentence_transformers.base.losses.merged_forward import embed_columns

from augcse.core.loss_parameters import ContrastiveParameters
from augcse.losses.gradcache import cached_components
from augcse.losses.heads import build_head
from augcse.core.schema import Section, validate

DROPOUT_COPY = "~"
LABEL = "label"  # the column sentence-transformers hands to a loss as ``labels``


class RoleError(ValueError):
    """A dataset's columns do not match the roles a loss reads; the message is one line."""


@dataclass(frozen=True)
class Role:
    """A text input a loss reads.

    ``many``: several columns ``name``, ``name_2``, ``name_3``… (extra negatives); ``fallback``: the
    source used when the dataset has no such column (``~anchor``: a second dropout pass of the anchor);
    an optional role without a fallback is simply left out. ``from_column: False`` marks a role the
    method always takes from its fallback (AugCSE's and VaSCL's dropout positive): a dataset column of
    that name is not read (a composite may still map the role elsewhere with ``inputs``).
    """

    name: str
    required: bool = True
    many: bool = False
    fallback: str | None = None
    from_column: bool = True

    def owns(self, column: str) -> bool:
        if not self.from_column:
            return False
        return column == self.name or (self.many and re.fullmatch(rf"{re.escape(self.name)}_\d+", column) is not None)


@dataclass(frozen=True)
class LabelSpace:
    """The classes of the ``label`` column: their number and, where known, their names (for checks)."""

    size: int
    names: tuple[str, ...] | None = None
    spec: Any = None  # how the recipe wrote it (e.g. ``8-2-aug``), to pass it on unchanged


@dataclass(frozen=True)
class Contract:
    """The roles a configured loss reads and its label space (``None``: it reads no labels)."""

    roles: tuple[Role, ...]
    labels: LabelSpace | None = None
    default: tuple[str, ...] = ("anchor",)  # the columns assumed when the loss is used without bind()

    def default_columns(self) -> list[str]:
        return list(self.default)

    def assign(self, columns: Sequence[str], has_label: bool, who: str = "the loss") -> dict[str, list[str]]:
        """Role → its sources (dataset columns, or the fallback); one-line :class:`RoleError` otherwise."""
        names = ", ".join(r.name + ("…" if r.many else "") for r in self.roles)
        sources: dict[str, list[str]] = {r.name: [] for r in self.roles}
        for column in columns:
            role = next((r for r in self.roles if r.owns(column)), None)
            if role is None:
                raise RoleError(f"column {column!r} is not a role {who} reads (it reads: {names}); "
                                "drop it, rename it in the view, or map it with the composite's inputs")
            if sources[role.name] and not role.many:
                raise RoleError(f"role {role.name!r} of {who} has two columns")
            sources[role.name].append(column)
        for role in self.roles:
            if not sources[role.name] and role.fallback is not None:
                sources[role.name] = [role.fallback]
            elif not sources[role.name] and role.required:
                raise RoleError(f"{who} reads the role {role.name!r} but the dataset has no such column "
                                f"(columns: {', '.join(columns)}); add a view that writes it")
        if has_label and self.labels is None:
            raise RoleError(f"the dataset has a {LABEL!r} column that {who} does not read; leave it out of the view")
        if not has_label and self.labels is not None:
            raise RoleError(f"{who} reads the {LABEL!r} column ({self.labels.size} classes), which the dataset lacks")
        return {role: src for role, src in sources.items() if src}


def check_label_space(want: LabelSpace, have: LabelSpace, who: str = "the loss") -> None:
    """One line when the loss's label space and the view's differ (one set of classes, stated once).

    Names compare case-insensitively: the loss keeps names as written, the view spells them as registered.
    """
    if want.size != have.size or (want.names and have.names and
                                  [n.lower() for n in want.names] != [n.lower() for n in have.names]):
        raise RoleError(f"{who} expects {want.size} label classes ({want.spec!r}) but the view writes "
                        f"{have.size} ({have.spec!r}); state the set once, in the view")


def embed_sources(model, by_column: Mapping[str, dict[str, Tensor]], sources: Iterable[str]) -> dict[str, Tensor]:
    """Pooled embeddings of each distinct source in one merged forward pass (``~col``: another dropout pass)."""
    unique = list(dict.fromkeys(sources))
    pooled = embed_columns(model, [by_column[s.lstrip(DROPOUT_COPY)] for s in unique], separate_first=False)
    return dict(zip(unique, pooled))


def by_role(sources: Mapping[str, list[str]], roles: Sequence[Role], values: Mapping[str, Any]) -> dict[str, Any]:
    """Values of each role's sources: one value, or a list for a ``many`` role."""
    many = {r.name for r in roles if r.many}
    return {role: [values[s] for s in src] if role in many else values[src[0]] for role, src in sources.items()}


class RoleLoss(nn.Module):
    """The contract every augcse loss follows: roles by name, one embedding pass, :meth:`compute_loss`.

    Subclasses define :meth:`contract_for` (roles and label space from the constructor parameters) and
    :meth:`compute_loss` (the maths, from pooled embeddings by role), returning a dict of named
    components; the trainer sums and logs them.
    """

    Parameters: ClassVar[type[Section] | None] = None  # the declared settings (augcse.core.loss_parameters)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """The constructor's signature is the declared parameters: one declaration for help, docs and checks."""
        super().__init_subclass__(**kwargs)
        if "Parameters" in cls.__dict__ and cls.Parameters is not None:
            model = inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD)
            declared = inspect.signature(cls.Parameters).parameters.values()
            cls.__signature__ = inspect.Signature([model, *declared])

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model
        self.layout: list[str] | None = None  # the dataset's text columns, set by bind()
        self.mini_batch_size: int | None = None  # gradient caching (augcse.losses.gradcache) when set

    def settings(self, params: Mapping[str, Any]) -> Any:
        """``params`` validated by :attr:`Parameters`; one line naming the parameter otherwise."""
        return validate(self.Parameters, params, subject=f"{type(self).__name__} parameter")

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        """Roles and label space for these constructor parameters (defaults filled in); no model needed."""
        raise NotImplementedError

    @functools.cached_property
    def contract(self) -> Contract:
        return self.contract_for(self.get_config_dict())

    def bind(self, columns: Sequence[str]) -> None:
        """Read the dataset's columns (in the order the trainer passes them) by name; ``label`` is not a text column."""
        text = [c for c in columns if c != LABEL]
        self.contract.assign(text, LABEL in columns, type(self).__name__)
        self.layout = text

    def columns(self) -> list[str]:
        """The text columns of a batch: the bound layout, or the contract's default columns when unbound."""
        return self.layout or self.contract.default_columns()

    def sources(self) -> dict[str, list[str]]:
        """Role → its sources (columns or ``~anchor``) under :meth:`columns`."""
        contract = self.contract
        return contract.assign(self.columns(), contract.labels is not None, type(self).__name__)

    def by_column(self, sentence_features: Iterable[dict[str, Tensor]]) -> dict[str, dict[str, Tensor]]:
        """The batch's tokenised columns by name (the bound layout); one line when the counts differ."""
        features = list(sentence_features)
        layout = self.columns()
        if len(features) != len(layout):
            raise RoleError(f"{type(self).__name__} reads the columns {layout} but the batch has {len(features)} "
                            "text columns; call loss.bind(dataset.column_names) with the training dataset")
        return dict(zip(layout, features))

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        sources = self.sources()
        roles = self.contract.roles
        return self.from_sources(sentence_features, [s for src in sources.values() for s in src],
                                 lambda pooled, features: self.compute_loss(
                                     by_role(sources, roles, pooled), labels, by_role(sources, roles, features)))

    def from_sources(self, sentence_features: Iterable[dict[str, Tensor]], wanted: Sequence[str],
                     compute: Callable[[dict[str, Tensor], dict[str, dict[str, Tensor]]], dict[str, Tensor]],
                     ) -> dict[str, Tensor]:
        """``compute(pooled by source, token features by source)`` for the ``wanted`` sources of this batch:
        one merged embedding pass, or mini-batch by mini-batch with gradient caching (``mini_batch_size``)."""
        by_column = self.by_column(sentence_features)
        unique = list(dict.fromkeys(wanted))
        features = {s: by_column[s.lstrip(DROPOUT_COPY)] for s in unique}
        if self.mini_batch_size is None or not torch.is_grad_enabled():
            return compute(embed_sources(self.model, by_column, unique), features)
        return cached_components(self, self.model, features, lambda pooled: compute(pooled, features),
                                 self.mini_batch_size)

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        """The loss from the encoder's pooled embeddings by role (any head is applied here)."""
        raise NotImplementedError

    def prepare(self, dataset) -> None:
        """What the loss computes from the training dataset before the first step (SCCL's starting centroids);
        nothing for most losses. :func:`augcse.losses.bind_dataset` calls it once the columns are bound."""

    def pop_metrics(self) -> dict[str, float]:
        """Training metrics gathered since the last call (logged beside the loss components)."""
        return {}

    def get_config_dict(self) -> dict[str, Any]:
        return {}


class ContrastiveLoss(RoleLoss):
    """A :class:`RoleLoss` with a train-only head and a temperature.

    Args:
        model: the SentenceTransformer being trained.
        temperature: τ of the InfoNCE softmax.
        head: train-only head name (``none``, ``mlp``, ``bn``, ``vascl``), see :mod:`augcse.losses.heads`.
        gather_across_devices: gather in-batch keys across processes (with gradients).
        mini_batch_size: embed this many texts at a time and cache the gradients (GradCache): the same
            gradient as the whole batch at once, with one mini-batch of activations in memory.
    """

    Parameters = ContrastiveParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model)
        self.config = self.settings(params)
        self.temperature = float(self.config.temperature)
        self.head_name = self.config.head or "none"
        self.head = build_head(self.head_name, model.get_embedding_dimension())
        self.gather_across_devices = self.config.gather_across_devices
        self.mini_batch_size = self.config.mini_batch_size

    def apply_head(self, views: Sequence[Tensor]) -> list[Tensor]:
        """The train-only head over all views at once (batch-norm statistics cover the whole batch),
        split back into one tensor per view."""
        return list(torch.split(self.head(torch.cat(list(views))), [v.size(0) for v in views]))

    def get_config_dict(self) -> dict[str, Any]:
        config = {"temperature": self.temperature, "head": self.head_name,
                  "gather_across_devices": self.gather_across_devices}
        return config if self.mini_batch_size is None else {**config, "mini_batch_size": self.mini_batch_size}
