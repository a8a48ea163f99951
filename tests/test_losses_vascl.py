"""VaSCL: neighbours, the virtual perturbation (Δ, direction, clean parameter gradients) and Eq. 1 by hand."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from augcse.losses.vascl import VaSCLLoss, nearest_neighbours

TAU = 0.05


@pytest.fixture()
def loss(tiny_st):
    torch.manual_seed(0)
    return VaSCLLoss(tiny_st, topk=3, eps=1.0, temperature=TAU)


def test_neighbours_are_top_dot_products_without_self():
    torch.manual_seed(0)
    e = torch.randn(6, 4)
    got = nearest_neighbours(e, 2)
    scores = e @ e.T
    for i in range(6):
        others = [j for j in range(6) if j != i]
        best = sorted(others, key=lambda j: -float(scores[i, j]))[:2]
        assert got[i].tolist() == best


def test_perturbation_respects_delta_and_beats_random_directions(loss):
    torch.manual_seed(1)
    e = torch.randn(8, 32) * 3
    neighbours = nearest_neighbours(e, 3)
    delta = loss.virtual_perturbation(e, neighbours)
    assert torch.allclose(delta.norm(dim=-1), torch.full((8,), 1.0), atol=1e-5)
    virtual = loss.probe_loss(e, delta, neighbours).item()
    clean = loss.probe_loss(e, torch.zeros_like(e), neighbours).item()
    randoms = [loss.probe_loss(e, F.normalize(torch.randn_like(e), dim=-1), neighbours).item() for _ in range(20)]
    assert virtual > clean
    assert virtual - clean > max(r - clean for r in randoms)


def test_perturbation_leaves_parameter_gradients_clean(loss):
    e = torch.randn(8, 32, requires_grad=True)
    loss.virtual_perturbation(e, nearest_neighbours(e.detach(), 3))
    assert all(p.grad is None for p in loss.head.parameters())
    assert e.grad is None


def test_detach_stops_neighbourhood_gradient_to_the_encoder(tiny_st):
    torch.manual_seed(0)
    for detach, reaches in ((True, False), (False, True)):
        loss = VaSCLLoss(tiny_st, topk=2, eps=1.0, detach=detach)
        e1, e2 = torch.randn(5, 32, requires_grad=True), torch.randn(5, 32)
        loss.compute_loss({"anchor": e1, "positive": e2})["neighbourhood"].backward()
        assert (e1.grad is not None and e1.grad.abs().sum() > 0) == reaches
        assert any(p.grad is not None for p in loss.head.parameters())


def test_instance_loss_is_nt_xent_over_both_views(loss):
    torch.manual_seed(2)
    z1, z2 = torch.randn(3, 4), torch.randn(3, 4)
    views = torch.cat([z1, z2])
    total = 0.0
    for i in range(6):
        partner = (i + 3) % 6
        logits = [float(F.cosine_similarity(views[i], views[j], dim=0)) / TAU for j in range(6) if j != i]
        pos = float(F.cosine_similarity(views[i], views[partner], dim=0)) / TAU
        total += -(pos - math.log(sum(math.exp(x) for x in logits))) / 6
    assert loss.instance_loss(z1, z2).item() == pytest.approx(total, rel=1e-5)


def test_components(loss):
    out = loss.compute_loss({"anchor": torch.randn(6, 32), "positive": torch.randn(6, 32)})
    assert set(out) == {"instance", "neighbourhood"} and all(torch.isfinite(v) for v in out.values())


@pytest.mark.parametrize("clean_gradient", [False, True])
def test_head_gradient_follows_the_authors_code(tiny_st, monkeypatch, clean_gradient):
    """The authors' code embeds the clean side under no_grad: only h(e + δ) trains the head.
    ``clean_gradient=True`` keeps the gradient through h(e) as well."""
    torch.manual_seed(3)
    loss = VaSCLLoss(tiny_st, topk=2, eps=1.0, clean_gradient=clean_gradient)
    e = torch.randn(6, 32)
    delta = F.normalize(torch.randn(6, 32), dim=-1)
    monkeypatch.setattr(loss, "virtual_perturbation", lambda base, neighbours: delta)
    loss.compute_loss({"anchor": e, "positive": torch.randn(6, 32)})["neighbourhood"].backward()
    got = [p.grad.clone() for p in loss.head.parameters()]
    loss.zero_grad()
    neighbours = nearest_neighbours(e, 2)
    clean = loss.head(e)
    clean = clean if clean_gradient else clean.detach()
    loss.neighbourhood_loss(clean, loss.head(e + delta), neighbours).backward()
    for mine, reference in zip(got, loss.head.parameters()):
        torch.testing.assert_close(mine, reference.grad)
