"""ConSERT: each embedding-layer augmentation and the NT-Xent loss against plain-torch restatements of the
authors' code (github yym6472/ConSERT), on identical tensors and identical draws, in float64; the hooks on a
tiny model; a short training run whose saved model is a plain sentence-transformers one."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import torch

from conftest import reload_plainly, train_briefly
from augcse.losses import LOSSES, ConSERTLoss
from augcse.losses.embedding_augment import Draw, adversarial_noise, augmenting, cut, draw, shuffle_positions

SENTENCES = ["The cat sat on the mat .", "He can swim very well .", "It rained all day in Paris .",
             "Birds sing at dawn in the spring .", "She is not happy with the result .",
             "The company was founded in 1990 .", "They will arrive tomorrow morning .", "A man is playing a guitar ."]
LARGE_NUM = 1e9


# ---- the authors' operations, restated step by step (transformers/modeling_bert.py, losses/AdvCLSoftmaxLoss.py)

def authors_replace_position_ids(position_ids, attention_mask, shuffled):
    """modeling_bert.py BertModel._replace_position_ids: per row, the first num_tokens ids in random.shuffle's
    order (here the given order), the rest kept; index_select, then cat."""
    rows = []
    for bsz_id in range(position_ids.size(0)):
        sample_pid = position_ids[bsz_id]
        num_tokens = attention_mask[bsz_id].sum().int().item()
        indexes = list(shuffled[bsz_id])
        assert sorted(indexes) == list(range(num_tokens))
        total_indexes = indexes + list(range(num_tokens, position_ids.size(1)))
        rows.append(torch.index_select(sample_pid, 0, torch.tensor(total_indexes)).unsqueeze(0))
    return torch.cat(rows, 0)


def authors_cutoff_embeddings(embedding_output, attention_mask, direction, rate, shuffled):
    """modeling_bert.py BertModel._cutoff_embeddings: row (token), column (feature) or random (element) cutoff;
    ``shuffled[b]`` stands for the row's ``random.shuffle(indexes)``, of which the first int(n·rate) are zeroed."""
    bsz, seq_len, emb_size = embedding_output.shape
    out = []
    for bsz_id in range(bsz):
        sample_embedding = embedding_output[bsz_id]
        sample_mask = attention_mask[bsz_id]
        if direction == "row":
            num_dimensions, dim_index = sample_mask.sum().int().item(), 0
        elif direction == "column":
            num_dimensions, dim_index = emb_size, 1
        else:
            num_dimensions, dim_index = sample_mask.sum().int().item() * emb_size, 0
        num_cutoff_indexes = int(num_dimensions * rate)
        indexes = list(shuffled[bsz_id])
        assert sorted(indexes) == list(range(num_dimensions))
        cutoff_indexes = indexes[:num_cutoff_indexes]
        if direction == "random":
            sample_embedding = sample_embedding.reshape(-1)
        cutoff_embedding = torch.index_fill(sample_embedding, dim_index, torch.tensor(cutoff_indexes, dtype=torch.long), 0.0)
        if direction == "random":
            cutoff_embedding = cutoff_embedding.reshape(seq_len, emb_size)
        out.append(cutoff_embedding.unsqueeze(0))
    return torch.cat(out, 0)


def authors_noise(grad, noise_norm):
    """AdvCLSoftmaxLoss.forward, 'adversarial backward': the gradient normalised per token, times noise_norm."""
    norm = grad.norm(p=2, dim=-1)
    return noise_norm * (grad / (norm.unsqueeze(dim=-1) + 1e-10))


def authors_nt_xent(hidden1, hidden2, temperature):
    """AdvCLSoftmaxLoss._contrastive_loss_forward, contrastive_loss_type 'nt_xent', hidden_norm True."""
    batch_size = hidden1.size(0)
    hidden1 = torch.nn.functional.normalize(hidden1, p=2, dim=-1)
    hidden2 = torch.nn.functional.normalize(hidden2, p=2, dim=-1)
    labels = torch.arange(0, batch_size)
    masks = torch.nn.functional.one_hot(torch.arange(0, batch_size), num_classes=batch_size).to(hidden1.dtype)
    logits_aa = torch.matmul(hidden1, hidden1.transpose(0, 1)) / temperature - masks * LARGE_NUM
    logits_bb = torch.matmul(hidden2, hidden2.transpose(0, 1)) / temperature - masks * LARGE_NUM
    logits_ab = torch.matmul(hidden1, hidden2.transpose(0, 1)) / temperature
    logits_ba = torch.matmul(hidden2, hidden1.transpose(0, 1)) / temperature
    loss_a = torch.nn.functional.cross_entropy(torch.cat([logits_ab, logits_aa], dim=1), labels)
    loss_b = torch.nn.functional.cross_entropy(torch.cat([logits_ba, logits_bb], dim=1), labels)
    return loss_a + loss_b


# ---- fixtures

@pytest.fixture()
def batch():
    g = torch.Generator().manual_seed(5)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2, [1] * 3 + [0] * 4])
    emb = torch.randn(3, 7, 8, generator=g, dtype=torch.float64)
    return emb, mask


def python_shuffles(counts, seed):
    """The authors' draws: random.shuffle of range(n) per row."""
    rng = random.Random(seed)
    out = []
    for n in counts:
        indexes = list(range(n))
        rng.shuffle(indexes)
        out.append(indexes)
    return out


@pytest.mark.parametrize("name,direction,rate", [("token_cutoff", "row", 0.3), ("feature_cutoff", "column", 0.2),
                                                 ("dropout", "random", 0.1), ("token_cutoff", "row", 0.15)])
def test_cutoffs_equal_the_authors_on_their_draws(batch, name, direction, rate):
    emb, mask = batch
    lengths = mask.sum(1).tolist()
    counts = {"row": lengths, "column": [8] * 3, "random": [n * 8 for n in lengths]}[direction]
    shuffled = python_shuffles(counts, seed=11)
    want = authors_cutoff_embeddings(emb, mask, direction, rate, shuffled)
    ours = Draw(name, [torch.tensor(s[: int(n * rate)]) for s, n in zip(shuffled, counts)])
    got = cut(emb, ours)
    assert torch.equal(got, want)
    assert (got == 0).sum() > 0


def test_shuffle_equals_the_authors_position_ids(batch):
    _, mask = batch
    position_ids = torch.arange(7).expand(3, -1)
    shuffled = python_shuffles(mask.sum(1).tolist(), seed=3)
    want = authors_replace_position_ids(position_ids, mask, shuffled)
    got = shuffle_positions(position_ids, mask.sum(1).tolist(), [torch.tensor(s) for s in shuffled])
    assert torch.equal(got, want)
    assert not torch.equal(got, position_ids)
    assert torch.equal(got[:, 5:][mask[:, 5:] == 0], position_ids[:, 5:][mask[:, 5:] == 0])  # padding untouched


def test_draws_take_int_n_rate_of_the_real_tokens(batch):
    emb, mask = batch
    g = torch.Generator().manual_seed(0)
    assert [len(i) for i in draw("token_cutoff", mask, 8, 0.3, g).index] == [2, 1, 0]
    assert [len(i) for i in draw("feature_cutoff", mask, 8, 0.2, g).index] == [1, 1, 1]
    assert [len(i) for i in draw("dropout", mask, 8, 0.1, g).index] == [5, 4, 2]
    perms = draw("shuffle", mask, 8, 0.2, g).index
    assert [sorted(p.tolist()) for p in perms] == [list(range(n)) for n in (7, 5, 3)]
    assert all(int(i.max()) < 5 for i in draw("token_cutoff", mask, 8, 0.9, g).index[1:2])  # never a padding token
    assert draw("none", mask, 8, 0.2, g) is None and draw("adversarial", mask, 8, 0.2, g) is None


def test_adversarial_noise_equals_the_authors(batch):
    grad, _ = batch
    assert torch.equal(adversarial_noise(grad, 1.0), authors_noise(grad, 1.0))
    assert torch.allclose(adversarial_noise(grad, 0.5).norm(dim=-1), torch.full((3, 7), 0.5, dtype=torch.float64))


@pytest.mark.parametrize("temperature,scale", [(0.1, 0.15), (0.05, 1.0)])
def test_nt_xent_equals_the_authors(tiny_st, temperature, scale):
    g = torch.Generator().manual_seed(2)
    h1, h2 = (torch.randn(6, 32, generator=g, dtype=torch.float64) for _ in range(2))
    loss = ConSERTLoss(tiny_st, temperature=temperature, scale=scale)
    got = loss.nt_xent(h1, h2)
    want = scale * authors_nt_xent(h1, h2, temperature)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=0)


def test_nt_xent_by_hand_on_two_rows(tiny_st):
    h1 = torch.tensor([[1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    h2 = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    loss = ConSERTLoss(tiny_st, temperature=1.0, scale=1.0)
    e = math.e
    # view 1 row 0: positive cos 1, negatives cos(h1_0, h2_1) = 1, cos(h1_0, h1_1) = 0; row 1: all cosines 0
    a = -math.log(e / (e + e + 1)) - math.log(1 / (1 + 1 + 1))
    # view 2 row 0: positive cos 1, cos(h2_0, h1_1) = 0, cos(h2_0, h2_1) = 1; row 1: positive cos 0, the others 1
    b = -math.log(e / (e + 1 + e)) - math.log(1 / (1 + e + e))
    assert loss.nt_xent(h1, h2).item() == pytest.approx((a + b) / 2, rel=1e-12)  # each direction a mean over rows


# ---- the hooks on a tiny model

def tokenised(model, texts):
    return model.tokenize(texts)


def test_hooked_shuffle_equals_passing_the_authors_position_ids(tiny_st):
    model = tiny_st.double().eval()
    features = tokenised(model, SENTENCES[:3])
    mask = features["attention_mask"]
    g = torch.Generator().manual_seed(4)
    chosen = draw("shuffle", mask, 32, 0.0, g)
    with torch.no_grad(), augmenting(model, mask, chosen):
        got = model[0].auto_model(**{k: features[k] for k in ("input_ids", "attention_mask", "token_type_ids")}).last_hidden_state
        hooked = model(dict(features))["sentence_embedding"]
    pids = authors_replace_position_ids(torch.arange(mask.size(1)).expand(3, -1), mask, [c.tolist() for c in chosen.index])
    with torch.no_grad():
        want = model[0].auto_model(**{k: features[k] for k in ("input_ids", "attention_mask", "token_type_ids")},
                                   position_ids=pids).last_hidden_state
        plain = model(dict(features))["sentence_embedding"]
    assert torch.equal(got, want)
    assert not torch.allclose(hooked, plain)
    assert not model[0].auto_model.embeddings._forward_hooks and not model[0].auto_model.embeddings._forward_pre_hooks


@pytest.mark.parametrize("name,direction", [("token_cutoff", "row"), ("feature_cutoff", "column"), ("dropout", "random")])
def test_hooked_cutoff_replaces_the_embedding_output_as_the_authors(tiny_st, name, direction):
    model = tiny_st.double().eval()
    features = tokenised(model, SENTENCES[:3])
    mask = features["attention_mask"]
    chosen = draw(name, mask, 32, 0.25, torch.Generator().manual_seed(9))
    captured: list[torch.Tensor] = []
    with torch.no_grad(), augmenting(model, mask, capture=captured):
        model(dict(features))
    lengths = mask.sum(1).tolist()
    counts = {"row": lengths, "column": [32] * 3, "random": [n * 32 for n in lengths]}[direction]
    full = []  # the draw as the authors' shuffled list: the chosen first, then the rest
    for index, n in zip(chosen.index, counts):
        rest = [i for i in range(n) if i not in set(index.tolist())]
        full.append(index.tolist() + rest)
    authors = authors_cutoff_embeddings(captured[0], mask, direction, 0.25, full)
    with torch.no_grad(), augmenting(model, mask, replace=authors):
        want = model(dict(features))["sentence_embedding"]
    with torch.no_grad(), augmenting(model, mask, chosen):
        got = model(dict(features))["sentence_embedding"]
    assert torch.equal(got, want)


def test_loss_with_fixed_draws_equals_the_authors_pipeline(tiny_st, monkeypatch):
    """feature_cutoff 0.2 + shuffle, dropout off: the loss equals the authors' views and nt_xent × cl_rate."""
    import augcse.losses.consert as consert

    model = tiny_st.double()
    features = tokenised(model, SENTENCES[:4])
    mask = features["attention_mask"]
    draws = {"feature_cutoff": draw("feature_cutoff", mask, 32, 0.2, torch.Generator().manual_seed(1)),
             "shuffle": draw("shuffle", mask, 32, 0.2, torch.Generator().manual_seed(2))}
    monkeypatch.setattr(consert, "draw", lambda name, *a, **k: draws.get(name))
    loss = ConSERTLoss(model, temperature=0.1, scale=0.15).train()
    model.train()
    got = loss.compute_loss({}, None, {"anchor": features})["contrastive"]
    assert model.training  # the dropout switch is restored
    model.eval()
    with torch.no_grad():
        captured: list[torch.Tensor] = []
        with augmenting(model, mask, capture=captured):
            model(dict(features))
        lengths = mask.sum(1).tolist()
        chosen = draws["feature_cutoff"].index
        full = [c.tolist() + [i for i in range(32) if i not in set(c.tolist())] for c in chosen]
        cut_output = authors_cutoff_embeddings(captured[0], mask, "column", 0.2, full)
        with augmenting(model, mask, replace=cut_output):
            view_1 = model(dict(features))["sentence_embedding"]
        pids = authors_replace_position_ids(torch.arange(mask.size(1)).expand(4, -1), mask,
                                            [p.tolist() for p in draws["shuffle"].index])
        hidden = model[0].auto_model(input_ids=features["input_ids"], attention_mask=mask,
                                     token_type_ids=features["token_type_ids"], position_ids=pids).last_hidden_state
        view_2 = (hidden * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
    assert len(lengths) == 4
    # tiny_st pools by the mean only (no Normalize), so the authors' mean pooling is the model's output
    want = 0.15 * authors_nt_xent(view_1, view_2, 0.1)
    torch.testing.assert_close(got.detach(), want, rtol=1e-10, atol=1e-12)


def test_adversarial_view_moves_along_the_loss_gradient_and_leaves_parameter_gradients(tiny_st):
    model = tiny_st.double()
    features = tokenised(model, SENTENCES[:4])
    loss = ConSERTLoss(model, augment_1="none", augment_2="adversarial", adversarial_norm=0.5, temperature=0.1).train()
    model.eval()  # dropout off, as the loss's own passes have it; the loss stays in training mode
    clean = loss.embed(features)
    other = clean.detach() * 1.01
    adv = loss.adversarial_view(features, other)
    assert all(p.grad is None for p in model.parameters())  # the probe's gradient touched no parameter
    assert not torch.allclose(adv, clean)
    # the authors' construction, by hand: grad of the loss w.r.t. the plain embedding output, normalised per token
    captured: list[torch.Tensor] = []
    with augmenting(model, features["attention_mask"], capture=captured):
        plain = model(dict(features))["sentence_embedding"]
    (grad,) = torch.autograd.grad(loss.nt_xent(plain, other), captured[0])
    with torch.no_grad(), augmenting(model, features["attention_mask"], replace=captured[0] + authors_noise(grad, 0.5)):
        want = model(dict(features))["sentence_embedding"]
    torch.testing.assert_close(adv.detach(), want, rtol=1e-10, atol=1e-12)
    total = loss.compute_loss({}, None, {"anchor": features})["contrastive"]
    total.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())


def test_eval_mode_is_two_plain_passes_and_leaves_no_hook(tiny_st):
    model = tiny_st.double()
    features = tokenised(model, SENTENCES[:4])
    loss = ConSERTLoss(model, augment_1="token_cutoff", augment_2="shuffle").eval()
    model.eval()
    with torch.no_grad():
        value = loss.compute_loss({}, None, {"anchor": features})["contrastive"]
        plain = model(dict(features))["sentence_embedding"]
    assert value.item() == pytest.approx(loss.nt_xent(plain, plain).item(), rel=1e-12)
    embeddings = model[0].auto_model.embeddings
    assert not embeddings._forward_hooks and not embeddings._forward_pre_hooks


def test_two_steps_train_and_the_saved_model_is_plain_sentence_transformers(tiny_st, tmp_path: Path):
    from datasets import Dataset

    dataset = Dataset.from_dict({"anchor": SENTENCES})
    loss = LOSSES["consert"](tiny_st, augment_1="token_cutoff", augment_2="adversarial", rate_1=0.15)
    loss.bind(dataset.column_names)
    start = [p.detach().clone() for p in tiny_st.parameters()]
    train_briefly(tiny_st, dataset, loss, tmp_path)
    assert not all(torch.equal(a, b) for a, b in zip(start, tiny_st.parameters()))
    embeddings = tiny_st[0].auto_model.embeddings
    assert not embeddings._forward_hooks and not embeddings._forward_pre_hooks
    reload_plainly(tiny_st, tmp_path / "final", SENTENCES)


def test_recipe_parameters_are_checked_before_anything_loads():
    from augcse.core.loss_parameters import loss_settings
    from augcse.core.schema import RecipeError

    filled = loss_settings("consert", {})
    assert (filled["augment_1"], filled["augment_2"], filled["rate_1"], filled["temperature"], filled["scale"],
            filled["dropout"]) == ("feature_cutoff", "shuffle", 0.2, 0.1, 0.15, False)
    for bad in ({"augment_1": "span"}, {"rate_1": 0.0}, {"rate_2": 1.0}, {"adversarial_norm": 0},
                {"augment_1": "adversarial", "augment_2": "adversarial"}, {"mini_batch_size": 4}):
        with pytest.raises(RecipeError) as err:
            loss_settings("consert", bad)
        assert "\n" not in str(err.value)
    with pytest.raises(RecipeError):
        loss_settings("composite", {"mini_batch_size": 4, "terms": [{"loss": "consert"}, {"loss": "simcse"}]})


def test_composes_with_simcse_as_a_composite_term(tiny_st):
    from augcse.losses import CompositeLoss

    model = tiny_st.double().train()
    loss = CompositeLoss(model, columns=["anchor"], terms=[{"loss": "consert", "weight": 0.5},
                                                          {"loss": "simcse", "inputs": {"positive": "~anchor"}}])
    features = tokenised(model, SENTENCES[:4])
    out = loss([features])
    assert set(out) == {"consert/contrastive", "simcse/contrastive"}
    sum(out.values()).backward()
