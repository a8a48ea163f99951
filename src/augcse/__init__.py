"""augcse: unsupervised contrastive sentence embeddings as a sentence-transformers extension.

``import augcse`` stays light; :func:`load_model` is imported on first use.
"""

from __future__ import annotations

from typing import Any

from augcse.core.version import __version__

__all__ = ["__version__", "load_model"]


def __getattr__(name: str) -> Any:
    if name == "load_model":
        from augcse.models.load import load_model

        return load_model
    raise AttributeError(f"module 'augcse' has no attribute {name!r}")
