"""BERT-whitening (Su et al. 2021): a linear transform of the embeddings fitted on a corpus, no training.

On the embeddings ``X`` (n × d) of a corpus: ``μ`` is their mean, ``Σ`` their covariance (``np.cov``: divided by
n − 1, as the authors' code), ``Σ = U Λ Uᵀ`` its SVD and ``W = U Λ^(-1/2)`` (its first ``k`` columns when a
dimension ``k`` is given: the top-``k`` directions). An embedding ``x`` becomes ``(x − μ) W``; on the fitting
set the whitened covariance is the identity. The transform is saved as sentence-transformers' own ``Dense``
module (weight ``Wᵀ``, bias ``−μ W``, identity activation) after the model's other modules, so the saved
model loads with a plain ``SentenceTransformer(path)`` and encodes whitened embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense


def fit_whitening(embeddings, dim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(μ, W)`` of Su et al.'s whitening on ``embeddings`` (n × d), computed in float64; ``W`` is d × k.

    ``dim`` (k) keeps the ``k`` directions of largest variance (None: all ``d``). Refused when the corpus has
    too few distinct sentences for the kept directions (a zero eigenvalue has no inverse square root).
    """
    import numpy as np

    x = np.asarray(embeddings.detach().cpu() if hasattr(embeddings, "detach") else embeddings, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(f"whitening needs a 2-D array of at least 2 embeddings, got shape {x.shape}")
    d = x.shape[1]
    k = d if dim is None else int(dim)
    if not 1 <= k <= d:
        raise ValueError(f"whitening dimension {dim} must be between 1 and the embedding size {d}")
    mu = x.mean(axis=0)
    cov = np.cov(x.T)
    u, s, _ = np.linalg.svd(cov)
    u, s = u[:, :k], s[:k]
    if not np.all(s > 1e-12 * max(float(s[0]), 1e-300)):
        rank = int(np.sum(s > 1e-12 * max(float(s[0]), 1e-300)))
        raise ValueError(f"the {x.shape[0]} embeddings span only {rank} of the {k} kept directions (too few distinct "
                         f"sentences, or embeddings in a hyperplane, as a LayerNorm output's are): fit on more "
                         f"sentences or keep fewer directions (--dim {rank})")
    return mu, u / np.sqrt(s)


def apply_whitening(embeddings, mu, w):
    """``(x − μ) W`` for every row ``x`` of ``embeddings`` (any array or tensor type that broadcasts)."""
    return (embeddings - mu) @ w


def whitening_module(mu, w) -> Dense:
    """The transform as sentence-transformers' ``Dense`` (float32): ``x Wᵀᵀ + (−μ W)`` = ``(x − μ) W``."""
    import numpy as np
    import torch
    from sentence_transformers.base.modules import Dense

    mu = np.asarray(mu, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    return Dense(w.shape[0], w.shape[1], bias=True, activation_function=torch.nn.Identity(),
                 init_weight=torch.tensor(w.T, dtype=torch.float32),
                 init_bias=torch.tensor(-mu @ w, dtype=torch.float32))


def whiten_model(model: SentenceTransformer, sentences: Sequence[str], dim: int | None = None,
                 batch_size: int = 64) -> SentenceTransformer:
    """``model`` with a whitening module fitted on the embeddings of ``sentences`` appended (a new model
    sharing the modules; the input model is unchanged)."""
    from sentence_transformers import SentenceTransformer

    embeddings = model.encode(list(sentences), batch_size=batch_size, convert_to_numpy=True)
    mu, w = fit_whitening(embeddings, dim)
    module = whitening_module(mu, w).to(model.device)
    return SentenceTransformer(modules=[*model, module], device=str(model.device))


def corpus_sentences(path, limit: int | None = None, encoding: str = "utf-8") -> list[str]:
    """The non-blank lines of a text file (one sentence a line), the first ``limit`` of them when given."""
    from augcse.core.textfile import read_lines

    sentences = []
    for line in read_lines(path, encoding):
        text = line.strip()
        if text:
            sentences.append(text)
            if limit is not None and len(sentences) >= limit:
                break
    if not sentences:
        raise ValueError(f"{path} holds no sentence to fit the whitening on")
    return sentences
