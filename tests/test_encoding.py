"""The shared embedding cache: each distinct sentence encoded once, in token-length batches, equal to ``model.encode``."""

from __future__ import annotations

import numpy as np

from augcse.evaluation.encoding import EmbeddingCache, token_sorted


def test_batched_prefetch_equals_one_encode_call(tiny_st) -> None:
    sentences = [f"sentence number {i} " + "word " * (i % 7) for i in range(23)]
    cache = EmbeddingCache(tiny_st, batch_size=4, show_progress=True)  # five batches of 4 and one of 3
    got = cache.encode(sentences + sentences[:5])  # repeats are served from the cache
    assert cache.encoded_count == len(sentences)
    expected = tiny_st.encode(sentences + sentences[:5], batch_size=4)
    np.testing.assert_allclose(got, expected, atol=1e-6)
    cache.prefetch(sentences)
    assert cache.encoded_count == len(sentences)  # nothing encoded twice


def test_batches_are_formed_by_token_count_not_characters(tiny_st) -> None:
    # by characters these interleave (a long word is one or a few tokens; "a a a a" is four)
    short_by_chars = ["a a a a a a", "b b b b b b b"]  # 6–7 tokens, 11–13 characters
    long_by_chars = ["extraordinarily", "internationalization"]  # few tokens, 15–20 characters
    order = token_sorted(tiny_st, [*long_by_chars, *short_by_chars, "a a a a a a"])
    assert set(order[:2]) == set(long_by_chars) and order[2:] == short_by_chars  # deduplicated
    counts = [len(tiny_st.tokenizer(s)["input_ids"]) for s in order]
    assert counts == sorted(counts)

    seen: list[list[str]] = []
    encode = tiny_st.encode

    def spy(batch, **kwargs):
        seen.append(list(batch))
        return encode(batch, **kwargs)

    tiny_st.encode = spy
    EmbeddingCache(tiny_st, batch_size=2).prefetch([*short_by_chars, *long_by_chars])
    assert seen == [order[:2], short_by_chars]  # each batch one call, equal lengths together


def test_the_order_does_not_depend_on_the_input_order(tiny_st) -> None:
    sentences = [f"{w} " * (i % 5) + w for i, w in enumerate("alpha beta gamma delta epsilon zeta eta".split())]
    assert token_sorted(tiny_st, sentences) == token_sorted(tiny_st, list(reversed(sentences)))
