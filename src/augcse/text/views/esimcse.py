"""ESimCSE's view: the anchor with a few of its tokens repeated in place, drawn afresh every epoch.

ESimCSE §3.1 repeats sub-word tokens: of a sentence of N tokens, ``dup_len`` drawn uniformly from
``[0, max(2, int(dup_rate·N))]`` are chosen uniformly and each is doubled where it stands. The authors'
``run.sh`` trains with ``dup_type=bpe`` (token ids); their ``train.py`` also has ``dup_type=word`` (words split
on spaces). Their published figures come from ``train.py``, whose draw differs from the text (at most 9
repeats, the upper bound excluded): ``draw: code`` (the default) is it, ``draw: paper`` the text's.

``train.py`` repeats ids within the sentence already cut to ``--max_seq_length`` and does not cut the
positive again, so a long sentence's positive is up to 9 tokens longer than its anchor. With
``max_seq_length`` the view does the same: it cuts the anchor to that many tokens (special tokens counted)
and draws the repeats among the tokens kept; the collator's cut (``model.max_seq_length``) must then leave
room for the repeats (the reproduce rows: 32 + 9 = 41), so it cuts neither. Without it the whole sentence
is repeated and the collator cuts both, which for a sentence over the cut removes the length difference.

A view writes text, so the sub-word form repeats the characters of the chosen token of the model's own
tokenizer (its offsets): a word-initial token is repeated as a separate word (``play playing``), a
continuation piece is glued (``playinging``); re-tokenised, the positive is N + dup_len tokens long unless
the tokenizer merges the doubled piece differently.

Every draw is a pure function of (seed, epoch, sentence), as CARDS' view, so a resumed run and every
dataloader worker draw what the uninterrupted run drew; the trainer tells the transform the epoch
(``augcse.training.callbacks.DrawEpoch``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TYPE_CHECKING

import numpy as np

from augcse.core.schema import NonNegativeInt, PositiveInt, Probability
from augcse.text.retrieval import keyed_rng
from augcse.text.views.base import ViewContext, as_anchor, register_view, texts_of

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset

CODE_CAP = 10  # the authors' train.py never repeats more than 9 tokens (randrange(min(10, …)))


def repeat_count(rng: np.random.Generator, n: int, dup_rate: float, draw: str, unit: str) -> int:
    """How many of ``n`` units to repeat.

    ``paper``: uniform on ``[0, max(2, int(dup_rate·n))]`` (ESimCSE §3.1), at most ``n``. ``code``: the
    authors' ``train.py``: sub-words ``randrange(min(10, int(dup_rate·L)))`` with L = n + 2 (the special
    tokens counted), 0 when ``int(dup_rate·L)`` is 0; words ``randrange(min(10, n, max(2, int(dup_rate·n))))``.
    """
    if n == 0:
        return 0
    if draw == "paper":
        return min(int(rng.integers(0, max(2, int(dup_rate * n)) + 1)), n)
    if unit == "subword":
        high = min(CODE_CAP, int(dup_rate * (n + 2)))
    else:
        high = min(CODE_CAP, n, max(2, int(dup_rate * n)))
    return int(rng.integers(0, high)) if high > 0 else 0


def repeat_positions(rng: np.random.Generator, n: int, count: int, draw: str, unit: str) -> list[int]:
    """Which units are repeated (sorted, distinct); the code's word form never picks the last word."""
    pool = n - 1 if (draw == "code" and unit == "word") else n
    count = min(count, pool)
    return sorted(int(i) for i in rng.choice(pool, size=count, replace=False)) if count else []


def repeat_words(sentence: str, rng: np.random.Generator, dup_rate: float, draw: str = "paper") -> tuple[str, list[int]]:
    """The sentence with some of its space-separated words doubled, and the doubled word indexes."""
    words = sentence.split(" ")
    positions = repeat_positions(rng, len(words), repeat_count(rng, len(words), dup_rate, draw, "word"), draw, "word")
    chosen = set(positions)
    return " ".join(f"{w} {w}" if i in chosen else w for i, w in enumerate(words)), positions


def repeat_subwords(sentence: str, spans: list[tuple[int, int]], rng: np.random.Generator, dup_rate: float,
                    draw: str = "paper") -> tuple[str, list[int]]:
    """The sentence with the characters of some of its tokens (``spans``: their offsets) doubled in place."""
    spans = [(s, e) for s, e in spans if e > s]
    positions = repeat_positions(rng, len(spans), repeat_count(rng, len(spans), dup_rate, draw, "subword"), draw,
                                 "subword")
    return double_tokens(sentence, spans, positions), positions


def double_tokens(sentence: str, spans: list[tuple[int, int]], positions: list[int]) -> str:
    """The sentence with the tokens at ``positions`` (sorted indexes into ``spans``) written twice in place."""
    out, last = [], 0
    for index in positions:
        start, end = spans[index]
        piece = sentence[start:end]
        word_initial = start == 0 or sentence[start - 1].isspace()
        out.append(sentence[last:end])
        out.append(f" {piece}" if word_initial else piece)
        last = end
    out.append(sentence[last:])
    return "".join(out)


def cut(sentence: str, spans: list[tuple[int, int]], keep: int | None) -> tuple[str, list[tuple[int, int]]]:
    """The sentence up to the end of its first ``keep`` tokens (``spans``: their offsets), and those spans;
    as it is when ``keep`` is None or it has no more tokens."""
    if keep is None or len(spans) <= keep:
        return sentence, spans
    spans = spans[:keep]
    return sentence[:spans[-1][1]] if spans else "", spans


class RepetitionDraws:
    """The transform filling the positive column on access (and, with ``max_seq_length``, cutting the anchor);
    ``set_epoch`` picks the epoch draws are keyed by."""

    def __init__(self, seed: int, dup_rate: float, unit: str, draw: str, column: str, tokenizer=None,
                 max_seq_length: int | None = None) -> None:
        self.seed = seed
        self.dup_rate = dup_rate
        self.unit = unit
        self.draw = draw
        self.column = column
        self.tokenizer = tokenizer
        # the anchor's tokens kept, special tokens left out (the authors' --max_seq_length counts them)
        self.keep = None if max_seq_length is None or tokenizer is None else \
            max(0, max_seq_length - tokenizer.num_special_tokens_to_add())
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def pair(self, sentence: str, epoch: int | None = None) -> tuple[str, str]:
        """(anchor, positive): the anchor as trained on (cut with ``max_seq_length``) and its repetition."""
        rng = keyed_rng(self.seed, "esimcse_repetition", self.epoch if epoch is None else epoch, sentence)
        if self.unit == "word":
            return sentence, repeat_words(sentence, rng, self.dup_rate, self.draw)[0]
        spans = self.tokenizer(sentence, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        anchor, spans = cut(sentence, spans, self.keep)
        return anchor, repeat_subwords(anchor, spans, rng, self.dup_rate, self.draw)[0]

    def repeat(self, sentence: str, epoch: int | None = None) -> str:
        return self.pair(sentence, epoch)[1]

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        out = dict(batch)
        if self.column in batch:
            pairs = [self.pair(a) for a in batch["anchor"]]
            out[self.column] = [positive for _, positive in pairs]
            out["anchor"] = [anchor for anchor, _ in pairs]
        return out


def _outputs(params: Mapping[str, Any]) -> dict[str, Any]:
    return {params["positive_column"]: None}


def offsets_tokenizer(model):
    """The model's tokenizer if it reports character offsets (a fast tokenizer); one line otherwise."""
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is None or not getattr(tokenizer, "is_fast", False):
        raise ValueError("esimcse_repetition with unit: subword needs the model's fast tokenizer (character "
                         "offsets); use unit: word")
    return tokenizer


@register_view("esimcse_repetition", outputs=_outputs)
def esimcse_repetition_view(dataset: Dataset, context: ViewContext, dup_rate: Probability = 0.32,
                            unit: Literal["subword", "word"] = "subword", draw: Literal["paper", "code"] = "code",
                            max_seq_length: PositiveInt | None = None, positive_column: str = "positive",
                            seed: NonNegativeInt | None = None) -> Dataset:
    """ESimCSE's positive: the anchor with some tokens repeated, drawn lazily on access, afresh each epoch.

    Put this view last: it installs a ``Dataset.set_transform``, which later ``map`` calls would not see.

    Args:
        dup_rate: the largest share of tokens repeated (the authors' ``run.sh``: 0.32 for BERT-base, 0.3 for
            RoBERTa-base, 0.28 for RoBERTa-large).
        unit: ``subword`` (the paper's and ``run.sh``'s, through the model's fast tokenizer) or ``word``
            (space-separated words, the code's ``dup_type=word``).
        draw: how many are repeated: ``code`` (the authors' ``train.py``, which the published figures come
            from: at most 9, the upper bound excluded) or ``paper`` (§3.1: uniform on [0, max(2, int(dup_rate·N))]).
        max_seq_length: with ``unit: subword``, cut the anchor to this many tokens (special tokens counted)
            and repeat within them, the positive not cut again (the authors' ``--max_seq_length`` 32); set
            ``model.max_seq_length`` at least 9 higher so that the collator keeps the repeats. ``None``:
            repeat within the whole sentence. ``unit: word`` does not read it: the authors repeat words
            before tokenising and the collator cuts both, as their ``train.py`` does.
        positive_column: the column written.
        seed: the draws' seed; ``None``: the run's seed.
    """
    seed = context.seed if seed is None else seed
    tokenizer = offsets_tokenizer(context.model) if unit == "subword" else None
    dataset = as_anchor(dataset)
    dataset = dataset.add_column(positive_column, texts_of(dataset))  # a placeholder: the transform fills it
    dataset.set_transform(RepetitionDraws(seed, dup_rate, unit, draw, positive_column, tokenizer, max_seq_length))
    return dataset
