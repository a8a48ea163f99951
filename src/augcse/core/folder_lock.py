"""One writer per output folder: a second command writing the same folder is refused in one line naming the
first one's process, instead of the two colliding on each other's temporary files.

The lock is an advisory ``flock`` on ``FOLDER/.lock``, released by the kernel when the process ends however it
ends, so a killed command never leaves the folder locked. The lock file is opened without following a link
(``O_NOFOLLOW``) and without truncating it: a link, a pipe or a device named ``.lock`` is refused in one line with
nothing written, and the PID is written only into a regular file this process holds the lock of.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from augcse.core.outputs import open_own_file, refuse_links

LOCK_NAME = ".lock"


class FolderBusy(ValueError):
    """Another process holds the folder."""


class LockHeld(Exception):
    """The lock file is held by another process; ``holder`` is the PID it wrote, or "unknown"."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def take_lock(path: Path) -> TextIO:
    """Take the ``flock`` of ``path`` without waiting and write this process's PID in it; the open handle holds
    the lock (close it to release). :class:`LockHeld` when another process holds it; ``LinkRefused`` when ``path``
    is a symbolic link or not a regular file (:func:`augcse.core.outputs.open_own_file`; never truncated before
    the lock is held)."""
    fd = open_own_file(path, os.O_RDWR | os.O_CREAT, "cannot lock")
    handle = os.fdopen(fd, "r+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise LockHeld(holder) from None
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


@contextmanager
def folder_lock(folder: Path, option: str) -> Iterator[None]:
    """Hold ``folder`` for this process while the block runs; :class:`FolderBusy` when another holds it."""
    refuse_links(folder, option)  # before anything is written in it
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK_NAME
    try:
        handle = take_lock(path)
    except LockHeld as held:
        raise FolderBusy(f"{option} {folder} is in use by another augcse command (PID {held.holder}); wait for it "
                         f"to finish or choose another {option}") from None
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # still held: no other command can take it in between
        handle.close()
