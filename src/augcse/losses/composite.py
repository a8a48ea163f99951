"""Compose objectives of different papers: registered losses as weighted terms over one embedding pass.

A recipe names the terms; each reads some of the dataset's columns (``~col`` is a second dropout pass of
``col``). Every column or dropout copy any term needs is embedded once, in one merged forward pass, and
each term applies its own train-only head and maths to its share, so the total is exactly the weighted
sum of the terms' own losses on those embeddings. Components are logged as ``<term>/<component>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from torch import Tensor, nn

from sentence_transformers.base.losses.merged_forward import embed_columns

DROPOUT_COPY = "~"


class CompositeLoss(nn.Module):
    """A weighted sum of registered losses computed from one shared embedding pass.

    Args:
        model: SentenceTransformer to train (shared by every term).
        columns: the dataset's text columns in order (``label`` excluded), e.g. ``[anchor, positive, negation]``.
        terms: a list of ``{loss: <registered name>, name: <log prefix, default the loss name>, weight: 1.0,
            inputs: [columns, ``~col`` for a dropout copy], params: {…}}``; ``inputs`` defaults to the term's
            ``default_inputs()``.

    A term may define ``loss_from_pooled(pooled, labels, features)`` when it needs the embeddings before its
    head (VaSCL perturbs them) or the token features (CARDS' own-text mask); otherwise its head is applied
    over the concatenation of its inputs and ``compute_loss_from_embeddings`` is called, as in its own
    ``forward``. All terms receive the same ``labels``.

    References:
        - METHODS.md §5 (roles, one contrastive formulation, the trainer contract).

    Inputs:
        +-------------------------------------------+----------------------------+
        | Texts                                     | Labels                     |
        +===========================================+============================+
        | the columns named in ``columns``           | passed to every term       |
        +-------------------------------------------+----------------------------+

    Relations:
        - With one term of weight 1 it equals that loss on the same embeddings.

    Example:
        ::

            from augcse.losses import CompositeLoss
            loss = CompositeLoss(model, columns=["anchor", "positive", "negation", "retrieved"], terms=[
                {"loss": "sda", "inputs": ["anchor", "positive", "negation"]},
                {"loss": "cards", "inputs": ["anchor", "positive", "retrieved"], "weight": 0.5},
            ])
    """

    def __init__(self, model, columns: Sequence[str], terms: Sequence[dict[str, Any]]) -> None:
        super().__init__()
        from augcse.losses import LOSSES

        if not terms:
            raise ValueError("a composite loss needs at least one term")
        self.model = model
        self.columns = list(columns)
        self.terms = nn.ModuleDict()
        self.specs: list[dict[str, Any]] = []
        for spec in terms:
            unknown = set(spec) - {"loss", "name", "weight", "inputs", "params"}
            if unknown or "loss" not in spec:
                raise ValueError(f"composite term {spec!r}: needs 'loss'; allowed keys: loss, name, weight, inputs, params")
            if spec["loss"] not in LOSSES or spec["loss"] == "composite":
                raise ValueError(f"composite term: unknown loss {spec['loss']!r}; choose one of {', '.join(LOSSES)}")
            name = spec.get("name", spec["loss"])
            if name in self.terms:
                raise ValueError(f"composite term name {name!r} is used twice; give each a distinct 'name'")
            term = LOSSES[spec["loss"]](model, **spec.get("params", {}))
            term._modules.pop("model", None)  # share the model without registering (and saving) it per term
            term.__dict__["model"] = model
            inputs = list(spec.get("inputs") or self._default_inputs(term, name))
            for source in inputs:
                if source.lstrip(DROPOUT_COPY) not in self.columns:
                    raise ValueError(f"composite term {name!r} reads {source!r}, which is not among columns {self.columns}")
            self.terms[name] = term
            self.specs.append({"name": name, "loss": spec["loss"], "weight": float(spec.get("weight", 1.0)),
                               "inputs": inputs, "params": dict(spec.get("params", {}))})
        self.sources = list(dict.fromkeys(s for spec in self.specs for s in spec["inputs"]))

    @staticmethod
    def _default_inputs(term: nn.Module, name: str) -> list[str]:
        default = getattr(term, "default_inputs", None)
        if default is None:
            raise ValueError(f"composite term {name!r}: give its 'inputs' (e.g. [anchor, ~anchor])")
        return default()

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> dict[str, Tensor]:
        features = list(sentence_features)
        if len(features) != len(self.columns):
            raise ValueError(f"the composite loss expects the columns {self.columns} but the batch has "
                             f"{len(features)} text columns; set loss.params.columns to the dataset's columns")
        by_column = dict(zip(self.columns, features))
        source_features = [by_column[s.lstrip(DROPOUT_COPY)] for s in self.sources]
        pooled = dict(zip(self.sources, embed_columns(self.model, source_features, separate_first=False)))
        return self.compute_loss_from_pooled(pooled, labels, by_column)

    def compute_loss_from_pooled(self, pooled: dict[str, Tensor], labels: Tensor | None = None,
                                 features: dict[str, dict[str, Tensor]] | None = None) -> dict[str, Tensor]:
        """Every term on its inputs' pooled embeddings; returns weighted components named ``term/component``."""
        out: dict[str, Tensor] = {}
        for spec in self.specs:
            term = self.terms[spec["name"]]
            inputs = [pooled[s] for s in spec["inputs"]]
            term_features = [features[s.lstrip(DROPOUT_COPY)] for s in spec["inputs"]] if features else None
            if hasattr(term, "loss_from_pooled"):
                parts = term.loss_from_pooled(inputs, labels, term_features)
            else:
                parts = term.compute_loss_from_embeddings(term.apply_head(inputs), labels)
            if isinstance(parts, Tensor):
                parts = {"loss": parts}
            for key, value in parts.items():
                out[f"{spec['name']}/{key}"] = spec["weight"] * value
        return out

    def pop_metrics(self) -> dict[str, float]:
        metrics = {}
        for name, term in self.terms.items():
            pop = getattr(term, "pop_metrics", None)
            if pop is not None:
                metrics.update({f"{name}/{k}": v for k, v in pop().items()})
        return metrics

    def get_config_dict(self) -> dict[str, Any]:
        return {"columns": self.columns,
                "terms": [{**spec, "config": self.terms[spec["name"]].get_config_dict()} for spec in self.specs]}
