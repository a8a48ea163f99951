"""augcse: unsupervised contrastive sentence embeddings as a sentence-transformers extension.

``import augcse`` stays light (sentence-transformers loads when :func:`load_model` is first called).
"""

from __future__ import annotations

from augcse.encode import load_model

__version__ = "0.1.0"
__all__ = ["__version__", "load_model"]
