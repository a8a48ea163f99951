"""How much of the encoder's gradient SCCL's clustering term gives, at the first step, on a clustering set's texts.

SCCL (``augcse.losses.sccl``) adds KL(p‖q) of a Student's-t assignment to an instance-wise contrast. Whether the
clustering term moves the encoder at all depends on its gradient beside the contrast's, which depends on the
terms' weights and on the scale of the embeddings it reads (unit vectors for all-MiniLM-L6-v2 as published, which
ends in ``Normalize``; the authors' BERT mean pooling is unnormalised). For each seeded batch of 64 texts (two
dropout passes, as a training step has), this measures the norm of each weighted term's gradient with respect to
the encoder's parameters, separately, and the mean assignment confidence max q, under:

- ``authors``: the recipe's loss (contrastive weight 10, eta 0.5) on the model's unit vectors;
- ``equal``: contrastive weight 1, eta 1 on the unit vectors;
- ``unnormalised``: the authors' weights on the model without its ``Normalize`` module (centroids of its own
  embeddings), as the authors' code reads BERT.

The starting centroids are K-means (seed 0) of the N texts' embeddings under each model, K the set's labels'
count (the labels are read for K alone).

    python benchmarks/sccl_gradient_share.py --data-dir $AUGCSE_DATA --set tweet --n 1000 --out docs/records/sccl-gradient-share-tweet.json
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

VARIANTS = {  # name: (contrastive_weight, eta, keep the Normalize module)
    "authors": (10.0, 0.5, True),
    "equal": (1.0, 1.0, True),
    "unnormalised": (10.0, 0.5, False),
}


def read_set(path: Path, n: int) -> tuple[list[str], int]:
    with open(path, encoding="utf-8", newline="") as f:
        rows = [row for _, row in zip(range(n), csv.DictReader(f)) if row["text"].strip()]
    return [row["text"] for row in rows], len({row["label"] for row in rows})


def gradient_norms(model, loss, texts: list[str]) -> dict[str, float]:
    """Each weighted term's gradient norm over the encoder's parameters, for one batch of two dropout passes."""
    import torch

    model.train()
    features = model.preprocess(texts)
    first, second = (model(dict(features))["sentence_embedding"] for _ in range(2))
    terms = loss.compute_loss({"anchor": first, "positive": second})
    parameters = [p for p in model.parameters() if p.requires_grad]
    norms = {}
    for name, value in terms.items():
        grads = torch.autograd.grad(value, parameters, retain_graph=True, allow_unused=True)
        norms[name] = float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads if g is not None)))
        norms[f"{name}_value"] = float(value.detach())
    with torch.no_grad():
        norms["max_q"] = float(loss.soft_assign(first.detach()).max(1).values.mean())
    return norms


def main() -> None:
    import numpy as np
    import torch
    from sentence_transformers import SentenceTransformer

    from augcse import load_model
    from augcse.losses.sccl import SCCLLoss
    from augcse.studies.cluster_study import cpu_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--set", default="tweet", choices=("tweet", "searchsnippets", "stackoverflow", "biomedical"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    texts, clusters = read_set(args.data_dir / "clustering" / f"{args.set}.csv", args.n)
    order = np.random.default_rng(0).permutation(len(texts))
    batches = [[texts[i] for i in order[b * 64:(b + 1) * 64]] for b in range(args.batches)]
    record = {"command": "python benchmarks/sccl_gradient_share.py --data-dir $AUGCSE_DATA " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k != "data_dir"), "set": args.set,
        "texts": len(texts), "clusters": clusters, "batch": 64, "cpu": cpu_model(), "variants": {}}
    for name, (weight, eta, normalised) in VARIANTS.items():
        torch.manual_seed(0)
        published = load_model("sentence-transformers/all-MiniLM-L6-v2")
        model = published if normalised else SentenceTransformer(modules=[published[0], published[1]])
        loss = SCCLLoss.from_texts(model, texts, clusters=clusters, seed=0, contrastive_weight=weight, eta=eta)
        rows = [gradient_norms(model, loss, batch) for batch in batches]
        mean = {key: float(np.mean([row[key] for row in rows])) for key in rows[0]}
        mean["cluster_share"] = mean["cluster"] / (mean["cluster"] + mean["contrastive"])
        record["variants"][name] = {"contrastive_weight": weight, "eta": eta, "normalised": normalised,
                                    **{k: round(v, 6) for k, v in mean.items()}}
        print(name, json.dumps(record["variants"][name]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
