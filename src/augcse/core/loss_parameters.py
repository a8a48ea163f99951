"""The parameters of every registered loss, declared once with their types and ranges, importable without torch.

A loss class reads its settings from its :class:`~augcse.core.schema.Section` here (``SimCSELoss.Parameters``)
and its constructor's signature is this declaration, so ``SimCSELoss(model, temperature=-1)`` and a
recipe's ``loss.params.temperature: -1`` are refused by the same field, in the same words, and a recipe
is refused before torch loads. The roles a loss reads stay with its class (they need no model either,
but they are the loss's maths, not its settings).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from augcse.core.names import suggest
from augcse.core.schema import (
    FieldsError, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, Probability, RecipeError, Section,
    Temperature,
    validate,
)

HeadName = Literal["none", "mlp", "bn", "vascl", "sccl"]  # the train-only heads of augcse.losses.heads.HEADS


class ContrastiveParameters(Section):
    """What every contrastive loss shares: τ, the train-only head, gathering across processes."""

    temperature: Temperature = 0.05
    head: HeadName | None = "none"
    gather_across_devices: bool = True
    # gradient caching: embed this many texts at a time; the gradient is the whole batch's (None: all at once)
    mini_batch_size: PositiveInt | None = None


class SimCSEParameters(ContrastiveParameters):
    symmetric: bool = False
    hard_negative_weight: float = 0.0
    # the other rows' embeddings of the query's own view are negatives too (NT-Xent: 2M − 1 candidates)
    same_view_negatives: bool = False


class SDAParameters(ContrastiveParameters):
    # δ relaxes the negation (it is pushed away less than an ordinary negative), so it is never negative
    margin: NonNegativeFloat = 0.5
    neg_block: Literal["diag", "all"] = "diag"
    head: HeadName | None = "bn"
    symmetric: bool = False


class VaSCLParameters(ContrastiveParameters):
    topk: PositiveInt = 16
    eps: PositiveFloat = 15.0
    xi: PositiveFloat | None = None
    detach: bool = True
    clean_gradient: bool = False
    head: HeadName | None = "vascl"
    # the authors' code where the paper differs: uniform start, dot-product neighbours, one ascent step
    noise: Literal["uniform", "gaussian"] = "uniform"
    similarity: Literal["dot", "cosine"] = "dot"
    ascent_steps: PositiveInt = 1


class CARDSParameters(ContrastiveParameters):
    head: HeadName | None = "mlp"
    mask_own_text: bool = True
    symmetric: bool = False

    @model_validator(mode="after")
    def _mask_needs_one_way(self) -> CARDSParameters:
        if self.symmetric and self.mask_own_text:
            raise FieldsError(("symmetric", "mask_own_text"),
                              "the symmetric form has no own-text mask; set mask_own_text: false with symmetric: true")
        return self


class ESimCSEParameters(ContrastiveParameters):
    # SimCSE's train-only MLP on [CLS] (the authors' run.sh: --pooler_type cls --mlp_only_train)
    head: HeadName | None = "mlp"
    # θ_m ← m·θ_m + (1 − m)·θ each training forward (ESimCSE §3.2, m = 0.995); 0 copies the encoder each step
    momentum: Annotated[float, Field(ge=0, lt=1)] = 0.995
    # momentum-encoded embeddings of earlier batches kept as extra negatives (run.sh neg_size 160 = 2.5 × 64);
    # 0: no queue (SimCSE with the repetition positive)
    queue_size: NonNegativeInt = 160
    # the column the momentum encoder embeds into the queue: the anchor, as the authors' trainer does
    queue_view: Literal["anchor", "positive"] = "anchor"


ConSERTAugmentation = Literal["none", "shuffle", "token_cutoff", "feature_cutoff", "dropout", "adversarial"]
CutoffRate = Annotated[float, Field(gt=0, lt=1)]


class ConSERTParameters(ContrastiveParameters):
    # the authors' scripts/unsup-consert-base.sh: --temperature 0.1 --da_final_1 feature_cutoff
    # --cutoff_rate_final_1 0.2 --da_final_2 shuffle --cl_rate 0.15 --no_dropout
    temperature: Temperature = 0.1
    augment_1: ConSERTAugmentation = "feature_cutoff"
    augment_2: ConSERTAugmentation = "shuffle"
    rate_1: CutoffRate = 0.2  # share of tokens, dimensions or elements a cutoff zeroes (unused by the others)
    rate_2: CutoffRate = 0.2
    adversarial_norm: PositiveFloat = 1.0  # the perturbation's L2 norm per token (--noise_norm)
    scale: PositiveFloat = 0.15  # the factor on the summed two-way NT-Xent (--cl_rate)
    dropout: bool = False  # the encoder's dropout in the loss's passes (--no_dropout: off)

    @model_validator(mode="after")
    def _views_inside_the_loss(self) -> ConSERTParameters:
        if self.augment_1 == self.augment_2 == "adversarial":
            raise FieldsError(("augment_1", "augment_2"),
                              "the adversarial view is computed against the other view; make one of them another augmentation")
        if self.mini_batch_size is not None:
            raise FieldsError(("mini_batch_size",), "ConSERT's views are passes of the encoder inside the loss; they do "
                              "not combine with gradient caching (set mini_batch_size: null)")
        return self


class PromptBERTParameters(SimCSEParameters):
    # the authors' run.sh: --mlp_only_train (SimCSE's MLP on the [MASK] state, training only)
    head: HeadName | None = "mlp"
    # template denoising in training (--mask_embedding_sentence_delta): each embedding less its template's own
    denoise: bool = True
    # the positive (and any hard negative) through the pooler's second template (--..._different_template)
    different_template: bool = True

    @model_validator(mode="after")
    def _denoise_in_one_pass(self) -> PromptBERTParameters:
        if self.denoise and self.mini_batch_size is not None:
            raise FieldsError(("denoise", "mini_batch_size"),
                              "template denoising embeds the templates inside the loss; it does not combine with "
                              "gradient caching (set mini_batch_size: null or denoise: false)")
        return self


class DiffCSEParameters(ContrastiveParameters):
    # the authors' run script: --batchnorm (the 2-layer projection with batch norm, training only)
    head: HeadName | None = "bn"
    # λ of InfoNCE + λ·RTD (run_diffcse.sh: 0.005 for BERT-base and RoBERTa-base)
    rtd_weight: NonNegativeFloat = 0.005
    # share of tokens masked before the generator fills them (run_diffcse.sh: 0.30, for BERT-base)
    mask_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.30
    # the frozen masked-LM that fills the masks (the authors' default; distilroberta-base for RoBERTa)
    generator: str = "distilbert-base-uncased"
    # the authors' code takes the generator's most likely token (argmax); the paper says sampled
    generator_decoding: Literal["argmax", "sample"] = "argmax"
    # the discriminator's [CLS] input: the embedding after the train-only head (the code's default), or before
    condition_on: Literal["head", "encoder"] = "head"

    @model_validator(mode="after")
    def _one_pass(self) -> DiffCSEParameters:
        if self.mini_batch_size is not None:
            raise FieldsError(("mini_batch_size",), "the discriminator reads every token of the batch in one "
                                                    "pass; DiffCSE does not combine with gradient caching "
                                                    "(set mini_batch_size: null)")
        return self


class MLMParameters(Section):
    """The masked-LM auxiliary term (SimCSE App. E.1): masking of the anchor's tokens, its head's start."""

    # share of tokens masked, 80/10/10 [MASK]/random/kept (SimCSE's and BERT's 0.15)
    mask_ratio: Annotated[float, Field(gt=0, lt=1)] = 0.15
    # the MLM head's start: the backbone checkpoint's (SimCSE's BERT code loads cls.predictions), else fresh
    head_init: Literal["checkpoint", "fresh"] = "checkpoint"
    # independent maskings of each anchor (SimCSE's code masks both rows of a pair: the sentence twice)
    copies: PositiveInt = 1
class DeCLUTRParameters(ContrastiveParameters):
    """DeCLUTR's contrastive half: τ 0.05 (the authors' declutr_base.jsonnet), no head (mean pooling)."""


class CTOriginalParameters(Section):
    # negative pairs per positive pair (the authors' negative_k: 7, a batch of 16 = two groups of 8)
    negative_k: PositiveInt = 7
    # mean over the pairs (the authors' Keras BinaryCrossentropy) or sum (sentence-transformers' loss)
    reduction: Literal["mean", "sum"] = "mean"
    # False: both encoders embed with dropout off (the authors call them with training=False)
    dropout: bool = False


class AugCSEParameters(ContrastiveParameters):
    augmentations: PositiveInt | str | list[str] | None = None
    variant: Literal["augcse", "bool", "positive", "none", "negative"] = "augcse"
    discriminator_weight: NonNegativeFloat = 0.005
    grl_alpha: float = -1.0
    head: HeadName | None = "bn"
    symmetric: bool | None = None
    discriminator_layers: PositiveInt = 2
    discriminator_dropout: Probability = 0.2
    discriminator_output_tanh: bool = True
    hard_negative_weight: float = 0.0


# the clustering term's weight in the authors' trainer when the recipe leaves eta out (training.py: 0.5 × the
# KL in train_step_virtual, 1 × in train_step_explicit)
SCCL_CLUSTER_WEIGHT = {"dropout": 0.5, "explicit": 1.0}
# views the authors ran that augcse does not compute inside the loss, and what to do instead
SCCL_OTHER_VIEWS = {
    "contextual": "the authors' contextual substitution rewrites texts with a masked language model (none is "
                  "stored with augcse); write the rewrites as columns positive and positive_2 with an augmentation "
                  "view (e.g. RandomContextualWordAugmentation with a local masked LM) and use views: explicit",
}


def read_centroids(path: str, clusters: int):
    """The float array of K starting centroids in the ``.npy`` file ``path``, checked (one line naming the file
    otherwise): a regular file, no pickled objects, two dimensions, ``clusters`` rows, floats, all finite."""
    import numpy as np

    from augcse.core.paths import expect_file

    file = expect_file(path, "centroids file", "save the K-means centroids with numpy.save")
    try:
        array = np.load(file, allow_pickle=False)
    except ValueError as exc:  # a pickled object array, or not a .npy at all
        raise ValueError(f"centroids file {file}: cannot be read as a plain .npy array ({exc}); save a float array "
                         "with numpy.save") from None
    except (OSError, EOFError) as exc:
        raise ValueError(f"centroids file {file}: cannot be read ({exc}); save a float array with numpy.save") from None
    if not isinstance(array, np.ndarray):  # an .npz archive
        raise ValueError(f"centroids file {file}: is an .npz archive, not one array; save the centroids with numpy.save")
    if array.ndim != 2 or array.shape[0] != clusters or not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"centroids file {file}: holds a {array.dtype} array of shape {array.shape}; it needs floats "
                         f"of shape ({clusters}, d), one row per cluster (clusters: {clusters})")
    if not np.isfinite(array).all():
        raise ValueError(f"centroids file {file}: holds NaN or infinite values; recompute the centroids")
    return array.astype(np.float32, copy=False)


class SCCLParameters(ContrastiveParameters):
    """SCCL's settings; the defaults are the authors' run scripts (amazon-science/sccl Notebook/run_*.sh)."""

    # K, the number of clusters (the authors' --num_classes default: SearchSnippets' 8)
    clusters: Annotated[int, Field(ge=2)] = 8
    # a .npy of the K starting centroids, shape (K, d); None: K-means of the training texts' starting embeddings
    centroids: str | None = None
    temperature: Temperature = 0.5
    head: HeadName | None = "sccl"
    # dropout: two dropout passes of the anchor (the authors' "virtual"); explicit: augmented columns
    views: Literal["dropout", "explicit"] = "dropout"
    # the instance-wise term's weight (the authors' --eta, 10 in their scripts)
    contrastive_weight: NonNegativeFloat = 10.0
    # η, the clustering term's weight; None: the authors' trainer's (0.5 dropout, 1.0 explicit)
    eta: NonNegativeFloat | None = None
    alpha: PositiveFloat = 1.0  # degrees of freedom of the Student's t kernel
    kmeans_seed: NonNegativeInt = 0  # K-means' seed when the centroids are computed from the training texts

    @field_validator("views", mode="before")
    @classmethod
    def _views_run_here(cls, value: Any) -> Any:
        if value in SCCL_OTHER_VIEWS:
            raise ValueError(f"{value!r} is not run by augcse: {SCCL_OTHER_VIEWS[value]}")
        return value

    @model_validator(mode="after")
    def _centroids_and_weight(self) -> SCCLParameters:
        if self.centroids is not None:
            try:
                read_centroids(self.centroids, self.clusters)
            except ValueError as exc:
                raise FieldsError(("centroids",), str(exc)) from None
        if self.eta is None:
            self.eta = SCCL_CLUSTER_WEIGHT[self.views]
        return self


class Term(Section):
    """One weighted term of a composite loss."""

    loss: str  # a registered loss other than composite
    name: str | None = None  # the prefix of its logged components; the loss name when left out
    weight: float = 1.0
    inputs: dict[str, str | list[str]] = Field(default_factory=dict)  # role → column or ``~column``
    params: dict[str, Any] = Field(default_factory=dict)  # the term loss's own parameters

    @model_validator(mode="after")
    def _named(self) -> Term:
        self.name = self.name or self.loss
        return self


# terms that run an encoder on token ids inside the loss (a gradient cache of pooled embeddings would miss it)
TOKEN_TERMS = frozenset({"mlm", "diffcse"})


class CompositeParameters(Section):
    terms: list[Term] = Field(min_length=1)
    columns: list[str] | None = None
    mini_batch_size: PositiveInt | None = None  # gradient caching for the shared embedding pass of every term

    @model_validator(mode="after")
    def _one_embedding_pass(self) -> CompositeParameters:
        for index, term in enumerate(self.terms):
            if term.params.get("mini_batch_size") is not None:
                raise FieldsError([("terms", index, "params", "mini_batch_size")],
                                  "the terms share one embedding pass; set mini_batch_size on the composite itself")
            if term.loss == "consert" and self.mini_batch_size is not None:
                raise FieldsError([("terms", index, "loss")], "a consert term embeds its own views inside the loss; "
                                  "it does not combine with gradient caching (set mini_batch_size: null)")
            if self.mini_batch_size is not None and term.loss in TOKEN_TERMS:
                raise FieldsError(["mini_batch_size", ("terms", index, "loss")],
                                  f"the {term.loss} term runs an encoder on the batch's tokens itself, outside the "
                                  "cached embedding pass; it does not combine with gradient caching "
                                  "(set mini_batch_size: null)")
        return self


# the losses whose every row needs other rows of its batch as negatives: a batch of one trains nothing
IN_BATCH_NEGATIVES = frozenset({"simcse", "augcse", "sda", "vascl", "cards", "esimcse", "promptbert", "consert",
                                "diffcse", "ct", "declutr", "ct_original", "sccl"})


def needs_in_batch_negatives(name: str, params: Mapping[str, Any]) -> bool:
    """Whether the loss ``name`` with ``params`` (a composite: any of its terms) contrasts a row with others."""
    if name == "composite":
        return any(isinstance(term, Mapping) and term.get("loss") in IN_BATCH_NEGATIVES
                   for term in params.get("terms") or [])
    return name in IN_BATCH_NEGATIVES


def loss_models(name: str, params: Mapping[str, Any]) -> list[str]:
    """The models a loss loads besides the backbone (DiffCSE's generator; a composite: its terms'), so a study
    checks them with the backbone before anything trains."""
    if name == "composite":
        return [m for term in params.get("terms") or [] if isinstance(term, Mapping)
                for m in loss_models(term.get("loss", ""), term.get("params") or {})]
    if name == "diffcse":
        return [params.get("generator") or DiffCSEParameters.model_fields["generator"].default]
    return []

# losses that embed the batch their own way, so they cannot share a composite's one embedding pass
WHOLE_BATCH_LOSSES = {"ct_original": "embeds each pair with two encoders of its own"}

# every registered loss; ``None``: a sentence-transformers loss whose parameters are its own constructor's
# (checked against that signature once the class loads)
LOSS_PARAMETERS: dict[str, type[Section] | None] = {
    "simcse": SimCSEParameters,
    "augcse": AugCSEParameters,
    "sda": SDAParameters,
    "vascl": VaSCLParameters,
    "cards": CARDSParameters,
    "esimcse": ESimCSEParameters,
    "declutr": DeCLUTRParameters,
    "ct_original": CTOriginalParameters,
    "promptbert": PromptBERTParameters,
    "consert": ConSERTParameters,
    "diffcse": DiffCSEParameters,
    "mlm": MLMParameters,
    "sccl": SCCLParameters,
    "composite": CompositeParameters,
    "tsdae": None,
    "ct": None,
}


def loss_settings(name: str, params: Mapping[str, Any] | Any, prefix: str = "loss.params", subject: str = "recipe key",
                  lookup: Callable[[str], type[Section] | None] = LOSS_PARAMETERS.get) -> dict[str, Any]:
    """A loss's parameters validated, with every default filled in (a composite's terms too).

    ``lookup`` gives a loss's declared parameters; the default needs no torch and skips the library's
    losses (``None``), which the loss classes' own ``Parameters`` cover once they are imported.
    """
    model = lookup(name)
    if model is None:
        return dict(params or {})
    filled = validate(model, params if params is not None else {}, prefix, subject).model_dump()
    if model is CompositeParameters:
        names = [n for n in LOSS_PARAMETERS if n != "composite"]
        for index, term in enumerate(filled["terms"]):
            where = f"{prefix}.terms[{index}]" if prefix else f"terms[{index}]"
            if term["loss"] not in names:
                raise RecipeError(f"{subject} '{where}.loss': unknown loss {term['loss']!r}"
                                  f"{suggest(term['loss'], names)}; choose one of {', '.join(names)}")
            if term["loss"] in WHOLE_BATCH_LOSSES:
                raise RecipeError(f"{subject} '{where}.loss': {term['loss']} {WHOLE_BATCH_LOSSES[term['loss']]}; "
                                  "train it alone, not as a composite term")
            term["params"] = loss_settings(term["loss"], term["params"], f"{where}.params", subject, lookup)
        seen = [t["name"] for t in filled["terms"]]
        twice = next((n for n in seen if seen.count(n) > 1), None)
        if twice:
            raise RecipeError(f"{subject} '{prefix}.terms': the term name {twice!r} is used twice; "
                              "give each a distinct 'name'")
    return filled
