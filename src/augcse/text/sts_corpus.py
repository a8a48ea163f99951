"""The unlabelled sentences of the seven STS tasks: ConSERT's unsupervised training corpus, as a text file.

ConSERT's unsupervised setting (the authors' ``main.py --train_data stssick --no_pair``, ``data_utils.py``
``load_datasets``) trains on every sentence of STS12–16 (all test subsets), STS-B (train, dev, test) and
SICK (train, trial, test): both sentences of each pair, one sentence per line, in that order, repeats kept
(89,192 lines). The similarity scores are never read. The files are those of the data directory's SentEval
layout (``sts/senteval/downstream``)::

    python -m augcse.text.sts_corpus --output corpus/sts_sick_unlabelled.txt   # under $AUGCSE_DATA
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from augcse.assets.resolve import resolve_data

ROOT = "sts/senteval/downstream"
CORPUS = "corpus/sts_sick_unlabelled.txt"  # where the recipes expect the file, under the data directory
MAKE = f"python -m augcse.text.sts_corpus --output $AUGCSE_DATA/{CORPUS}"
STS_SUBSETS = {  # the authors' load_sts12 … load_sts16, in their order
    "STS12-en-test": ["MSRpar", "MSRvid", "SMTeuroparl", "surprise.OnWN", "surprise.SMTnews"],
    "STS13-en-test": ["headlines", "OnWN", "FNWN"],
    "STS14-en-test": ["images", "OnWN", "tweet-news", "deft-news", "deft-forum", "headlines"],
    "STS15-en-test": ["answers-forums", "answers-students", "belief", "headlines", "images"],
    "STS16-en-test": ["answer-answer", "headlines", "plagiarism", "postediting", "question-question"],
}
STSB_SPLITS = ["train", "dev", "test"]
SICK_SPLITS = ["train", "trial", "test_annotated"]


def _lines(relpath: str, data_dir: str | None) -> list[str]:
    text = resolve_data(relpath, data_dir, download=False).read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines()]


def sts_sentences(data_dir: str | None = None) -> Iterator[str]:
    """Every sentence of the seven STS tasks' pairs in the authors' order (scores and SICK's header skipped)."""
    for task, subsets in STS_SUBSETS.items():
        for subset in subsets:
            for line in _lines(f"{ROOT}/STS/{task}/STS.input.{subset}.txt", data_dir):
                yield from (s for s in line.split("\t")[:2] if s)
    for split in STSB_SPLITS:
        for line in _lines(f"{ROOT}/STS/STSBenchmark/sts-{split}.csv", data_dir):
            if line:
                yield from line.split("\t")[5:7]
    for split in SICK_SPLITS:
        for line in _lines(f"{ROOT}/SICK/SICK_{split}.txt", data_dir)[1:]:
            if line:
                yield from line.split("\t")[1:3]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="the corpus file to write (one sentence per line)")
    parser.add_argument("--data-dir", default=None, help="the data directory (default: $AUGCSE_DATA)")
    args = parser.parse_args(argv)
    sentences = list(sts_sentences(args.data_dir))
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text("".join(f"{s}\n" for s in sentences), encoding="utf-8")
    print(f"{len(sentences)} sentences written to {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
