"""``augcse encode``: embed sentences with any sentence-transformers folder (our runs included)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from augcse.assets import resolve_model


def load_model(name_or_path: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(resolve_model(name_or_path))


def encode(model, sentences: list[str], batch_size: int = 64) -> np.ndarray:
    """Embeddings exactly as evaluation computes them (not normalised)."""
    return np.asarray(model.encode(sentences, batch_size=batch_size, convert_to_numpy=True), dtype=np.float32)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("encode", help="embed sentences (one per line) with a model folder or name")
    parser.add_argument("model", help="sentence-transformers folder (e.g. runs/NAME/final) or model name")
    parser.add_argument("input", nargs="?", default="-", help="text file, one sentence per line (default: stdin)")
    parser.add_argument("--out", required=True, help="output .npy file")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.set_defaults(func=_run_cli)


def _run_cli(args: argparse.Namespace) -> int:
    handle = sys.stdin if args.input == "-" else open(args.input, encoding="utf-8")
    with handle:
        sentences = [line.rstrip("\n") for line in handle if line.strip()]
    embeddings = encode(load_model(args.model), sentences, args.batch_size)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, embeddings)
    print(f"wrote {embeddings.shape[0]} × {embeddings.shape[1]} embeddings to {args.out}")
    return 0
