"""PromptBERT's prompt pooler (Jiang et al., EMNLP 2022): the sentence inside a template, the embedding at [MASK].

:class:`PromptTransformer` is a sentence-transformers ``Transformer`` whose ``preprocess`` places each sentence
in the template at the token level, as the authors' ``train.py`` does: ``[CLS] prefix sentence suffix [SEP]``
with the prefix and suffix tokenised on their own and the sentence tokenised without special tokens and
truncated to ``max_length`` tokens (the template is not counted, so it is never cut). ``forward`` writes the
last hidden state at the row's mask token as ``sentence_embedding``; no ``Pooling`` follows it (a published
``Normalize`` may). With ``denoise`` the embedding of the template with an empty sentence is subtracted
(template denoising, §5.2), computed as the authors' ``get_delta``: the ids ``[CLS] prefix suffix [SEP]``
with position ids ``0…T−1`` where every position after the prefix is shifted by the row's sentence length L,
so the template tokens sit where they sat around the sentence; L = (attention mask sum) − T.

A second template (``second_template``) is kept for training: :meth:`PromptTransformer.retemplate` rewrites
a tokenised batch into it (the ``promptbert`` loss's different-template positive). Each tokenised row carries
``prompt_template`` (0 or 1), so columns of both templates still share one merged forward pass.

The saved model is this module (``modules.json`` names ``augcse.models.prompt.PromptTransformer``), its
templates in ``sentence_bert_config.json``. sentence-transformers ≥ 6 imports a module class outside its own
package only with ``trust_remote_code=True``: ``SentenceTransformer(path, trust_remote_code=True)`` loads it
(the class is imported from the installed augcse, no file of the folder is run), and
:func:`augcse.load_model` passes that flag only for folders whose custom modules are augcse's own.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from sentence_transformers.base.modules import Transformer

SENTENCE = "[X]"
MASK = "[MASK]"

# the authors' run.sh templates (``*cls*_…*sep+*`` written with [X] and [MASK]); template 1 embeds at evaluation
TEMPLATES: dict[str, tuple[str, str]] = {
    "bert": ('This sentence of "[X]" means[MASK].', 'This sentence : "[X]" means[MASK].'),  # unsup-bert
    "roberta": ("This sentence : '[X] ' means[MASK].", "The sentence : '[X] ' means[MASK]."),  # unsup-roberta
}


def split_template(template: str) -> tuple[str, str]:
    """``(prefix, suffix)`` around ``[X]``; the prefix stripped (the authors strip it for RoBERTa, and spaces
    are nothing to BERT's tokenizer), the suffix kept as written. One line when ``[X]`` or ``[MASK]`` is not
    there exactly once."""
    if template.count(SENTENCE) != 1 or template.count(MASK) != 1 or template.index(MASK) < template.index(SENTENCE):
        raise ValueError(f"a prompt template holds {SENTENCE} once and {MASK} once after it: {template!r}")
    prefix, suffix = template.split(SENTENCE)
    return prefix.strip(), suffix


class PromptTransformer(Transformer):
    """A Transformer that embeds a sentence as the [MASK] state of a template (see the module docstring).

    Args:
        template: the template the model embeds with, ``[X]`` for the sentence, ``[MASK]`` for the mask token.
        second_template: the template of the training positive (``None``: the first).
        denoise: subtract the template's own [MASK] state in every forward (training and encoding).
        Other arguments are ``Transformer``'s.
    """

    config_keys: list[str] = [*Transformer.config_keys, "template", "second_template", "denoise"]

    def __init__(self, model_name_or_path: str, *, template: str = TEMPLATES["bert"][0],
                 second_template: str | None = None, denoise: bool = False, **kwargs: Any) -> None:
        super().__init__(model_name_or_path, **kwargs)
        self.denoise = bool(denoise)
        tokenizer = self.tokenizer
        if tokenizer.mask_token_id is None:
            raise ValueError(f"{model_name_or_path}: its tokenizer has no mask token; the prompt pooler needs one")
        self.mask_token_id = int(tokenizer.mask_token_id)
        self.pad_token_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)
        self.cls_token_id = int(tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id)
        self.sep_token_id = int(tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id)
        self.set_templates(template, second_template)

    def set_templates(self, template: str, second_template: str | None = None) -> None:
        self.template, self.second_template = template, second_template
        self.parts = [self._ids(t) for t in (template, second_template or template)]

    def _ids(self, template: str) -> tuple[list[int], list[int]]:
        """Prefix ids (with [CLS]) and suffix ids (with [SEP]) of one template; exactly one mask, in the suffix."""
        prefix, suffix = split_template(template)
        suffix = suffix.replace(MASK, self.tokenizer.mask_token)
        encode = lambda text: self.tokenizer(text, add_special_tokens=False)["input_ids"] if text else []  # noqa: E731
        head, tail = [self.cls_token_id, *encode(prefix)], [*encode(suffix), self.sep_token_id]
        if tail.count(self.mask_token_id) != 1 or self.mask_token_id in head:
            raise ValueError(f"template {template!r} tokenises to {tail.count(self.mask_token_id)} mask tokens after "
                             "the sentence; it needs exactly one")
        return head, tail

    def template_length(self, index: int) -> int:
        head, tail = self.parts[index]
        return len(head) + len(tail)

    def build(self, sentences: list[list[int]], index: Tensor | list[int], device=None) -> dict[str, Tensor]:
        """Padded features of token-id sentences, each in its template (``index`` per row)."""
        rows = [self.parts[int(i)][0] + s + self.parts[int(i)][1] for s, i in zip(sentences, index)]
        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for row, tokens in enumerate(rows):
            ids[row, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
            mask[row, :len(tokens)] = 1
        which = torch.as_tensor([int(i) for i in index], dtype=torch.long)
        out = {"input_ids": ids, "attention_mask": mask, "prompt_template": which}
        return {k: v.to(device) for k, v in out.items()} if device is not None else out

    def preprocess(self, inputs, prompt: str | None = None, max_length: int | None = None, **kwargs: Any) -> dict:
        """Each text in the first template; the sentence truncated to ``max_length`` (else ``max_seq_length``)
        tokens and, whatever that is, to what the position embeddings leave beside the template."""
        texts = [(prompt or "") + (t[0] if isinstance(t, tuple) else t) for t in inputs]
        limit = max_length or self.max_seq_length or 512
        positions = getattr(self.auto_model.config, "max_position_embeddings", 512)
        if getattr(self.auto_model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            positions -= self.pad_token_id + 1  # RoBERTa's positions start after the padding index
        limit = max(0, min(limit, positions - max(self.template_length(0), self.template_length(1))))
        if self.do_lower_case:
            texts = [t.lower() for t in texts]
        sentences = [ids[:limit] for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        return self.build(sentences, [0] * len(sentences))

    def tokenize(self, texts, **kwargs: Any) -> dict:
        return self.preprocess(texts, **kwargs)

    def retemplate(self, features: dict[str, Tensor], index: int) -> dict[str, Tensor]:
        """The same sentences in template ``index`` (the authors' second template for the positive)."""
        ids, lengths = features["input_ids"], features["attention_mask"].sum(1).tolist()
        source = features.get("prompt_template", torch.zeros(ids.size(0), dtype=torch.long)).tolist()
        sentences = []
        for row, (n, s) in enumerate(zip(lengths, source)):
            head, tail = self.parts[int(s)]
            sentences.append(ids[row, len(head):int(n) - len(tail)].tolist())
        return self.build(sentences, [index] * len(sentences), device=ids.device)

    def template_embeddings(self, lengths: Tensor, index: Tensor) -> Tensor:
        """The [MASK] state of each row's template with an empty sentence, its suffix at positions shifted by
        the row's sentence length (the authors' ``get_delta``); with gradients where they are enabled."""
        result = None
        for t in sorted(set(index.tolist())):
            head, tail = self.parts[t]
            ids = torch.tensor(head + tail, dtype=torch.long, device=lengths.device)
            rows = (index == t).nonzero(as_tuple=True)[0]
            wanted, inverse = torch.unique(lengths[rows], return_inverse=True)
            positions = torch.arange(ids.numel(), device=ids.device).repeat(wanted.numel(), 1)
            positions[:, len(head):] += wanted.unsqueeze(1)
            hidden = self.auto_model(input_ids=ids.repeat(wanted.numel(), 1), position_ids=positions,
                                     return_dict=True).last_hidden_state
            delta = hidden[:, len(head) + tail.index(self.mask_token_id)]
            if result is None:
                result = delta.new_zeros((index.numel(), delta.size(-1)))
            result = result.index_put((rows,), delta[inverse])
        return result

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        index = features.pop("prompt_template", None)
        try:
            features = super().forward(features, **kwargs)
        finally:
            if index is not None:
                features["prompt_template"] = index
        ids = features["input_ids"]
        if index is None:
            index = torch.zeros(ids.size(0), dtype=torch.long, device=ids.device)
        hidden = features["token_embeddings"]
        position = (ids == self.mask_token_id).int().argmax(1)
        embedding = hidden[torch.arange(ids.size(0), device=ids.device), position]
        if self.denoise:
            embedding = embedding - self.template_embeddings(self.sentence_lengths(features), index)
        features["sentence_embedding"] = embedding
        return features

    def sentence_lengths(self, features: dict[str, Tensor]) -> Tensor:
        """Tokens of each row's sentence: attention-mask sum less its template's length."""
        index = features.get("prompt_template")
        if index is None:
            index = torch.zeros(features["input_ids"].size(0), dtype=torch.long)
        sizes = torch.tensor([self.template_length(int(i)) for i in index.tolist()],
                             device=features["attention_mask"].device)
        return features["attention_mask"].sum(1) - sizes


def prompt_model(backbone: str, template: str | None = None, second_template: str | None = None,
                 denoise: bool = False, max_seq_length: int | None = 32, keep_after_pooling: bool = True,
                 config: dict[str, Any] | None = None):
    """A SentenceTransformer embedding with PromptBERT's prompt: :class:`PromptTransformer` over ``backbone``
    (the modules a sentence-transformers model has after pooling kept, as for every pooler). Templates default
    to the authors' (``TEMPLATES``: RoBERTa's for a RoBERTa-style tokenizer, BERT's otherwise); ``config``
    replaces values of the backbone's config, as for every pooler."""
    from sentence_transformers import SentenceTransformer

    from augcse.models.backbone_config import check_config
    from augcse.models.published import load_after_pooling, modules_after_pooling, published_max_seq_length

    if max_seq_length is None:
        max_seq_length = published_max_seq_length(backbone)
    module = PromptTransformer(backbone, template=template or TEMPLATES["bert"][0], second_template=second_template,
                               denoise=denoise, max_seq_length=max_seq_length,
                               config_kwargs=check_config(backbone, config) or None)
    if template is None:  # the authors' pair for the tokenizer's style
        first, second = TEMPLATES["roberta" if module.tokenizer.mask_token == "<mask>" else "bert"]
        module.set_templates(first, second_template or second)
    after = modules_after_pooling(backbone) if keep_after_pooling else []
    return SentenceTransformer(modules=[module, *load_after_pooling(backbone, after)])
