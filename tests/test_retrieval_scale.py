"""CARDS retrieval at scale: the index chosen by corpus size (exact below the threshold, keys unchanged),
approximate recall, IVF reproducibility, sharded encoding equal to one process, and the view's refusals."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import typing

import numpy as np
import pytest

import augcse.text.retrieval as retrieval
import augcse.text.retrieval_shards as retrieval_shards
from augcse.core.schema import RecipeError
from augcse.text.retrieval import build_neighbours, dedupe_corpus, mean_pooled
from augcse.text.retrieval_index import (EXACT_BELOW, INDEX_KINDS, PQ_TRAIN_FLOOR, IndexChoice, IndexKind, build_index,
                                        ivf_lists)
from augcse.text.retrieval_shards import resolve_shards, shard_rows


@pytest.fixture(scope="module")
def wiki(data_dir) -> list[str]:
    return (data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text().splitlines()


def clustered(n: int, dim: int = 32, centres: int = 100, seed: int = 0) -> np.ndarray:
    """Unit vectors from a Gaussian mixture: neighbourhoods with structure, as sentence embeddings have."""
    rng = np.random.default_rng(seed)
    means = rng.standard_normal((centres, dim))
    points = means[rng.integers(0, centres, n)] + 0.35 * rng.standard_normal((n, dim))
    points = points.astype(np.float32)
    return points / np.linalg.norm(points, axis=1, keepdims=True)


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


def test_auto_is_exact_below_the_threshold_and_approximate_from_it():
    assert IndexChoice().resolved(EXACT_BELOW - 1) == "flat" and IndexChoice().resolved(EXACT_BELOW) == "hnsw"
    assert IndexChoice().identity(EXACT_BELOW - 1) == {} and IndexChoice("flat").identity(10**7) == {}
    assert IndexChoice().identity(EXACT_BELOW) == {"kind": "hnsw", "m": 32, "ef_search": 256, "ef_construction": 80,
                                                   "build_threads": 1}
    assert IndexChoice("ivf").identity(EXACT_BELOW)["nlist"] == ivf_lists(EXACT_BELOW) == round(4 * EXACT_BELOW ** 0.5)
    assert IndexChoice("ivf", nprobe=8).identity(5000) != IndexChoice("ivf", nprobe=16).identity(5000)


def test_auto_below_the_threshold_keeps_the_lists_and_the_cache_key(tiny_st, tmp_path, wiki):
    """The cache folder is the key of before (no index entry), and the lists are the exact search's."""
    import faiss

    corpus = wiki[:400]
    found = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=tmp_path)
    texts = dedupe_corpus(corpus)
    queries = list(dict.fromkeys(corpus))
    before = {"corpus": retrieval._texts_hash(texts), "queries": retrieval._texts_hash(queries),
              "model": retrieval.model_fingerprint(tiny_st), "k": 8, "min_words": 3}
    key = hashlib.sha256(json.dumps(before).encode()).hexdigest()[:20]
    assert (tmp_path / key / "neighbours.npz").is_file()
    assert isinstance(faiss.read_index(str(tmp_path / key / "index.faiss")), faiss.IndexFlatIP)
    vectors = mean_pooled(tiny_st, texts)
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(vectors)
    position = {retrieval.normalise(t): i for i, t in enumerate(texts)}
    for row, query in enumerate(found.queries[:50]):
        if retrieval.normalise(query) not in position:
            continue
        _, ids = exact.search(vectors[position[retrieval.normalise(query)]][None], 10)
        expected = [i for i in ids[0] if i != position[retrieval.normalise(query)]][:8]
        assert found.ids[row].tolist() == expected


FAISS_CLASS = {"flat": "IndexFlatIP", "ivf": "IndexIVFFlat", "ivfpq": "IndexIVFPQ", "hnsw": "IndexHNSWFlat"}


def test_every_kind_a_recipe_may_name_has_a_builder():
    assert set(typing.get_args(IndexKind)) == {"auto", *INDEX_KINDS} and set(INDEX_KINDS) == set(FAISS_CLASS)


@pytest.mark.parametrize("kind", sorted(INDEX_KINDS))
def test_each_kind_builds_its_own_index_filled_and_keyed_by_its_name(kind):
    """The registry's builder for ``kind`` gives that Faiss class holding every vector, and the cache key
    names the kind (the exact index alone keeps the key of before)."""
    points = clustered(PQ_TRAIN_FLOOR if kind == "ivfpq" else 2_000)
    index = build_index(points, IndexChoice(kind))
    assert type(index).__name__ == FAISS_CLASS[kind] and index.ntotal == len(points)
    assert IndexChoice(kind).identity(len(points)).get("kind") == (None if kind == "flat" else kind)


@pytest.mark.parametrize("choice, bound8, bound64", [(IndexChoice("ivf"), 0.9, 0.9), (IndexChoice("hnsw"), 0.9, 0.9),
                                                     (IndexChoice("ivfpq"), 0.2, 0.45)])
def test_approximate_recall_on_a_clustered_set(choice, bound8, bound64):
    """On 20,000 clustered points, recall@8 and @64 of the approximate index against the exact one hold a
    bound with margin (IVF and HNSW measured about 0.99; IVF-PQ, 4 one-byte codes for these 32 dimensions,
    0.28 and 0.55); one probed cell of an inverted file is visibly worse, so the bound can fail."""
    import faiss

    points = clustered(20_000)
    queries = points[:500]
    exact = faiss.IndexFlatIP(points.shape[1])
    exact.add(points)
    _, truth = exact.search(queries, 64)
    index = build_index(points, choice)
    assert type(index).__name__ == {"ivf": "IndexIVFFlat", "hnsw": "IndexHNSWFlat", "ivfpq": "IndexIVFPQ"}[choice.kind]
    _, found = index.search(queries, 64)
    assert recall(found[:, :8], truth[:, :8]) >= bound8 and recall(found, truth) >= bound64
    if choice.kind != "hnsw":
        index.nprobe = 1
        _, few = index.search(queries, 64)
        assert recall(few, truth) < bound64


def test_ivfpq_refuses_a_corpus_too_small_to_train_its_codes():
    with pytest.raises(ValueError, match=r"ivfpq needs at least 9,984 sentences .* has 5,000\); use index: flat or ivf"):
        build_index(clustered(5_000), IndexChoice("ivfpq"))


def test_two_hnsw_builds_give_the_same_graph_and_the_threads_come_back():
    """auto's index from 10^5 on is built on one thread: the same neighbours and scores in two builds, and
    Faiss's thread count is restored after."""
    import faiss

    points = clustered(6_000)
    threads = faiss.omp_get_max_threads()
    results = [build_index(points, IndexChoice("hnsw", ef_search=32)).search(points[:300], 16) for _ in range(2)]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert faiss.omp_get_max_threads() == threads


def test_ivf_lists_are_the_same_in_two_builds(tiny_st, tmp_path, wiki):
    corpus = wiki[:1200]
    one = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=tmp_path / "a", index=IndexChoice("ivf", nprobe=4))
    two = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=tmp_path / "b", index=IndexChoice("ivf", nprobe=4))
    np.testing.assert_array_equal(one.ids, two.ids)
    np.testing.assert_array_equal(one.scores, two.scores)
    flat = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=tmp_path / "a")
    assert len(list((tmp_path / "a").glob("*/neighbours.npz"))) == 2  # the IVF lists have a key of their own
    assert 0.5 < recall(one.ids, flat.ids) < 1  # approximate, yet mostly the exact lists
    meta = json.loads(next(p for p in (tmp_path / "a").glob("*/meta.json") if '"kind"' in p.read_text()).read_text())
    assert meta["index"]["kind"] == "ivf" and meta["index"]["nlist"] == ivf_lists(len(dedupe_corpus(corpus)))


def test_shard_rows_cover_the_corpus_on_batch_boundaries():
    rows = shard_rows(1000, 128, 3)
    assert [r.start for r in rows] == [0, 256, 640] and rows[-1].stop == 1000
    assert all(r.start % 128 == 0 for r in rows)
    assert [len(r) for r in shard_rows(100, 128, 2)] == [0, 100]


def test_two_shards_by_the_shard_option_equal_one_process(tiny_st, tmp_path, wiki, monkeypatch):
    """Shard 1 (another process, here a thread) encodes its half and waits; shard 0 encodes the other half,
    merges and writes the lists; both return exactly the single process's lists."""
    monkeypatch.setattr(retrieval_shards, "POLL_SECONDS", 0.01)
    corpus = wiki[:300]
    alone = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=tmp_path / "one", batch_size=32)
    cache = tmp_path / "two"
    second: list = []
    worker = threading.Thread(target=lambda: second.append(build_neighbours(
        corpus, corpus, tiny_st, k=8, cache_dir=cache, batch_size=32, shards=2, shard=1)))
    worker.start()
    deadline = time.monotonic() + 120
    while not list(cache.glob("embeddings/*/embeddings-00001-of-00002.npy")) and time.monotonic() < deadline:
        time.sleep(0.05)  # encode one shard at a time: the two share a model
    first = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=cache, batch_size=32, shards=2, shard=0)
    worker.join(timeout=120)
    for found in (first, second[0]):
        np.testing.assert_array_equal(found.ids, alone.ids)
        np.testing.assert_array_equal(found.scores, alone.scores)
    assert len(list(cache.glob("embeddings/*/embeddings-*-of-00002.npy"))) == 2


def test_shards_in_turn_resume_and_equal_one_process(tiny_st, tmp_path, wiki, monkeypatch):
    """One process naming 3 shards encodes them in turn; run again after losing one shard and the lists, it
    encodes that shard only; both times the lists are the single process's."""
    import shutil

    corpus = [t for t in wiki[:400] if len(t.split()) >= 3][:300]  # every query indexed: no extra encoding
    alone = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=tmp_path / "one", batch_size=32)
    encoded = []
    encode = retrieval.mean_pooled
    monkeypatch.setattr(retrieval, "mean_pooled", lambda model, texts, *args: encoded.append(len(texts)) or
                        encode(model, texts, *args))
    cache = tmp_path / "three"
    found = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=cache, batch_size=32, shards=3)
    np.testing.assert_array_equal(found.ids, alone.ids)
    np.testing.assert_array_equal(found.scores, alone.scores)
    assert len(encoded) == 3 and sum(encoded) == len(dedupe_corpus(corpus))
    next(cache.glob("embeddings/*/embeddings-00001-of-00003.npy")).unlink()
    for lists in cache.glob("*/neighbours.npz"):
        shutil.rmtree(lists.parent)
    encoded.clear()
    again = build_neighbours(corpus, corpus, tiny_st, k=8, cache_dir=cache, batch_size=32, shards=3)
    assert encoded == [len(shard_rows(len(dedupe_corpus(corpus)), 32, 3)[1])]
    np.testing.assert_array_equal(again.ids, alone.ids)


def test_torchrun_ranks_are_the_shards_on_one_node_only(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert resolve_shards(None, None) == (1, None)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert resolve_shards(None, None) == (4, 2)
    assert resolve_shards(2, None) == (2, None)  # shards that are not the ranks: every missing one in turn
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two nodes: their disks may differ, so no sharing by default
    assert resolve_shards(None, None) == (1, None)
    with pytest.raises(ValueError, match="not one of the 2 shards"):
        resolve_shards(2, 2)


@pytest.mark.parametrize("spec, message", [
    ({"index": "annoy"}, "'data.views[0].index' must be one of 'auto', 'flat', 'ivf', 'hnsw', 'ivfpq'"),
    ({"nprobe": 0}, "'data.views[0].nprobe' must be > 0"),
    ({"ef_search": 1.5}, "'data.views[0].ef_search'"),
    ({"shards": 0}, "'data.views[0].shards' must be > 0"),
    ({"shard": 1}, "shard needs shards"),
    ({"shards": 2, "shard": 2}, "shard 2 is not one of the 2 shards"),
])
def test_the_view_refuses_bad_index_and_shard_parameters_in_one_line(spec, message):
    from augcse.text.views import produced_columns

    with pytest.raises(RecipeError) as caught:
        produced_columns([{"name": "cards", **spec}])
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_index_gpu_without_faiss_gpu_says_so_and_searches_on_the_cpu(caplog):
    import faiss

    if hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:
        pytest.skip("this Faiss has a GPU: the fallback is not taken")
    from augcse.text.retrieval_index import searcher

    index = build_index(clustered(500), IndexChoice("flat", gpu=True))
    with caplog.at_level(logging.WARNING):
        assert searcher(index, IndexChoice("flat", gpu=True)) is index
    assert "searching on the CPU" in caplog.text
    assert IndexChoice("flat", gpu=True).identity(500) == {}  # no GPU used: the CPU lists and their key
