"""CARDS switch-case (Wang et al. 2022, §2.2): flip the case of the first letter of some words.

``variant``: ``v1`` switches exactly ``max(1, round(n*p))`` words, ``v2`` each word with probability p
(docs/PAPERS.md §5). ``mode`` restricts the words (CARDS Table 5): ``default`` any word starting with a
letter; ``substitution`` only words whose switched form changes the first sub-token and nothing else;
``retokenization`` only words whose switched form splits differently — their case is switched back
but the new split is kept, so the text is unchanged and only :meth:`SwitchCase.encode` shows the
effect. The last two need the tokenizer of the model being trained (``tokenizer=``).
"""

from __future__ import annotations

import random
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

from augcse.assets.resolve import resolve_model
from augcse.text.augment.base import Augmentation, AugmentationError, Meaning, register, rng_for

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc


def switch(word: str) -> str:
    return (word[0].lower() if word[0].isupper() else word[0].upper()) + word[1:]


@lru_cache(maxsize=4)
def _tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model(name))


@register
class SwitchCase(Augmentation):
    """Flip the first letter's case of randomly chosen words."""

    name = "SwitchCase"
    meaning = Meaning.PRESERVING.value
    source = "CARDS (Wang et al. 2022) §2.2 and Table 5; alibaba/SimCSE-with-CARDS text_augmentation"
    rule = ("v1: exactly max(1, round(n*p)) words, v2: each word with probability p; mode default / "
            "substitution / retokenization (see module docs)")
    defaults = {"p": 0.05, "variant": "v2", "mode": "default", "tokenizer": None}
    choices = {"variant": ("v1", "v2"), "mode": ("default", "substitution", "retokenization")}

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        if self.params["mode"] != "default" and not self.params["tokenizer"]:
            raise ValueError(f"SwitchCase mode={self.params['mode']!r} needs tokenizer=<model name or folder>")

    @property
    def tokenizer(self) -> Any:
        return _tokenizer(self.params["tokenizer"]) if self.params["tokenizer"] else None

    def _pieces(self, word: str, first: bool) -> list[str]:
        return self.tokenizer.tokenize(word if first else " " + word)

    def _kind(self, word: str, first: bool) -> str:
        """CARDS Table 1 type of switching ``word``: substitution, division/fusion/regrouping, or none."""
        before, after = self._pieces(word, first), self._pieces(switch(word), first)
        if before == after:
            return "none"
        if len(before) == len(after) and before[1:] == after[1:]:
            return "substitution"
        vocab = self.tokenizer.get_vocab()
        return "retokenization" if all(p in vocab for p in _switch_back(after)) else "none"

    def _chosen(self, words: list[str], rng: random.Random) -> list[int]:
        mode = self.params["mode"]
        cands = [i for i, w in enumerate(words) if w[:1].isalpha()]
        if mode != "default":
            cands = [i for i in cands if self._kind(words[i], i == 0) == mode]
        if not cands:
            return []
        p = self.params["p"]
        if self.params["variant"] == "v1":
            return sorted(rng.sample(cands, min(len(cands), max(1, round(len(words) * p)))))
        return [i for i in cands if rng.random() < p]

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        if self.params["mode"] == "retokenization":
            return None  # the text does not change; see encode()
        words = text.split(" ")
        chosen = self._chosen(words, rng)
        for i in chosen:
            words[i] = switch(words[i])
        return " ".join(words) if chosen else None

    def encode(self, batch: Sequence[str], seed: int = 0) -> list[list[int]]:
        """Token ids (no special tokens) of each augmented sentence; in ``retokenization`` mode the
        chosen words keep their case but take the split of their switched form."""
        if self.tokenizer is None:
            raise AugmentationError("SwitchCase.encode needs tokenizer=<model name or folder>")
        out = []
        for text in batch:
            if self.params["mode"] != "retokenization":
                out.append(self.tokenizer.encode(self.apply([text], seed)[0], add_special_tokens=False))
                continue
            words = text.split(" ")
            chosen = set(self._chosen(words, rng_for(seed, self.name, text)))
            tokens: list[str] = []
            for i, word in enumerate(words):
                if i in chosen:
                    tokens += _switch_back(self._pieces(switch(word), i == 0))
                else:
                    tokens += self._pieces(word, i == 0)
            out.append(self.tokenizer.convert_tokens_to_ids(tokens))
        return out


SPACE_MARKERS = "\u0120\u2581"  # byte-level BPE "Ġ" and SentencePiece "▁"


def _switch_back(pieces: list[str]) -> list[str]:
    """Flip back the case of the word's first letter inside its sub-tokens, keeping the split."""
    out = list(pieces)
    for n, piece in enumerate(out):
        k = next((j for j, ch in enumerate(piece) if ch.isalpha() and ch not in SPACE_MARKERS), None)
        if k is not None:
            out[n] = piece[:k] + switch(piece[k:])
            break
    return out
