"""Sentences/second of the full rule-based set with one shared parse vs one parse per augmentation.

Both runs happen in the same process on the same sentences (the first N lines of the shared
Wikipedia corpus); the shared-parse outputs are checked to equal the per-augmentation outputs.

    python benchmarks/augment_speed.py --data-dir $AUGCSE_DATA --n 10000

``--rates-only`` skips the slow per-augmentation run and records the perturbation rates alone; the rates
table of docs/AUGMENTATIONS.md is generated from such a record (``docs/records/augment-rates.json``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from augcse.text import augment
from augcse.assets.resolve import load_spacy, wordnet


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, required=True)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--augs", default="all-rule-based")
    ap.add_argument("--out", type=Path, default=None, help="write the measurements as JSON here")
    ap.add_argument("--rates-only", action="store_true", help="skip the per-augmentation run (rates and shared time)")
    args = ap.parse_args()
    lines = (args.data_dir / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()
    sentences = [s for s in lines if s.strip()][: args.n]
    names = augment.resolve_names(args.augs)
    augs = [augment.get(n) for n in names]
    load_spacy(), wordnet()
    augment.augment_batch(names, sentences[:50])  # warm up lexicon caches for both runs alike

    start = time.perf_counter()
    docs = augment.parse(sentences)
    shared = {a.name: a.apply(sentences, 0, docs) for a in augs}
    t_shared = time.perf_counter() - start

    t_separate = None
    if not args.rates_only:
        start = time.perf_counter()
        separate = {}
        for a in augs:
            separate[a.name] = a.apply(sentences, 0, augment.parse(sentences) if a.needs_parse else None)
        t_separate = time.perf_counter() - start
        assert shared == separate, "shared and per-augmentation parses disagree"

    rates = {name: sum(o != s for o, s in zip(outs, sentences)) / len(sentences) for name, outs in shared.items()}
    for name in ("PunctuationInsertion", "ModalVerbs", "DoubleNegation", "Negation"):
        outs = augment.get(name, variant="paper").apply(sentences, 0, docs)
        rates[f"{name} (paper)"] = sum(o != s for o, s in zip(outs, sentences)) / len(sentences)
    n_parse = sum(a.needs_parse for a in augs)
    result = {
        "sentences": len(sentences), "augmentations": len(augs), "parse_based": n_parse,
        "corpus": "corpus/wiki1m_for_simcse.first11914.txt", "seed": 0,
        "shared_parse_s": round(t_shared, 1), "shared_sentences_per_s": round(len(sentences) / t_shared, 1),
        **({} if t_separate is None else {
            "parse_per_augmentation_s": round(t_separate, 1),
            "per_augmentation_sentences_per_s": round(len(sentences) / t_separate, 1),
            "speedup": round(t_separate / t_shared, 2)}),
        "perturbation_rate": {k: round(v, 4) for k, v in rates.items()},
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
