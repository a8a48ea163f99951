"""How often CARDS' retrieved "hard negatives" carry the anchor's own label, on a labelled adaptation set.

CARDS draws each anchor's negative uniformly from its top-k neighbours in the corpus (own text excluded,
``R_uniform``, k = 64). On an intent set whose training texts are the corpus, a neighbour with the anchor's
intent is a false negative: the loss pushes apart what the task wants together. This mines the same
neighbours as the CARDS view (:func:`augcse.text.retrieval.build_neighbours`, the starting model) and prints the
share of them with the anchor's label, against the share for a random pair of texts (chance).

    python benchmarks/retrieved_negatives.py --data-dir ../shared/data --sets intent/snips intent/hwu64
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter

import numpy as np

from augcse import load_model
from augcse.evaluation.clustering import read_labelled_csv
from augcse.text.retrieval import build_neighbours, normalise


def label_shares(texts: list[str], labels: list[str], model, k: int, tops: tuple[int, ...]) -> dict[str, float]:
    """Share of each anchor's top-n retrieved neighbours (n in ``tops``) with the anchor's label, and chance."""
    by_text: dict[str, set[str]] = {}
    for text, label in zip(texts, labels):
        by_text.setdefault(normalise(text), set()).add(label)
    with tempfile.TemporaryDirectory() as cache:
        found = build_neighbours(texts, texts, model, k, cache)
    shares: dict[int, list[float]] = {n: [] for n in tops}
    for query, row in zip(found.queries, found.ids):
        own = by_text[normalise(query)]
        same = [bool(by_text[normalise(found.index_texts[i])] & own) for i in row if i >= 0]
        for n in tops:
            if same[:n]:
                shares[n].append(float(np.mean(same[:n])))
    counts = np.array(list(Counter(labels).values()), dtype=float)
    chance = float(((counts / counts.sum()) ** 2).sum())  # two texts drawn at random share a label
    return {**{f"top-{n}": float(np.mean(v)) for n, v in shares.items()},
            "chance": chance, "labels": len(counts), "indexed": len(found.index_texts)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--sets", nargs="+", default=["intent/snips", "intent/hwu64"],
                        help="folders under the data dir with a train.csv of text,label")
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--k", type=int, default=64)
    args = parser.parse_args()
    model = load_model(args.model)
    print("| set | intents | texts indexed | same label, top-8 | same label, top-%d | chance |" % args.k)
    print("|---|---:|---:|---:|---:|---:|")
    for name in args.sets:
        texts, labels, names = read_labelled_csv(f"{name}/train.csv", args.data_dir)
        s = label_shares(texts, [names[i] for i in labels], model, args.k, (8, args.k))
        print(f"| {name} | {s['labels']} | {s['indexed']} | {s['top-8']:.3f} | {s[f'top-{args.k}']:.3f} | "
              f"{s['chance']:.3f} |")


if __name__ == "__main__":
    main()
