"""augcse: unsupervised contrastive sentence embeddings as a sentence-transformers extension.

``import augcse`` stays light; :func:`load_model` is imported on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["__version__", "load_model"]


def __getattr__(name: str) -> Any:
    if name == "load_model":
        from augcse.encode import load_model

        return load_model
    raise AttributeError(f"module 'augcse' has no attribute {name!r}")
