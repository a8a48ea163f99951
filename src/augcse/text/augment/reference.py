"""The augmentation reference (``docs/AUGMENTATIONS.md``), generated from the registry so it cannot drift from it.

The tables of registered augmentations (name, meaning, needs, rule, source, default parameters) and of
the named sets come from :data:`~augcse.text.augment.REGISTRY` and :data:`~augcse.text.augment.SETS`, the
perturbation rates from their measured record (``docs/records/augment-rates.json``, written by
``benchmarks/augment_speed.py --rates-only``; read from the repository root); the prose
around them (the contract, where a rule differs from the original, the measured rates) is written by
hand in ``reference.md`` beside this module, whose ``<!-- generated: … -->`` lines this module fills.

Regenerate with ``python -m augcse.text.augment.reference > docs/AUGMENTATIONS.md``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

from augcse.text.augment.base import REGISTRY, SETS
from augcse.core.document import markdown_table

COMMAND = "python -m augcse.text.augment.reference > docs/AUGMENTATIONS.md"
TEMPLATE = Path(__file__).with_name("reference.md")
RATES = Path("docs/records/augment-rates.json")  # relative to the repository root


def note() -> list[str]:
    return [f"Generated from the augmentation registry by `{COMMAND}`; do not edit by hand (a test fails when "
            "this file is out of date): the tables come from the registered classes and the named sets, the "
            "prose from `src/augcse/text/augment/reference.md`."]


def registry() -> list[str]:
    """One row per registered augmentation, in registration order."""
    return markdown_table(["name", "meaning", "needs", "rule", "source", "parameters (defaults)"],
                 [(name, cls.meaning, ", ".join(cls.needs) or "-", cls.rule, cls.source,
                   ", ".join(f"{k}={v!r}" for k, v in cls.defaults.items()) or "-")
                  for name, cls in REGISTRY.items()])


def sets() -> list[str]:
    return markdown_table(["set", "members"], [(name, ", ".join(members)) for name, members in SETS.items()])


def rates() -> list[str]:
    """The measured share of sentences each augmentation changes; a ``(paper)`` row is that variant."""
    try:
        record = json.loads(RATES.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"{RATES} is missing (run from the repository root; it is written by "
                         "benchmarks/augment_speed.py --rates-only)") from None
    rows = []
    for name, rate in record["perturbation_rate"].items():
        base = name.removesuffix(" (paper)")
        rows.append((name, REGISTRY[base].meaning, f"{100 * rate:.2f} %"))
    return markdown_table(["augmentation", "meaning", "perturbation rate"], rows, [False, False, True])


SECTIONS: dict[str, Callable[[], list[str]]] = {"note": note, "registry": registry, "sets": sets, "rates": rates}


def reference() -> str:
    """The whole document: the hand-written template with every ``<!-- generated: NAME -->`` line filled."""
    out = []
    for line in TEMPLATE.read_text(encoding="utf-8").splitlines():
        marker = line.strip()
        if marker.startswith("<!-- generated:") and marker.endswith("-->"):
            out += SECTIONS[marker.removeprefix("<!-- generated:").removesuffix("-->").strip()]()
        else:
            out.append(line)
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    sys.exit(main())
