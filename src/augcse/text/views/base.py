"""The view registry and what every view builder shares: the context, the anchor column, the augmentation cache.

A view builder is a registered function ``(dataset, context, **params) -> dataset`` that adds named
columns. It also declares, from its parameters alone, the columns it writes (``outputs``), so a recipe
is checked against the loss's roles before anything loads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: checking a recipe's views loads no datasets (about 1 s)
    from datasets import Dataset


from augcse.text.augment import build_cache
from augcse.text.augment.cache import Texts, cache_key

ANCHOR = "anchor"
LABEL = "label"
MAP_BATCH = 1000  # rows a view's batched ``map`` handles at a time: what of the corpus is in Python at once


@dataclass
class ViewContext:
    """What a view builder may need besides the dataset."""

    model: Any  # the SentenceTransformer being trained (e.g. to encode the corpus for retrieval)
    seed: int = 42
    data_dir: Path | None = None
    run_dir: Path | None = None
    cache_dir: Path | None = None
    wait_seconds: float | None = None  # how long a process waits for another building a shared cache


ViewBuilder = Callable[..., "Dataset"]
# columns a view writes, from its (defaults-filled) parameters: column → None for text, or for a label
# column ``{"size": K, "names": (...), "spec": <as written>}``; a key mapped to ``REMOVED`` is dropped
Outputs = Callable[[Mapping[str, Any]], dict[str, Any]]
REMOVED = object()


@dataclass(frozen=True)
class View:
    builder: ViewBuilder
    outputs: Outputs
    replaces: bool = False  # the view replaces the dataset's columns instead of adding to them


VIEWS: dict[str, View] = {}


def register_view(name: str, outputs: Outputs, replaces: bool = False) -> Callable[[ViewBuilder], ViewBuilder]:
    """Decorator: make a view builder available to recipes as ``{name: <name>, …params}``."""

    def decorator(fn: ViewBuilder) -> ViewBuilder:
        if name in VIEWS:
            raise ValueError(f"view {name!r} is registered twice")
        VIEWS[name] = View(fn, outputs, replaces)
        return fn

    return decorator


def texts_of(dataset: Dataset) -> list[str]:
    """The anchor sentences of a corpus or of an already built dataset, as a list: the whole column in memory.

    For views that need every sentence at once (retrieval); the others read slices with ``Dataset.map``.
    """
    return list(dataset[ANCHOR if ANCHOR in dataset.column_names else "text"])


def as_anchor(dataset: Dataset) -> Dataset:
    """Rename a corpus's ``text`` column to ``anchor`` (the first role of every loss)."""
    return dataset.rename_column("text", ANCHOR) if "text" in dataset.column_names else dataset


def cache_root(context: ViewContext) -> Path:
    """Where augmentation caches and retrieval indexes live: the context's cache dir, else beside the runs."""
    if context.cache_dir is not None:
        return Path(context.cache_dir)
    if context.run_dir is not None:
        return Path(context.run_dir).parent / ".cache"
    return Path.home() / ".cache" / "augcse"


def cached_augmentations(sentences: Texts, names: Sequence[str], context: ViewContext, seed: int,
                         params: dict[str, dict] | None = None, n_process: int = 1) -> Dataset:
    """Run each augmentation once over the sentences through the library's content-keyed cache.

    ``sentences`` may be a Dataset (its ``anchor``/``text`` column), read a slice at a time; the result is
    memory-mapped from the cache's shards, in the sentences' order.
    """
    key = cache_key(sentences, list(names), params or {}, seed)
    out = cache_root(context) / "augment" / key[:20]
    return build_cache(sentences, list(names), out, seed=seed, n_process=n_process, params=params,
                       progress=False, wait_seconds=context.wait_seconds)


class RowDraws:
    """A view's per-row draws taken a batch at a time, equal to drawing them for the whole corpus at once.

    The same numbers as ``rng = default_rng(seed); choice = rng.integers(0, k, size=n); u = rng.random(n)``:
    NumPy's generators draw a batch as consecutive draws (PCG64 keeps a spare 32-bit half in its state), so
    batches of any size concatenate to the one-shot arrays. The uniforms come from a second generator first
    moved past the ``n`` choices, so the memory is a batch's, not ``n`` numbers'.
    """

    def __init__(self, seed: int, n: int, k: int, uniform: bool = False) -> None:
        import numpy as np

        self.k = k
        self.choices = np.random.default_rng(seed)
        self.uniforms = np.random.default_rng(seed) if uniform else None
        if self.uniforms is not None:
            for start in range(0, n, 1 << 20):  # skip the choices' draws
                self.uniforms.integers(0, k, size=min(1 << 20, n - start))

    def take(self, m: int) -> tuple[Any, Any]:
        """The next ``m`` rows' choices in ``[0, k)`` and uniforms in ``[0, 1)`` (None without ``uniform``)."""
        return (self.choices.integers(0, self.k, size=m),
                self.uniforms.random(m) if self.uniforms is not None else None)


def view_fingerprint(dataset: Dataset, view: str, **params: Any) -> str:
    """The fingerprint of a view's ``map`` result from the input's and the view's parameters.

    Given explicitly, so ``datasets`` does not hash the function's closure (an augmentation cache, a generator).
    """
    from datasets.fingerprint import Hasher

    return Hasher.hash([dataset._fingerprint, view, params])
