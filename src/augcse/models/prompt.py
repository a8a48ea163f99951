"""PromptBERT's model: :class:`~augcse.models.prompt_transformer.PromptTransformer` over a backbone.

The module itself lives in :mod:`augcse.models.prompt_transformer`, a file that imports nothing of augcse so
that a saved model can carry it (see there); this module builds models with it and re-exports its names.
"""

from __future__ import annotations

from augcse.models.prompt_transformer import MASK, SENTENCE, TEMPLATES, PromptTransformer, split_template

__all__ = ["MASK", "SENTENCE", "TEMPLATES", "PromptTransformer", "prompt_model", "split_template"]


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
