"""The shared embedding cache: each distinct sentence encoded once, in chunks, equal to ``model.encode``."""

from __future__ import annotations

import numpy as np

from augcse.evaluation.encoding import EmbeddingCache


def test_chunked_prefetch_equals_one_encode_call(tiny_st) -> None:
    sentences = [f"sentence number {i} " + "word " * (i % 7) for i in range(23)]
    cache = EmbeddingCache(tiny_st, batch_size=4, show_progress=True)
    cache.CHUNK_BATCHES = 2  # chunks of 8 sentences: three chunks and a partial one
    got = cache.encode(sentences + sentences[:5])  # repeats are served from the cache
    assert cache.encoded_count == len(sentences)
    expected = tiny_st.encode(sentences + sentences[:5], batch_size=4)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    cache.prefetch(sentences)
    assert cache.encoded_count == len(sentences)  # nothing encoded twice
