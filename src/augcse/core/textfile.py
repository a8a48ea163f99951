"""Text inputs, one sentence per line, read so that undecodable bytes are named by file and line.

Python's own message (``'utf-8' codec can't decode byte 0xe9 in position 3``) names neither; the commands
that read a user's text file (``encode``, ``augment``) read it through :func:`read_lines` instead, and a
whole file a user names (a recipe, a labelled CSV) through :func:`read_text`.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator
from pathlib import Path


def check_encoding(encoding: str) -> str:
    """The encoding's canonical name; ValueError (one line) for an unknown one."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ValueError(f"--encoding {encoding}: unknown encoding; e.g. utf-8, latin-1, cp1252") from None


def decode_lines(raw_lines: Iterable[bytes], source: str, encoding: str = "utf-8") -> Iterator[str]:
    """Each line of bytes decoded; ValueError naming ``source``, the line and the byte that do not decode."""
    for number, raw in enumerate(raw_lines, 1):
        try:
            yield raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise ValueError(f"{source} line {number}: byte {raw[exc.start:exc.start + 1]!r} at column "
                             f"{exc.start + 1} is not {encoding}; convert the file, or pass --encoding "
                             "(e.g. --encoding latin-1)") from None


def read_lines(path: str | Path, encoding: str = "utf-8") -> Iterator[str]:
    """The lines of ``path`` (with their line ends), decoded by :func:`decode_lines`; a folder is refused."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder; give a text file, one sentence per line")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    with open(path, "rb") as handle:
        yield from decode_lines(handle, str(path), encoding)


def read_text(path: str | Path, label: str) -> str:
    """The whole of ``path`` as UTF-8 text; ValueError naming it (as ``label``) and the first line that is not.

    For files read at once whose format is UTF-8 by definition (YAML, the labelled CSVs): no ``--encoding``.
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(f"{label} is not UTF-8 text (byte {data[exc.start:exc.start + 1]!r} on line {line}); "
                         "save it as UTF-8") from None
