"""Where results go: an output folder is proven writable before anything loads, and a failed write is one line.

A read-only or full filesystem otherwise shows up minutes later as a traceback from deep inside
``safetensors`` or ``torch.serialization``. Every command that writes (train, encode, eval ``--save-to``,
augment, report, compare, study, reproduce) checks its output here first, before torch or a model loads;
a write that fails anyway is recognised by :func:`write_failure` and reported with the path, the space free
and how to continue.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

# errors a write can meet that are about the place, not the data: the user fixes them by freeing space or
# choosing another folder
WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
# how libraries that do not raise OSError word the same faults (safetensors, torch's zip writer) -> the reason shown
WRITE_MESSAGES = {
    "no space left on device": "No space left on device", "read-only file system": "Read-only file system",
    "disk quota exceeded": "Disk quota exceeded", "permission denied": "Permission denied",
    # torch's zip writer says only that a write was cut short
    "file write failed": "a write was cut short: the disk is probably full",
    "unexpected pos": "a write was cut short: the disk is probably full",
    # numpy's array writer, the same: "38400 requested and 15328 written"
    "requested and": "a write was cut short: the disk is probably full",
}


def write_failure(exc: BaseException) -> str | None:
    """The reason when ``exc`` is a failed write to a full, read-only or forbidden place; None otherwise."""
    if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
        return exc.strerror or os.strerror(exc.errno)
    text = str(exc).lower()
    return next((reason for marker, reason in WRITE_MESSAGES.items() if marker in text), None)


def free_bytes(path: Path) -> int:
    """Free space on the filesystem holding ``path`` (or its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free


def mib(size: float) -> str:
    """A size for a message in MiB; under 1 MiB in KiB, so that a small file is not "0 MiB needed"."""
    return f"{size / 2**20:.0f} MiB" if size >= 2**20 else f"{size / 2**10:.0f} KiB"


def check_writable(folder: str | Path, what: str) -> Path:
    """Prove ``folder`` can be created and written (a probe file, then removed); raises ValueError (one line) if not.

    Folders created for the probe are removed again (by a single process), so a command refused later has
    written nothing.

    ``what`` names the option or recipe key the user gave the folder with, so the message says what to change.
    """
    folder = Path(folder).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{what} {folder}: exists and is not a folder; choose a folder")
    probe = folder / f".augcse-write-probe-{os.getpid()}"
    missing = [p for p in (folder, *folder.absolute().parents) if not p.exists()]  # the deepest first
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"probe")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"{what} {folder}: cannot write there ({reason}); choose a writable folder") from None
    finally:  # proven, not left behind, even when the write stopped half-way (a full disk): nothing is written
        with contextlib.suppress(OSError):
            probe.unlink(missing_ok=True)
        # several processes of one job probe the same folder at once: one removing a folder another is probing
        # would fail the other's probe, so they leave it (as ``mkdir -p`` would)
        for created in missing if int(os.environ.get("WORLD_SIZE", "1")) == 1 else ():
            with contextlib.suppress(OSError):  # another process wrote into it meanwhile: it stays
                created.rmdir()
    return folder


def check_output_file(path: str | Path, what: str) -> Path:
    """An output file's folder is writable and the name is not a folder (never written beside it instead)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise ValueError(f"{what} {path}: is a folder; give a file name, e.g. {path / 'embeddings.npy'}")
    check_writable(path.parent, what)
    return path


def write_text_atomically(path: Path, text: str) -> None:
    """:func:`write_atomically` for a text file (UTF-8): a record whose presence says a step is done."""
    write_atomically(path, lambda handle: handle.write(text.encode("utf-8")))


def write_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """``write`` fills a temporary file beside ``path``, which then replaces ``path`` in one rename.

    A full disk, an error or a kill while writing leaves ``path`` as it was (absent, or the previous file),
    never a truncated file that looks complete; the temporary file is removed on any failure.
    """
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "wb") as handle:
            write(handle)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
