"""CARDS' view: a switch-cased positive and retrieved hard negatives, drawn afresh every epoch.

Every draw is a pure function of (seed, epoch, anchor sentence), not of a generator's state, so a run
resumed from a checkpoint draws what the uninterrupted run drew, and each dataloader worker draws its
rows' own values. The trainer tells the transform the epoch (``augcse.training.callbacks.DrawEpoch``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, TYPE_CHECKING

from augcse.text.augment import get
from augcse.text.retrieval import NegativeSampler, build_neighbours, keyed_rng
from augcse.text.retrieval_index import IndexChoice, IndexKind
from augcse.core.schema import NonNegativeInt, PositiveInt, Probability
from augcse.text.views.base import ViewContext, as_anchor, cache_root, register_view, texts_of

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset

logger = logging.getLogger(__name__)


def tokenizer_ignores_case(model) -> bool:
    """True when the model's tokenizer maps a word and its case-flipped form to the same ids."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None:
        return False
    probe = "Paris Is A City"
    return tokenizer(probe)["input_ids"] == tokenizer(probe.swapcase())["input_ids"]


def negative_columns(column: str, s: int) -> list[str]:
    """``retrieved``, ``retrieved_2``… for ``s`` negatives per anchor."""
    return [column] + [f"{column}_{j}" for j in range(2, s + 1)]


def _outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    if not (params["switch_case"] or params["retrieve"]):
        raise ValueError("switch_case: false with retrieve: false writes nothing")
    if params.get("shard") is not None and not params.get("shards"):
        raise ValueError("shard needs shards, the shard count (under torchrun leave both null: the ranks are "
                         "the shards)")
    if params.get("shard") is not None and params["shard"] >= params["shards"]:
        raise ValueError(f"shard {params['shard']} is not one of the {params['shards']} shards "
                         f"(0 to {params['shards'] - 1})")
    out = {params["positive_column"]: None} if params["switch_case"] else {}
    if params["retrieve"]:
        out.update({c: None for c in negative_columns(params["negative_column"], params["s"])})
    return out


class CardsDraws:
    """The transform filling CARDS' columns on access; ``set_epoch`` picks the epoch the draws are keyed by."""

    def __init__(self, seed: int, switcher, positive_column: str, sampler, negative_columns: list[str]) -> None:
        self.seed = seed
        self.switcher = switcher
        self.positive_column = positive_column
        self.sampler = sampler
        self.negative_columns = negative_columns
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        out = dict(batch)
        anchors = batch["anchor"]
        if self.switcher is not None and self.positive_column in batch:
            # SwitchCase keys its own draws by (seed, sentence); the seed here carries the epoch
            seed = int(keyed_rng(self.seed, "switch_case", self.epoch).integers(1 << 31))
            out[self.positive_column] = self.switcher.apply(anchors, seed=seed)
        if self.sampler is not None and self.negative_columns and self.negative_columns[0] in batch:
            drawn = [self.sampler(a, self.epoch) for a in anchors]
            for j, column in enumerate(self.negative_columns):
                out[column] = [d[j] for d in drawn]
        return out


def _switcher(context: ViewContext, p: float, variant: str, mode: str):
    if tokenizer_ignores_case(context.model):
        logger.warning("CARDS switch-case: the tokenizer of this model lower-cases its input, so flipping "
                       "the case of words changes nothing it sees; the positive is effectively the dropout "
                       "copy. Use a cased model (e.g. roberta-base) for the paper's augmentation.")
    tokenizer = None
    if mode != "default":
        tokenizer = getattr(getattr(context.model, "tokenizer", None), "name_or_path", None)
    return get("SwitchCase", p=p, variant=variant, mode=mode, tokenizer=tokenizer)


@register_view("cards", outputs=_outputs)
def cards_view(dataset: Dataset, context: ViewContext, switch_case: bool = True, p: Probability = 0.05,
               variant: Literal["v1", "v2"] = "v2", mode: Literal["default", "substitution"] = "default",
               retrieve: bool = True, k: PositiveInt = 64, s: PositiveInt = 1,
               sampling: Literal["R_uniform", "R_top", "D_uniform"] = "R_uniform", min_words: NonNegativeInt = 3,
               positive_column: str = "positive", negative_column: str = "retrieved",
               seed: NonNegativeInt | None = None, batch_size: PositiveInt = 128,
               retrieval_max_seq_length: PositiveInt | None = None, index: IndexKind = "auto",
               nprobe: PositiveInt = 32, ef_search: PositiveInt = 256, index_gpu: bool = False,
               shards: PositiveInt | None = None, shard: NonNegativeInt | None = None) -> Dataset:
    """CARDS' columns, drawn lazily on access, afresh each epoch (keyed by seed, epoch and anchor):

    ``positive``: the switch-cased anchor (CARDS v1/v2, probability ``p``; ``mode: substitution`` only
    switches words whose first sub-token changes, CARDS Table 5); ``retrieved`` (``retrieved_2``… for
    ``s > 1``): neighbours sampled from the anchor's top-``k`` by ``sampling`` (CARDS Fig. 3, see
    :mod:`augcse.text.retrieval`). ``switch_case: false`` writes no positive (the loss then uses the dropout
    copy: "+ retrieval only"); ``retrieve: false`` writes no negatives ("+ switch-case only"). Table 5's
    retokenization mode changes only token ids, not the text, so it is not a view option. Put this view
    last: it installs a ``Dataset.set_transform``, which later ``map`` calls would not see.

    Args:
        retrieval_max_seq_length: the tokens of each sentence the starting model encodes for retrieval
            (its ``max_seq_length`` during that encoding only, restored after): 32 is the authors' code;
            ``None`` encodes it at the model's own length.
        index: the Faiss index the corpus is searched with: ``auto`` is the exact ``flat`` index below 10^5
            sentences (the lists and cache keys of before) and ``hnsw`` (a graph index, built on one thread so
            reproducible) from 10^5 on, the faster and more exact of the approximate indexes measured there
            (docs/SCALE.md); ``ivf`` is an inverted file of about 4·√n cells (seeded k-means, reproducible);
            ``ivfpq`` is ``ivf`` with each vector compressed to one byte per 8 dimensions (for corpora whose
            vectors do not fit in memory; lower recall). An approximate index's parameters join the neighbour
            cache's key.
        nprobe: the IVF (and IVF-PQ) cells each query searches (more: higher recall, slower; docs/SCALE.md).
        ef_search: the candidates each HNSW query keeps (more: higher recall, slower).
        index_gpu: search on a GPU when Faiss has GPU support (faiss-gpu) and one is present; else a log line
            says why it searches on the CPU.
        shards: encode the corpus in this many shards, each written to the cache folder and merged in order
            into the lists one process gives; ``null``: torchrun's ``WORLD_SIZE`` when its ranks share one
            node, else 1.
        shard: the one shard this process encodes (separate jobs sharing the cache folder; shard 0's merges);
            ``null``: the torchrun ``RANK`` when the shards are the ranks, else every missing shard in turn.
    """
    _outputs(locals())
    seed = context.seed if seed is None else seed
    dataset = as_anchor(dataset)
    sentences = texts_of(dataset)
    switcher = _switcher(context, p, variant, mode) if switch_case else None
    if switcher is not None:
        dataset = dataset.add_column(positive_column, sentences)
    sampler, columns = None, []
    if retrieve:
        neighbours = build_neighbours(sentences, sentences, context.model, k, cache_root(context) / "retrieval",
                                      min_words=min_words, batch_size=batch_size,
                                      max_seq_length=retrieval_max_seq_length,
                                      index=IndexChoice(index, nprobe=nprobe, ef_search=ef_search, gpu=index_gpu),
                                      shards=shards, shard=shard, wait_seconds=context.wait_seconds)
        sampler = NegativeSampler(neighbours, sampling, s, seed)
        columns = negative_columns(negative_column, s)
        for column in columns:  # placeholders: the transform fills them per access
            dataset = dataset.add_column(column, sentences)
    dataset.set_transform(CardsDraws(seed, switcher, positive_column, sampler, columns))
    return dataset
