"""A checkpoint is checked before a run resumes from it: every file the trainer will read is there and whole.

The trainer reads a checkpoint's files one by one as it resumes, so a damaged one otherwise ends in a library's
traceback (a safetensors header, an unpickling error), a JSON error naming no file, or, for a missing RNG state,
no error at all and a run that silently differs from the uninterrupted one; a pickle that names code (in the
optimizer, scheduler or RNG state) stops the trainer's ``weights_only`` load deep in its resume, and a tag in a
recipe stops the recipe comparison. :func:`checkpoint_damage` reads each file as the resume will, without running
anything, and names the first damaged one in words; :func:`resume_refusal` turns that into one line offering the
newest intact older checkpoint, and refuses a resume by another number of processes (the global batch would
change under the run).
"""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import yaml

from augcse.core import yamlfile
from augcse.core.paths import kind_of
from augcse.core.torchfile import torch_file_damage

TRAINER_STATE = "trainer_state.json"
TORCH_FILES = ("optimizer.pt", "scheduler.pt")  # torch's zip format, read by the trainer with weights_only=True
RECIPE = "recipe.yaml"


def rng_files(checkpoint: Path) -> list[Path]:
    """The RNG states a checkpoint holds: ``rng_state.pth`` (one process) or one ``rng_state_R.pth`` per rank."""
    return sorted(checkpoint.glob("rng_state*.pth"))


def saved_processes(checkpoint: Path) -> int:
    """How many processes wrote the checkpoint (one RNG state each)."""
    return max(1, len([p for p in rng_files(checkpoint) if p.name != "rng_state.pth"]))


def _safetensors_damage(path: Path) -> str | None:
    """A weights file whose header or size disagrees with itself (cut short by a kill or a full disk)."""
    if not path.is_file():
        return f"{path.name} is {kind_of(path)}, not a file"
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            return f"{path.name} is cut short ({size} bytes)"
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            return f"{path.name} is cut short or not a safetensors file ({size} bytes)"
        try:
            header = json.loads(f.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError):
            return f"{path.name} has an unreadable header"
    ends = [entry["data_offsets"][1] for key, entry in header.items() if key != "__metadata__"]
    expected = 8 + length + max(ends, default=0)
    return None if size == expected else f"{path.name} holds {size} of its {expected} bytes (cut short)"


def _zip_damage(path: Path) -> str | None:
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        return f"{path.name} cannot be read ({exc})"
    return f"{path.name} is damaged (member {bad} fails its checksum)" if bad else None


def _recipe_damage(path: Path) -> str | None:
    """A recipe the resume compares with this run's that is not plain YAML (a ``!!python`` tag, a damaged file)."""
    if not path.is_file():
        return f"{path.name} is {kind_of(path)}, not a file"
    try:
        yamlfile.load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        why = yamlfile.describe(exc) if isinstance(exc, yaml.YAMLError) else str(exc)
        return f"{path.name} is not a readable recipe ({why}; augcse writes only plain YAML)"
    return None


def _trainer_state_damage(path: Path) -> str | None:
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return f"{TRAINER_STATE} is not valid JSON ({str(exc).splitlines()[0]})"
    return None if isinstance(state, dict) and "global_step" in state else f"{TRAINER_STATE} holds no global_step"


def checkpoint_damage(checkpoint: Path, loss_state: str) -> str | None:
    """What is wrong with ``checkpoint``, naming the file; None when every file the resume reads is whole."""
    weights = sorted(checkpoint.rglob("*.safetensors"))
    if not weights and not (checkpoint / "pytorch_model.bin").is_file():
        return "it holds no model weights (model.safetensors)"
    required = [TRAINER_STATE, loss_state, *TORCH_FILES]
    missing = [name for name in required if not (checkpoint / name).is_file()]
    if not rng_files(checkpoint):
        missing.append("rng_state.pth")
    if missing:
        return f"{', '.join(missing)} missing"
    return next((found for found in _damages(checkpoint, loss_state, weights) if found), None)


def _damages(checkpoint: Path, loss_state: str, weights: list[Path]) -> Iterator[str | None]:
    """Each file's damage (None when whole) in the order the resume reads them, checked only as far as asked."""
    yield from (_safetensors_damage(path) for path in weights)
    yield _trainer_state_damage(checkpoint / TRAINER_STATE)
    yield torch_file_damage(checkpoint / loss_state)
    for path in (*(checkpoint / name for name in TORCH_FILES), *rng_files(checkpoint)):
        yield _zip_damage(path) or torch_file_damage(path)
    if (checkpoint / "pytorch_model.bin").is_file():
        yield torch_file_damage(checkpoint / "pytorch_model.bin")
    if (checkpoint / RECIPE).exists():
        yield _recipe_damage(checkpoint / RECIPE)


def resume_refusal(checkpoint: Path, older: Sequence[Path], loss_state: str, processes: int) -> str | None:
    """The one line refusing to resume from a damaged ``checkpoint`` (offering the newest intact of ``older``,
    oldest first) or from one written by another number of processes; None when the resume may go on."""
    damage = checkpoint_damage(checkpoint, loss_state)
    if damage:
        intact = next((p for p in reversed(older) if checkpoint_damage(p, loss_state) is None), None)
        offer = (f"{intact.name} is intact: move {checkpoint.name} away (e.g. mv {checkpoint} "
                 f"{checkpoint.parent / ('damaged-' + checkpoint.name)}) and run the same command to resume from it"
                 if intact else "no older checkpoint is intact: start again with --overwrite")
        return f"--resume: {checkpoint} is damaged: {damage}; {offer}"
    run_recipe = checkpoint.parent / RECIPE  # what the resume compares with when the checkpoint holds no recipe
    damage = None if (checkpoint / RECIPE).exists() or not run_recipe.exists() else _recipe_damage(run_recipe)
    if damage:
        return f"--resume: {checkpoint.parent}/{damage}; restore the recipe the run wrote"
    saved = saved_processes(checkpoint)
    if saved != processes:
        return (f"--resume: {checkpoint.name} was written by {saved} process(es) and this run has {processes}: "
                f"the global batch would change mid-run; resume it with {saved} process(es)")
    return None
