"""SDA's margin-relaxed negation against a hand computation, and the SDA view."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from augcse.losses.infonce import KeyBlock, info_nce
from augcse.losses.sda import SDALoss

TAU = 0.05


def cos(a, b):
    return float(F.cosine_similarity(a.unsqueeze(0), b.unsqueeze(0)))


def nll(pos, logits):
    return -(pos - math.log(sum(math.exp(x) for x in logits)))


@pytest.fixture()
def views():
    torch.manual_seed(1)
    return torch.randn(3, 5), torch.randn(3, 5), torch.randn(3, 5)


def test_margin_matches_equation_4_diag(tiny_st, views):
    h, hp, hn = views
    delta = 0.5
    loss = SDALoss(tiny_st, margin=delta, temperature=TAU, head="none")
    expected = 0.0
    for i in range(3):
        logits = [cos(h[i], hp[j]) / TAU for j in range(3)] + [(cos(h[i], hn[i]) - delta) / TAU]
        expected += nll(logits[i], logits) / 3
    got = loss.compute_loss({"anchor": h, "positive": hp, "negation": [hn]})["contrastive"]
    assert got.item() == pytest.approx(expected, rel=1e-5)
    assert loss.negation_offset == pytest.approx(-delta / TAU)


def test_margin_moves_exactly_the_negation_logit(views):
    """Lowering only the negation logit by δ/τ by hand (an explicit logit row) equals the margin."""
    h, hp, _ = views
    hn = h + 0.1 * torch.randn(3, 5)  # a negation close to its anchor, so the margin matters
    delta = 0.3
    plain = torch.cat([F.normalize(h, dim=-1) @ F.normalize(hp, dim=-1).T / TAU,
                       F.cosine_similarity(h, hn).unsqueeze(1) / TAU], dim=1)
    shifted = plain.clone()
    shifted[:, -1] -= delta / TAU
    by_hand = F.cross_entropy(shifted, torch.arange(3))
    got = info_nce(h, [KeyBlock(hp), KeyBlock(hn, "diag", diag_offset=-delta / TAU)], TAU)
    assert got.item() == pytest.approx(by_hand.item(), rel=1e-6)
    assert by_hand.item() != pytest.approx(F.cross_entropy(plain, torch.arange(3)).item(), rel=1e-3)


def test_margin_all_block_sees_every_negation_with_own_offset(tiny_st, views):
    h, hp, hn = views
    delta = 0.5
    loss = SDALoss(tiny_st, margin=delta, neg_block="all", temperature=TAU, head="none")
    expected = 0.0
    for i in range(3):
        negs = [(cos(h[i], hn[j]) - (delta if i == j else 0.0)) / TAU for j in range(3)]
        logits = [cos(h[i], hp[j]) / TAU for j in range(3)] + negs
        expected += nll(logits[i], logits) / 3
    assert loss.compute_loss({"anchor": h, "positive": hp, "negation": [hn]})["contrastive"].item() == pytest.approx(expected, rel=1e-5)


def test_without_negation_is_infonce(tiny_st, views):
    h, hp, _ = views
    loss = SDALoss(tiny_st, head="none")
    assert loss.compute_loss({"anchor": h, "positive": hp})["contrastive"].item() == pytest.approx(
        info_nce(h, [KeyBlock(hp)], 0.05).item())


def test_bad_neg_block_is_refused(tiny_st):
    with pytest.raises(ValueError, match="neg_block"):
        SDALoss(tiny_st, neg_block="full")


def test_sda_view_pairs_unchangeable_sentences_with_themselves(tiny_st, tmp_path):
    from datasets import Dataset

    from augcse.text.views import ViewContext, build_views

    sentences = ["The cat sat on the mat .", "Paris", "He can swim very well .", "It is not raining today ."]
    context = ViewContext(model=tiny_st, seed=3, cache_dir=tmp_path)
    ds = build_views(Dataset.from_dict({"text": sentences}),
                     [{"name": "sda", "positive": "PI", "negation": True}], context)
    assert ds.column_names == ["anchor", "positive", "negation"]
    none = build_views(Dataset.from_dict({"text": sentences}),
                       [{"name": "sda", "positive": "ensemble", "proportion": 0.0}], context)
    assert none["positive"] == sentences  # proportion 0: every sentence is its own positive
    assert all(n != s for n, s in zip(ds["negation"], sentences))
