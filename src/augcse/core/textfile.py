"""Text inputs, one sentence per line, read so that undecodable bytes are named by file and line.

Python's own message (``'utf-8' codec can't decode byte 0xe9 in position 3``) names neither; the commands
that read a user's text file (``encode``, ``augment``) read it through :func:`read_lines` instead, and a
whole file a user names (a recipe, a labelled CSV) through :func:`read_text`.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from augcse.core.paths import kind_of


def check_encoding(encoding: str) -> str:
    """The encoding's canonical name; ValueError (one line) for an unknown one."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ValueError(f"--encoding {encoding}: unknown encoding; e.g. utf-8, latin-1, cp1252") from None


def decode_lines(raw_lines: Iterable[bytes], source: str, encoding: str = "utf-8",
                 advise: Callable[[], str | None] | None = None) -> Iterator[str]:
    """Each line of bytes decoded; ValueError naming ``source``, the line and the byte that do not decode, with
    ``advise()``'s advice when it has one (what the file really is) and else the ``--encoding`` one."""
    for number, raw in enumerate(raw_lines, 1):
        try:
            yield raw.decode(encoding)
        except UnicodeDecodeError as exc:
            advice = (advise() if advise else None) or "convert the file, or pass --encoding (e.g. --encoding latin-1)"
            raise ValueError(f"{source} line {number}: byte {raw[exc.start:exc.start + 1]!r} at column "
                             f"{exc.start + 1} is not {encoding}; {advice}") from None


BOMS = {b"\xff\xfe\x00\x00": "UTF-32", b"\x00\x00\xfe\xff": "UTF-32", b"\xff\xfe": "UTF-16", b"\xfe\xff": "UTF-16"}


def why_not_utf8(path: str | Path, probe: int = 4096) -> str:
    """What a file that does not decode as UTF-8 most likely is, from its first ``probe`` bytes, with the
    conversion to suggest: UTF-16/32 (a byte-order mark, or a NUL in every other byte), a binary file (NUL
    bytes), else a single-byte encoding such as latin-1."""
    return wide_or_binary(path, probe) or "it is not UTF-8 text: convert it (e.g. iconv -f latin1 -t utf-8 for latin-1)"


def wide_or_binary(path: str | Path, probe: int = 4096) -> str | None:
    """:func:`why_not_utf8` for the files no single-byte ``--encoding`` reads (UTF-16/32 text, a binary file);
    None for any other. Lines are split at the byte 0x0A, which UTF-16 and UTF-32 spread over two or four bytes,
    so such a file is converted, never read with its own name as the encoding."""
    with open(path, "rb") as handle:
        head = handle.read(probe)
    for bom, name in BOMS.items():
        if head.startswith(bom):
            return f"it is {name} text (byte-order mark {bom.hex(' ').upper()}), not UTF-8: convert it (e.g. " \
                   f"iconv -f {name} -t UTF-8)"
    nul = head.count(b"\0")
    if nul and (head[1::2].count(b"\0") > 0.4 * len(head[1::2]) or head[0::2].count(b"\0") > 0.4 * len(head[0::2])):
        return "it looks like UTF-16 text without a byte-order mark (a NUL in every other byte), not UTF-8: " \
               "convert it (e.g. iconv -f UTF-16LE -t UTF-8)"
    if nul:
        return f"it holds NUL bytes ({nul} in its first {len(head)} bytes): a binary file, not text"
    return None


def read_lines(path: str | Path, encoding: str = "utf-8") -> Iterator[str]:
    """The lines of ``path`` (with their line ends), decoded by :func:`decode_lines` (a UTF-16 or binary file
    named as such); anything but a file (a folder, a device) is refused, naming what it is."""
    path = Path(path)
    kind = kind_of(path)
    if kind == "missing":
        raise FileNotFoundError(f"{path}: no such file")
    if kind != "a file":
        raise ValueError(f"{path} is {kind}; give a text file, one sentence per line")
    with open(path, "rb") as handle:
        yield from decode_lines(handle, str(path), encoding, lambda: wide_or_binary(path))


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
                         f"{why_not_utf8(path)}") from None
