"""Batch augmentation: every named augmentation on a list of sentences, each parsed once, in parallel.

Every sentence's randomness depends only on (seed, name, text), so the chunks a process pool works on
give the same outputs as one process.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from typing import Any, Sequence

from augcse.text.augment.base import Augmentation, get, resolve_names
from augcse.text.augment.parse import parse


def _instances(names: Sequence[str], params: dict[str, dict[str, Any]] | None) -> list[Augmentation]:
    params = params or {}
    return [get(name, **params.get(name, {})) for name in names]


def _augment_chunk(names: list[str], sentences: list[str], seed: int,
                   params: dict[str, dict[str, Any]] | None) -> dict[str, list[str]]:
    augs = _instances(names, params)
    docs = parse(sentences) if any(a.needs_parse for a in augs) else None
    return {a.name: a.apply(sentences, seed, docs) for a in augs}


def augment_batch(names: Sequence[str] | str, sentences: Sequence[str], seed: int = 0, n_process: int = 1,
                  params: dict[str, dict[str, Any]] | None = None) -> dict[str, list[str]]:
    """Apply each named augmentation (or set) to ``sentences``, parsing every sentence once.

    ``params`` maps an augmentation name to its parameters. With ``n_process > 1`` the sentences are
    split into contiguous chunks, each parsed and augmented in its own process; results are identical
    to ``n_process=1`` because every sentence's randomness depends only on (seed, name, text).
    """
    names = resolve_names(names)
    sentences = list(sentences)
    if n_process <= 1 or len(sentences) < 2 * n_process:
        return _augment_chunk(names, sentences, seed, params)
    size = -(-len(sentences) // n_process)
    chunks = [sentences[i:i + size] for i in range(0, len(sentences), size)]
    with ProcessPoolExecutor(max_workers=n_process) as pool:
        parts = list(pool.map(_augment_chunk, [names] * len(chunks), chunks, [seed] * len(chunks),
                              [params] * len(chunks)))
    return {name: [s for part in parts for s in part[name]] for name in names}
