"""Original vs augmented embeddings of real sentences: per-augmentation similarity, isomorphism
(COND-HM, SVG, GH) and PCA / t-SNE pictures (AugCSE §6.1, App. A.13, Fig. 2–4).

    python benchmarks/eval_geometry.py sentence-transformers/all-MiniLM-L6-v2 --n 100 \
        --augs RandomSwap,ContractionExpansions,TenseTransformation,SentenceReordering,YodaPerturbation \
        --out /tmp/geometry

Sentences: the first N distinct sentences of STS-B dev (embedded default set). Writes
``geometry.json``, ``pca.png`` and ``tsne.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from augcse.assets.resolve import resolve_model
from augcse.text.augment.base import get
from augcse.evaluation.analysis import pair_similarity
from augcse.evaluation.geometry import GeometryTask, has_gudhi, isomorphism
from augcse.report.plots import embedding_projection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--augs", default="RandomSwap,ContractionExpansions,TenseTransformation,SentenceReordering")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="geometry-out")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    sentences = list(dict.fromkeys(GeometryTask().sentences(GeometryTask().load(None))))[: args.n]
    model = SentenceTransformer(resolve_model(args.model), device="cpu")
    base = model.encode(sentences, convert_to_numpy=True)
    rows, orig_all, aug_all, labels = {}, [], [], []
    for name in args.augs.split(","):
        augmented, _ = get(name).apply_safe(sentences, seed=0)
        changed = np.array([a != s for a, s in zip(augmented, sentences)])
        emb = model.encode(augmented, convert_to_numpy=True)
        sim = pair_similarity(base, emb)
        rows[name] = {"changed": float(changed.mean()), "similarity": float(sim.mean()),
                      "similarity_changed": float(sim[changed].mean()) if changed.any() else float("nan"),
                      **isomorphism(base, emb)}
        orig_all.append(base[changed])
        aug_all.append(emb[changed])
        labels += [name] * int(changed.sum())
        print(name, {k: round(v, 4) for k, v in rows[name].items()}, flush=True)
    o, a = np.vstack(orig_all), np.vstack(aug_all)
    for method in ("pca", "tsne"):
        embedding_projection(o, a, labels, out / f"{method}.png", method=method,
                             title=f"{method.upper()}: STS-B dev sentences and their augmentations ({args.model.split('/')[-1]})")
    (out / "geometry.json").write_text(json.dumps({"model": args.model, "n": len(sentences), "gudhi": has_gudhi(),
                                                   "augmentations": rows,
                                                   "seconds": time.perf_counter() - start}, indent=1))
    print(f"{time.perf_counter() - start:.0f} s; wrote {out}/pca.png, tsne.png, geometry.json")


if __name__ == "__main__":
    main()
