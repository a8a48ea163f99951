"""DiffCSE: the loss against a step-by-step re-statement of the authors' ``cl_forward`` (voidism/DiffCSE,
diffcse/models.py) and their masking (train.py ``OurDataCollatorWithPadding.mask_tokens``) in float64, on the
same masks and the same generator; its refusals; a short training run whose saved model is plain
sentence-transformers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import reload_plainly, train_briefly
from test_losses_mlm import authors_mask_tokens as simcse_mask_tokens
from augcse.core.schema import RecipeError
from augcse.losses import LOSSES, DiffCSELoss
from augcse.losses import diffcse as diffcse_module
from augcse.losses.diffcse import edited_inputs, rtd_loss
from augcse.losses.masking import mask_tokens

SENTENCES = ["The cat sat on the mat .", "He can swim very well .", "It rained all day in Paris and London .",
             "Birds sing ."]


def authors_mask_tokens(tokenizer, inputs: torch.Tensor, probability: float) -> tuple[torch.Tensor, torch.Tensor]:
    """DiffCSE train.py, ``OurDataCollatorWithPadding.mask_tokens``: SimCSE's, with padding left maskable."""
    return simcse_mask_tokens(tokenizer, inputs, probability, special=("cls", "sep"))


def projection_mlp(loss: DiffCSELoss, x: torch.Tensor) -> torch.Tensor:
    """diffcse/models.py ``ProjectionMLP`` (--batchnorm) in training mode, restated with the loss head's weights."""
    first, bn1, _, second, bn2 = loss.head.net
    x = F.linear(x, first.weight)
    x = F.batch_norm(x, None, None, bn1.weight, bn1.bias, training=True, eps=bn1.eps)
    x = F.relu(x)
    x = F.linear(x, second.weight)
    return F.batch_norm(x, None, None, None, None, training=True, eps=bn2.eps)


def authors_cl_forward(loss: DiffCSELoss, tokens: dict, z: torch.Tensor, mlm_input_ids: torch.Tensor,
                       lambda_weight: float, temp: float) -> tuple[torch.Tensor, torch.Tensor]:
    """diffcse/models.py ``cl_forward`` for num_sent = 2, pooler ``cls`` with --batchnorm, before_mlp False.

    ``tokens``: the batch flattened as the authors' collator does (bs * 2 rows, the two views of a sentence
    next to each other); ``z``: the pooled outputs in that order. Returns (total loss, the RTD loss)."""
    input_ids, attention_mask, token_type_ids = tokens["input_ids"], tokens["attention_mask"], tokens["token_type_ids"]
    batch_size = input_ids.size(0) // 2
    pooler_output = projection_mlp(loss, z).view(batch_size, 2, -1)  # cls.mlp(pooler_output) before the RTD
    with torch.no_grad():
        g_pred = loss.generator(mlm_input_ids, attention_mask)[0].argmax(-1)
    g_pred[:, 0] = loss.tokenizer.cls_token_id  # cls_token=101 for BERT
    replaced = (g_pred != input_ids) * attention_mask
    e_inputs = g_pred * attention_mask
    cls_input = pooler_output.view((-1, pooler_output.size(-1)))
    embeddings = loss.discriminator.embeddings
    original = embeddings.forward

    def conditioned(*args, **kwargs):  # modeling_bert.py BertModel.forward: cat([cls_input, embedding_output[:, 1:]])
        embedding_output = original(*args, **kwargs)
        return torch.cat([cls_input.unsqueeze(1), embedding_output[:, 1:, :]], dim=1)

    embeddings.forward = conditioned
    try:
        mlm_outputs = loss.discriminator(e_inputs, attention_mask=attention_mask, token_type_ids=token_type_ids,
                                         return_dict=True)
    finally:
        embeddings.forward = original
    z1, z2 = pooler_output[:, 0], pooler_output[:, 1]
    cos_sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / temp
    labels = torch.arange(cos_sim.size(0)).long()
    loss_fct = torch.nn.CrossEntropyLoss()
    contrastive = loss_fct(cos_sim, labels)
    e_labels = replaced.view(-1, replaced.size(-1))
    prediction_scores = loss.rtd_head(mlm_outputs.last_hidden_state)
    masked_lm_loss = loss_fct(prediction_scores.view(-1, 2), e_labels.view(-1))
    return contrastive + lambda_weight * masked_lm_loss, masked_lm_loss


def interleave(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Rows a0, b0, a1, b1…: the authors' (bs, num_sent, …) batch viewed as (bs * num_sent, …)."""
    return torch.stack([first, second], dim=1).reshape(-1, *first.shape[1:])


@pytest.fixture()
def diffcse(tiny_st, tiny_mlm_dir):
    def build(**params):
        loss = DiffCSELoss(tiny_st, generator=str(tiny_mlm_dir), **params).double()
        loss.generator.double()
        loss.train()
        tiny_st.eval()  # the discriminator and the generator follow the encoder: no dropout, one network for both
        return loss
    return build


# λ and masking ratio of the authors' run script (BERT-base and RoBERTa-base: 0.005, 0.30) and of their
# train.py defaults (λ 0.1, ratio 0.15)
@pytest.mark.parametrize("rtd_weight,mask_ratio", [(0.005, 0.30), (0.1, 0.15)])
def test_total_and_rtd_equal_the_authors_cl_forward(diffcse, tiny_st, monkeypatch, rtd_weight, mask_ratio):
    loss = diffcse(rtd_weight=rtd_weight, mask_ratio=mask_ratio, head="bn")
    features = tiny_st.tokenize(SENTENCES)
    g = torch.Generator().manual_seed(7)
    z_anchor, z_positive = (torch.randn(len(SENTENCES), 32, generator=g, dtype=torch.float64) for _ in range(2))
    both = {k: interleave(v, v) for k, v in features.items() if isinstance(v, torch.Tensor)}
    torch.manual_seed(11)
    mlm_input_ids, _ = authors_mask_tokens(loss.tokenizer, both["input_ids"], mask_ratio)
    assert (mlm_input_ids != both["input_ids"]).any()
    # augcse masks [anchors; positives]: feed it the very rows the authors' collator masked
    ours = torch.cat([mlm_input_ids[0::2], mlm_input_ids[1::2]])
    monkeypatch.setattr(diffcse_module, "mask_tokens", lambda tok, ids, mask, ratio: (ours.clone(), None))
    got = loss.compute_loss({"anchor": z_anchor, "positive": z_positive}, None,
                            {"anchor": features, "positive": features})
    want_total, want_rtd = authors_cl_forward(loss, both, interleave(z_anchor, z_positive), mlm_input_ids,
                                              rtd_weight, 0.05)
    assert (got["contrastive"] + got["rtd"]).item() == pytest.approx(want_total.item(), rel=1e-12)
    assert (got["rtd"] / rtd_weight).item() == pytest.approx(want_rtd.item(), rel=1e-12)
    assert want_rtd.item() > 0.1  # a real two-way loss, not a constant


def test_rtd_and_edit_by_hand():
    # 2 rows of 4 positions, the last of row 2 padding; generator tokens at every position
    generated = torch.tensor([[5, 7, 8, 9], [6, 3, 4, 4]])
    original = torch.tensor([[101, 7, 2, 9], [101, 3, 5, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    edited, replaced = edited_inputs(generated, original, mask, 101)
    assert edited.tolist() == [[101, 7, 8, 9], [101, 3, 4, 0]]
    assert replaced.tolist() == [[0, 0, 1, 0], [0, 0, 1, 0]]
    logits = torch.zeros(2, 4, 2, dtype=torch.float64)
    logits[0, 2] = torch.tensor([0.0, 2.0])
    # every position counts, padding too (labelled kept): 7 positions at log 2, one at log(1 + e^-2)
    want = (7 * torch.log(torch.tensor(2.0, dtype=torch.float64)) + torch.log1p(torch.exp(torch.tensor(-2.0, dtype=torch.float64)))) / 8
    assert rtd_loss(logits, replaced).item() == pytest.approx(want.item(), rel=1e-12)


def test_masking_equals_the_authors_collator_on_the_same_draws(tiny_st):
    tokenizer = tiny_st.tokenizer
    features = tiny_st.tokenize(["a b c d e f g h i j k l m n o p q r s t u v w x y z"] * 6)
    ids, mask = features["input_ids"], features["attention_mask"]
    for ratio in (0.15, 0.30):
        torch.manual_seed(3)
        want, want_labels = authors_mask_tokens(tokenizer, ids, ratio)
        torch.manual_seed(3)
        got, labels = mask_tokens(tokenizer, ids, mask, ratio)
        assert torch.equal(got, want) and torch.equal(labels, want_labels)
    # over many rows: the ratio, and [CLS], [SEP] and padding never chosen
    many = tiny_st.tokenize(SENTENCES * 200)
    torch.manual_seed(0)
    _, labels = mask_tokens(tokenizer, many["input_ids"], many["attention_mask"], 0.30)
    chosen = labels != -100
    special = torch.isin(many["input_ids"], torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id]))
    assert not chosen[special].any() and not chosen[many["attention_mask"] == 0].any()
    share = chosen.sum() / ((many["attention_mask"] == 1) & ~special).sum()
    assert 0.28 < float(share) < 0.32


def test_condition_on_encoder_reads_the_embedding_before_the_head(diffcse, tiny_st, monkeypatch):
    features = tiny_st.tokenize(SENTENCES)
    z = torch.randn(len(SENTENCES), 32, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    seen = []
    for where in ("head", "encoder"):
        loss = diffcse(condition_on=where)
        monkeypatch.setattr(loss, "rtd", lambda tokens, condition: seen.append(condition) or condition.sum() * 0)
        loss.compute_loss({"anchor": z, "positive": z}, None, {"anchor": features, "positive": features})
    torch.testing.assert_close(seen[1], torch.cat([z, z]))
    assert not torch.allclose(seen[0], seen[1])


def test_dropout_of_discriminator_and_generator_follows_the_encoder(diffcse, tiny_st):
    loss = diffcse()
    features = tiny_st.tokenize(SENTENCES)
    z = torch.randn(len(SENTENCES), 32, dtype=torch.float64)
    for mode in (True, False):
        tiny_st.train(mode)
        loss.compute_loss({"anchor": z, "positive": z}, None, {"anchor": features, "positive": features})
        assert loss.discriminator.training is mode and loss.generator.training is mode


def test_gradient_reaches_the_embedding_and_the_discriminator_not_the_generator(diffcse, tiny_st):
    loss = diffcse(head="bn")
    features = tiny_st.tokenize(SENTENCES)
    z = torch.randn(len(SENTENCES), 32, dtype=torch.float64, requires_grad=True)
    out = loss.compute_loss({"anchor": z, "positive": z * 1.0}, None, {"anchor": features, "positive": features})
    out["rtd"].backward()
    assert z.grad is not None and z.grad.abs().sum() > 0  # RTD's gradient flows into h
    assert loss.rtd_head.weight.grad is not None
    assert all(p.grad is None and not p.requires_grad for p in loss.generator.parameters())
    assert not any(k.startswith("_generator") or "generator" in k for k in loss.state_dict())


def test_refusals_in_one_line(tiny_st, tiny_model_dir):
    from augcse.core.loss_parameters import loss_settings

    assert loss_settings("diffcse", {})["rtd_weight"] == 0.005
    for bad in ({"mask_ratio": 0.0}, {"mask_ratio": 1.0}, {"rtd_weight": -1}, {"generator_decoding": "beam"},
                {"condition_on": "pooler"}, {"mini_batch_size": 8}):
        with pytest.raises(RecipeError):
            loss_settings("diffcse", bad)
    with pytest.raises(RecipeError, match="generator 'no-such/generator-here'") as info:
        DiffCSELoss(tiny_st, generator="no-such/generator-here")
    assert "\n" not in str(info.value)
    with pytest.raises(RecipeError, match="masked-LM|does not load"):
        DiffCSELoss(tiny_st, generator=str(tiny_model_dir))  # a plain encoder, no masked-LM head: refused


def test_missing_generator_is_a_missing_input_of_a_study_run(tmp_path):
    from augcse.core.loss_parameters import loss_models

    params = {"terms": [{"loss": "simcse"}, {"loss": "diffcse", "params": {"generator": "distilroberta-base"}}]}
    assert loss_models("composite", params) == ["distilroberta-base"]
    assert loss_models("diffcse", {}) == ["distilbert-base-uncased"]
    assert loss_models("simcse", {}) == []


def test_two_steps_train_and_the_saved_model_is_plain_sentence_transformers(tiny_st, tiny_mlm_dir, tmp_path: Path):
    from datasets import Dataset
    from safetensors import safe_open

    dataset = Dataset.from_dict({"anchor": SENTENCES * 2})
    loss = LOSSES["diffcse"](tiny_st, generator=str(tiny_mlm_dir), rtd_weight=0.5)
    loss.bind(dataset.column_names)
    start = [p.detach().clone() for p in tiny_st.parameters()]
    disc = [p.detach().clone() for p in loss.discriminator.parameters()]
    train_briefly(tiny_st, dataset, loss, tmp_path)
    assert not all(torch.equal(a, b) for a, b in zip(start, tiny_st.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(disc, loss.discriminator.parameters()))  # it trains too
    reload_plainly(tiny_st, tmp_path / "final", SENTENCES)
    weights = next((tmp_path / "final").rglob("model.safetensors"))
    with safe_open(str(weights), framework="pt") as handle:
        keys = set(handle.keys())
    assert len(keys) <= len(tiny_st[0].auto_model.state_dict())  # the encoder once, nothing of the loss


def test_training_refuses_a_generator_that_is_not_here_before_any_model_loads(tmp_path, data_dir):
    from augcse.training.recipes.config import load_recipe
    from augcse.training.build import check_inputs

    recipe = load_recipe(None, "diffcse-minilm", [f"output_dir={tmp_path}", "loss.params.generator=no-such/generator",
                                                  "data.corpus=corpus/wiki1m_for_simcse.first11914.txt"])
    with pytest.raises(RecipeError, match="'loss.params.generator': model 'no-such/generator'") as info:
        check_inputs(recipe, data_dir)
    assert "\n" not in str(info.value)


def test_diffcse_as_a_composite_term_equals_the_loss_alone(diffcse, tiny_st, tiny_mlm_dir):
    from augcse.losses import CompositeLoss

    features = tiny_st.tokenize(SENTENCES)
    alone = diffcse(rtd_weight=0.1)
    composite = CompositeLoss(tiny_st, terms=[{"loss": "diffcse", "params": {"generator": str(tiny_mlm_dir),
                                                                             "rtd_weight": 0.1}}]).double()
    term = composite.terms["diffcse"]
    term.generator.double()
    term.load_state_dict({k: v for k, v in alone.state_dict().items() if not k.startswith("model.")}, strict=False)
    alone.bind(["anchor"])
    composite.bind(["anchor"])
    torch.manual_seed(0)
    want = alone([features])
    torch.manual_seed(0)
    got = composite([features])
    assert set(got) == {"diffcse/contrastive", "diffcse/rtd"}
    assert sum(got.values()).item() == pytest.approx(sum(want.values()).item(), rel=1e-12)
    assert got["diffcse/rtd"].item() == pytest.approx(want["rtd"].item(), rel=1e-12)
