"""PromptBERT: the prompt pooler (template, [MASK] state, denoising), the promptbert loss, saving and loading."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from augcse.models.prompt import TEMPLATES, PromptTransformer, prompt_model, split_template


@pytest.fixture()
def prompt_st(tiny_model_dir: Path):
    model = prompt_model(str(tiny_model_dir), max_seq_length=16)
    return model.to(torch.float64)


def test_bert_template_tokens_and_mask_position(prompt_st) -> None:
    module = prompt_st[0]
    features = prompt_st.preprocess(["A man plays.", "Hi"])
    tokens = module.tokenizer.convert_ids_to_tokens(features["input_ids"][0].tolist())
    assert tokens == ["[CLS]", "this", "sentence", "of", '"', "a", "man", "plays", ".", '"', "means", "[MASK]", ".",
                      "[SEP]"]
    short = features["input_ids"][1, :int(features["attention_mask"][1].sum())].tolist()
    assert module.tokenizer.convert_ids_to_tokens(short)[-3] == "[MASK]"
    assert module.sentence_lengths(features).tolist() == [4, 1]
    second = module.retemplate(features, 1)
    assert module.tokenizer.convert_ids_to_tokens(second["input_ids"][0].tolist())[1:4] == ["this", "sentence", ":"]
    assert second["prompt_template"].tolist() == [1, 1] and module.sentence_lengths(second).tolist() == [4, 1]


def test_truncation_keeps_the_template(prompt_st) -> None:
    features = prompt_st.preprocess(["word " * 100], max_length=5)
    assert prompt_st[0].sentence_lengths(features).tolist() == [5]
    assert (features["input_ids"] == prompt_st[0].mask_token_id).sum() == 1


def test_denoised_embedding_is_the_authors_operations(prompt_st) -> None:
    """h_mask(template(sentence)) − h_mask(template(∅)), positions after the prefix shifted by the length."""
    module = prompt_st[0].eval()
    encoder = module.auto_model
    sentences = ["A man plays a guitar.", "It rains."]
    features = prompt_st.preprocess(sentences)
    with torch.no_grad():
        plain = prompt_st(dict(features))["sentence_embedding"]
        module.denoise = True
        denoised = prompt_st(dict(features))["sentence_embedding"]
    head, tail = module.parts[0]
    expected = []
    with torch.no_grad():
        for row, text in enumerate(sentences):
            ids = module.tokenizer(text, add_special_tokens=False)["input_ids"]
            full = torch.tensor([head + ids + tail])
            hidden = encoder(input_ids=full).last_hidden_state[0]
            h_sentence = hidden[full[0].tolist().index(module.mask_token_id)]
            template = torch.tensor([head + tail])
            positions = torch.tensor([list(range(len(head))) + [len(head) + len(ids) + k for k in range(len(tail))]])
            h_template = encoder(input_ids=template, position_ids=positions).last_hidden_state[0][
                len(head) + tail.index(module.mask_token_id)]
            assert torch.allclose(plain[row], h_sentence, atol=1e-10)
            expected.append(h_sentence - h_template)
    assert plain.dtype == torch.float64
    assert torch.allclose(denoised, torch.stack(expected), atol=1e-10)
    assert not torch.allclose(denoised, plain)


def test_roberta_style_mask_position(tmp_path: Path, tiny_model_dir: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaModel

    # a byte-level BPE over a tiny vocabulary, RoBERTa's special tokens and post-processor (no Hub download)
    words = ["This", "Ġsentence", "Ġ:", "Ġ'", "'", "Ġmeans", ".", "A", "Ġman", "Ġsings", "The"]
    alphabet = sorted(set(pre_tokenizers.ByteLevel.alphabet()))
    unique = dict.fromkeys(["<s>", "<pad>", "</s>", "<unk>", "<mask>", *alphabet, *words])
    vocab = {t: i for i, t in enumerate(unique)}
    bpe = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", cls_token="<s>",
                                        sep_token="</s>", pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
    config = RobertaConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=64, pad_token_id=1)
    RobertaModel(config).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    model = prompt_model(str(tmp_path))
    assert model[0].template == TEMPLATES["roberta"][0]
    features = model.preprocess(["A man sings"])
    tokens = model[0].tokenizer.convert_ids_to_tokens(features["input_ids"][0].tolist())
    assert tokens == ["<s>", "This", "Ġsentence", "Ġ:", "Ġ'", "A", "Ġman", "Ġsings", "Ġ'", "Ġmeans", "<mask>", ".",
                      "</s>"]
    with torch.no_grad():
        out = model(dict(features))
    assert torch.equal(out["sentence_embedding"][0], out["token_embeddings"][0, 10])


def test_template_needs_sentence_and_mask() -> None:
    assert split_template('This sentence : "[X]" means[MASK].') == ('This sentence : "', '" means[MASK].')
    with pytest.raises(ValueError, match="once"):
        split_template("This sentence means [MASK].")


def test_loss_refuses_a_model_without_the_prompt_pooler(tiny_st) -> None:
    from augcse.losses import PromptBERTLoss

    with pytest.raises(ValueError, match="prompt pooler"):
        PromptBERTLoss(tiny_st)


def test_loss_reads_the_second_template_and_denoises(prompt_st) -> None:
    from augcse.losses import PromptBERTLoss, SimCSELoss

    torch.manual_seed(0)
    prompt_st.eval()  # no dropout: the loss is a function of the inputs
    loss = PromptBERTLoss(prompt_st, head="none")
    features = prompt_st.preprocess(["A man plays a guitar.", "It rains.", "The cat sleeps on the mat."])
    value = loss([features])["contrastive"]
    module = prompt_st[0]
    with torch.no_grad():
        second = module.retemplate(features, 1)
        anchor = prompt_st(dict(features))["sentence_embedding"]
        positive = prompt_st(dict(second))["sentence_embedding"]
        anchor = anchor - module.template_embeddings(module.sentence_lengths(features), features["prompt_template"])
        positive = positive - module.template_embeddings(module.sentence_lengths(second), second["prompt_template"])
    by_hand = torch.nn.functional.cross_entropy(
        torch.nn.functional.cosine_similarity(anchor[:, None], positive[None], dim=-1) / 0.05, torch.arange(3))
    assert torch.allclose(value, by_hand, atol=1e-8)
    plain = SimCSELoss(prompt_st, head="none")([features])["contrastive"]
    assert not torch.allclose(value, plain)  # the dropout-free SimCSE positive is the anchor itself


def test_denoise_refuses_gradient_caching() -> None:
    from augcse.core.loss_parameters import loss_settings
    from augcse.core.schema import RecipeError

    with pytest.raises(RecipeError, match="gradient caching"):
        loss_settings("promptbert", {"mini_batch_size": 2})
    assert loss_settings("promptbert", {"mini_batch_size": 2, "denoise": False})["mini_batch_size"] == 2


def test_two_steps_train_save_and_plain_load(tmp_path: Path, tiny_model_dir: Path) -> None:
    from datasets import Dataset
    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer, SentenceTransformerTrainingArguments

    from augcse import load_model
    from augcse.losses import PromptBERTLoss

    model = prompt_model(str(tiny_model_dir), max_seq_length=16)
    before = [p.detach().clone() for p in model.parameters()]
    train = Dataset.from_dict({"anchor": [f"Sentence number {i} is here." for i in range(8)]})
    loss = PromptBERTLoss(model)  # the authors' MLP head, denoising, second template
    loss.bind(train.column_names)
    args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4,
                                                max_steps=2, report_to=[], save_strategy="no", use_cpu=True)
    SentenceTransformerTrainer(model=model, args=args, train_dataset=train, loss=loss).train()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    model.save(str(tmp_path / "final"))
    sentences = ["A man plays a guitar.", "Nobody is here."]
    expected = model.encode(sentences, convert_to_tensor=True)
    plain = SentenceTransformer(str(tmp_path / "final"), trust_remote_code=True)
    assert isinstance(plain[0], PromptTransformer) and len(plain) == 1
    assert torch.allclose(plain.encode(sentences, convert_to_tensor=True), expected, atol=1e-6)
    assert torch.allclose(load_model(str(tmp_path / "final")).encode(sentences, convert_to_tensor=True), expected,
                          atol=1e-6)
