"""The scale VaSCL's Δ is relative to: the norm of the pooled embeddings ``e`` it perturbs, and the distance
from each sentence to its K nearest in-batch neighbours, on the training sentences of a recipe.

Δ is an absolute norm (``‖δ‖ = Δ``), so a Δ chosen for one model's embeddings means something else on
another's: 15 for RoBERTa-base's mean-pooled embeddings (paper), 3 for all-MiniLM-L6-v2's mean pooling
without its ``Normalize`` (norm ≈ 4.5), and what on unit vectors? This prints, for a model rebuilt with a
named pooler (with and without its modules after pooling), the mean ‖e‖ and the mean distance to the 16
nearest in-batch neighbours, so Δ can be carried over at the same relative size.

    python benchmarks/embedding_norm.py --data-dir ../shared/data --model sentence-transformers/all-MiniLM-L6-v2
    python benchmarks/embedding_norm.py --data-dir ../shared/data --model roberta-base --delta 15   # the paper's
"""

from __future__ import annotations

import argparse
import json

import torch

from augcse.assets.resolve import resolve_data, resolve_model
from augcse.text.corpus import read_corpus
from augcse.losses.vascl import nearest_neighbours
from augcse.models.poolers import build_sentence_transformer


def scale(embeddings: torch.Tensor, batch: int, topk: int) -> dict[str, float]:
    """Mean norm, and mean distance to the ``topk`` in-batch neighbours VaSCL would pick (dot product)."""
    distances = []
    for start in range(0, len(embeddings) - batch + 1, batch):
        rows = embeddings[start:start + batch]
        distances.append((rows[:, None, :] - rows[nearest_neighbours(rows, topk)]).norm(dim=-1).mean(1))
    norms = embeddings.norm(dim=1)
    return {"norm_mean": float(norms.mean()), "norm_sd": float(norms.std()),
            "neighbour_distance": float(torch.cat(distances).mean())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--model", default="sentence-transformers/all-MiniLM-L6-v2")
    parser.add_argument("--pooler", default="avg")
    parser.add_argument("--corpus", default="corpus/wiki1m_for_simcse.first11914.txt")
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--topk", type=int, default=16)
    parser.add_argument("--delta", type=float, default=3.0, help="a Δ to express relative to each scale")
    args = parser.parse_args()

    # the sentences a recipe with ``data.shuffle: true``, ``data.limit`` and ``seed`` trains on
    texts, _ = read_corpus(resolve_data(args.corpus, args.data_dir), limit=args.sentences, shuffle=True,
                           seed=args.seed)
    out = {}
    for keep in (False, True):
        model = build_sentence_transformer(resolve_model(args.model), args.pooler, 32, keep_after_pooling=keep)
        model.eval()
        found = scale(torch.as_tensor(model.encode(texts, batch_size=64)), args.batch, args.topk)
        found.update(delta_over_norm=args.delta / found["norm_mean"],
                     delta_over_neighbour_distance=args.delta / found["neighbour_distance"])
        out["kept" if keep else "dropped"] = found
    print(json.dumps({"model": args.model, "pooler": args.pooler, "modules after pooling": out}, indent=2))


if __name__ == "__main__":
    main()
