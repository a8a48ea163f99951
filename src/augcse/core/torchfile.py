"""Reading a torch file someone else wrote without running it: what is wrong with it, in words, or None.

A torch file is a pickle, and a pickle may name any function to call as it loads. augcse and the trainer read
every torch file with ``weights_only=True``, which refuses such a pickle, but deep inside a library's traceback
(the trainer's resume, a model load) whose first line advises turning the protection off. :func:`torch_file_damage`
reads the file the same way before they do, so a command can refuse it in one line naming the file; nothing in
the file runs, and its tensors are mapped from disk, not read into memory.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path


def torch_file_damage(path: Path) -> str | None:
    """Why ``weights_only`` loading refuses ``path`` (a pickle naming code, a file cut short), naming the file;
    None when it loads. The numpy types of an RNG state are allowed, as the trainer allows them."""
    import pickle

    import torch
    from transformers.trainer_pt_utils import safe_globals

    try:
        with safe_globals(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch's note on the pickle protocol would be a second line
            torch.load(path, map_location="cpu", weights_only=True, mmap=_is_zip(path))
    except pickle.UnpicklingError as exc:
        return _refused(path, str(exc))
    except Exception as exc:  # noqa: BLE001 - any failure to load is a damaged file, named
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"{path.name} cannot be loaded ({type(exc).__name__}: {first[:120]})"
    return None


# the lines of torch's refusal that say nothing about the file (the first advises turning the protection off)
_BOILERPLATE = ("Weights only load failed", "Please file an issue", "Check the documentation")


def _refused(path: Path, text: str) -> str:
    named = re.search(r"GLOBAL (\S+)", text)
    if named:
        return (f"{path.name} is a pickle that names code ({named.group(1)}), not plain tensors; augcse never runs "
                "it: use a copy from the author that loads with weights_only=True (or safetensors)")
    why = next((line.strip() for line in text.splitlines()
                if line.strip() and not line.strip().startswith(_BOILERPLATE)), "not plain tensors")
    return (f"{path.name} is not a plain torch file ({why[:120]}); augcse reads torch files only as tensors "
            "(weights_only=True): use a copy from the author that loads that way (or safetensors)")


def _is_zip(path: Path) -> bool:
    """torch maps only its zip format; a file in the legacy format is read as it is."""
    with open(path, "rb") as handle:
        return handle.read(4) == b"PK\x03\x04"
