"""Where results go: an output folder is proven writable before anything loads, and a failed write is one line.

A read-only or full filesystem otherwise shows up minutes later as a traceback from deep inside
``safetensors`` or ``torch.serialization``. Every command that writes (train, encode, eval ``--save-to``,
augment, report, compare, study, reproduce) checks its output here first, before torch or a model loads;
a write that fails anyway is recognised by :func:`write_failure` and reported with the path, the space free
and how to continue.

What augcse writes, one rule everywhere: it creates or replaces only regular files and folders it made, never
anything through a symbolic link. A folder it is about to write into (a run, a study, a cache, a report's run) is
claimed with :func:`claim_folder`, which refuses in one line a link or anything but files and folders at its top
level or within :data:`LINK_DEPTH` levels below, before anything is written; and its own small writes (records,
reports, logs, the lock, the marker) go through :func:`write_atomically` and :func:`append_line`, which refuse a
link in the file's place and never follow one planted later (a new temporary file renamed over the name, an
append opened with ``O_NOFOLLOW``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from augcse.core.paths import KINDS

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
        probe.unlink(missing_ok=True)  # a link left under the probe's name is removed, never written through
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
    check_file_target(path, what)  # a link or a pipe named as the output is refused, never written through
    check_writable(path.parent, what)
    return path


class LinkRefused(ValueError):
    """A symbolic link (or a device, a pipe) where augcse would write; the message names it and what to do."""


# how deep below a claimed folder links are looked for: a study's set/run/checkpoint-N/1_Pooling/config.json is 5
LINK_DEPTH = 6


def _not_ours(path: Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a folder (never following a link); None otherwise."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # absent, or below a file: the folder checks name that
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return next((words for test, words in KINDS.items() if test(mode)), "not a file or folder")


def _link_refusal(path: Path, what: str, kind: str) -> LinkRefused:
    return LinkRefused(f"{what} {path}: is {kind}; augcse writes only files and folders it made, never through a "
                       "link: remove it or choose another folder")


def refuse_links(folder: str | Path, what: str, depth: int = LINK_DEPTH) -> None:
    """:class:`LinkRefused` when ``folder`` itself, or anything within ``depth`` levels below it, is a symbolic
    link, a device or a pipe (the walk never follows a link); nothing when ``folder`` is absent."""
    folder = Path(folder).expanduser()
    level = [folder]
    for _ in range(depth + 1):
        below = []
        for path in level:
            kind = _not_ours(path)
            if kind is not None:
                raise _link_refusal(path, what, kind)
            if path.is_dir():
                below.extend(sorted(path.iterdir()))
        if not below:
            return
        level = below


def claim_folder(folder: str | Path, what: str) -> Path:
    """The folder a command is about to write into: no link in it (:func:`refuse_links`), and writable
    (:func:`check_writable`); both one line, before anything loads or is written."""
    refuse_links(folder, what)
    return check_writable(folder, what)


def check_file_target(path: Path, what: str) -> None:
    """:class:`LinkRefused` when ``path`` is a link, a device or a pipe: augcse replaces only regular files."""
    kind = _not_ours(path)
    if kind is not None:
        raise _link_refusal(path, what, kind)


def write_text_atomically(path: Path, text: str) -> None:
    """:func:`write_atomically` for a text file (UTF-8): a record whose presence says a step is done."""
    write_atomically(path, lambda handle: handle.write(text.encode("utf-8")))


def _new_file(path: Path) -> BinaryIO:
    """``path`` created anew for writing, never through a link: one left there (a stale temporary file, a link
    planted under its name) is removed first, and the name is created exclusively."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

    def opener(name: str, _: int) -> int:  # the handle keeps the path as its name, for the messages that name it
        return os.open(name, flags, 0o644)

    try:
        return open(path, "wb", opener=opener)
    except FileExistsError:
        path.unlink()
        return open(path, "wb", opener=opener)


def write_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """``write`` fills a temporary file beside ``path``, which then replaces ``path`` in one rename.

    A full disk, an error or a kill while writing leaves ``path`` as it was (absent, or the previous file),
    never a truncated file that looks complete; the temporary file is removed on any failure. A link (or a pipe)
    in ``path``'s place is refused (:class:`LinkRefused`); one planted while writing is replaced by the rename,
    never followed.
    """
    path = Path(path)
    check_file_target(path, "cannot write")
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with _new_file(temporary) as handle:
            write(handle)
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)


def open_own_file(path: Path, flags: int, what: str) -> int:
    """A descriptor of ``path`` opened with ``flags`` (plus ``O_NOFOLLOW``, non-blocking, close-on-exec), only when
    it is a regular file: a link, a pipe or a device there is :class:`LinkRefused` saying ``what`` could not be
    done, and nothing is written. The one opening of a file augcse writes in place (the lock, an appended log)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link_refusal(path, what, "a symbolic link") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _link_refusal(path, what, next((words for test, words in KINDS.items() if test(mode)), "not a file"))
    return fd


def append_line(path: Path, line: str) -> None:
    """Append ``line`` (and a newline) to ``path``, created if missing, never through a link and never to a pipe
    or device (:func:`open_own_file`)."""
    fd = open_own_file(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, "cannot append to")
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
