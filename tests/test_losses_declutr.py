"""DeCLUTR: the span sampler against the authors' sampling on the same draws, the loss against their
NT-Xent operations (one and several positives per anchor), the view, and a short training run whose saved
model is a plain sentence-transformers one."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import reload_plainly, train_briefly
from augcse.losses import LOSSES, DeCLUTRLoss
from augcse.text.views import ViewContext, build_views
from augcse.text.views.declutr import sample_spans

DOCUMENT = ("The cat sat on the mat while the dog slept by the fire . Outside , the rain fell on the roofs of the "
            "old town and the streets were empty . Nobody walked to the market that morning , and the baker kept "
            "his bread warm for the customers who would come later in the day .")


def authors_sample(tokens: list[str], rng: np.random.Generator, num_anchors: int, num_positives: int,
                   max_span_len: int, min_span_len: int, sampling_strategy: str | None) -> tuple[list[str], list[str]]:
    """JohnGiorgi/DeCLUTR declutr/common/contrastive_utils.py, sample_anchor_positive_pairs, step by step,
    with ``rng`` where their code calls ``np.random`` (``randint`` → ``integers``, both high-exclusive)."""
    num_tokens = len(tokens)
    if num_tokens < num_anchors * max_span_len * 2:
        raise ValueError("too short")
    anchors, positives = [], []
    valid_anchor_starts = list(range(0, num_tokens - max_span_len + 1, max_span_len))
    for i in range(num_anchors):
        anchor_len = int(rng.beta(4, 2) * (max_span_len - min_span_len) + min_span_len)
        if len(valid_anchor_starts) // (num_anchors - i) < num_anchors - i:
            anchor_start_idx = rng.choice([0, len(valid_anchor_starts) - 1])
        else:
            anchor_start_idx = rng.integers(len(valid_anchor_starts))
        anchor_start = rng.integers(valid_anchor_starts[anchor_start_idx],
                                    valid_anchor_starts[anchor_start_idx] + max_span_len - anchor_len + 1)
        del valid_anchor_starts[max(0, anchor_start_idx - 1): anchor_start_idx + 2]
        anchor_end = anchor_start + anchor_len
        anchors.append(" ".join(tokens[anchor_start:anchor_end]))
        for _ in range(num_positives):
            if sampling_strategy == "subsuming":
                positive_len = int(rng.beta(2, 4) * (anchor_len - min_span_len) + min_span_len)
                positive_start = rng.integers(anchor_start, anchor_end - positive_len + 1)
            elif sampling_strategy == "adjacent":
                max_positive_len = min(max_span_len, max(anchor_start, num_tokens - anchor_end))
                positive_len = int(rng.beta(2, 4) * (max_positive_len - min_span_len) + min_span_len)
                valid_starts = []
                if anchor_start - positive_len > 0:
                    valid_starts.append(anchor_start - positive_len)
                if anchor_end + positive_len <= num_tokens:
                    valid_starts.append(anchor_end)
                positive_start = rng.choice(valid_starts)
            else:
                positive_len = int(rng.beta(2, 4) * (max_span_len - min_span_len) + min_span_len)
                positive_start = rng.integers(max(0, anchor_start - positive_len),
                                              min(anchor_end, num_tokens - positive_len) + 1)
            positive_end = positive_start + positive_len
            positives.append(" ".join(tokens[positive_start:positive_end]))
    return anchors, positives


@pytest.mark.parametrize("sampling", ["any", "subsuming", "adjacent"])
@pytest.mark.parametrize("num_tokens,anchors,positives,longest,shortest", [
    (2048, 2, 2, 512, 32),   # the authors' declutr_base.jsonnet on their shortest document
    (3000, 2, 2, 512, 32),
    (200, 1, 1, 40, 10),
    (400, 3, 4, 40, 5),      # few free blocks left: the first-or-last branch
    (96, 4, 3, 12, 12),      # min = max: every span exactly 12 tokens
])
def test_the_sampler_draws_the_authors_spans(sampling, num_tokens, anchors, positives, longest, shortest):
    tokens = [f"t{i}" for i in range(num_tokens)]
    for seed in range(25):
        want = authors_sample(tokens, np.random.default_rng(seed), anchors, positives, longest, shortest,
                              None if sampling == "any" else sampling)
        got_anchors, got_positives = sample_spans(num_tokens, np.random.default_rng(seed), anchors, positives,
                                                  longest, shortest, sampling)
        assert [" ".join(tokens[s:e]) for s, e in got_anchors] == want[0]
        assert [" ".join(tokens[s:e]) for s, e in got_positives] == want[1]
        for s, e in got_anchors:
            assert shortest <= e - s <= longest and 0 <= s and e <= num_tokens


def test_the_sampler_refuses_a_short_document():
    with pytest.raises(ValueError, match="shorter than num_anchors"):
        sample_spans(2047, np.random.default_rng(0), 2, 2, 512, 32)
    with pytest.raises(ValueError, match="must not exceed"):
        sample_spans(5000, np.random.default_rng(0), 2, 2, 32, 64)


def authors_nt_xent(anchors: torch.Tensor, positives: torch.Tensor, num_positives: int, temperature: float) -> float:
    """The authors' DeCLUTR.forward (declutr/model.py) and pytorch-metric-learning's NTXentLoss, step by step.

    model.py: positives (num_anchors·P, d) reshaped to (num_anchors, P, d) and averaged over P;
    losses/pytorch_metric_learning.py get_embeddings_and_labels: cat(anchors, positives), labels cat(idx, idx);
    NTXentLoss._compute_loss (CosineSimilarity, MeanReducer): for every ordered same-label pair (a1, p),
    max-shifted numerator exp(s_ap/τ) over itself plus the exp(s_an/τ) of a1's different-label pairs,
    −log(num/den + tiny), averaged over the pairs.
    """
    positives = torch.mean(torch.reshape(positives, (anchors.size(0), -1, anchors.size(-1))), dim=1)
    embeddings = torch.cat((anchors, positives))
    indices = torch.arange(anchors.size(0))
    labels = torch.cat((indices, indices))
    normed = F.normalize(embeddings, p=2, dim=1)
    mat = normed @ normed.T
    same = labels.unsqueeze(1) == labels.unsqueeze(0)
    same.fill_diagonal_(False)
    diff = labels.unsqueeze(1) != labels.unsqueeze(0)
    a1, p = torch.where(same)
    a2, n = torch.where(diff)
    pos_pairs = mat[a1, p].unsqueeze(1) / temperature
    neg_pairs = mat[a2, n] / temperature
    n_per_p = (a2.unsqueeze(0) == a1.unsqueeze(1)).to(mat.dtype)
    neg_pairs = neg_pairs * n_per_p
    neg_pairs[n_per_p == 0] = torch.finfo(mat.dtype).min
    max_val = torch.max(pos_pairs, torch.max(neg_pairs, dim=1, keepdim=True)[0]).detach()
    numerator = torch.exp(pos_pairs - max_val).squeeze(1)
    denominator = torch.sum(torch.exp(neg_pairs - max_val), dim=1) + numerator
    log_exp = torch.log((numerator / denominator) + torch.finfo(mat.dtype).tiny)
    return float(torch.mean(-log_exp))


@pytest.mark.parametrize("num_positives", [1, 2, 3])
@pytest.mark.parametrize("temperature", [0.05, 0.5])
def test_the_loss_equals_the_authors_nt_xent(tiny_st, num_positives, temperature):
    g = torch.Generator().manual_seed(num_positives)
    rows, dim = 6, 16
    anchors = torch.randn(rows, dim, generator=g, dtype=torch.float64)
    # the authors' positives: anchor after anchor, its P positives in a row
    positives = torch.randn(rows * num_positives, dim, generator=g, dtype=torch.float64)
    columns = [positives[k::num_positives] for k in range(num_positives)]  # positive, positive_2, … by row
    loss = DeCLUTRLoss(tiny_st, temperature=temperature)
    pooled = {"anchor": anchors, "positive": columns if num_positives > 1 else columns[0]}
    got = loss.compute_loss(pooled)["contrastive"].item()
    assert got == pytest.approx(authors_nt_xent(anchors, positives, num_positives, temperature), rel=1e-12)


def test_a_hand_computation_on_two_pairs(tiny_st):
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    p1 = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    p2 = torch.tensor([[1.0, -1.0], [1.0, 1.0]], dtype=torch.float64)
    # averaged positives: (1, 0) and (0.5, 1)
    m = [(1.0, 0.0), (0.5, 1.0)]
    vecs = [(1.0, 0.0), (0.0, 1.0), *m]  # a1, a2, p1, p2

    def cos(u, v):
        return (u[0] * v[0] + u[1] * v[1]) / math.hypot(*u) / math.hypot(*v)

    tau = 0.5
    total = 0.0
    for i, partner in [(0, 2), (1, 3), (2, 0), (3, 1)]:
        den = sum(math.exp(cos(vecs[i], vecs[j]) / tau) for j in range(4) if j != i)
        total += -(cos(vecs[i], vecs[partner]) / tau - math.log(den))
    got = DeCLUTRLoss(tiny_st, temperature=tau).compute_loss({"anchor": a, "positive": [p1, p2]})["contrastive"]
    assert got.item() == pytest.approx(total / 4, rel=1e-12)


def test_the_view_draws_rows_per_anchor_reproducibly_and_counts_the_short_documents(tiny_st, caplog):
    from datasets import Dataset

    lines = [DOCUMENT, "too short .", DOCUMENT.upper()]
    corpus = Dataset.from_dict({"text": lines})
    spec = {"name": "declutr_spans", "num_anchors": 2, "num_positives": 3, "max_span_len": 8, "min_span_len": 3,
            "unit": "word"}
    with caplog.at_level("INFO", logger="augcse.text.views.declutr"):
        dataset = build_views(corpus, [spec], ViewContext(model=tiny_st, seed=7))
    assert dataset.column_names == ["anchor", "positive", "positive_2", "positive_3"]
    assert len(dataset) == 4  # two documents sampled, two anchors each
    assert "2/3 documents sampled (4 rows), 1 shorter than 32 tokens skipped" in caplog.text
    again = build_views(corpus, [spec], ViewContext(model=tiny_st, seed=7))
    assert dataset[:] == again[:]
    other = build_views(corpus, [spec], ViewContext(model=tiny_st, seed=8))
    assert dataset[:] != other[:]
    for row in dataset:
        for column, text in row.items():
            assert text in DOCUMENT or text in DOCUMENT.upper()
            assert 3 <= len(text.split()) <= 8
    # the first document's spans are the sampler's on the keyed draw
    from augcse.text.retrieval import keyed_rng

    words = DOCUMENT.split()
    anchors, positives = sample_spans(len(words), keyed_rng(7, "declutr_spans", DOCUMENT), 2, 3, 8, 3)
    assert dataset[0]["anchor"] == " ".join(words[anchors[0][0]:anchors[0][1]])
    assert dataset[1]["positive_3"] == " ".join(words[positives[5][0]:positives[5][1]])


def test_documents_of_several_lines_and_sub_word_spans(tiny_st):
    from datasets import Dataset

    sentences = DOCUMENT.split(" . ")
    corpus = Dataset.from_dict({"text": sentences})
    spec = {"name": "declutr_spans", "num_anchors": 1, "num_positives": 1, "max_span_len": 10, "min_span_len": 4,
            "lines_per_document": 3}
    dataset = build_views(corpus, [spec], ViewContext(model=tiny_st, seed=1))
    assert dataset.column_names == ["anchor", "positive"]
    assert len(dataset) == 1  # three lines joined into one document long enough for 2·10 sub-words; one left over
    tokenizer = tiny_st.tokenizer
    for text in dataset[0].values():
        assert 4 <= len(tokenizer(text, add_special_tokens=False)["input_ids"]) <= 10
    with pytest.raises(ValueError, match="every one of the"):
        build_views(corpus, [{**spec, "lines_per_document": 1, "max_span_len": 50}], ViewContext(model=tiny_st))


def test_recipe_settings_are_checked_before_anything_loads():
    from augcse.core.loss_parameters import loss_settings
    from augcse.core.schema import RecipeError
    from augcse.losses import validate_loss
    from augcse.text.views import produced_columns

    assert loss_settings("declutr", {})["temperature"] == 0.05
    with pytest.raises(RecipeError):
        loss_settings("declutr", {"temperature": 0})
    views = [{"name": "declutr_spans", "num_positives": 2}]
    validate_loss("declutr", {}, produced_columns(views))
    with pytest.raises(RecipeError, match="data.views"):
        produced_columns([{"name": "declutr_spans", "sampling": "nearby"}])
    with pytest.raises(RecipeError, match="data.views"):
        produced_columns([{"name": "declutr_spans", "min_span_len": 0}])


def test_a_few_steps_train_and_the_saved_model_is_plain_sentence_transformers(tiny_st, tmp_path: Path):
    from datasets import Dataset

    corpus = Dataset.from_dict({"text": [DOCUMENT, DOCUMENT.lower(), DOCUMENT.upper()] * 2})
    dataset = build_views(corpus, [{"name": "declutr_spans", "max_span_len": 10, "min_span_len": 4}],
                          ViewContext(model=tiny_st, seed=3))
    loss = LOSSES["declutr"](tiny_st)
    loss.bind(dataset.column_names)
    start = [p.detach().clone() for p in tiny_st.parameters()]
    train_briefly(tiny_st, dataset, loss, tmp_path)
    assert not all(torch.equal(a, b) for a, b in zip(start, tiny_st.parameters()))
    reload_plainly(tiny_st, tmp_path / "final", dataset["anchor"][:4])
