"""ESimCSE: the loss against a hand computation of the authors' operations, the momentum update, the FIFO
queue, the repetition view, and a short training run whose saved model is a plain sentence-transformers one."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import reload_plainly, train_briefly
from augcse.losses import LOSSES, ESimCSELoss
from augcse.losses.esimcse import enqueue, momentum_update
from augcse.text.retrieval import keyed_rng
from augcse.text.views import ViewContext, build_views
from augcse.text.views.esimcse import RepetitionDraws, repeat_count, repeat_subwords, repeat_words

SENTENCES = ["The cat sat on the mat .", "He can swim very well .", "It rained all day in Paris .",
             "Birds sing at dawn in the spring .", "She is not happy with the result .",
             "The company was founded in 1990 .", "They will arrive tomorrow morning .", "A man is playing a guitar ."]


def hand_loss(z1: torch.Tensor, z2: torch.Tensor, queue: torch.Tensor | None, temperature: float) -> float:
    """The authors' cl_forward: Similarity = cosine / temp, logits [z1·z2ᵀ | z1·queueᵀ], CrossEntropy(arange)."""
    total = 0.0
    for i in range(z1.size(0)):
        row = [float(F.cosine_similarity(z1[i], z2[j], dim=0)) / temperature for j in range(z2.size(0))]
        if queue is not None:
            row += [float(F.cosine_similarity(z1[i], q, dim=0)) / temperature for q in queue]
        top = max(row)
        total += -(row[i] - top - math.log(sum(math.exp(v - top) for v in row)))
    return total / z1.size(0)


@pytest.fixture()
def vectors():
    g = torch.Generator().manual_seed(3)
    return tuple(torch.randn(n, 32, generator=g, dtype=torch.float64) for n in (5, 5, 7))


@pytest.mark.parametrize("with_queue", [False, True])
def test_loss_equals_the_authors_logits_and_cross_entropy(tiny_st, vectors, with_queue):
    z1, z2, queue = vectors
    loss = ESimCSELoss(tiny_st, head="none", queue_size=7).double()
    loss.queue = queue if with_queue else None
    got = loss.compute_loss({"anchor": z1, "positive": z2})["contrastive"].item()  # no features: no step
    assert got == pytest.approx(hand_loss(z1, z2, queue if with_queue else None, 0.05), rel=1e-12)
    if with_queue:  # the queue does change the loss
        assert got != pytest.approx(hand_loss(z1, z2, None, 0.05), rel=1e-6)


def test_momentum_update_is_exactly_the_ema(tiny_st):
    model = tiny_st.double()
    loss = ESimCSELoss(model, momentum=0.9)
    mirror = list(loss.momentum_encoder.parameters())
    assert all(not p.requires_grad for p in mirror)
    assert all(torch.equal(a, b) for a, b in zip(mirror, model.parameters()))  # starts as the encoder
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p))
    before = [p.detach().clone() for p in mirror]
    loss.update_momentum_encoder()
    for old, new, online in zip(before, mirror, model.parameters()):
        assert torch.equal(new, 0.9 * old + (1 - 0.9) * online.detach())
    # and the function itself on plain tensors
    a, b = torch.randn(4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    a0 = a.clone()
    momentum_update([a], [b], 0.995)
    assert torch.equal(a, 0.995 * a0 + (1 - 0.995) * b)


def test_queue_is_first_in_first_out_with_its_size():
    queue = None
    for step in range(4):
        queue = enqueue(queue, torch.full((2, 3), float(step)), 5)
    assert queue.shape == (5, 3)
    assert queue[:, 0].tolist() == [1.0, 2.0, 2.0, 3.0, 3.0]  # oldest first, the last batch at the end
    assert enqueue(queue, torch.zeros(2, 3), 0) is None


def tokenized(model, texts):
    return model.tokenize(texts)


def test_training_forwards_step_the_encoder_then_enqueue_this_batch(tiny_st):
    model = tiny_st.double().train()
    loss = ESimCSELoss(model, head="mlp", queue_size=5, momentum=0.5).double().train()
    loss.bind(["anchor", "positive"])
    first = None
    for step in range(3):
        anchors, positives = SENTENCES[2 * step:2 * step + 2], [s.upper() for s in SENTENCES[2 * step:2 * step + 2]]
        previous = None if loss.queue is None else loss.queue.clone()
        with torch.no_grad():
            for p in model.parameters():  # the "optimizer step" between forwards
                p.add_(0.01 * torch.randn_like(p))
        before = [p.clone() for p in loss.momentum_encoder.parameters()]
        parts = loss([tokenized(model, anchors), tokenized(model, positives)])
        parts["contrastive"].backward()
        for old, new, online in zip(before, loss.momentum_encoder.parameters(), model.parameters()):
            assert torch.equal(new, 0.5 * old + 0.5 * online.detach())
        # the batch enters the queue after the loss read it, embedded by the stepped momentum encoder
        want = loss.momentum_embeddings(tokenized(model, anchors))
        torch.testing.assert_close(loss.queue[-2:], want)
        if previous is not None:
            torch.testing.assert_close(loss.queue[:-2], previous[-(loss.queue.size(0) - 2):])
        first = first or parts
    assert loss.queue.shape[0] == 5
    # a forward without gradients (a probe, the guard) changes nothing
    queue, mirror = loss.queue.clone(), [p.clone() for p in loss.momentum_encoder.parameters()]
    with torch.no_grad():
        loss([tokenized(model, SENTENCES[:2]), tokenized(model, SENTENCES[2:4])])
    assert torch.equal(loss.queue, queue)
    assert all(torch.equal(a, b) for a, b in zip(mirror, loss.momentum_encoder.parameters()))


def test_state_dict_carries_the_momentum_encoder_and_the_queue(tiny_st):
    loss = ESimCSELoss(tiny_st, queue_size=4)
    loss.queue = torch.arange(12.0).reshape(4, 3)
    with torch.no_grad():
        next(loss.momentum_encoder.parameters()).add_(1.0)
    state = {k: v for k, v in loss.state_dict().items() if not k.startswith("model.")}  # LossStateCheckpoint's
    assert any(k.startswith("momentum_state.") for k in state)
    fresh = ESimCSELoss(tiny_st, queue_size=4)
    result = fresh.load_state_dict(state, strict=False)
    assert not result.unexpected_keys
    assert torch.equal(fresh.queue, loss.queue)
    assert torch.equal(next(fresh.momentum_encoder.parameters()), next(loss.momentum_encoder.parameters()))


def test_gradient_caching_gives_the_same_loss_and_gradient_with_a_queue(tiny_st):
    model = tiny_st.double().eval()  # no dropout: one merged pass and mini-batches see the same network
    queue = torch.randn(6, model.get_embedding_dimension(), dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    results = []
    for mini_batch_size in (None, 3):
        torch.manual_seed(0)
        params = {"head": "mlp", "queue_size": 6, **({"mini_batch_size": mini_batch_size} if mini_batch_size else {})}
        loss = LOSSES["esimcse"](model, **params).double()  # training mode by default; the model stays in eval
        loss.bind(["anchor", "positive"])
        loss.queue = queue.clone()
        model.zero_grad()
        parts = loss([tokenized(model, SENTENCES[:5]), tokenized(model, [s + " ." for s in SENTENCES[:5]])])
        parts["contrastive"].backward()
        results.append((parts["contrastive"].item(), [p.grad.clone() for p in model.parameters() if p.grad is not None],
                        loss.queue.clone()))
    (plain, plain_grads, plain_queue), (cached, cached_grads, cached_queue) = results
    assert cached == pytest.approx(plain, rel=1e-10)
    assert len(plain_grads) == len(cached_grads) > 0
    for a, b in zip(cached_grads, plain_grads):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-11)
    torch.testing.assert_close(cached_queue, plain_queue)


def test_word_repetition_repeats_the_drawn_count_reproducibly():
    sentence = "one two three four five six seven eight nine ten eleven twelve"
    n = 12
    counts = []
    for epoch in range(40):
        text, positions = repeat_words(sentence, keyed_rng(7, "esimcse_repetition", epoch, sentence), 0.32)
        assert len(text.split(" ")) == n + len(positions)
        assert 0 <= len(positions) <= max(2, int(0.32 * n)) == 3
        for i in positions:  # each chosen word is doubled where it stands
            assert f"{sentence.split(' ')[i]} {sentence.split(' ')[i]}" in text
        again, same = repeat_words(sentence, keyed_rng(7, "esimcse_repetition", epoch, sentence), 0.32)
        assert (again, same) == (text, positions)
        counts.append(len(positions))
    assert set(counts) == {0, 1, 2, 3}  # uniform on [0, max(2, int(dup_rate·n))], bounds included
    # the authors' code: randrange excludes its bound and the last word is never picked
    for epoch in range(40):
        text, positions = repeat_words(sentence, keyed_rng(7, "code", epoch), 0.32, draw="code")
        assert len(positions) <= 2 and (n - 1) not in positions
    # a fixed draw: this seed, epoch and sentence repeat exactly these words
    rng = keyed_rng(42, "esimcse_repetition", 0, sentence)
    count = repeat_count(keyed_rng(42, "esimcse_repetition", 0, sentence), n, 0.32, "paper", "word")
    assert len(repeat_words(sentence, rng, 0.32)[1]) == count


def test_subword_repetition_through_the_tokenizer(tiny_st):
    tokenizer = tiny_st.tokenizer
    draws = RepetitionDraws(seed=1, dup_rate=0.32, unit="subword", draw="paper", column="positive", tokenizer=tokenizer)
    sentence = "the cat sat on the mat and the dog ran to the park"  # one token per word
    n = len(tokenizer(sentence, add_special_tokens=False)["input_ids"])
    seen = set()
    for epoch in range(30):
        text = draws.repeat(sentence, epoch)
        added = len(tokenizer(text, add_special_tokens=False)["input_ids"]) - n
        assert 0 <= added <= max(2, int(0.32 * n))
        assert draws.repeat(sentence, epoch) == text
        seen.add(added)
    assert len(seen) > 2
    # a continuation piece is glued, a word-initial one becomes a word of its own
    glued, positions = repeat_subwords("playing", [(0, 4), (4, 7)], np.random.default_rng(0), 1.0)
    assert glued in {"playing", "play playing", "playinging", "play playinging"}


def test_the_view_draws_per_epoch_and_writes_the_positive(tiny_st):
    from datasets import Dataset

    corpus = Dataset.from_dict({"text": SENTENCES})
    dataset = build_views(corpus, [{"name": "esimcse_repetition", "unit": "word"}], ViewContext(model=tiny_st, seed=5))
    assert dataset.column_names == ["anchor", "positive"]
    first = dataset[:]["positive"]
    assert first == dataset[:]["positive"]  # reproducible
    for anchor, positive in zip(SENTENCES, first):
        assert len(positive.split(" ")) >= len(anchor.split(" "))
    transform = dataset.format["format_kwargs"]["transform"]
    transform.set_epoch(1)
    assert dataset[:]["positive"] != first  # a fresh draw in the next epoch


def test_two_steps_train_and_the_saved_model_is_plain_sentence_transformers(tiny_st, tmp_path: Path):
    from datasets import Dataset
    from safetensors import safe_open

    dataset = build_views(Dataset.from_dict({"text": SENTENCES}), [{"name": "esimcse_repetition"}],
                          ViewContext(model=tiny_st, seed=1))
    loss = ESimCSELoss(tiny_st, queue_size=6, head="mlp")
    loss.bind(dataset.column_names)
    start = [p.detach().clone() for p in tiny_st.parameters()]
    train_briefly(tiny_st, dataset, loss, tmp_path)
    assert loss.queue.shape[0] == 6  # two batches of 4 enqueued, the oldest two dropped
    assert not all(torch.equal(a, b) for a, b in zip(start, tiny_st.parameters()))
    # the momentum encoder moved towards the trained encoder but is not it
    assert not all(torch.equal(a, b) for a, b in zip(loss.momentum_encoder.parameters(), tiny_st.parameters()))
    reload_plainly(tiny_st, tmp_path / "final", SENTENCES)
    weights = next((tmp_path / "final").rglob("model.safetensors"))
    with safe_open(str(weights), framework="pt") as handle:
        keys = set(handle.keys())
    assert not any("momentum" in k for k in keys)
    assert len(keys) <= len(tiny_st[0].auto_model.state_dict())  # the encoder once, nothing of the loss


def test_recipe_parameters_are_checked_before_anything_loads():
    from augcse.core.loss_parameters import loss_settings
    from augcse.core.schema import RecipeError

    assert loss_settings("esimcse", {})["queue_size"] == 160
    for bad in ({"momentum": 1.0}, {"momentum": -0.1}, {"queue_size": -1}, {"queue_view": "negation"}):
        with pytest.raises(RecipeError):
            loss_settings("esimcse", bad)
