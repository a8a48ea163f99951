"""Word-level random edits on whitespace tokens (nlpaug's RandomWordAug actions, ESimCSE repetition).

No parse needed; the number of edited words is ``max(aug_min, int(p * n))`` capped at ``aug_max``,
as in nlpaug.
"""

from __future__ import annotations

import random

from typing import TYPE_CHECKING, Callable, ClassVar

from augcse.text.augment.base import Augmentation, Meaning, register

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc

NLPAUG = "nlpaug RandomWordAug (Ma 2019), added to NL-Augmenter by AugCSE (App. A.2)"


def _count(n: int, p: float, aug_min: int, aug_max: int | None) -> int:
    k = max(aug_min, int(p * n))
    return min(k, aug_max) if aug_max else k


Action = Callable[[list[str], random.Random, int], list[str]]


class _RandomWord(Augmentation):
    """Apply ``action`` to ``k`` of the words; subclasses differ only in the action."""

    meaning = Meaning.POSSIBLY.value
    source = NLPAUG
    defaults = {"p": 0.1, "aug_min": 1, "aug_max": 10}
    action: ClassVar[Action]

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        words = text.split()
        if len(words) < 2:
            return None
        out = self.action(words, rng, _count(len(words), self.params["p"], self.params["aug_min"], self.params["aug_max"]))
        return " ".join(out) if out else None


def delete(words: list[str], rng: random.Random, k: int) -> list[str]:
    k = min(k, len(words) - 1)
    drop = set(rng.sample(range(len(words)), k))
    return [w for i, w in enumerate(words) if i not in drop]


def crop(words: list[str], rng: random.Random, k: int) -> list[str]:
    k = min(k, len(words) - 1)
    start = rng.randrange(0, len(words) - k + 1)
    return words[:start] + words[start + k:]


def swap(words: list[str], rng: random.Random, k: int) -> list[str]:
    out = list(words)
    for i in rng.sample(range(len(words)), min(k, len(words))):
        j = i + 1 if i + 1 < len(out) and (i == 0 or rng.random() < 0.5) else i - 1
        out[i], out[j] = out[j], out[i]
    return out


ACTIONS: dict[str, Action] = {"delete": delete, "crop": crop, "swap": swap}


def any_action(words: list[str], rng: random.Random, k: int) -> list[str]:
    return ACTIONS[rng.choice(sorted(ACTIONS))](words, rng, k)


@register
class RandomDeletion(_RandomWord):
    """Delete a proportion of the words."""

    name = "RandomDeletion"
    rule = "delete max(1, int(p*n)) random words (at most aug_max); AugCSE Fig. 6 uses p = 0.6"
    defaults = {"p": 0.6, "aug_min": 1, "aug_max": 10}
    action = staticmethod(delete)


@register
class RandomCrop(_RandomWord):
    """Delete one contiguous span of words."""

    name = "RandomCrop"
    rule = "delete one contiguous span of max(1, int(p*n)) words"
    action = staticmethod(crop)


@register
class RandomSwap(_RandomWord):
    """Swap a proportion of the words with a neighbour."""

    name = "RandomSwap"
    rule = "swap max(1, int(p*n)) random words with an adjacent word"
    action = staticmethod(swap)


@register
class RandomWordAugmentation(_RandomWord):
    """One of delete / crop / swap, chosen uniformly per sentence."""

    name = "RandomWordAugmentation"
    rule = "pick delete, crop or swap uniformly per sentence and apply it with rate p"
    action = staticmethod(any_action)


@register
class WordRepetition(Augmentation):
    """Repeat a few words in place (ESimCSE), changing length without changing meaning."""

    name = "WordRepetition"
    meaning = Meaning.PRESERVING.value
    source = "ESimCSE (Wu et al. 2022), word repetition"
    rule = "draw dup_len uniformly from 1..max(1, int(dup_rate*n)) and duplicate that many random words in place"
    defaults = {"dup_rate": 0.32}

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        words = text.split()
        if not words:
            return None
        dup_len = rng.randint(1, max(1, int(self.params["dup_rate"] * len(words))))
        picked = set(rng.sample(range(len(words)), min(dup_len, len(words))))
        out = []
        for i, w in enumerate(words):
            out.extend([w, w] if i in picked else [w])
        return " ".join(out)
