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


def _kinds(paper: str, row: str) -> dict[str, str]:
    from augcse.studies import paper_settings

    return {s.key: s.kind for s in paper_settings.settings(paper, row)}


def test_precision_and_clipping_follow_the_authors_loops():
    """VaSCL's released loop: float32, no clipping; AugCSE's run script: float32. Stated as code, not open."""
    for name in ("roberta-base", "distilroberta", "roberta-large", "simcse-roberta-base", "simcse-distilroberta",
                 "simcse-roberta-large"):
        training = resolved(_rows("vascl")[name])["training"]
        assert (training["fp16"], training["max_grad_norm"]) == (False, 0.0), name
        assert _kinds("vascl", name)["training.fp16"] == _kinds("vascl", name)["training.max_grad_norm"] == "code"
    for name in ("bert-base", "bert-base-transfer", "roberta-base", "roberta-base-transfer"):
        assert resolved(_rows("augcse")[name])["training"]["fp16"] is False, name
        assert _kinds("augcse", name)["training.fp16"] == "code"


def test_statuses_say_what_their_sources_support():
    transfer = _kinds("augcse", "diffcse-bert-base-transfer")
    assert {transfer[k] for k in ("training.learning_rate", "loss.params.rtd_weight", "loss.params.mask_ratio",
                                  "training.num_train_epochs")} == {"open"}
    assert _kinds("augcse", "diffcse-bert-base")["training.learning_rate"] == "code"  # the STS script's own row
    cards = [(row, key) for row in ("roberta-base", "switch-case-only-roberta-base", "retrieval-only-roberta-base",
                                    "roberta-large", "switch-case-only-roberta-large", "retrieval-only-roberta-large")
             for key in ("data.views[0].p", "data.views[0].k") if _kinds("cards", row).get(key) not in (None, "open")]
    assert len(cards) == 8 and all(_kinds("cards", row)[key] == "code" for row, key in cards)
    assert _kinds("augcse", "bert-base")["loss.params.augmentations"] == "deviation"
    assert _kinds("sda", "ct-bert-base")["training.lr_scheduler_type"] == "code"  # the step-down schedule, built


def test_esimcse_roberta_large_trains_with_run_sh_dropout():
    config = resolved(_rows("cards")["esimcse-roberta-large"])["model"]["config"]
    assert config == {"hidden_dropout_prob": 0.15, "attention_probs_dropout_prob": 0.15}
    assert resolved(_rows("cards")["esimcse-roberta-base"])["model"]["config"]["hidden_dropout_prob"] == 0.1


def test_promptberts_figure_is_a_mean_with_its_spread():
    from augcse.studies.published import Reported, published

    ref = published("cards/prompt-roberta-base")
    assert (ref.reported, ref.scores["sts_avg"], ref.sd["sts_avg"]) == (Reported.MEAN, 79.15, 0.25)
