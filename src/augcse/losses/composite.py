"""Compose objectives of different papers: registered losses as weighted terms over one embedding pass.

A recipe names the terms; each term reads its roles from the dataset's columns by name (a role
``positive`` reads the column ``positive``), unless its ``inputs`` map a role onto another column or
onto ``~col`` (a second dropout pass of ``col``). Every column or dropout copy any term needs is
embedded once, in one merged forward pass, and each term's :meth:`compute_loss` applies its own
train-only head and maths to its share, so the total is exactly the weighted sum of the terms' own
losses on those embeddings. Components are logged as ``<term>/<component>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from torch import Tensor, nn

from augcse.core.loss_parameters import CompositeParameters, loss_settings
from augcse.losses.base import (
    DROPOUT_COPY, LABEL, Contract, Role, RoleError, RoleLoss, by_role, check_label_space,
)
from augcse.losses.registry import TERMS


def _parameters(name: str):
    """A loss's declared parameters: the composite's own, or a term's (the registered class's, so the library's
    losses are covered)."""
    return CompositeParameters if name == "composite" else TERMS[name].Parameters


def term_sources(contract: Contract, inputs: Mapping[str, Any], columns: Sequence[str], who: str) -> dict[str, list[str]]:
    """A term's role → sources among ``columns``: its ``inputs`` first, then the same-named columns, then fallbacks."""
    known = {r.name for r in contract.roles}
    for role in inputs:
        if role not in known:
            raise RoleError(f"{who}: 'inputs' names the role {role!r}, which this loss does not read "
                            f"(it reads: {', '.join(sorted(known))})")
    out: dict[str, list[str]] = {}
    for role in contract.roles:
        given = inputs.get(role.name)
        if given is not None:
            src = [given] if isinstance(given, str) else list(given)
        else:
            src = [c for c in columns if role.owns(c)] or ([role.fallback] if role.fallback else [])
        for s in src:
            if s.lstrip(DROPOUT_COPY) not in columns:
                raise RoleError(f"{who} reads {s!r} for its role {role.name!r}, but the dataset has no column "
                                f"{s.lstrip(DROPOUT_COPY)!r} (columns: {', '.join(columns)})")
        if not src and role.required:
            raise RoleError(f"{who} reads the role {role.name!r} but the dataset has no such column "
                            f"(columns: {', '.join(columns)}); add a view that writes it or map it with 'inputs'")
        if src:
            out[role.name] = src
    return out


class CompositeLoss(RoleLoss):
    """A weighted sum of registered losses computed from one shared embedding pass.

    Args:
        model: SentenceTransformer to train (shared by every term).
        mini_batch_size: gradient caching: embed this many texts at a time (the gradient stays the whole
            batch's; less memory, one more forward pass; docs/TRAINING.md). ``None``: the whole batch at once.
        terms: a list of ``{loss: <registered name>, name: <log prefix, default the loss name>, weight: 1.0,
            inputs: {role: column or ``~column``}, params: {…}}``; a role without an entry in ``inputs`` reads
            the column of its own name, else its fallback (a dropout copy of the anchor where the loss says so).
        columns: the dataset's text columns, for use without :meth:`bind` (a recipe binds the built dataset).

    References:
        - docs/PAPERS.md §6 (roles, one contrastive formulation, the trainer contract).

    Inputs:
        +-------------------------------------------+----------------------------+
        | Texts                                     | Labels                     |
        +===========================================+============================+
        | every column some term reads, by name     | to the terms that read it  |
        +-------------------------------------------+----------------------------+

    Relations:
        - With one term of weight 1 it equals that loss on the same embeddings.

    Example:
        ::

            from augcse import load_model
            from augcse.losses import CompositeLoss

            model = load_model("sentence-transformers/all-MiniLM-L6-v2")
            loss = CompositeLoss(model, terms=[
                {"loss": "sda"},                                            # anchor, positive, negation
                {"loss": "cards", "inputs": {"positive": "~anchor"}, "weight": 0.5},  # anchor, retrieved
            ])
            loss.bind(["anchor", "positive", "negation", "retrieved"])
    """

    Parameters = CompositeParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model)
        config = loss_settings("composite", params, "", f"{type(self).__name__} parameter", _parameters)
        columns = config["columns"]
        self.terms = nn.ModuleDict()
        self.specs: list[dict[str, Any]] = []
        for spec in config["terms"]:
            term = TERMS[spec["loss"]](model, **spec["params"])
            term._modules.pop("model", None)  # share the model without registering (and saving) it per term
            term.__dict__["model"] = model
            self.terms[spec["name"]] = term
            self.specs.append({**spec, "weight": float(spec["weight"])})
        self.initial_columns = list(columns) if columns is not None else None
        self.mini_batch_size = config.get("mini_batch_size")
        self.contract = self.contract_for(config)
        if columns is not None:  # text columns; the label column goes with them when a term reads it
            self.bind([*columns, *([LABEL] if self.contract.labels is not None else [])])

    @classmethod
    def contract_for(cls, params: Mapping[str, Any]) -> Contract:
        """One role per column some term reads (required when a term cannot do without it); the label space
        of the terms that read labels (they must agree)."""
        roles: dict[str, Role] = {}
        labels = None
        for index, spec in enumerate(params.get("terms") or []):
            factory = TERMS[spec["loss"]]
            where = f"loss.params.terms[{index}].params"
            contract = factory.contract_for(loss_settings(spec["loss"], spec.get("params") or {}, where,
                                                          lookup=_parameters))
            inputs = spec.get("inputs", {})
            for role in contract.roles:
                given = inputs.get(role.name)
                sources = [given] if isinstance(given, str) else list(given or [])
                for source in sources or [role.name]:
                    column = source.lstrip(DROPOUT_COPY)
                    need = role.required or bool(given)
                    many = role.many and not given
                    previous = roles.get(column)
                    roles[column] = Role(column, need or bool(previous and previous.required),
                                         many or bool(previous and previous.many))
            if contract.labels is not None:
                if labels is not None:
                    check_label_space(labels, contract.labels, f"composite term {spec.get('name') or spec['loss']!r}")
                labels = contract.labels
        return Contract(tuple(roles.values()), labels, tuple(r for r in roles if roles[r].required))

    def bind(self, columns: Sequence[str]) -> None:
        super().bind(columns)
        for spec in self.specs:
            self._sources(spec)  # refuse a term that cannot read its roles, now rather than at the first batch

    def _sources(self, spec: dict[str, Any]) -> dict[str, list[str]]:
        term = self.terms[spec["name"]]
        return term_sources(term.contract, spec["inputs"], self.columns(), f"composite term {spec['name']!r}")

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        sources = {spec["name"]: self._sources(spec) for spec in self.specs}
        return self.from_sources(sentence_features, [s for src in sources.values() for v in src.values() for s in v],
                                 lambda pooled, features: self.compute_loss(pooled, labels, features))

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        """Every term on its roles' pooled embeddings (``pooled`` by source); weighted components ``term/component``."""
        out: dict[str, Tensor] = {}
        for spec in self.specs:
            term = self.terms[spec["name"]]
            sources = self._sources(spec)
            roles = term.contract.roles
            term_labels = labels if term.contract.labels is not None else None
            parts = term.compute_loss(by_role(sources, roles, pooled), term_labels,
                                      by_role(sources, roles, features) if features else None)
            for key, value in parts.items():
                out[f"{spec['name']}/{key}"] = spec["weight"] * value
        return out

    def pop_metrics(self) -> dict[str, float]:
        return {f"{name}/{k}": v for name, term in self.terms.items() for k, v in term.pop_metrics().items()}

    def get_config_dict(self) -> dict[str, Any]:
        config = {"columns": self.initial_columns,
                  "terms": [{**spec, "config": self.terms[spec["name"]].get_config_dict()} for spec in self.specs]}
        return config if self.mini_batch_size is None else {**config, "mini_batch_size": self.mini_batch_size}


__all__ = ["CompositeLoss", "term_sources", "LABEL"]
