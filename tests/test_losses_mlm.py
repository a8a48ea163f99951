"""The mlm term: equal to SimCSE's MLM auxiliary objective (princeton-nlp/SimCSE, simcse/models.py
``cl_forward``, the ``mlm_input_ids`` branch) in float64 on the same masks, SimCSE w/ MLM as a composite equal
to loss_simcse + 0.1·loss_mlm, the head's start, and a short training run whose saved model is plain."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import reload_plainly, train_briefly
from augcse.core.schema import RecipeError
from augcse.losses import CompositeLoss, MLMLoss
from augcse.losses import mlm as mlm_module

SENTENCES = ["The cat sat on the mat .", "He can swim very well .", "It rained all day in Paris and London .",
             "Birds sing ."]
TENSORS = ("input_ids", "attention_mask", "token_type_ids")


def authors_mask_tokens(tokenizer, inputs: torch.Tensor, probability: float,
                        special: tuple[str, ...] = ("cls", "sep", "pad")) -> tuple[torch.Tensor, torch.Tensor]:
    """SimCSE train.py ``OurDataCollatorWithPadding.mask_tokens`` restated (80% [MASK], 10% random, 10% kept).

    DiffCSE's train.py keeps the same function but leaves padding maskable: ``special=("cls", "sep")``.
    """
    inputs, labels = inputs.clone(), inputs.clone()
    probability_matrix = torch.full(labels.shape, probability)
    special_ids = {getattr(tokenizer, f"{name}_token_id") for name in special}
    mask = torch.tensor([[t in special_ids for t in row] for row in labels.tolist()], dtype=torch.bool)
    probability_matrix.masked_fill_(mask, value=0.0)
    masked_indices = torch.bernoulli(probability_matrix).bool()
    labels[~masked_indices] = -100
    indices_replaced = torch.bernoulli(torch.full(labels.shape, 0.8)).bool() & masked_indices
    inputs[indices_replaced] = tokenizer.convert_tokens_to_ids(tokenizer.mask_token)
    indices_random = torch.bernoulli(torch.full(labels.shape, 0.5)).bool() & masked_indices & ~indices_replaced
    inputs[indices_random] = torch.randint(len(tokenizer), labels.shape, dtype=torch.long)[indices_random]
    return inputs, labels


def authors_mlm_loss(encoder, lm_head, tokens: dict, mlm_input_ids, mlm_labels, vocab_size: int) -> torch.Tensor:
    """simcse/models.py ``cl_forward``: encoder(mlm_input_ids, attention_mask, token_type_ids), lm_head on the
    last hidden state, CrossEntropyLoss over the vocabulary (labels -100 ignored)."""
    mlm_outputs = encoder(mlm_input_ids, attention_mask=tokens["attention_mask"],
                          token_type_ids=tokens["token_type_ids"], return_dict=True)
    prediction_scores = lm_head(mlm_outputs.last_hidden_state)
    return torch.nn.CrossEntropyLoss()(prediction_scores.view(-1, vocab_size), mlm_labels.view(-1))


def tokens_of(model, texts, copies: int = 1) -> dict:
    features = {k: v for k, v in model.tokenize(texts).items() if k in TENSORS}
    return {k: torch.stack([v] * copies, dim=1).reshape(-1, v.size(1)) for k, v in features.items()}  # a0, a0, a1…


@pytest.fixture()
def mlm_st(tiny_mlm_dir):
    """A sentence model over the tiny BERT whose checkpoint has a masked-LM head, CLS pooling, float64, no dropout."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    transformer = Transformer(str(tiny_mlm_dir), max_seq_length=32)
    model = SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "cls")])
    return model.double().eval()


def masks_for(model, copies: int, ratio: float, seed: int):
    """The authors' collator's masks for the batch of ``copies`` × each sentence (their row order)."""
    tokens = tokens_of(model, SENTENCES, copies)
    torch.manual_seed(seed)
    masked, labels = authors_mask_tokens(model.tokenizer, tokens["input_ids"], ratio)
    assert (labels != -100).any()
    return tokens, masked, labels


def feed(monkeypatch, masked, labels, copies):
    """augcse's term repeats the batch as [all; all]: hand it the authors' rows in that order."""
    order = torch.cat([torch.arange(i, masked.size(0), copies) for i in range(copies)])
    monkeypatch.setattr(mlm_module, "mask_tokens", lambda tok, ids, mask, ratio: (masked[order], labels[order]))


@pytest.mark.parametrize("copies", [1, 2])
def test_mlm_equals_simcse_models_py(mlm_st, monkeypatch, copies):
    loss = MLMLoss(mlm_st).double()
    loss.copies = copies
    tokens, masked, labels = masks_for(mlm_st, copies, 0.15, seed=copies)
    feed(monkeypatch, masked, labels, copies)
    got = loss.compute_loss({}, None, {"anchor": mlm_st.tokenize(SENTENCES)})["mlm"]
    want = authors_mlm_loss(mlm_st[0].auto_model, loss.lm_head, tokens, masked, labels,
                            mlm_st[0].auto_model.config.vocab_size)
    assert got.item() == pytest.approx(want.item(), rel=1e-12)
    assert want.item() > 1.0


def test_simcse_with_mlm_is_the_composite_simcse_plus_a_tenth_of_mlm(mlm_st, monkeypatch):
    loss = CompositeLoss(mlm_st, terms=[{"loss": "simcse", "params": {"head": "mlp"}},
                                        {"loss": "mlm", "weight": 0.1, "params": {"copies": 2}}]).double()
    loss.bind(["anchor"])
    tokens, masked, labels = masks_for(mlm_st, 2, 0.15, seed=5)
    feed(monkeypatch, masked, labels, 2)
    parts = loss([mlm_st.tokenize(SENTENCES)])
    # SimCSE's cl_forward with pooler cls + MLP, on the two (here dropout-free) passes of the batch
    z = mlm_st(mlm_st.tokenize(SENTENCES))["sentence_embedding"]
    mlp = loss.terms["simcse"].head
    z1, z2 = mlp(z), mlp(z)
    cos_sim = F.cosine_similarity(z1.unsqueeze(1), z2.unsqueeze(0), dim=-1) / 0.05
    loss_simcse = torch.nn.CrossEntropyLoss()(cos_sim, torch.arange(len(SENTENCES)))
    loss_mlm = authors_mlm_loss(mlm_st[0].auto_model, loss.terms["mlm"].lm_head, tokens, masked, labels,
                                mlm_st[0].auto_model.config.vocab_size)
    total = sum(parts.values())
    assert total.item() == pytest.approx((loss_simcse + 0.1 * loss_mlm).item(), rel=1e-12)
    assert parts["mlm/mlm"].item() == pytest.approx(0.1 * loss_mlm.item(), rel=1e-12)


@pytest.mark.parametrize("copies", [1, 2])
@pytest.mark.parametrize("composite", [False, True], ids=["alone", "with-simcse"])
def test_a_batch_with_nothing_masked_adds_zero_and_moves_no_weight_of_the_term(mlm_st, monkeypatch, copies, composite):
    """A batch of short sentences can draw no token to mask (15 % of a few tokens each): the term is 0 with a
    zero gradient, not the NaN of an empty mean that would stop the run, alone and beside SimCSE."""
    tokens = tokens_of(mlm_st, SENTENCES, copies)
    feed(monkeypatch, tokens["input_ids"], torch.full_like(tokens["input_ids"], -100), copies)
    terms = [{"loss": "mlm", "params": {"copies": copies}}]
    loss = CompositeLoss(mlm_st, terms=[{"loss": "simcse"}, *terms] if composite else terms).double()
    loss.bind(["anchor"])
    parts = loss([mlm_st.tokenize(SENTENCES)])
    mlm = next(value for key, value in parts.items() if key.startswith("mlm"))
    assert mlm.item() == 0.0 and torch.isfinite(sum(parts.values()))
    mlm.backward()
    head = [p.grad for p in loss.terms["mlm"].lm_head.parameters()]
    assert all(g is not None and torch.count_nonzero(g) == 0 for g in head)


def test_the_head_starts_from_the_checkpoint_or_fresh_with_a_warning(mlm_st, tiny_st, tiny_mlm_dir, caplog):
    from transformers import BertForMaskedLM

    checkpoint = BertForMaskedLM.from_pretrained(str(tiny_mlm_dir)).cls.state_dict()
    head = MLMLoss(mlm_st).lm_head.state_dict()
    assert head.keys() == checkpoint.keys()
    assert all(torch.equal(head[k].float(), checkpoint[k]) for k in head)
    fresh = MLMLoss(mlm_st, head_init="fresh").lm_head.state_dict()
    assert not torch.equal(fresh["predictions.transform.dense.weight"].float(),
                           checkpoint["predictions.transform.dense.weight"])
    with caplog.at_level(logging.WARNING, logger="augcse.losses.mlm"):
        MLMLoss(tiny_st)  # a plain encoder checkpoint: no masked-LM head
    assert any("starts fresh" in r.getMessage() for r in caplog.records)


def test_parameters_and_refusals():
    from augcse.core.loss_parameters import loss_settings

    assert loss_settings("mlm", {}) == {"mask_ratio": 0.15, "head_init": "checkpoint", "copies": 1}
    for bad in ({"mask_ratio": 0}, {"mask_ratio": 1.5}, {"copies": 0}, {"head_init": "random"}, {"weight": 1}):
        with pytest.raises(RecipeError):
            loss_settings("mlm", bad)
    with pytest.raises(RecipeError):
        loss_settings("composite", {"terms": [{"loss": "mlm", "params": {"mask_ratio": -1}}]})
    # the term runs the encoder on masked tokens itself: a cache of pooled embeddings would drop that gradient
    with pytest.raises(RecipeError, match="gradient caching"):
        loss_settings("composite", {"terms": [{"loss": "simcse"}, {"loss": "mlm"}], "mini_batch_size": 8})


def test_two_steps_of_simcse_with_mlm_and_the_saved_model_is_plain(tiny_st, tmp_path: Path):
    from datasets import Dataset
    from safetensors import safe_open

    dataset = Dataset.from_dict({"anchor": SENTENCES * 2})
    loss = CompositeLoss(tiny_st, terms=[{"loss": "simcse"}, {"loss": "mlm", "weight": 0.1}])
    loss.bind(dataset.column_names)
    head = [p.detach().clone() for p in loss.terms["mlm"].lm_head.parameters()]
    train_briefly(tiny_st, dataset, loss, tmp_path)
    assert not all(torch.equal(a, b) for a, b in zip(head, loss.terms["mlm"].lm_head.parameters()))  # it trains
    reload_plainly(tiny_st, tmp_path / "final", SENTENCES)
    weights = next((tmp_path / "final").rglob("model.safetensors"))
    with safe_open(str(weights), framework="pt") as handle:
        assert not any("predictions" in k or "lm_head" in k for k in handle.keys())
