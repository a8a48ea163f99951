"""DeCLUTR's view: anchor spans and nearby positive spans drawn from the same document.

DeCLUTR (Giorgi et al., ACL 2021, §2) samples ``num_anchors`` anchor spans from each document, their lengths
drawn from Beta(4, 2) between ``min_span_len`` and ``max_span_len`` tokens, at starts that keep the anchors
apart; for each anchor it samples ``num_positives`` positive spans, their lengths from Beta(2, 4), that may
overlap the anchor, be subsumed by it or be adjacent to it. A document shorter than
``num_anchors · max_span_len · 2`` tokens cannot be sampled and is skipped (the authors' reader raises on it;
their corpus keeps documents of at least 2048 tokens); the view counts and logs the skipped documents.

A document is one corpus line, or ``lines_per_document`` consecutive lines joined by a space (a corpus of
sentences, such as the Wikipedia slice, has no document of its own). Tokens are the model's sub-words
(the authors' reader, through the model's tokenizer, decoding a span's token ids back to text) or
space-separated words (their default without a tokenizer). Each anchor is a row: ``anchor`` and its
positives ``positive``, ``positive_2``, … The draws of a document are a pure function of (seed, document),
so every run and every worker draws the same spans.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal, TYPE_CHECKING

import numpy as np

from augcse.core.schema import NonNegativeInt, PositiveInt
from augcse.text.retrieval import keyed_rng
from augcse.text.views.base import ANCHOR, MAP_BATCH, ViewContext, register_view, view_fingerprint

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset

logger = logging.getLogger(__name__)

DOCUMENT_INDEX = "document_index"  # the row's document, to count the skipped ones (dropped before training)
Span = tuple[int, int]  # token indices [start, end)
Sampling = Literal["any", "subsuming", "adjacent"]


def min_document_tokens(num_anchors: int, max_span_len: int) -> int:
    """The shortest document the sampler accepts (the authors' check: ``num_anchors · max_span_len · 2``)."""
    return num_anchors * max_span_len * 2


def sample_spans(num_tokens: int, rng: np.random.Generator, num_anchors: int, num_positives: int,
                 max_span_len: int, min_span_len: int, sampling: Sampling = "any") -> tuple[list[Span], list[Span]]:
    """Anchor spans and, anchor by anchor, their positive spans, drawn in the order of the authors' sampler.

    The draws, one anchor after another: the anchor's length ``int(Beta(4,2)·(max−min) + min)``; which of the
    still-free blocks of ``max_span_len`` tokens holds it (uniform, or the first or last block when too few are
    left for the remaining anchors); its start inside that block; the block and its two neighbours leave the
    pool. Then each positive: its length (Beta(2,4)) and start, by ``sampling``: ``any`` (overlapping, subsumed
    or adjacent), ``subsuming`` (inside the anchor) or ``adjacent`` (just before or just after it).
    """
    if min_span_len > max_span_len:
        raise ValueError(f"min_span_len ({min_span_len}) must not exceed max_span_len ({max_span_len})")
    if num_tokens < min_document_tokens(num_anchors, max_span_len):
        raise ValueError(f"a document of {num_tokens} tokens is shorter than num_anchors · max_span_len · 2 = "
                         f"{min_document_tokens(num_anchors, max_span_len)}")
    free = list(range(0, num_tokens - max_span_len + 1, max_span_len))  # starts of the free blocks
    anchors: list[Span] = []
    positives: list[Span] = []
    for i in range(num_anchors):
        length = int(rng.beta(4, 2) * (max_span_len - min_span_len) + min_span_len)
        left = num_anchors - i
        block = int(rng.choice([0, len(free) - 1])) if len(free) // left < left else int(rng.integers(len(free)))
        start = int(rng.integers(free[block], free[block] + max_span_len - length + 1))
        del free[max(0, block - 1):block + 2]
        end = start + length
        anchors.append((start, end))
        for _ in range(num_positives):
            positives.append(_positive(rng, num_tokens, start, end, max_span_len, min_span_len, sampling))
    return anchors, positives


def _positive(rng: np.random.Generator, num_tokens: int, start: int, end: int, max_span_len: int,
              min_span_len: int, sampling: Sampling) -> Span:
    if sampling == "subsuming":  # never longer than the anchor, inside it
        length = int(rng.beta(2, 4) * ((end - start) - min_span_len) + min_span_len)
        first = int(rng.integers(start, end - length + 1))
    elif sampling == "adjacent":  # shortened where the anchor leaves no room on either side
        longest = min(max_span_len, max(start, num_tokens - end))
        length = int(rng.beta(2, 4) * (longest - min_span_len) + min_span_len)
        starts = ([start - length] if start - length > 0 else []) + ([end] if end + length <= num_tokens else [])
        first = int(rng.choice(starts))
    else:  # overlapping, subsumed or adjacent, never past the document's edges
        length = int(rng.beta(2, 4) * (max_span_len - min_span_len) + min_span_len)
        first = int(rng.integers(max(0, start - length), min(end, num_tokens - length) + 1))
    return first, first + length


def positive_columns(num_positives: int) -> list[str]:
    """``positive``, ``positive_2``, … (the ``many`` role the ``declutr`` loss reads)."""
    return ["positive", *[f"positive_{k}" for k in range(2, num_positives + 1)]]


class SpanDrawer:
    """Documents → rows of (anchor span, its positive spans) as text, counting the documents too short."""

    def __init__(self, seed: int, tokenizer, num_anchors: int, num_positives: int, max_span_len: int,
                 min_span_len: int, sampling: Sampling) -> None:
        self.seed = seed
        self.tokenizer = tokenizer
        self.settings = (num_anchors, num_positives, max_span_len, min_span_len, sampling)
        self.columns = positive_columns(num_positives)

    def tokens(self, document: str) -> tuple[list, Any]:
        """The document's tokens and how a span of them becomes text (the authors' whitespace clean-up first)."""
        text = " ".join(document.split())
        if self.tokenizer is None:
            words = text.split()
            return words, lambda s, e: " ".join(words[s:e])
        # a leading space, as the authors' reader adds it, so a BPE tokenizer treats the first word as any other
        ids = self.tokenizer(f" {text}", add_special_tokens=False, verbose=False)["input_ids"]
        return ids, lambda s, e: self.tokenizer.decode(ids[s:e]).strip()

    def __call__(self, batch: dict[str, list], indices: list[int]) -> dict[str, list]:
        num_anchors, num_positives, max_span_len, min_span_len, sampling = self.settings
        out: dict[str, list] = {ANCHOR: [], **{c: [] for c in self.columns}, DOCUMENT_INDEX: []}
        for index, document in zip(indices, batch["document"]):
            tokens, text_of = self.tokens(document)
            if len(tokens) < min_document_tokens(num_anchors, max_span_len):
                continue  # too short: no row (counted from the indices that are left)
            rng = keyed_rng(self.seed, "declutr_spans", document)
            anchors, positives = sample_spans(len(tokens), rng, *self.settings)
            for a, anchor in enumerate(anchors):
                out[ANCHOR].append(text_of(*anchor))
                out[DOCUMENT_INDEX].append(index)
                for column, span in zip(self.columns, positives[a * num_positives:(a + 1) * num_positives]):
                    out[column].append(text_of(*span))
        return out


def documents(dataset: Dataset, lines_per_document: int) -> Dataset:
    """The corpus as documents: each line, or each run of ``lines_per_document`` lines joined by a space."""
    column = ANCHOR if ANCHOR in dataset.column_names else "text"
    if lines_per_document == 1:
        return dataset.select_columns([column]).rename_column(column, "document")

    def join(batch: dict[str, list]) -> dict[str, list]:
        lines = batch[column]
        return {"document": [" ".join(lines[i:i + lines_per_document]) for i in range(0, len(lines),
                                                                                       lines_per_document)]}

    # a batch holds whole documents, so joining batch by batch equals joining the whole corpus
    return dataset.map(join, batched=True, batch_size=lines_per_document * MAP_BATCH,
                       remove_columns=dataset.column_names,
                       new_fingerprint=view_fingerprint(dataset, "declutr_documents", n=lines_per_document))


def _outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    return {ANCHOR: None, **{c: None for c in positive_columns(params["num_positives"])}}


@register_view("declutr_spans", outputs=_outputs, replaces=True)
def declutr_spans_view(dataset: Dataset, context: ViewContext, num_anchors: PositiveInt = 2,
                       num_positives: PositiveInt = 2, max_span_len: PositiveInt = 512, min_span_len: PositiveInt = 32,
                       sampling: Sampling = "any", unit: Literal["subword", "word"] = "subword",
                       lines_per_document: PositiveInt = 1, seed: NonNegativeInt | None = None) -> Dataset:
    """DeCLUTR's anchors and positives: ``num_anchors`` rows per document, each with ``num_positives`` positives.

    Defaults are the authors' ``declutr_base.jsonnet``. Documents shorter than ``num_anchors · max_span_len · 2``
    tokens are skipped and counted. Replaces the corpus: its rows become anchor spans.

    Args:
        num_anchors: anchor spans drawn per document, each a row (2).
        num_positives: positive spans drawn per anchor, the columns ``positive``, ``positive_2``, … (2).
        max_span_len: the longest span, in tokens (512).
        min_span_len: the shortest span, in tokens (32).
        sampling: where a positive lies: ``any`` (overlapping, inside or next to the anchor: the authors'
            default), ``subsuming`` (inside it) or ``adjacent`` (just before or after it).
        unit: ``subword`` (the model's tokenizer, as the authors' reader; a span is its tokens decoded) or
            ``word`` (space-separated words).
        lines_per_document: consecutive corpus lines joined (by a space) into one document; 1: a line is a
            document (the authors' corpus), more for a corpus of sentences.
        seed: the draws' seed; ``None``: the run's seed.
    """
    if min_span_len > max_span_len:
        raise ValueError(f"declutr_spans: min_span_len ({min_span_len}) must not exceed max_span_len "
                         f"({max_span_len})")
    seed = context.seed if seed is None else seed
    tokenizer = None if unit == "word" else getattr(context.model, "tokenizer", None)
    if unit == "subword" and tokenizer is None:
        raise ValueError("declutr_spans with unit: subword needs the model's tokenizer; use unit: word")
    docs = documents(dataset, lines_per_document)
    drawer = SpanDrawer(seed, tokenizer, num_anchors, num_positives, max_span_len, min_span_len, sampling)
    params = dict(seed=seed, num_anchors=num_anchors, num_positives=num_positives, max_span_len=max_span_len,
                  min_span_len=min_span_len, sampling=sampling, unit=unit,
                  tokenizer=getattr(tokenizer, "name_or_path", None))
    spans = docs.map(drawer, batched=True, with_indices=True, batch_size=MAP_BATCH, remove_columns=["document"],
                     new_fingerprint=view_fingerprint(docs, "declutr_spans", **params))
    if not len(spans):
        raise ValueError(f"declutr_spans: every one of the {len(docs)} documents is shorter than num_anchors · "
                         f"max_span_len · 2 = {min_document_tokens(num_anchors, max_span_len)} tokens; join more "
                         "lines (lines_per_document) or shorten max_span_len")
    skipped = len(docs) - len(set(spans[DOCUMENT_INDEX]))
    spans = spans.remove_columns(DOCUMENT_INDEX)
    logger.info("declutr_spans: %d/%d documents sampled (%d rows), %d shorter than %d tokens skipped",
                len(docs) - skipped, len(docs), len(spans), skipped, min_document_tokens(num_anchors, max_span_len))
    return spans
