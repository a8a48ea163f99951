"""The papers' text augmentations as one library: registered, seeded, sharing one parse, cached.

>>> from augcse import augment
>>> augment.augment_batch(["SDA"], ["He travelled widely in Europe."])  # doctest: +SKIP
>>> augment.get("Negation").apply(["He travelled widely in Europe."])  # doctest: +SKIP
['He did not travel widely in Europe.']
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "REGISTRY", "SETS", "Augmentation", "AugmentationError", "Meaning", "augment_batch", "build_cache",
    "canonical_name", "get", "load_cache", "parse", "register", "resolve_names", "rng_for", "rule_based",
    "validate_params",
]


def __getattr__(name: str) -> Any:
    """Load the registry (and spaCy with it) only when a name of the library is first used."""
    if name in __all__:
        return getattr(importlib.import_module("augcse.augment.api"), name)
    raise AttributeError(f"module 'augcse.augment' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
