"""The InfoNCE core and SimCSE loss against hand computations on small tensors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from augcse.losses.infonce import KeyBlock, info_nce, symmetric_info_nce

TAU = 0.05


def cos(a, b):
    return float(F.cosine_similarity(a.unsqueeze(0), b.unsqueeze(0)))


def hand_loss(rows):
    """rows: list of (positive logit, [all logits]) → mean of -log softmax."""
    return sum(-(pos - math.log(sum(math.exp(x) for x in logits))) for pos, logits in rows) / len(rows)


@pytest.fixture()
def vectors():
    torch.manual_seed(0)
    return torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)


def test_simcse_unsupervised_matches_equation_1(vectors):
    h, hp, _ = vectors
    rows = []
    for i in range(3):
        logits = [cos(h[i], hp[j]) / TAU for j in range(3)]
        rows.append((logits[i], logits))
    got = info_nce(h, [KeyBlock(hp)], TAU)
    assert got.item() == pytest.approx(hand_loss(rows), rel=1e-5)


def test_hard_negatives_all_rows_see_all_with_alpha_on_own(vectors):
    h, hp, hn = vectors
    alpha = 0.5
    rows = []
    for i in range(3):
        pos = [cos(h[i], hp[j]) / TAU for j in range(3)]
        neg = [cos(h[i], hn[j]) / TAU + (math.log(alpha) if i == j else 0.0) for j in range(3)]
        rows.append((pos[i], pos + neg))
    got = info_nce(h, [KeyBlock(hp), KeyBlock(hn, "all", diag_offset=math.log(alpha))], TAU)
    assert got.item() == pytest.approx(hand_loss(rows), rel=1e-5)


def test_diag_block_with_margin_moves_only_own_negative(vectors):
    h, hp, hn = vectors
    delta = 0.5
    rows = []
    for i in range(3):
        pos = [cos(h[i], hp[j]) / TAU for j in range(3)]
        rows.append((pos[i], pos + [(cos(h[i], hn[i]) - delta) / TAU]))
    got = info_nce(h, [KeyBlock(hp), KeyBlock(hn, "diag", diag_offset=-delta / TAU)], TAU)
    assert got.item() == pytest.approx(hand_loss(rows), rel=1e-5)


def test_offdiag_excludes_self_and_subset_selects_keys(vectors):
    h, hp, _ = vectors
    subset = torch.tensor([[0, 2], [1, 0], [2, 1]])  # the first index is the row's positive
    rows = []
    for i in range(3):
        pos = [cos(h[i], hp[j]) / TAU for j in subset[i].tolist()]
        same = [cos(h[i], h[j]) / TAU for j in range(3) if j != i]
        rows.append((pos[0], pos + same))
    got = info_nce(h, [KeyBlock(hp, subset), KeyBlock(h, "offdiag")], TAU)
    assert got.item() == pytest.approx(hand_loss(rows), rel=1e-5)


def test_id_mask_hides_keys_from_the_same_sentence(vectors):
    h, hp, hn = vectors
    ids = torch.tensor([10, 11, 12])
    neg_ids = torch.tensor([11, 11, 10])  # row 1's own retrieved negative is itself → masked; row 0 sees key 2 masked
    rows = []
    for i in range(3):
        pos = [cos(h[i], hp[j]) / TAU for j in range(3)]
        neg = [cos(h[i], hn[j]) / TAU for j in range(3) if int(neg_ids[j]) != int(ids[i])]
        rows.append((pos[i], pos + neg))
    got = info_nce(h, [KeyBlock(hp), KeyBlock(hn, key_ids=neg_ids)], TAU, query_ids=ids)
    assert got.item() == pytest.approx(hand_loss(rows), rel=1e-5)


def test_symmetric_is_mean_of_both_directions(vectors):
    h, hp, _ = vectors
    forward = info_nce(h, [KeyBlock(hp)], TAU)
    backward = info_nce(hp, [KeyBlock(h)], TAU)
    assert symmetric_info_nce(h, hp, TAU).item() == pytest.approx(((forward + backward) / 2).item())


def test_bad_patterns_are_refused(vectors):
    h, hp, _ = vectors
    with pytest.raises(ValueError, match="positive block"):
        info_nce(h, [KeyBlock(hp, "offdiag")], TAU)
    with pytest.raises(ValueError, match="one key per query"):
        info_nce(h, [KeyBlock(hp), KeyBlock(hp[:2], "diag")], TAU)


def test_simcse_loss_uses_two_dropout_views(tiny_st):
    """One column → the loss runs the batch twice; in train mode the dropout views differ, in eval mode
    they coincide and the loss equals the InfoNCE of the embeddings with themselves."""
    from augcse.losses import SimCSELoss

    loss = SimCSELoss(tiny_st, temperature=TAU)
    features = tiny_st.preprocess(["a man plays a guitar", "the cat sleeps on the mat", "stocks fell sharply"])
    tiny_st.eval()
    value = loss([features])["contrastive"]
    with torch.no_grad():
        emb = tiny_st(tiny_st.preprocess(["a man plays a guitar", "the cat sleeps on the mat", "stocks fell sharply"]))["sentence_embedding"]
    assert value.item() == pytest.approx(info_nce(emb, [KeyBlock(emb)], TAU).item(), rel=1e-5)
    tiny_st.train()
    from augcse.losses.base import embed_sources

    views = embed_sources(tiny_st, {"anchor": features}, ["anchor", "~anchor"])
    assert not torch.allclose(views["anchor"], views["~anchor"]), "dropout must make the two views differ"


def _fake_second_process(monkeypatch):
    """Pretend to be rank 0 of 2: gathering appends another process's (random) keys."""
    import augcse.losses.infonce as core

    monkeypatch.setattr(core, "get_world_size", lambda: 2)
    monkeypatch.setattr(core, "get_rank", lambda: 0)
    monkeypatch.setattr(core, "all_gather_with_grad", lambda t: torch.cat([t, torch.randn_like(t)]))


@pytest.mark.parametrize("loss_name", ["simcse", "sda", "cards", "augcse"])
def test_gather_across_devices_false_is_honoured_on_every_path(tiny_st, monkeypatch, loss_name, vectors):
    """With gather_across_devices=False no key is gathered, whichever form (the symmetric one included)."""
    from augcse.losses import LOSSES

    h, hp, hn = vectors
    h, hp, hn = (torch.nn.functional.pad(v, (0, 28)) for v in (h, hp, hn))
    params = {"symmetric": True, "head": "none", "gather_across_devices": False}
    if loss_name == "augcse":
        params.update(augmentations=2, variant="none")
    if loss_name == "cards":
        params["mask_own_text"] = False
    loss = LOSSES[loss_name](tiny_st, **params)
    pooled = {"anchor": h, "positive": hp, "augmented": hp, "negation": [hn], "retrieved": [hn]}
    local = loss.compute_loss(pooled)["contrastive"].item()
    _fake_second_process(monkeypatch)
    assert loss.compute_loss(pooled)["contrastive"].item() == pytest.approx(local, rel=1e-6)
    loss.gather_across_devices = True  # and the fake gather does change the loss when asked for
    assert loss.compute_loss(pooled)["contrastive"].item() != pytest.approx(local, rel=1e-3)
