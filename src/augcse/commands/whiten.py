"""``augcse whiten``: fit BERT-whitening (Su et al. 2021) on a corpus and save the whitened model.

No training: the model encodes the corpus, the whitening ``(x − μ) W`` is fitted on those embeddings
(:mod:`augcse.models.whitening`) and appended as a sentence-transformers ``Dense`` module; the folder written
to ``--out`` loads with a plain ``SentenceTransformer(path)``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from augcse.commands.main import begin_work
from augcse.core.outputs import refuse_links


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "whiten", help="fit BERT-whitening on a corpus's embeddings and save the whitened model (no training)",
        description="Fit BERT-whitening (Su et al. 2021: (x - mu) W, W = U Lambda^-1/2 of the embeddings' "
                    "covariance) on the embeddings of a corpus, one sentence a line, and save the model with the "
                    "transform appended as a Dense module.")
    parser.add_argument("model", help="sentence-transformers folder (e.g. runs/NAME/final) or model name")
    parser.add_argument("--corpus", required=True, help="text file, one sentence per line, to fit the whitening on")
    parser.add_argument("--out", required=True, help="folder to save the whitened model in (new or empty)")
    parser.add_argument("--dim", type=int, default=None,
                        help="keep the k directions of largest variance (default: all, no reduction)")
    parser.add_argument("--pooler", default=None, metavar="NAME",
                        help="rebuild the model as its encoder with this pooler first (cls_before_pooler, avg, "
                             "avg_first_last, avg_emb_last, avg_top2…; default: the model's own)")
    parser.add_argument("--limit", type=int, default=None, help="fit on the corpus's first N sentences only")
    parser.add_argument("--encoding", default="utf-8", help="the corpus's text encoding (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per forward pass (default: 64)")
    parser.set_defaults(func=_run_cli)


def _run_cli(args: argparse.Namespace) -> int:
    from augcse.core.textfile import check_encoding

    check_encoding(args.encoding)
    out = Path(args.out).expanduser()
    refuse_links(out, "--out")  # the model is written only into a folder augcse makes, never through a link
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ValueError(f"--out {out}: exists and is not an empty folder; give a new folder")
    if args.dim is not None and args.dim < 1:
        raise ValueError(f"--dim {args.dim}: must be a positive number of dimensions")
    if args.limit is not None and args.limit < 2:
        raise ValueError(f"--limit {args.limit}: whitening needs at least 2 sentences")
    if args.pooler is not None:
        from augcse.core.names import suggest
        from augcse.models.poolers import POOLERS

        if args.pooler not in POOLERS:
            raise ValueError(f"unknown pooler {args.pooler!r}{suggest(args.pooler, POOLERS)}; "
                             f"choose one of {', '.join(POOLERS)}")
    from augcse.models.load import load_model
    from augcse.models.module_types import make_portable
    from augcse.models.whitening import corpus_sentences, whiten_model

    sentences = corpus_sentences(args.corpus, args.limit, args.encoding)
    begin_work()
    model = whiten_model(load_model(args.model, pooler=args.pooler), sentences, args.dim, args.batch_size)
    model.save(str(out))
    make_portable(out)
    print(f"wrote {out}: {args.model} whitened on {len(sentences)} sentences of {args.corpus} "
          f"({model.get_embedding_dimension()} dimensions)")
    return 0
