"""One writer per output folder: a second command writing the same folder is refused in one line naming the
first one's process, instead of the two colliding on each other's temporary files.

The lock is an advisory ``flock`` on ``FOLDER/.lock``, released by the kernel when the process ends however it
ends, so a killed command never leaves the folder locked.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

LOCK_NAME = ".lock"


class FolderBusy(ValueError):
    """Another process holds the folder."""


@contextmanager
def folder_lock(folder: Path, option: str) -> Iterator[None]:
    """Hold ``folder`` for this process while the block runs; :class:`FolderBusy` when another holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    with open(path, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise FolderBusy(f"{option} {folder} is in use by another augcse command (PID {holder}); wait for it "
                             f"to finish or choose another {option}") from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            path.unlink(missing_ok=True)
