"""Wall time of validating a built-in recipe in a fresh process, and which heavy libraries it imports.

Validation (``load_recipe``) runs before any model, spaCy pipeline or data file loads, so it should cost
little; each recipe is loaded ``--repeat`` times, each in a new interpreter, and the median, min and max
of the import-plus-validation time are printed.

    python benchmarks/recipe_validation.py --recipes augcse-minilm quickstart --repeat 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

HEAVY = ("torch", "spacy", "transformers", "sentence_transformers", "datasets", "nltk")
PROBE = """
import json, sys, time
start = time.perf_counter()
from augcse.training.recipes.config import load_recipe
load_recipe(None, sys.argv[1], [])
print(json.dumps({"seconds": time.perf_counter() - start,
                  "heavy": [m for m in %r if m in sys.modules]}))
""" % (HEAVY,)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recipes", nargs="+", default=["augcse-minilm"])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print("| recipe | median | min | max | heavy libraries imported |\n|---|---:|---:|---:|---|")
    for recipe in args.recipes:
        runs = [json.loads(subprocess.run([sys.executable, "-c", PROBE, recipe], capture_output=True, text=True,
                                          check=True).stdout) for _ in range(args.repeat)]
        times = [r["seconds"] for r in runs]
        print(f"| `{recipe}` | {statistics.median(times):.2f} s | {min(times):.2f} s | {max(times):.2f} s | "
              f"{', '.join(runs[0]['heavy']) or 'none'} |")


if __name__ == "__main__":
    main()
