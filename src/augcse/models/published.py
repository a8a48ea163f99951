"""What a sentence-transformers folder was published with: its token maximum and the modules it runs after
pooling (all-MiniLM-L6-v2: ``Normalize``), read from its own files, so a rebuilt model keeps them.

Apart from :mod:`augcse.models.poolers` so that every module that builds a model (the poolers, the prompt
module) reads them without importing another builder.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn


def _st_file(backbone: str, name: str) -> dict | list | None:
    """A sentence-transformers file of ``backbone`` (a folder or a Hub name, cache first), parsed; None when
    there is none (a plain Hugging Face encoder), or the Hub cannot be asked."""
    path = Path(backbone, name)
    if not Path(backbone).is_dir():
        from huggingface_hub import hf_hub_download
        from huggingface_hub.utils import EntryNotFoundError

        try:
            path = Path(hf_hub_download(backbone, name))
        except (EntryNotFoundError, OSError, ValueError):  # no such file in the repository, offline, not a name
            return None
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def published_max_seq_length(backbone: str) -> int | None:
    """The token maximum a sentence-transformers model was published with (its ``sentence_bert_config.json``).

    None for a plain Hugging Face encoder, which then gets its tokenizer's maximum.
    """
    value = (_st_file(backbone, "sentence_bert_config.json") or {}).get("max_seq_length")
    return int(value) if value else None


def modules_after_pooling(backbone: str) -> list[dict]:
    """The ``modules.json`` entries a sentence-transformers model runs after its pooling (all-MiniLM-L6-v2:
    ``Normalize``); none for a plain Hugging Face encoder."""
    entries = [e for e in _st_file(backbone, "modules.json") or [] if isinstance(e, dict)]
    kinds = [str(e.get("type", "")).rsplit(".", 1)[-1] for e in entries]
    return entries[kinds.index("Pooling") + 1:] if "Pooling" in kinds else []


def load_after_pooling(backbone: str, entries: list[dict]) -> list[nn.Module]:
    """The modules of ``entries`` loaded as the model was published, by sentence-transformers' own loaders; only
    sentence-transformers' and augcse's module types (:func:`~augcse.models.module_types.module_class`)."""
    from augcse.models.module_types import module_class

    return [module_class(entry["type"], f"{backbone}/modules.json").load(backbone, subfolder=entry.get("path", ""),
                                                                         trust_remote_code=False)
            for entry in entries]
