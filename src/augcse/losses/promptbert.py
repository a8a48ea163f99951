"""PromptBERT (Jiang et al., EMNLP 2022), unsupervised: SimCSE's objective on prompt embeddings.

The prompt itself is the model's pooler (:class:`augcse.models.prompt.PromptTransformer`, saved with the
model); this loss adds the two training-only parts of the authors' ``cl_forward``: the positive (and any
hard negative) is the sentence through the pooler's second template, and each embedding is template-denoised,
``h_mask(sentence) − h_mask(template with L empty positions)``, with gradients through both. The InfoNCE is
SimCSE's (τ 0.05, the train-only MLP after the subtraction).

Losses do not import the models layer, so the pooler is reached through the model's first module: a model
without it is refused in one line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from torch import Tensor

from augcse.core.loss_parameters import PromptBERTParameters
from augcse.losses.base import DROPOUT_COPY
from augcse.losses.simcse import SimCSELoss

SECOND = "@template2"  # suffix of a source embedded through the second template


class PromptBERTLoss(SimCSELoss):
    """SimCSE's InfoNCE between a sentence in template 1 and the same sentence in template 2::

        h(x, T) = h_[MASK](T(x)) − h_[MASK](T(∅))          (template denoising, ``denoise``)
        ℓ_i = −log e^{cos(f(h(x_i,T1)), f(h(x_i,T2)))/τ} / Σ_j e^{cos(f(h(x_i,T1)), f(h(x_j,T2)))/τ}

    ``f`` is the train-only head (SimCSE's MLP, the authors' ``--mlp_only_train``). The model must embed with
    the prompt pooler (:func:`augcse.models.prompt.prompt_model`), whose saved template is T1 and whose
    ``second_template`` is T2.

    Args:
        model: SentenceTransformer whose first module is the prompt pooler.
        denoise: subtract each row's template embedding (its suffix at positions shifted by the sentence's
            length, as the authors' ``get_delta``) in training; skipped when the pooler already denoises.
        different_template: embed the positive and hard negatives through the second template (off: the
            first template twice, two dropout masks).
        temperature: τ (0.05, the authors' ``--temp``).
        head: train-only head after the subtraction (``mlp``: the authors' ``--mlp_only_train``).
        symmetric: as :class:`~augcse.losses.SimCSELoss`.
        hard_negative_weight: as :class:`~augcse.losses.SimCSELoss`.
        gather_across_devices: as :class:`~augcse.losses.SimCSELoss`.
        mini_batch_size: gradient caching, only with ``denoise: false``.

    References:
        - Jiang, Jiao, Huang, Zhang, Wang, Zhuang, Wei, Huang, Deng, Zhang. PromptBERT: Improving BERT Sentence
          Embeddings with Prompts. EMNLP 2022 (arXiv:2201.04337); the authors' code kongds/Prompt-BERT
          (``run.sh`` unsup-bert/unsup-roberta, ``prompt_bert/models.py`` ``cl_forward``, ``train.py``).

    Inputs:
        +-------------------------------------+--------+
        | Texts                               | Labels |
        +=====================================+========+
        | (anchor,)                           | none   |
        +-------------------------------------+--------+
        | (anchor, positive)                  | none   |
        +-------------------------------------+--------+

        As :class:`~augcse.losses.SimCSELoss`; without a ``positive`` column the positive is the anchor's text.

    Relations:
        - :class:`~augcse.losses.SimCSELoss` with the prompt pooler and ``denoise: false, different_template:
          false`` is this loss.
        - Every other augcse loss trains with the prompt pooler as it is (one template, no denoising).

    Example:
        ::

            from datasets import Dataset
            from sentence_transformers import SentenceTransformerTrainer
            from augcse.losses import PromptBERTLoss
            from augcse.models.prompt import prompt_model
            from augcse.assets.resolve import resolve_model

            model = prompt_model(resolve_model("sentence-transformers/all-MiniLM-L6-v2"))
            train = Dataset.from_dict({"anchor": ["The cat sleeps.", "It rains today.", "A man sings."]})
            loss = PromptBERTLoss(model, head="none")
            SentenceTransformerTrainer(model=model, train_dataset=train, loss=loss).train()
    """

    Parameters = PromptBERTParameters

    def __init__(self, model, **params: Any) -> None:
        super().__init__(model, **params)
        self.denoise = bool(self.config.denoise)
        self.different_template = bool(self.config.different_template)
        if not hasattr(self.prompt, "retemplate"):
            raise ValueError("the promptbert loss needs the prompt pooler as the model's first module "
                             "(augcse.models.prompt.prompt_model); this model's is "
                             f"{type(self.prompt).__name__}")

    @property
    def prompt(self):
        model = getattr(self.model, "module", self.model)
        return model[0]

    def from_sources(self, sentence_features: Iterable[dict[str, Tensor]], wanted: Sequence[str],
                     compute: Callable[[dict[str, Tensor], dict[str, dict[str, Tensor]]], dict[str, Tensor]],
                     ) -> dict[str, Tensor]:
        """The positive and negative sources through the second template, then SimCSE's single pass."""
        features = list(sentence_features)
        if not self.different_template:
            return super().from_sources(features, wanted, compute)
        sources = self.sources()
        second = {s for role in ("positive", "negative") for s in sources.get(role, [])}
        by_column = self.by_column(features)
        extra, renamed = {}, []
        for source in wanted:
            if source in second:
                name = source.lstrip(DROPOUT_COPY) + SECOND
                extra[name] = self.prompt.retemplate(by_column[source.lstrip(DROPOUT_COPY)], 1)
                renamed.append(name)
            else:
                renamed.append(source)
        back = dict(zip(renamed, wanted))
        layout, self.layout = self.layout, [*self.columns(), *extra]
        try:
            return super().from_sources([*features, *extra.values()], renamed,
                                        lambda pooled, feats: compute({back[k]: v for k, v in pooled.items()},
                                                                      {back[k]: v for k, v in feats.items()}))
        finally:
            self.layout = layout

    def compute_loss(self, pooled: Mapping[str, Any], labels: Tensor | None = None,
                     features: Mapping[str, Any] | None = None) -> dict[str, Tensor]:
        if self.denoise and not self.prompt.denoise and features is not None:
            pooled = dict(pooled)
            for role, value in pooled.items():
                if isinstance(value, list):
                    pooled[role] = [v - self.delta(f) for v, f in zip(value, features[role])]
                else:
                    pooled[role] = value - self.delta(features[role])
        return super().compute_loss(pooled, labels, features)

    def delta(self, features: Mapping[str, Tensor]) -> Tensor:
        """The template embedding of each row (its template, its sentence length), with gradients."""
        index = features["prompt_template"]
        return self.prompt.template_embeddings(self.prompt.sentence_lengths(features), index)

    def get_config_dict(self) -> dict[str, Any]:
        return {**super().get_config_dict(), "denoise": self.denoise, "different_template": self.different_template}

    @property
    def citation(self) -> str:
        return ("@inproceedings{jiang2022promptbert, title={PromptBERT: Improving BERT Sentence Embeddings with "
                "Prompts}, author={Jiang, Ting and Jiao, Jian and Huang, Shaohan and Zhang, Zihan and Wang, Deqing "
                "and Zhuang, Fuzhen and Wei, Furu and Huang, Haizhen and Deng, Denvy and Zhang, Qi}, "
                "booktitle={EMNLP}, year={2022}}")
