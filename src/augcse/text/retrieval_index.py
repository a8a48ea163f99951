"""Which Faiss index CARDS' retrieval searches: exact where that is cheap, approximate where it is not.

An exact ``IndexFlatIP`` compares every query with every sentence: n² inner products, an hour at 10^6
sentences on two CPU cores and 100× that at 10^7. ``auto`` keeps the exact index below :data:`EXACT_BELOW`
sentences (so every list mined so far, and its cache key, stays as it was) and from there on builds the graph
index HNSW (``IndexHNSWFlat``, inner product on the L2-normalised vectors), which the measured table in
docs/SCALE.md puts ahead of the inverted file at 10^5 and 10^6 (higher recall for the same search time). Its
graph is built on one thread, so two builds give the same lists. ``ivf`` (``IndexIVFFlat``: seeded k-means
cells, of which each query searches the ``nprobe`` nearest) is offered too, and ``ivfpq`` (``IndexIVFPQ``),
which stores each vector as :func:`pq_codes` bytes instead of 4 per dimension, for corpora whose vectors do
not fit in memory (10^8 sentences); its lists are approximate twice over (cells and codes). Each kind is one
entry of :data:`INDEX_KINDS`: its builder, what its lists depend on, whether a GPU can search it.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

logger = logging.getLogger(__name__)

IndexKind = Literal["auto", "flat", "ivf", "hnsw", "ivfpq"]

EXACT_BELOW = 100_000  # auto: the exact flat index below this many indexed sentences, HNSW from it on
KMEANS_SEED = 1234  # the IVF k-means seed (and of its training sample): the same cells in every build
TRAIN_POINTS_PER_LIST = 64  # IVF trains on at most this many sampled sentences per cell (Faiss's floor is 39)
HNSW_EF_CONSTRUCTION = 80  # candidates kept while inserting into the HNSW graph
PQ_BITS = 8  # IVF-PQ: bits per sub-vector code (256 centroids per sub-space)
PQ_TRAIN_FLOOR = 39 * 2**PQ_BITS  # IVF-PQ: Faiss's floor of training points for 256 centroids a sub-space


def ivf_lists(n: int) -> int:
    """IVF cells for ``n`` sentences: about 4·√n, at most one per 39 sentences (Faiss's training floor)."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


def pq_codes(dim: int) -> int:
    """IVF-PQ's sub-vectors (one byte each) for ``dim`` dimensions: the largest divisor of ``dim`` at most
    ``dim / 8``, i.e. 8 dimensions a byte where ``dim`` allows (48 bytes for MiniLM's 384, 96 for 768)."""
    return max(m for m in range(1, max(1, dim // 8) + 1) if dim % m == 0)


@dataclass(frozen=True)
class IndexChoice:
    """The index a retrieval corpus is searched with, and its search-time parameters."""

    kind: IndexKind = "auto"
    nprobe: int = 32  # IVF: the cells each query searches
    ef_search: int = 256  # HNSW: the candidates each query keeps (recall@64 0.90 at 10^6 in docs/SCALE.md)
    hnsw_m: int = 32  # HNSW: links per node
    gpu: bool = False  # search on a GPU when Faiss has GPU support and one is present

    def resolved(self, n: int) -> str:
        """The kind actually built for ``n`` indexed sentences."""
        if self.kind != "auto":
            return self.kind
        return "flat" if n < EXACT_BELOW else "hnsw"

    def identity(self, n: int) -> dict[str, Any]:
        """What the neighbour lists depend on beyond the exact default, for the cache key: empty for the exact
        index on the CPU, so lists mined before indexes were a choice keep their keys."""
        kind = INDEX_KINDS[self.resolved(n)]
        out = kind.identity(n, self)
        if self.gpu and kind.gpu and gpu_available():  # GPU sums differ from the CPU's in the last bits
            out["gpu"] = True
        return out


def gpu_available() -> bool:
    """True when this Faiss build has GPU support and sees a GPU."""
    import faiss

    return hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0


def _flat(vectors: np.ndarray, choice: IndexChoice):
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(vectors)
    return index


def _ivf(vectors: np.ndarray, choice: IndexChoice):
    import faiss

    n, dim = vectors.shape
    return _trained(faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, ivf_lists(n), faiss.METRIC_INNER_PRODUCT),
                    vectors, choice)


def _ivfpq(vectors: np.ndarray, choice: IndexChoice):
    import faiss

    n, dim = vectors.shape
    if n < PQ_TRAIN_FLOOR:
        raise ValueError(f"index: ivfpq needs at least {PQ_TRAIN_FLOOR:,} sentences to train its codes (this corpus "
                         f"has {n:,}); use index: flat or ivf")
    index = faiss.IndexIVFPQ(faiss.IndexFlatIP(dim), dim, ivf_lists(n), pq_codes(dim), PQ_BITS,
                             faiss.METRIC_INNER_PRODUCT)
    index.pq.cp.seed = KMEANS_SEED
    return _trained(index, vectors, choice)


def _trained(index, vectors: np.ndarray, choice: IndexChoice):
    """An inverted file's seeded k-means cells trained on a bounded sample, filled, searching ``nprobe`` cells."""
    index.cp.seed = KMEANS_SEED
    index.cp.max_points_per_centroid = TRAIN_POINTS_PER_LIST
    index.train(vectors)
    index.nprobe = min(choice.nprobe, index.nlist)
    index.add(vectors)
    return index


def _hnsw(vectors: np.ndarray, choice: IndexChoice):
    import faiss

    index = faiss.IndexHNSWFlat(vectors.shape[1], choice.hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    index.hnsw.efSearch = choice.ef_search
    threads = faiss.omp_get_max_threads()  # threads insert in an order of their own: one makes the same graph
    faiss.omp_set_num_threads(1)
    try:
        index.add(vectors)
    finally:
        faiss.omp_set_num_threads(threads)
    return index


def _ivf_identity(n: int, choice: IndexChoice, kind: str = "ivf") -> dict[str, Any]:
    return {"kind": kind, "nlist": ivf_lists(n), "nprobe": choice.nprobe, "kmeans_seed": KMEANS_SEED,
            "train_per_list": TRAIN_POINTS_PER_LIST}


def _hnsw_identity(n: int, choice: IndexChoice) -> dict[str, Any]:
    return {"kind": "hnsw", "m": choice.hnsw_m, "ef_search": choice.ef_search,
            "ef_construction": HNSW_EF_CONSTRUCTION, "build_threads": 1}


@dataclass(frozen=True)
class Kind:
    """One index kind: how it is built (trained and filled), what its lists depend on, whether a GPU searches it."""

    build: Callable[[np.ndarray, IndexChoice], Any]
    identity: Callable[[int, IndexChoice], dict[str, Any]]
    gpu: bool = True


INDEX_KINDS: dict[str, Kind] = {  # ``auto`` is :meth:`IndexChoice.resolved`'s choice among these
    "flat": Kind(_flat, lambda n, choice: {}),
    "ivf": Kind(_ivf, _ivf_identity),
    "ivfpq": Kind(_ivfpq, lambda n, choice: {**_ivf_identity(n, choice, "ivfpq"), "pq_bits": PQ_BITS}),
    "hnsw": Kind(_hnsw, _hnsw_identity, gpu=False),  # Faiss has no GPU HNSW index
}


def build_index(vectors: np.ndarray, choice: IndexChoice):
    """A CPU index of ``vectors`` (float32, L2-normalised rows; inner product is cosine), trained and filled."""
    n = vectors.shape[0]
    kind = choice.resolved(n)
    index = INDEX_KINDS[kind].build(vectors, choice)
    cells = f" in {index.nlist} cells, searching {index.nprobe}" if hasattr(index, "nprobe") else ""  # an IVF
    logger.info("retrieval: %s index of %d sentences%s", kind, n, cells)
    return index


def searcher(index, choice: IndexChoice):
    """The index to search with: a GPU copy when asked for and possible, else ``index`` itself (said why)."""
    if not choice.gpu:
        return index
    import faiss

    if not hasattr(faiss, "StandardGpuResources"):
        logger.warning("retrieval: index_gpu is set but this Faiss (faiss-cpu) has no GPU support; searching on "
                       "the CPU (install faiss-gpu to search on the GPU)")
        return index
    if faiss.get_num_gpus() == 0:
        logger.warning("retrieval: index_gpu is set but Faiss sees no GPU; searching on the CPU")
        return index
    if isinstance(index, faiss.IndexHNSWFlat):
        logger.warning("retrieval: Faiss has no GPU HNSW index; searching on the CPU")
        return index
    resources = faiss.StandardGpuResources()
    on_gpu = faiss.index_cpu_to_gpu(resources, 0, index)
    on_gpu.resources = resources  # the GPU memory lives as long as the index that uses it
    logger.info("retrieval: searching on the GPU")
    return on_gpu
