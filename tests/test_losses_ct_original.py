"""Contrastive Tension as Carlsson et al. train it: the pairing of each batch against the authors' grouping,
the binary cross-entropy against their Keras operations, the library's summed form, and a short training run
whose saved model is a plain sentence-transformers one without the second encoder."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import reload_plainly, train_briefly
from augcse.losses import LOSSES, CTOriginalLoss
from augcse.losses.contrastive_tension import tension_pairs

SENTENCES = [f"sentence number {i} says something about topic {i % 5} ." for i in range(16)]


def authors_order(p_ids: list, n_ids: list, negative_k: int) -> tuple[list, list, list]:
    """FreddeFrallan/Contrastive-Tension ContrastiveTension/Training.py, _orderBatchSamples, step by step:
    per positive sentence, model 1 gets [p, K negatives], model 2 [p, the next K negatives], labels [1, 0×K]."""
    inds_1, inds_2, labels, neg_counter = [], [], [], 0
    for ind in p_ids:
        inds_1.append(ind)
        inds_2.append(ind)
        inds_1.extend(n_ids[neg_counter:neg_counter + negative_k])
        inds_2.extend(n_ids[neg_counter + negative_k:neg_counter + negative_k * 2])
        neg_counter += negative_k * 2
        labels.extend([1] + [0] * negative_k)
    return inds_1, inds_2, labels


def authors_bce(emb1: torch.Tensor, emb2: torch.Tensor, labels: torch.Tensor) -> float:
    """ContrastiveTension/ContrastiveTensionModel.py: compareSents = reduce_sum(emb1·emb2, −1), then
    tf.losses.BinaryCrossentropy(from_logits=True) (mean over the batch) as Keras computes it:
    max(x, 0) − x·y + log(1 + exp(−|x|))."""
    x = torch.sum(emb1 * emb2, dim=-1)
    per_pair = torch.clamp(x, min=0) - x * labels + torch.log1p(torch.exp(-torch.abs(x)))
    return float(per_pair.mean())


def test_the_pairs_of_a_batch_of_16_are_the_authors_two_groups_of_8():
    partner, labels = tension_pairs(16, 7)
    assert labels.tolist() == ([1.0] + [0.0] * 7) * 2
    # the authors' layout for positives a0, a8 and negatives a1..a7 | a2..a8 | a9..a15 | a10..a15, a0
    rows = list(range(16))
    n_ids = rows[1:8] + rows[2:9] + rows[9:16] + rows[10:16] + [0]
    first, second, authors_labels = authors_order([0, 8], n_ids, 7)
    assert first == rows and second == partner.tolist() and authors_labels == labels.tolist()
    assert all(partner[i] != i for i in range(16) if labels[i] == 0)
    # other sizes: one positive per K+1 rows, the last group cut short; a batch of one is one positive pair
    partner, labels = tension_pairs(10, 3)
    assert labels.tolist() == [1, 0, 0, 0, 1, 0, 0, 0, 1, 0] and partner.tolist()[-1] == 0
    assert tension_pairs(1, 7)[0].tolist() == [0]


@pytest.fixture()
def double_st(tiny_st):
    return tiny_st.double()


def embed(model, texts: list[str]) -> torch.Tensor:
    features = model.preprocess(texts)
    return model(dict(features))["sentence_embedding"]


@pytest.mark.parametrize("negative_k", [7, 3])
def test_the_loss_equals_the_authors_bce_on_their_pairs(double_st, negative_k):
    loss = CTOriginalLoss(double_st, negative_k=negative_k)
    with torch.no_grad():  # the two encoders apart, as after some training
        for p in loss.copy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    features = double_st.preprocess(SENTENCES)
    double_st.train()
    got = loss([features])["tension"]
    # the authors' pairs from the same sentences, embedded with dropout off (training=False)
    partner, labels = tension_pairs(len(SENTENCES), negative_k)
    double_st.eval()
    loss.copy.eval()
    with torch.no_grad():
        emb1 = embed(loss.copy, SENTENCES)
        emb2 = embed(double_st, [SENTENCES[j] for j in partner.tolist()])
    assert got.item() == pytest.approx(authors_bce(emb1, emb2, labels.double()), rel=1e-12)
    assert double_st.training is False  # restored to the mode it had
    # the loss trains both encoders
    double_st.train()
    loss([double_st.preprocess(SENTENCES)])["tension"].backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in loss.copy.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in double_st.parameters())


def test_a_hand_computation_and_the_library_sum(double_st):
    x = torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64)
    y = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    import math

    hand = (math.log(1 + math.exp(-2.0)) + math.log(1 + math.exp(-1.0)) + math.log(1 + math.exp(0.5))) / 3
    assert authors_bce(x.unsqueeze(1), torch.ones(3, 1, dtype=torch.float64), y) == pytest.approx(hand, rel=1e-12)
    mean = CTOriginalLoss(double_st)
    summed = CTOriginalLoss(double_st, reduction="sum")
    summed.tension.model1.load_state_dict(mean.copy.state_dict())
    features = double_st.preprocess(SENTENCES[:8])
    torch.testing.assert_close(summed([features])["tension"], 8 * mean([features])["tension"], rtol=1e-12, atol=0)


def test_dropout_is_off_unless_asked(double_st):
    double_st.train()
    loss = CTOriginalLoss(double_st)
    features = double_st.preprocess(SENTENCES)
    first, second = loss([features])["tension"], loss([features])["tension"]
    assert first.item() == second.item()  # the authors' training=False: no dropout noise
    with_dropout = CTOriginalLoss(double_st, dropout=True)
    torch.manual_seed(0)
    a = with_dropout([features])["tension"].item()
    b = with_dropout([features])["tension"].item()
    assert a != b and double_st.training


def test_recipe_settings_and_the_composite_refusal():
    from augcse.core.loss_parameters import loss_settings
    from augcse.core.schema import RecipeError

    assert loss_settings("ct_original", {}) == {"negative_k": 7, "reduction": "mean", "dropout": False}
    for bad in ({"negative_k": 0}, {"reduction": "max"}):
        with pytest.raises(RecipeError):
            loss_settings("ct_original", bad)
    with pytest.raises(RecipeError, match="two encoders of its own"):
        loss_settings("composite", {"terms": [{"loss": "ct_original"}, {"loss": "simcse"}]})


def test_a_few_steps_train_both_encoders_and_the_saved_model_is_plain(tiny_st, tmp_path: Path):
    from datasets import Dataset
    from safetensors import safe_open

    dataset = Dataset.from_dict({"anchor": SENTENCES})
    loss = LOSSES["ct_original"](tiny_st)
    loss.bind(dataset.column_names)
    start = [p.detach().clone() for p in tiny_st.parameters()]
    copy_start = [p.detach().clone() for p in loss.copy.parameters()]
    train_briefly(tiny_st, dataset, loss, tmp_path, batch_size=8)
    assert not all(torch.equal(a, b) for a, b in zip(start, tiny_st.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(copy_start, loss.copy.parameters()))  # trained too
    assert not all(torch.equal(a, b) for a, b in zip(loss.copy.parameters(), tiny_st.parameters()))  # apart
    reload_plainly(tiny_st, tmp_path / "final", SENTENCES)
    weights = next((tmp_path / "final").rglob("model.safetensors"))
    with safe_open(str(weights), framework="pt") as handle:
        assert len(set(handle.keys())) <= len(tiny_st[0].auto_model.state_dict())  # the encoder once
