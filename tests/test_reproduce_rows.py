"""The reproduce rows that follow their authors' code in what the loss contrasts and what it starts from:
VaSCL's SimCSE re-training with 2M − 1 candidates (Eq. 1), checked by hand; SimCSE w/ MLM on RoBERTa from
roberta-base's own masked-LM head."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from augcse.losses.simcse import SimCSELoss
from augcse.losses.vascl import VaSCLLoss
from augcse.studies.reproduce import papers, resolved

TAU = 0.05


def _eq1_by_hand(z1: torch.Tensor, z2: torch.Tensor) -> float:
    """VaSCL Eq. 1 written out: for each of the 2M embeddings, its partner against the 2M − 1 others."""
    views = torch.cat([F.normalize(z1, dim=-1), F.normalize(z2, dim=-1)])
    m = z1.size(0)
    total = 0.0
    for i in range(2 * m):
        partner = (i + m) % (2 * m)
        others = [j for j in range(2 * m) if j != i]
        logits = [float(views[i] @ views[j]) / TAU for j in others]
        total += -(float(views[i] @ views[partner]) / TAU - math.log(sum(math.exp(x) for x in logits)))
    return total / (2 * m)


def test_same_view_negatives_is_vascls_instance_loss_by_hand(tiny_st):
    torch.manual_seed(0)
    z1, z2 = torch.randn(3, 32), torch.randn(3, 32)
    simcse = SimCSELoss(tiny_st, temperature=TAU, symmetric=True, same_view_negatives=True)
    got = simcse.compute_loss({"anchor": z1, "positive": z2})["contrastive"].item()
    assert got == pytest.approx(_eq1_by_hand(z1, z2), rel=1e-5)
    assert got == pytest.approx(VaSCLLoss(tiny_st, temperature=TAU).instance_loss(z1, z2).item(), rel=1e-6)
    # without it, SimCSE's M candidates: a different, smaller denominator
    plain = SimCSELoss(tiny_st, temperature=TAU, symmetric=True).compute_loss({"anchor": z1, "positive": z2})
    assert plain["contrastive"].item() < got - 1e-3


def test_one_way_same_view_negatives_adds_the_anchors_of_other_rows(tiny_st):
    torch.manual_seed(1)
    a, p = torch.randn(3, 32), torch.randn(3, 32)
    got = SimCSELoss(tiny_st, temperature=TAU, same_view_negatives=True).compute_loss({"anchor": a, "positive": p})
    a, p = F.normalize(a, dim=-1), F.normalize(p, dim=-1)
    want = 0.0
    for i in range(3):
        keys = [p[j] for j in range(3)] + [a[j] for j in range(3) if j != i]
        logits = torch.stack([a[i] @ k for k in keys]) / TAU
        want += float(torch.logsumexp(logits, 0) - logits[0 + i])
    assert got["contrastive"].item() == pytest.approx(want / 3, rel=1e-5)


def _rows(paper: str) -> dict:
    return {row.name: row for row in papers()[paper].rows}


@pytest.mark.parametrize("name", ["simcse-roberta-base", "simcse-distilroberta", "simcse-roberta-large"])
def test_vascls_simcse_rows_contrast_2m_minus_1_candidates(name):
    params = resolved(_rows("vascl")[name])["loss"]["params"]
    assert params["same_view_negatives"] is True and params["symmetric"] is True


def test_simcse_mlm_roberta_starts_from_the_checkpoints_head():
    for name in ("simcse-mlm-roberta-base", "simcse-mlm-bert-base"):
        terms = resolved(_rows("augcse")[name])["loss"]["params"]["terms"]
        assert terms[1]["params"]["head_init"] == "checkpoint", name
