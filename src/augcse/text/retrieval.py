"""CARDS' retrieved hard negatives: nearest corpus sentences under the starting model, mined once and cached.

The index holds the deduplicated corpus (sentences of at least ``min_words`` words), each encoded once by
the model *before* training (mean pooling of the token embeddings, L2-normalised, so inner product is
cosine) in a Faiss index: the exact ``IndexFlatIP`` below 10^5 sentences, an inverted file above
(:mod:`augcse.text.retrieval_index`); ``max_seq_length`` cuts the texts it sees (32 in the authors'
code; ``None`` keeps the model's own length). The encoding may be split into shards across processes
(:mod:`augcse.text.retrieval_shards`). Every training sentence gets its top-k neighbours with itself
and exact duplicates (equal after whitespace normalisation) excluded. CARDS found that refreshing the
index during training does not help (false negatives), so it never changes; it is cached on disk under
a key of the corpus, the queries, the model, k and an approximate index's parameters, and reused by
every run that shares them.

Each epoch, each anchor's negative is drawn from its list by a registered sampler (``R_uniform`` default,
``R_top``, ``D_uniform``; CARDS Fig. 3), from a generator keyed by (seed, epoch, anchor): no draw state.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from augcse.core.sole_builder import sole_builder
from augcse.text.retrieval_index import IndexChoice, build_index, searcher
from augcse.text.retrieval_shards import merged, resolve_shards, save_array, shard_file, shard_rows, wait_for

logger = logging.getLogger(__name__)


def normalise(text: str) -> str:
    """The duplicate key: whitespace collapsed, ends stripped."""
    return " ".join(text.split())


def dedupe_corpus(texts: Sequence[str], min_words: int = 3) -> list[str]:
    """Unique sentences (by :func:`normalise`) of at least ``min_words`` words, in first-seen order."""
    seen: set[str] = set()
    out = []
    for text in texts:
        key = normalise(text)
        if len(key.split()) >= min_words and key not in seen:
            seen.add(key)
            out.append(text)
    return out


def model_fingerprint(model) -> str:
    """A short hash of the model's identity: its class, parameter shapes and a sample of its weights."""
    digest = hashlib.sha256(type(model).__name__.encode())
    params = list(model.state_dict().items())
    for name, tensor in params:
        digest.update(f"{name}:{tuple(tensor.shape)}".encode())
    for _, tensor in params[:2] + params[-2:]:
        digest.update(tensor.detach().float().cpu().numpy().tobytes()[:1 << 20])
    return digest.hexdigest()[:16]


def _texts_hash(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8") + b"\n")
    return digest.hexdigest()


@contextmanager
def truncated(model, max_seq_length: int | None) -> Iterator[None]:
    """``model.max_seq_length`` set to ``max_seq_length`` inside the block, restored after it (``None``: as is)."""
    if max_seq_length is None:
        yield
        return
    before = model.max_seq_length
    model.max_seq_length = max_seq_length
    try:
        yield
    finally:
        model.max_seq_length = before


def mean_pooled(model, texts: Sequence[str], batch_size: int = 128, max_seq_length: int | None = None) -> np.ndarray:
    """Mean of the token embeddings under ``model`` (its own pooler aside), L2-normalised, float32;
    each text cut at ``max_seq_length`` tokens (``None``: the model's own limit)."""
    import torch

    vectors = []
    with truncated(model, max_seq_length):
        for start in range(0, len(texts), batch_size):
            tokens = model.encode(list(texts[start:start + batch_size]), output_value="token_embeddings",
                                  batch_size=batch_size, convert_to_numpy=False)
            vectors += [t.float().mean(0) for t in tokens]
    matrix = torch.stack(vectors).cpu().numpy().astype(np.float32)
    return matrix / np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)


@dataclass
class Neighbours:
    """Top-k index neighbours of each query sentence: ``ids[q]`` into ``index_texts``, hardest first."""

    index_texts: list[str]
    queries: list[str]
    ids: np.ndarray  # (n_queries, k) int64
    scores: np.ndarray  # (n_queries, k) float32 cosine

    def row_of(self) -> dict[str, int]:
        return {text: row for row, text in enumerate(self.queries)}


def build_neighbours(corpus: Sequence[str], queries: Sequence[str], model, k: int, cache_dir: str | Path,
                     min_words: int = 3, batch_size: int = 128, max_seq_length: int | None = None,
                     index: IndexChoice | None = None, shards: int | None = 1,
                     shard: int | None = None, wait_seconds: float | None = None) -> Neighbours:
    """Mine (or load from ``cache_dir``) the top-k neighbours of ``queries`` in the deduplicated ``corpus``,
    encoded cut at ``max_seq_length`` tokens (``None``: the model's own limit), searched with ``index``
    (default: exact below 10^5 sentences), the encoding split into ``shards`` (see :func:`corpus_vectors`).

    The process that builds the lists holds their folder's lock (:func:`augcse.core.sole_builder.sole_builder`):
    other processes building the same lists (every rank of a job whose nodes do not share the shards) wait up to
    ``wait_seconds`` and read them; processes that only encode a shard wait as long for the lists."""
    choice = index or IndexChoice()
    index_texts = dedupe_corpus(corpus, min_words)
    queries = list(dict.fromkeys(queries))
    if len(index_texts) < 2:
        raise ValueError(f"the retrieval corpus has {len(index_texts)} sentence(s) of ≥ {min_words} words; need more")
    corpus_hash, fingerprint = _texts_hash(index_texts), model_fingerprint(model)
    identity: dict = {"corpus": corpus_hash, "queries": _texts_hash(queries), "model": fingerprint, "k": k,
                      "min_words": min_words}
    if max_seq_length is not None:  # only when set, so the caches mined at full length keep their keys
        identity["max_seq_length"] = max_seq_length
    if approximate := choice.identity(len(index_texts)):  # likewise: the exact index adds nothing
        identity["index"] = approximate
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:20]
    folder = Path(cache_dir) / key
    embeddings = Path(cache_dir) / "embeddings" / hashlib.sha256(json.dumps(
        [corpus_hash, fingerprint, batch_size, max_seq_length]).encode()).hexdigest()[:20]
    n_shards, own = resolve_shards(shards, shard)
    if own not in (None, 0):  # this process encodes its shard; shard 0's process builds the lists
        if not (folder / "neighbours.npz").is_file():
            corpus_vectors(index_texts, model, embeddings, batch_size, max_seq_length, n_shards, own)
            wait_for([folder / "neighbours.npz"], "the neighbour lists", wait_seconds)
        return _load(folder, index_texts, queries)
    with sole_builder(folder, "the retrieval neighbour lists", wait_seconds):
        if (folder / "neighbours.npz").is_file():
            logger.info("retrieval: reusing the cached neighbour lists in %s", folder)
            return _load(folder, index_texts, queries)
        vectors = corpus_vectors(index_texts, model, embeddings, batch_size, max_seq_length, n_shards, own,
                                 wait_seconds)
        return _write_lists(folder, vectors, index_texts, queries, model, k, choice, approximate, min_words,
                            batch_size, max_seq_length)


def _write_lists(folder: Path, vectors: np.ndarray, index_texts: list[str], queries: list[str], model, k: int,
                 choice: IndexChoice, approximate: dict | None, min_words: int, batch_size: int,
                 max_seq_length: int | None) -> Neighbours:
    """Index ``vectors``, search every query and write the index and lists into ``folder`` (the lists last)."""
    import faiss

    index_ = build_index(vectors, choice)
    out_ids, out_scores = _search(index_, vectors, index_texts, queries, model, k, choice, batch_size, max_seq_length)
    folder.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index_, str(folder / "index.faiss"))
    (folder / "meta.json").write_text(json.dumps({"index_size": len(index_texts), "queries": len(queries),
                                                  "k": out_ids.shape[1], "min_words": min_words,
                                                  "max_seq_length": max_seq_length,
                                                  **({"index": approximate} if approximate else {})}))
    partial = folder / f".neighbours.{os.getpid()}.partial.npz"
    np.savez(partial, ids=out_ids, scores=out_scores)
    os.replace(partial, folder / "neighbours.npz")  # last and whole: other processes wait for this file
    logger.info("retrieval: indexed %d sentences, top-%d for %d queries, cached in %s",
                len(index_texts), out_ids.shape[1], len(queries), folder)
    return Neighbours(index_texts, queries, out_ids, out_scores)


def _load(folder: Path, index_texts: list[str], queries: list[str]) -> Neighbours:
    saved = np.load(folder / "neighbours.npz", allow_pickle=False)
    return Neighbours(index_texts, queries, saved["ids"], saved["scores"])


def corpus_vectors(index_texts: list[str], model, folder: Path, batch_size: int, max_seq_length: int | None,
                   shards: int, shard: int | None, wait_seconds: float | None = None) -> np.ndarray | None:
    """The index sentences' embeddings, in order. One shard: encoded here, kept in memory. Several: each
    shard's file in ``folder`` is encoded by this process (``shard``; None: every missing one in turn) or
    another; shard 0's process (or the one doing all) waits for all and returns them merged, the others None."""
    if shards == 1:
        return mean_pooled(model, index_texts, batch_size, max_seq_length)
    rows = shard_rows(len(index_texts), batch_size, shards)
    for i in range(shards) if shard is None else [shard]:
        path = shard_file(folder, i, shards)
        if path.exists():
            logger.info("retrieval: shard %d of %d already encoded in %s", i, shards, path)
            continue
        texts = index_texts[rows[i].start:rows[i].stop]
        save_array(path, mean_pooled(model, texts, batch_size, max_seq_length) if texts
                   else np.zeros((0, 0), np.float32))
        logger.info("retrieval: encoded shard %d of %d (%d sentences) into %s", i, shards, len(texts), path)
    if shard not in (None, 0):
        return None
    wait_for([shard_file(folder, i, shards) for i in range(shards)], f"the {shards} embedding shards", wait_seconds)
    return merged(folder, shards)


def _search(index, vectors: np.ndarray, index_texts: list[str], queries: list[str], model, k: int,
            choice: IndexChoice, batch_size: int, max_seq_length: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Each query's top-k index rows and cosines, itself and its duplicates excluded."""
    import faiss

    exact = isinstance(index, faiss.IndexFlat)
    position = {normalise(t): i for i, t in enumerate(index_texts)}
    missing = [q for q in queries if normalise(q) not in position]
    extra = (mean_pooled(model, missing, batch_size, max_seq_length) if missing
             else np.zeros((0, vectors.shape[1]), np.float32))
    extra_row = {q: i for i, q in enumerate(missing)}
    query_vectors = np.stack([vectors[position[normalise(q)]] if q not in extra_row else extra[extra_row[q]]
                              for q in queries]) if queries else vectors[:0]
    k_eff = min(k, len(index_texts) - 1)
    scores, ids = searcher(index, choice).search(query_vectors, min(k_eff + 2, len(index_texts)))
    out_ids = np.full((len(queries), k_eff), -1, dtype=np.int64)
    out_scores = np.zeros((len(queries), k_eff), dtype=np.float32)
    for row, query in enumerate(queries):
        own = normalise(query)
        kept = [(i, s) for i, s in zip(ids[row], scores[row]) if i >= 0 and normalise(index_texts[i]) != own]
        if len(kept) < k_eff:  # ties (or an IVF's few probed cells) left too few: search this row exactly
            wide_scores, wide_ids = (index.search(query_vectors[row:row + 1], len(index_texts)) if exact else
                                     faiss.knn(query_vectors[row:row + 1], vectors, len(index_texts),
                                               metric=faiss.METRIC_INNER_PRODUCT))
            kept = [(i, s) for i, s in zip(wide_ids[0], wide_scores[0]) if normalise(index_texts[i]) != own]
        kept = kept[:k_eff]
        out_ids[row, :len(kept)] = [i for i, _ in kept]
        out_scores[row, :len(kept)] = [s for _, s in kept]
    return out_ids, out_scores


# --------------------------------------------------------------------------- sampling (CARDS Fig. 3)

Sampler = Callable[[np.random.Generator, np.ndarray, int, int], np.ndarray]


def r_uniform(rng: np.random.Generator, row: np.ndarray, index_size: int, s: int) -> np.ndarray:
    """s of the k retrieved neighbours, uniformly without replacement (the default)."""
    valid = row[row >= 0]
    return rng.choice(valid, size=s, replace=len(valid) < s)


def r_top(rng: np.random.Generator, row: np.ndarray, index_size: int, s: int) -> np.ndarray:
    """The s hardest neighbours."""
    valid = row[row >= 0]
    return valid[np.arange(s) % len(valid)]


def d_uniform(rng: np.random.Generator, row: np.ndarray, index_size: int, s: int) -> np.ndarray:
    """s sentences uniformly from the whole index (the caller rejects the sentence itself)."""
    return rng.integers(0, index_size, size=s)


SAMPLERS: dict[str, Sampler] = {"R_uniform": r_uniform, "R_top": r_top, "D_uniform": d_uniform}


def keyed_rng(seed: int, *keys: object) -> np.random.Generator:
    """A generator that depends only on ``seed`` and ``keys`` (e.g. the epoch and the sentence), so a draw
    is the same in an uninterrupted run, a resumed one and every dataloader worker: nothing to checkpoint."""
    digest = hashlib.blake2b("\x1f".join(map(str, (seed, *keys))).encode(), digest_size=8).digest()
    return np.random.default_rng(int.from_bytes(digest, "little"))


class NegativeSampler:
    """Draws a query's negatives, never the query itself or an exact duplicate: a pure function of
    (seed, epoch, query), so each epoch draws afresh and a resumed run draws what it would have."""

    def __init__(self, neighbours: Neighbours, sampling: str = "R_uniform", s: int = 1, seed: int = 0) -> None:
        if sampling not in SAMPLERS:
            raise ValueError(f"unknown sampling {sampling!r}; choose one of {', '.join(SAMPLERS)}")
        self.neighbours = neighbours
        self.sample = SAMPLERS[sampling]
        self.s = s
        self.seed = seed
        self.row = neighbours.row_of()
        self.keys = [normalise(t) for t in neighbours.index_texts]

    def __call__(self, query: str, epoch: int = 0) -> list[str]:
        row = self.neighbours.ids[self.row[query]]
        own = normalise(query)
        rng = keyed_rng(self.seed, "negatives", epoch, query)
        picks = self.sample(rng, row, len(self.keys), self.s)
        out = []
        for pick in picks:
            while self.keys[pick] == own:  # only D_uniform can land on the query itself
                pick = rng.integers(0, len(self.keys))
            out.append(self.neighbours.index_texts[pick])
        return out
