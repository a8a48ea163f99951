"""Gradient caching gives every InfoNCE-based loss the gradient of the whole batch (float64, the tiny model).

Without dropout the mini-batches see the same network as one merged pass, so the cached loss's values and
every gradient (encoder, train-only heads, discriminator) equal the uncached loss's. With dropout, the
second pass must replay each mini-batch's masks: the cached gradients then equal those of an uncached loss
whose embedding pass draws the same masks (each source, mini-batch by mini-batch, in the same order).
"""

from __future__ import annotations

import pytest
import torch
from sentence_transformers.base.losses.gradcache import _create_minibatch, _minibatch_ranges

import augcse.losses.base as base
from augcse.core.schema import RecipeError
from augcse.losses import LOSSES

TEXTS = {
    "anchor": ["The cat sat on the mat .", "He can swim well .", "It rained all day .", "Birds sing at dawn .",
               "A man plays the guitar on stage tonight .", "Prices rose ."],
    "positive": ["The cat , sat on the mat .", "He could swim very well .", "It rained all day !",
                 "Birds sing at dawn .", "A man is playing a guitar .", "Prices went up ."],
    "negation": ["The cat did not sit on the mat .", "He cannot swim well .", "It did not rain all day .",
                 "Birds do not sing at dawn .", "No man plays the guitar .", "Prices did not rise ."],
    "augmented": ["The mat sat on the cat .", "He can swim well .", "It rains all day .", "At dawn birds sing .",
                  "A man plays guitar on stage .", "Prices rose !"],
    "retrieved": ["Dogs bark at night .", "She cannot sing .", "The sun shone .", "Fish swim in the sea .",
                  "A woman plays the piano .", "Costs fell sharply ."],
}
LABELS = torch.tensor([0, 1, 1, 0, 1, 0])
# every InfoNCE-based loss, with the columns it reads and settings that use its heads and options
CASES = {
    "simcse": (["anchor"], {}),
    "simcse-hard-negative": (["anchor", "positive", "negative"], {"hard_negative_weight": 0.5, "symmetric": True}),
    "augcse": (["anchor", "augmented"], {"augmentations": 2, "discriminator_dropout": 0.0, "head": "bn"}),
    "sda": (["anchor", "positive", "negation"], {"head": "bn"}),
    "vascl": (["anchor"], {"topk": 2, "eps": 1.0, "head": "vascl"}),
    "cards": (["anchor", "retrieved"], {}),
    "composite": (["anchor", "positive", "negation", "augmented"], {"terms": [
        {"loss": "sda", "params": {"head": "bn"}},
        {"loss": "augcse", "weight": 0.5, "params": {"augmentations": 2, "discriminator_dropout": 0.0}},
    ]}),
}


def build(model, case: str, mini_batch_size: int | None):
    columns, params = CASES[case]
    name = case.split("-")[0]
    params = {**params, **({"mini_batch_size": mini_batch_size} if mini_batch_size else {})}
    torch.manual_seed(0)  # the heads and the discriminator start equal in both losses
    loss = LOSSES[name](model, **params).double()
    loss.bind([*columns, *(["label"] if loss.contract.labels is not None else [])])
    return loss, columns


def features(model, columns: list[str]) -> list[dict[str, torch.Tensor]]:
    return [model.tokenize(TEXTS["negation" if c == "negative" else c]) for c in columns]


def step(model, loss, columns: list[str], seed: int = 1) -> tuple[dict[str, float], list[torch.Tensor]]:
    """The components and the gradient of every trainable parameter (encoder and loss) after one backward."""
    model.zero_grad()
    loss.zero_grad()
    torch.manual_seed(seed)
    labels = LABELS if loss.contract.labels is not None else None
    parts = loss(features(model, columns), labels)
    torch.stack(list(parts.values())).sum().backward()
    params = [p for p in [*model.parameters(), *loss.parameters()] if p.requires_grad]
    unique = list({id(p): p for p in params}.values())
    return {k: v.item() for k, v in parts.items()}, [p.grad.clone() if p.grad is not None else None for p in unique]


def assert_same(got, want) -> None:
    (got_parts, got_grads), (want_parts, want_grads) = got, want
    assert got_parts.keys() == want_parts.keys()
    for key in want_parts:
        assert got_parts[key] == pytest.approx(want_parts[key], rel=1e-10, abs=1e-12), key
    assert len(got_grads) == len(want_grads)
    for g, w in zip(got_grads, want_grads):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w, rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("case", CASES)
def test_cached_gradients_equal_the_whole_batch_without_dropout(tiny_st, case):
    model = tiny_st.double().eval()
    plain, columns = build(model, case, None)
    want = step(model, plain, columns)
    cached, _ = build(model, case, 4)  # 6 texts per column: mini-batches of 4 and 2
    got = step(model, cached, columns)
    assert any(g is not None and g.abs().sum() > 0 for g in got[1][:5]), "the encoder receives a gradient"
    assert_same(got, want)


def sequential_embed(model, by_column, sources, size):
    """What the cached loss computes, with a graph: each source, mini-batch by mini-batch, in order."""
    out = []
    for source in sources:
        column = by_column[source.lstrip(base.DROPOUT_COPY)]
        out.append(torch.cat([model(_create_minibatch(column, begin, end))["sentence_embedding"]
                              for begin, end in _minibatch_ranges(column, size)]))
    return dict(zip(sources, out))


@pytest.mark.parametrize("case", ["simcse", "augcse", "sda", "composite"])
def test_dropout_is_replayed_in_the_second_pass(tiny_st, case, monkeypatch):
    model = tiny_st.double().train()
    cached, columns = build(model, case, 4)
    got = step(model, cached, columns)
    plain, _ = build(model, case, None)
    monkeypatch.setattr(base, "embed_sources", lambda m, by_column, sources: sequential_embed(m, by_column, sources, 4))
    want = step(model, plain, columns)
    assert_same(got, want)
    # and the masks did differ between the two dropout passes of the anchor (SimCSE's positive)
    monkeypatch.undo()
    merged = step(model, plain, columns)
    assert merged[0] != want[0]


def test_the_mini_batch_size_is_a_checked_parameter(tiny_st):
    with pytest.raises(RecipeError, match="mini_batch_size"):
        LOSSES["simcse"](tiny_st, mini_batch_size=0)
    with pytest.raises(RecipeError, match=r"terms\[0\]\.params\.mini_batch_size.*on the composite itself"):
        LOSSES["composite"](tiny_st, terms=[{"loss": "simcse", "params": {"mini_batch_size": 8}}])
    loss = LOSSES["composite"](tiny_st, terms=[{"loss": "simcse"}], mini_batch_size=8)
    assert loss.mini_batch_size == 8 and loss.get_config_dict()["mini_batch_size"] == 8


def test_the_replay_runs_under_the_autocast_of_the_first_pass(tiny_st, monkeypatch):
    """A trainer calls backward outside its autocast; the re-embedded mini-batches must still be bf16 ones."""
    model = tiny_st.float().eval()
    seen = []
    forward = type(model).forward
    monkeypatch.setattr(type(model), "forward", lambda self, f, **k: seen.append(
        torch.is_autocast_enabled("cpu")) or forward(self, f, **k))
    cached, columns = build(model, "simcse", 4)
    cached.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        parts = cached(features(model, columns))
    first = list(seen)
    torch.stack(list(parts.values())).sum().backward()
    assert first and all(first) and len(seen) == 2 * len(first) and all(seen)
