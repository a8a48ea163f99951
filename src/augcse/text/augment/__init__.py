"""The papers' text augmentations as one library: registered, seeded, sharing one parse, cached.

Importing the package registers every family (about 0.1 s: spaCy, WordNet and the word lists load on
first use, not on import), so the registry is complete wherever one of its modules is used.

>>> from augcse.text import augment
>>> augment.augment_batch(["SDA"], ["He travelled widely in Europe."])  # doctest: +SKIP
>>> augment.get("Negation").apply(["He travelled widely in Europe."])  # doctest: +SKIP
['He did not travel widely in Europe.']
"""

from __future__ import annotations

from augcse.text.augment import (  # noqa: F401 - importing a family registers its augmentations
    gazetteer,
    lexical,
    model_based,
    random_word,
    sda,
    switch_case,
    syntax,
    wordnet_based,
)
from augcse.text.augment.api import augment_batch
from augcse.text.augment.base import (
    REGISTRY,
    SETS,
    Augmentation,
    AugmentationError,
    Meaning,
    canonical_name,
    get,
    register,
    resolve_names,
    rng_for,
    rule_based,
    validate_params,
)
from augcse.text.augment.cache import build_cache, load_cache
from augcse.text.augment.parse import parse

__all__ = [
    "REGISTRY", "SETS", "Augmentation", "AugmentationError", "Meaning", "augment_batch", "build_cache",
    "canonical_name", "get", "load_cache", "parse", "register", "resolve_names", "rng_for", "rule_based",
    "validate_params",
]
