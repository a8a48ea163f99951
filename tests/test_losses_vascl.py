"""VaSCL: neighbours, the virtual perturbation (Δ, direction, clean parameter gradients) and Eq. 1 by hand."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from augcse.core.schema import RecipeError
from augcse.losses.vascl import VaSCLLoss, nearest_neighbours, start_noise

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


def test_cosine_ranks_by_direction_where_dot_ranks_by_norm():
    """Row 0 = (1, 0); row 1 = (10, 10) is long at 45°; row 2 = (1, 0.1) is short and almost parallel to row 0.
    Dot products: 0·1 = 10, 0·2 = 1, 1·2 = 11; cosines: 0·1 = 0.707, 0·2 = 0.995, 1·2 = 0.774."""
    e = torch.tensor([[1.0, 0.0], [10.0, 10.0], [1.0, 0.1]], dtype=torch.float64)
    assert nearest_neighbours(e, 1).tolist() == [[1], [2], [1]]
    assert nearest_neighbours(e, 1, "dot").tolist() == [[1], [2], [1]]
    assert nearest_neighbours(e, 1, "cosine").tolist() == [[2], [2], [0]]


def test_similarity_picks_the_neighbours_of_the_loss(tiny_st, monkeypatch):
    torch.manual_seed(4)
    e = torch.randn(6, 32, dtype=torch.float64) * torch.tensor([1.0, 20.0, 1.0, 20.0, 1.0, 20.0],
                                                               dtype=torch.float64)[:, None]
    delta = 5 * F.normalize(torch.randn(6, 32, dtype=torch.float64), dim=-1)
    got = {}
    for similarity in ("dot", "cosine"):
        loss = VaSCLLoss(tiny_st, topk=2, eps=5.0, similarity=similarity).double()
        monkeypatch.setattr(loss, "virtual_perturbation", lambda base, neighbours: delta)
        got[similarity] = loss.compute_loss({"anchor": e, "positive": e})["neighbourhood"]
        want = loss.neighbourhood_loss(loss.head(e), loss.head(e + delta), nearest_neighbours(e, 2, similarity))
        torch.testing.assert_close(got[similarity], want, rtol=1e-12, atol=0)
    assert not torch.equal(nearest_neighbours(e, 2, "dot"), nearest_neighbours(e, 2, "cosine"))
    assert abs(got["dot"] - got["cosine"]) > 1e-6


def test_uniform_start_is_the_codes_draw_and_gaussian_is_standard_normal():
    like = torch.zeros(4000, 50, dtype=torch.float64)
    torch.manual_seed(6)
    uniform = start_noise(like)
    torch.manual_seed(6)
    assert torch.equal(uniform, torch.rand_like(like) - 0.5)
    assert uniform.min() >= -0.5 and uniform.max() < 0.5
    assert uniform.std().item() == pytest.approx(1 / math.sqrt(12), abs=0.005)
    torch.manual_seed(6)
    gaussian = start_noise(like, "gaussian")
    assert gaussian.mean().item() == pytest.approx(0.0, abs=0.005)
    assert gaussian.std().item() == pytest.approx(1.0, abs=0.005)
    assert (gaussian < -0.5).float().mean().item() == pytest.approx(0.3085, abs=0.005)  # Φ(−0.5)


def code_perturbation(loss, e, neighbours, xi):
    """The authors' step by hand: d ~ U(−0.5, 0.5) normalised, g = ∇_d ℓ_N(e + ξd), δ = Δ g/‖g‖."""
    d = F.normalize(torch.rand_like(e) - 0.5, dim=-1).requires_grad_(True)
    (g,) = torch.autograd.grad(loss.probe_loss(e, xi * d, neighbours), d)
    return loss.eps * g / g.norm(dim=-1, keepdim=True)


def test_default_perturbation_is_the_codes_single_uniform_step(tiny_st):
    loss = VaSCLLoss(tiny_st, topk=3, eps=2.0, xi=0.5)
    torch.manual_seed(7)
    e = torch.randn(8, 32) * 3
    neighbours = nearest_neighbours(e, 3)
    torch.manual_seed(8)
    want = code_perturbation(loss, e, neighbours, 0.5)
    options = (({}, True), ({"noise": "uniform", "ascent_steps": 1}, True), ({"noise": "gaussian"}, False))
    for explicit, same in options:
        other = VaSCLLoss(tiny_st, topk=3, eps=2.0, xi=0.5, **explicit)
        other.head.load_state_dict(loss.head.state_dict())  # the same head: only the options differ
        torch.manual_seed(8)
        assert torch.equal(other.virtual_perturbation(e, neighbours), want) == same


def test_second_ascent_step_is_the_normalised_gradient_at_the_first(tiny_st):
    """Step 2 probes at δ₁ itself (norm Δ, not ξ): δ₂ = Δ ∇_δ ℓ_N(e + δ₁)/‖·‖, still of norm Δ."""
    torch.manual_seed(9)
    loss = VaSCLLoss(tiny_st, topk=3, eps=2.0, xi=0.5, ascent_steps=2).double()
    e = torch.randn(8, 32, dtype=torch.float64) * 3
    neighbours = nearest_neighbours(e, 3)
    torch.manual_seed(10)
    first = code_perturbation(loss, e, neighbours, 0.5).requires_grad_(True)
    (g,) = torch.autograd.grad(loss.probe_loss(e, first, neighbours), first)
    want = 2.0 * g / g.norm(dim=-1, keepdim=True)
    torch.manual_seed(10)
    got = loss.virtual_perturbation(e, neighbours)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got.norm(dim=-1), torch.full((8,), 2.0, dtype=torch.float64))
    assert (got - first).abs().max() > 1e-3


@pytest.mark.parametrize("bad", [{"ascent_steps": 0}, {"noise": "laplace"}, {"similarity": "euclidean"}])
def test_new_options_are_checked(tiny_st, bad):
    with pytest.raises(RecipeError, match=next(iter(bad))):
        VaSCLLoss(tiny_st, **bad)
