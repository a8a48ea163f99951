"""``augcse encode``: embed sentences with any sentence-transformers folder or name (:func:`augcse.models.load.load_model`).

Row ``i`` of the output is the embedding of line ``i + 1`` of the input, always: a blank line has no
sentence to embed, so a file with blank lines is refused (naming them) rather than silently shortened.
The output is written exactly where ``--out`` says (``.npy`` appended when missing, as NumPy does): a folder
there is refused, never written beside; the input and the output are checked before the model loads. The
file is written beside ``--out`` and renamed onto it, so a full disk or a kill never leaves a truncated one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from augcse.commands.main import begin_work
from augcse.models.load import load_model  # augcse.load_model is this one

if TYPE_CHECKING:
    import numpy as np
    from sentence_transformers import SentenceTransformer

SHOWN_LINES = 10  # blank line numbers named in the error


def encode(model: SentenceTransformer, sentences: list[str], batch_size: int = 64) -> np.ndarray:
    """Embeddings exactly as evaluation computes them (not normalised)."""
    import numpy as np

    return np.asarray(model.encode(sentences, batch_size=batch_size, convert_to_numpy=True), dtype=np.float32)


def read_sentences(lines: Iterable[str], source: str) -> list[str]:
    """One sentence per line; raises ValueError for an empty input or blank lines (named by number)."""
    sentences = [line.rstrip("\r\n") for line in lines]
    if not sentences:
        raise ValueError(f"{source} is empty: nothing to encode")
    blank = [number for number, text in enumerate(sentences, 1) if not text.strip()]
    if blank:
        shown = ", ".join(map(str, blank[:SHOWN_LINES])) + (", …" if len(blank) > SHOWN_LINES else "")
        raise ValueError(f"{source} has {len(blank)} blank line(s) (line {shown}); output row i is line i, "
                         "so remove them or put a sentence on each")
    return sentences


def npy_path(out: str) -> Path:
    """The file ``numpy.save`` really writes: it appends ``.npy`` when the name lacks it."""
    return Path(out if out.endswith(".npy") else f"{out}.npy")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from augcse.evaluation.backends import add_backend_argument  # imports nothing heavy

    parser = subparsers.add_parser(
        "encode", help="embed sentences (one per line) with a model folder or name",
        description="Embed sentences, one per line, into a .npy array: row i is the embedding of line i. "
                    "Blank lines and empty inputs are refused.")
    parser.add_argument("model", help="sentence-transformers folder (e.g. runs/NAME/final) or model name")
    parser.add_argument("input", nargs="?", default="-", help="text file, one sentence per line (default: stdin)")
    parser.add_argument("--out", required=True,
                        help="output file; .npy is appended when missing (a folder is refused, not written beside)")
    parser.add_argument("--encoding", default="utf-8", help="the input's text encoding (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default: 64)")
    add_backend_argument(parser)
    parser.set_defaults(func=_run_cli)


def output_file(out: str) -> Path:
    """The file ``--out`` names, proven writable; a folder (``out`` or ``out.npy``) is refused in one line."""
    from augcse.core.outputs import check_output_file

    if Path(out).expanduser().is_dir():
        raise ValueError(f"--out {out}: is a folder; give a file name, e.g. {Path(out) / 'embeddings.npy'}")
    return check_output_file(npy_path(out), "--out")


def _run_cli(args: argparse.Namespace) -> int:
    import numpy as np

    from augcse.evaluation.backends import check_backend, use_backend
    from augcse.core.outputs import free_bytes, mib, write_atomically, write_failure
    from augcse.core.textfile import check_encoding, decode_lines, read_lines

    check_encoding(args.encoding)
    check_backend(args.backend)
    if args.input == "-":
        sentences = read_sentences(decode_lines(sys.stdin.buffer, "standard input", args.encoding), "standard input")
    else:
        sentences = read_sentences(read_lines(args.input, args.encoding), args.input)
    out = output_file(args.out)
    begin_work()
    embeddings = encode(use_backend(load_model(args.model), args.backend), sentences, args.batch_size)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(out, lambda handle: np.save(handle, embeddings))
    except OSError as exc:
        if write_failure(exc) is None:
            raise
        print(f"augcse encode: error: could not write {out} ({write_failure(exc)}): {mib(embeddings.nbytes)} needed, "
              f"{mib(free_bytes(out.parent))} free; free space or choose another --out", file=sys.stderr)
        return 1
    print(f"wrote {embeddings.shape[0]} × {embeddings.shape[1]} embeddings to {out}")
    return 0
