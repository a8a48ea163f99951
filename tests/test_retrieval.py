"""CARDS retrieval (never the sentence itself or a duplicate, cached and reused), sampling and the CARDS loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import augcse.text.retrieval as retrieval
from augcse.losses.cards import CARDSLoss, text_ids
from augcse.text.retrieval import NegativeSampler, build_neighbours, dedupe_corpus, normalise

CORPUS = [
    "The cat sat on the mat.", "The cat sat on the mat.", "The  cat sat on the mat. ", "A dog sat on the mat.",
    "A dog slept on the rug.", "Stocks fell sharply on Monday.", "Markets dropped sharply on Monday.",
    "The weather is sunny today.", "It is sunny and warm today.", "Two words", "A bird sang in the tree.",
    "Birds were singing in the trees.", "He plays the guitar well.", "She plays the piano well.",
]


def test_dedupe_keeps_first_of_duplicates_and_drops_short():
    kept = dedupe_corpus(CORPUS, min_words=3)
    assert "Two words" not in kept
    assert sum(normalise(t) == "The cat sat on the mat." for t in kept) == 1


def test_neighbours_never_self_or_duplicate_and_cache_reused(tiny_st, tmp_path, monkeypatch):
    found = build_neighbours(CORPUS, CORPUS, tiny_st, k=5, cache_dir=tmp_path)
    for row, query in enumerate(found.queries):
        texts = [found.index_texts[i] for i in found.ids[row]]
        assert len(texts) == 5
        assert all(normalise(t) != normalise(query) for t in texts)
        assert len(set(found.ids[row].tolist())) == 5
    def boom(*args, **kwargs):
        raise AssertionError("encoded again instead of reusing the cache")
    monkeypatch.setattr(retrieval, "mean_pooled", boom)
    again = build_neighbours(CORPUS, CORPUS, tiny_st, k=5, cache_dir=tmp_path)
    assert np.array_equal(again.ids, found.ids)


@pytest.mark.parametrize("sampling", ["R_uniform", "R_top", "D_uniform"])
def test_samplers_never_return_the_query(tiny_st, tmp_path, sampling):
    found = build_neighbours(CORPUS, CORPUS, tiny_st, k=3, cache_dir=tmp_path)
    sampler = NegativeSampler(found, sampling, s=2, seed=0)
    for query in found.queries:
        for epoch in range(10):
            assert all(normalise(t) != normalise(query) for t in sampler(query, epoch))
    if sampling == "R_top":
        q = found.queries[0]
        assert sampler(q) == [found.index_texts[i] for i in found.ids[0][:2]]


def cards_dataset(tiny_st, tmp_path, seed: int = 0):
    from datasets import Dataset

    from augcse.text.views import ViewContext, build_views

    context = ViewContext(model=tiny_st, seed=seed, cache_dir=tmp_path)
    return build_views(Dataset.from_dict({"text": CORPUS[3:9]}),
                       [{"name": "cards", "k": 4, "p": 0.5, "variant": "v1"}], context)


def test_cards_view_draws_afresh_each_epoch(tiny_st, tmp_path, caplog):
    """A draw is a pure function of (seed, epoch, anchor): the same on every access within an epoch, afresh
    in the next epoch, and different for another seed."""
    ds = cards_dataset(tiny_st, tmp_path)
    assert "lower-cases" in caplog.text  # MiniLM's tokenizer is uncased
    first = ds[0]
    assert list(first) == ["anchor", "positive", "retrieved"]
    assert first["positive"] != first["anchor"]  # v1 always switches at least one word
    assert all(ds[0] == first for _ in range(5))
    transform = ds.format["format_kwargs"]["transform"]
    by_epoch = []
    for epoch in range(30):
        transform.set_epoch(epoch)
        by_epoch.append(ds[0])
    assert len({row["retrieved"] for row in by_epoch}) > 1 and first["anchor"] not in {r["retrieved"] for r in by_epoch}
    assert len({row["positive"] for row in by_epoch}) > 1
    transform.set_epoch(0)
    assert ds[0] == first and ds[:3]["retrieved"][0] == first["retrieved"]  # a row alone or in a batch: the same
    other = cards_dataset(tiny_st, tmp_path, seed=1)
    assert [other[i]["retrieved"] for i in range(6)] != [ds[i]["retrieved"] for i in range(6)]


def test_cards_view_dataloader_workers_draw_each_rows_own_values(tiny_st, tmp_path):
    """Two dataloader workers, each with its copy of the transform, give exactly what one process gives:
    each row's draws, not one shared sequence repeated per worker."""
    from torch.utils.data import DataLoader

    ds = cards_dataset(tiny_st, tmp_path)
    ds.format["format_kwargs"]["transform"].set_epoch(3)
    collate = lambda rows: rows  # noqa: E731 - keep the rows as they are
    alone = [r for b in DataLoader(ds, batch_size=2, collate_fn=collate) for r in b]
    workers = [r for b in DataLoader(ds, batch_size=2, collate_fn=collate, num_workers=2) for r in b]
    assert workers == alone  # a shared generator copied into each worker would repeat its sequence per worker


def test_text_ids_ignore_padding_and_mask_own_text(tiny_st, monkeypatch):
    a = tiny_st.tokenize(["The cat sat.", "A dog ran far away today."])
    b = tiny_st.tokenize(["The cat sat."])
    assert text_ids(a)[0] == text_ids(b)[0] and text_ids(a)[0] != text_ids(a)[1]
    torch.manual_seed(0)
    anchor, positive, negative = torch.randn(2, 8), torch.randn(2, 8), torch.randn(2, 8)
    loss = CARDSLoss(tiny_st, head="none")
    query_ids, key_ids = torch.tensor([7, 9]), torch.tensor([1, 7])  # row 1's negative is row 0's anchor
    ids = {"anchor": query_ids, "retrieved": [key_ids]}
    monkeypatch.setattr("augcse.losses.cards.text_ids", lambda features: features)
    masked = loss.compute_loss({"anchor": anchor, "positive": positive, "retrieved": [negative]}, None, ids)
    sim = lambda x, y: torch.nn.functional.cosine_similarity(x, y, dim=0) / 0.05
    rows = []
    for i in range(2):
        logits = [sim(anchor[i], positive[j]) for j in range(2)]
        logits += [sim(anchor[i], negative[j]) for j in range(2) if not (query_ids[i] == key_ids[j])]
        rows.append(-(logits[i] - torch.logsumexp(torch.stack(logits), 0)))
    assert masked["contrastive"].item() == pytest.approx(float(sum(rows) / 2), rel=1e-5)


LONG = ("The quick brown fox jumps over the lazy dog while the farmer watches from the old wooden "
        "barn near the river bank")


def test_retrieval_max_seq_length_embeds_the_truncated_sentence(tiny_st):
    """Cut at 8 tokens, a long sentence is encoded as its first 6 word pieces between [CLS] and [SEP];
    the model's own limit (32 here) is back afterwards."""
    ids = tiny_st.tokenizer(LONG, truncation=True, max_length=8)["input_ids"]
    head = tiny_st.tokenizer.decode(ids[1:-1])
    assert tiny_st.tokenizer(head)["input_ids"] == ids  # the truncated form tokenizes to the same 8 ids
    full = retrieval.mean_pooled(tiny_st, [LONG])
    cut = retrieval.mean_pooled(tiny_st, [LONG], max_seq_length=8)
    assert tiny_st.max_seq_length == 32
    np.testing.assert_allclose(cut, retrieval.mean_pooled(tiny_st, [head]), rtol=0, atol=1e-6)
    assert np.abs(cut - full).max() > 1e-3
    np.testing.assert_array_equal(full, retrieval.mean_pooled(tiny_st, [LONG], max_seq_length=None))


def test_cards_view_passes_retrieval_max_seq_length_and_caches_it_apart(tiny_st, tmp_path, monkeypatch):
    from datasets import Dataset

    from augcse.text.views import ViewContext, build_views

    lengths = []
    encode = retrieval.mean_pooled
    monkeypatch.setattr(retrieval, "mean_pooled", lambda model, texts, batch_size=128, max_seq_length=None: (
        lengths.append((max_seq_length, model.max_seq_length)) or encode(model, texts, batch_size, max_seq_length)))
    context = ViewContext(model=tiny_st, seed=0, cache_dir=tmp_path)
    for cut in (None, 8, None, 8):
        build_views(Dataset.from_dict({"text": CORPUS[3:9] + [LONG]}),
                    [{"name": "cards", "k": 2, "retrieval_max_seq_length": cut}], context)
    assert lengths == [(None, 32), (8, 32)]  # each length mined once, then read from its own cache
