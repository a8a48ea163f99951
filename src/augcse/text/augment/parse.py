"""One spaCy parse per sentence, shared by every parse-based augmentation.

Parsing dominates the cost of the rule-based set, so a batch is parsed once (``nlp.pipe``, batched,
optionally in several processes) and the resulting ``Doc`` objects are handed to each augmentation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from augcse.assets.resolve import load_spacy

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc


def parse(sentences: Sequence[str], n_process: int = 1, batch_size: int = 256) -> list[Doc]:
    """Parse ``sentences`` with the English pipeline (tagger, parser, lemmatizer, NER)."""
    nlp = load_spacy()
    return list(nlp.pipe(list(sentences), batch_size=batch_size, n_process=max(1, n_process)))
