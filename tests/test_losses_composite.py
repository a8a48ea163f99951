"""A composition of objectives equals the sum of the separate losses (values and gradients)."""

from __future__ import annotations

import pytest
import torch

from augcse.losses import AugCSELoss, CompositeLoss, SDALoss

ANCHORS = ["The cat sat on the mat .", "He can swim well .", "It rained all day .", "Birds sing at dawn ."]
POSITIVES = ["The cat , sat on the mat .", "He could swim very well .", "It rained all day !", "Birds sing at dawn ."]
NEGATIONS = ["The cat did not sit on the mat .", "He cannot swim well .", "It did not rain all day .",
             "Birds do not sing at dawn ."]
AUGMENTED = ["The mat sat on the cat .", "He can swim well .", "It rains all day .", "At dawn birds sing ."]
LABELS = torch.tensor([0, 2, 1, 0])


def grads(model):
    return [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def test_two_objectives_sum_exactly(tiny_st):
    tiny_st.eval()  # no dropout: the shared pass and the separate passes see identical embeddings
    features = {name: tiny_st.tokenize(texts) for name, texts in
                [("anchor", ANCHORS), ("positive", POSITIVES), ("negation", NEGATIONS), ("augmented", AUGMENTED)]}
    torch.manual_seed(0)
    composite = CompositeLoss(tiny_st, columns=["anchor", "positive", "negation", "augmented"], terms=[
        {"loss": "sda", "weight": 1.0, "params": {"head": "bn"}},
        {"loss": "augcse", "weight": 0.5, "params": {"augmentations": 2, "discriminator_dropout": 0.0}},
    ])
    sda, augcse = composite.terms["sda"], composite.terms["augcse"]
    assert "model" not in dict(sda.named_children())  # the model is shared, not saved per term
    out = composite([features[c] for c in composite.columns()], LABELS)
    assert set(out) == {"sda/contrastive", "augcse/contrastive", "augcse/discriminator"}
    total = sum(out.values())
    tiny_st.zero_grad()
    total.backward()
    together = grads(tiny_st)

    separate_sda = SDALoss(tiny_st, head="bn")
    separate_sda.head.load_state_dict(sda.head.state_dict())
    separate_aug = AugCSELoss(tiny_st, augmentations=2, discriminator_dropout=0.0)
    separate_aug.head.load_state_dict(augcse.head.state_dict())
    separate_aug.discriminator.load_state_dict(augcse.discriminator.state_dict())
    tiny_st.zero_grad()
    a = separate_sda([features["anchor"], features["positive"], features["negation"]])
    b = separate_aug([features["anchor"], features["augmented"]], LABELS)
    expected = sum(a.values()) + 0.5 * sum(b.values())
    expected.backward()
    assert total.item() == pytest.approx(expected.item(), rel=1e-5)
    for got, want in zip(together, grads(tiny_st)):
        assert torch.allclose(got, want, atol=1e-6, rtol=1e-4)


def test_pooled_terms_and_metrics(tiny_st):
    tiny_st.eval()
    composite = CompositeLoss(tiny_st, columns=["anchor", "augmented"], terms=[
        {"loss": "vascl", "name": "v", "params": {"topk": 2, "eps": 1.0}},
        {"loss": "augcse", "params": {"augmentations": 2}},
        {"loss": "simcse"},
    ])
    composite.train()
    out = composite([tiny_st.tokenize(ANCHORS), tiny_st.tokenize(AUGMENTED)], LABELS)
    assert {"v/instance", "v/neighbourhood", "simcse/contrastive", "augcse/discriminator"} <= set(out)
    assert "augcse/discriminator_accuracy" in composite.pop_metrics()
    pooled = {"anchor": torch.randn(4, 32), "~anchor": torch.randn(4, 32)}
    single = CompositeLoss(tiny_st, columns=["anchor"], terms=[{"loss": "vascl", "params": {"topk": 2}}])
    torch.manual_seed(3)
    got = single.compute_loss(pooled)
    torch.manual_seed(3)
    want = single.terms["vascl"].compute_loss({"anchor": pooled["anchor"], "positive": pooled["~anchor"]})
    assert {k.split("/")[1]: v.item() for k, v in got.items()} == pytest.approx({k: v.item() for k, v in want.items()})


def test_bad_terms_are_refused(tiny_st):
    with pytest.raises(ValueError, match="unknown loss"):
        CompositeLoss(tiny_st, columns=["anchor"], terms=[{"loss": "nope"}])
    with pytest.raises(ValueError, match="'neg'"):
        CompositeLoss(tiny_st, columns=["anchor"], terms=[{"loss": "sda", "inputs": {"negation": "neg"}}])
    with pytest.raises(ValueError, match="inputs"):
        CompositeLoss(tiny_st, columns=["anchor"], terms=[{"loss": "simcse", "inputs": ["anchor", "~anchor"]}])
    with pytest.raises(ValueError, match="'extra' is not a role"):
        CompositeLoss(tiny_st, columns=["anchor", "extra"], terms=[{"loss": "simcse"}])
