"""augcse: unsupervised contrastive sentence embeddings as a sentence-transformers extension."""

__version__ = "0.1.0"
