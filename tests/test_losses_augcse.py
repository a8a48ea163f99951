"""AugCSE: the gradient-reversal layer, the discriminator loss (Eq. 2), the variants and the sampling view."""

from __future__ import annotations

import math

import pytest
import torch

from augcse.losses.augcse import AugCSELoss, AugmentationDiscriminator, discriminator_loss
from augcse.losses.grl import scale_gradient


def test_scale_gradient_is_identity_forward_and_alpha_backward():
    x = torch.randn(4, 3, requires_grad=True)
    y = scale_gradient(x, -2.5)
    assert torch.equal(y, x)
    (y * torch.arange(12.0).view(4, 3)).sum().backward()
    assert torch.allclose(x.grad, -2.5 * torch.arange(12.0).view(4, 3))


@pytest.mark.parametrize("alpha", [-1.0, -10.0, 1.0])
def test_reversal_scales_encoder_gradient_and_leaves_discriminator_alone(tiny_st, alpha):
    """Same discriminator and inputs, with GRL α and with a plain identity (α = 1): the gradient reaching
    the embeddings (the encoder side) is α times the plain one, the discriminator's own gradient is equal."""
    torch.manual_seed(0)
    z_orig, z_aug = torch.randn(6, 32), torch.randn(6, 32)
    labels = torch.tensor([0, 1, 2, 2, 1, 0])
    grads = {}
    for name, a in (("grl", alpha), ("plain", 1.0)):
        loss = AugCSELoss(tiny_st, augmentations=2, grl_alpha=a, head="none", discriminator_dropout=0.0)
        torch.manual_seed(1)
        loss.discriminator = AugmentationDiscriminator(64, 3, dropout=0.0)
        zo, za = z_orig.clone().requires_grad_(True), z_aug.clone().requires_grad_(True)
        loss.discriminate(zo, za, labels).backward()
        grads[name] = (zo.grad, za.grad, [p.grad.clone() for p in loss.discriminator.parameters()])
    assert torch.allclose(grads["grl"][0], alpha * grads["plain"][0], atol=1e-7)
    assert torch.allclose(grads["grl"][1], alpha * grads["plain"][1], atol=1e-7)
    for got, plain in zip(grads["grl"][2], grads["plain"][2]):
        assert torch.equal(got, plain)


def test_discriminator_loss_is_per_class_sigmoid_bce_by_hand():
    logits = torch.tensor([[0.3, -0.2, 0.9], [-0.5, 0.1, 0.0]])
    labels = torch.tensor([2, 0])
    expected = 0.0
    for i in range(2):
        for k in range(3):
            p = 1 / (1 + math.exp(-float(logits[i, k])))
            y = 1.0 if k == labels[i] else 0.0
            expected -= (y * math.log(p) + (1 - y) * math.log(1 - p)) / 6
    assert discriminator_loss(logits, labels).item() == pytest.approx(expected, rel=1e-6)


def test_code_discriminator_shape_and_output_tanh():
    disc = AugmentationDiscriminator(8, 5, num_layers=2, dropout=0.2, output_tanh=True)
    linears = [m for m in disc.net if isinstance(m, torch.nn.Linear)]
    assert [(l.in_features, l.out_features) for l in linears] == [(8, 16), (16, 5)]
    assert isinstance(disc.net[-1], torch.nn.Tanh)
    assert not isinstance(AugmentationDiscriminator(8, 5, output_tanh=False).net[-1], torch.nn.Tanh)


def test_variants_components_and_weight(tiny_st):
    torch.manual_seed(0)
    a, a2, aug = torch.randn(4, 32), torch.randn(4, 32), torch.randn(4, 32)
    labels = torch.tensor([0, 1, 2, 2])
    main = AugCSELoss(tiny_st, augmentations=2, discriminator_weight=0.5, head="none").eval()
    out = main.compute_loss({"anchor": a, "positive": a2, "augmented": aug}, labels)
    assert set(out) == {"contrastive", "discriminator"}
    raw = discriminator_loss(main.discriminator(torch.cat([a, aug], -1)), labels)
    assert out["discriminator"].item() == pytest.approx(0.5 * raw.item(), rel=1e-6)
    boolean = AugCSELoss(tiny_st, augmentations=2, variant="bool", head="none")
    assert boolean.discriminator.net[-2].out_features == 2
    assert boolean.targets(labels).tolist() == [1, 1, 0, 0]
    none = AugCSELoss(tiny_st, augmentations=2, variant="none", head="none")
    assert set(none.compute_loss({"anchor": a, "augmented": aug})) == {"contrastive"}
    positive = AugCSELoss(tiny_st, augmentations=2, variant="positive", head="none")
    assert set(positive.compute_loss({"anchor": a, "augmented": aug}, labels)) == {"contrastive", "discriminator"}


def test_negative_variant_is_equation_1_by_default(tiny_st):
    """Paper Eq. 1 (the code's one-way ``ranking_neg``): the dropout positive, in-batch positives, and the
    row's own augmentation as the only hard negative, by hand."""
    import math

    torch.manual_seed(0)
    a, a2, aug = torch.randn(4, 32), torch.randn(4, 32), torch.randn(4, 32)
    negative = AugCSELoss(tiny_st, augmentations=2, variant="negative", head="none")
    got = negative.compute_loss({"anchor": a, "positive": a2, "augmented": aug})["contrastive"].item()
    cos = torch.nn.functional.cosine_similarity
    total = 0.0
    for i in range(4):
        logits = [float(cos(a[i], a2[j], dim=0)) / 0.05 for j in range(4)] + [float(cos(a[i], aug[i], dim=0)) / 0.05]
        total += -(logits[i] - math.log(sum(math.exp(x) for x in logits))) / 4
    assert got == pytest.approx(total, rel=1e-5)


def test_discriminator_accuracy_is_popped(tiny_st):
    loss = AugCSELoss(tiny_st, augmentations=2, head="none").train()
    loss.discriminate(torch.randn(4, 32), torch.randn(4, 32), torch.tensor([0, 1, 2, 2]))
    metrics = loss.pop_metrics()
    assert 0.0 <= metrics["discriminator_accuracy"] <= 1.0
    assert loss.pop_metrics() == {}


def test_sample_view_labels_unchanged_as_no_augmentation(tiny_st, tmp_path):
    from datasets import Dataset

    from augcse.text.views import ViewContext, build_views

    sentences = ["I do not think it will rain .", "Paris", "The cat is on the mat .", "She was happy ."] * 2
    names = ["ContractionExpansions", "TenseTransformation"]
    context = ViewContext(model=tiny_st, seed=5, cache_dir=tmp_path)
    spec = [{"name": "augcse_sample", "augmentations": names}]
    ds = build_views(Dataset.from_dict({"text": sentences}), spec, context)
    assert ds.column_names == ["anchor", "augmented", "label"]
    assert set(ds["label"]) <= {0, 1, 2}
    for row in ds:
        assert (row["label"] == 2) == (row["augmented"] == row["anchor"])
    again = build_views(Dataset.from_dict({"text": sentences}), spec, context)
    assert again["label"] == ds["label"]  # fixed for the run (seeded)
    dropped = build_views(Dataset.from_dict({"text": sentences}), [{**spec[0], "drop_unchanged": True}], context)
    assert 2 not in dropped["label"]


@pytest.mark.parametrize("recipe", ["augcse-minilm", "augcse-bert-base", "augcse-roberta-base",
                                    "augcse-bert-base-transfer", "augcse-roberta-base-transfer"])
def test_recipes_leave_symmetry_to_the_variant(recipe):
    """``variant=negative`` on a built-in recipe is Eq. 1 (one-way), not the recipe's two-way default."""
    from augcse.losses.augcse import VARIANTS
    from augcse.training.recipes.config import load_recipe

    negative = ["loss.params.variant=negative", "data.views[0].label_column=null"]  # Eq. 1 reads no label
    params = load_recipe(name=recipe, overrides=negative).loss.params
    assert params["symmetric"] is None and VARIANTS[params["variant"]].symmetric is False  # null: the variant's
    params = load_recipe(name=recipe).loss.params
    assert params["symmetric"] is None and VARIANTS[params["variant"]].symmetric is True
