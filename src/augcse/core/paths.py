"""What a path a user named is, said in words: one helper for every command that expects a file or a folder.

Without it each command guessed: a file given where a folder is expected was "does not exist", ``/dev/zero``
given as a data directory too, and a folder given as a texts file was "an unknown kind of file". Every command
that takes a path asks :func:`expect_file` or :func:`expect_folder`, which name what the path is and what was
wanted, in one line.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# st_mode kinds -> the words a message uses; a regular file and a folder are the two a user can mean
KINDS = {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device", stat.S_ISFIFO: "a named pipe",
         stat.S_ISSOCK: "a socket", stat.S_ISDIR: "a folder", stat.S_ISREG: "a file"}


def kind_of(path: str | Path) -> str:
    """What ``path`` is: "missing", "a file", "a folder", "a character device", … ("a broken link" when it is a
    symbolic link to nothing). Links to files and folders are followed, as opening them would."""
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken link" if os.path.islink(path) else "missing"
    except NotADirectoryError:  # a/b where a is a file
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    return next((words for test, words in KINDS.items() if test(mode)), "not a file or folder")


def _refusal(path: Path, what: str, kind: str, wanted: str) -> str:
    if kind == "missing":
        return f"{what} {path}: does not exist; give an existing {wanted}"
    return f"{what} {path}: is {kind}, not a {wanted}; give a {wanted}"


def expect_file(path: str | Path, what: str, hint: str = "") -> Path:
    """``path`` as a Path when it is a regular file (or a link to one); ValueError naming what it is otherwise.
    ``what`` names the argument or option (e.g. ``"texts file"``, ``"--sample"``); ``hint`` ends the line."""
    path = Path(path).expanduser()
    kind = kind_of(path)
    if kind != "a file":
        raise ValueError(_refusal(path, what, kind, "file") + (f" ({hint})" if hint else ""))
    return path


def expect_folder(path: str | Path, what: str, hint: str = "") -> Path:
    """``path`` as a Path when it is a folder (or a link to one); ValueError naming what it is otherwise."""
    path = Path(path).expanduser()
    kind = kind_of(path)
    if kind != "a folder":
        raise ValueError(_refusal(path, what, kind, "folder") + (f" ({hint})" if hint else ""))
    return path
