"""The named augmentation sets as plain data, and the expansion of a set spec into member names.

They live outside :mod:`augcse.text.augment` so that a loss can size AugCSE's label space (one class per
augmentation, plus "unchanged") from a set name without importing the augmentation library: the losses
never import :mod:`augcse.text.augment` (an import contract in ``pyproject.toml``). The library reads its sets
from here and checks every member against its registry (``tests/test_augment.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

# AugCSE Table 3 typography (METHODS.md §1.2). 12-Aug is the list in the authors' run script.
_AUG4 = ["DiverseParaphrase", "TenseTransformation", "RandomSwap", "ContractionExpansions"]
# 8-Aug is a reconstruction (the orange colouring is lost in the paper's text): 4-Aug + Casual2Formal +
# the three 12-Aug items with the best single-augmentation positive STS-B in Fig. 6 (all 0.83).
_AUG8 = _AUG4 + ["Casual2Formal", "DiscourseMarkerSubstitution", "SentenceAuxiliaryNegationRemoval",
                 "SentenceSubjectObjectSwitch"]
_AUG12 = [
    "ContractionExpansions", "DiverseParaphrase", "Casual2Formal", "SentenceAuxiliaryNegationRemoval",
    "TenseTransformation", "DiscourseMarkerSubstitution", "SentenceSubjectObjectSwitch", "RandomSwap",
    "CityNamesTransformation", "SentenceAdjectivesAntonymsSwitch", "YodaPerturbation", "SentenceReordering",
]
_AUG16 = _AUG12 + ["ColorTransformation", "RandomWordAugmentation", "GenderSwap", "NumericToWord"]
_LM = ("DiverseParaphrase", "Casual2Formal")


def _without_lm(names: list[str]) -> list[str]:
    return [n for n in names if n not in _LM]


SETS: dict[str, list[str]] = {
    "4-aug": _AUG4,
    "8-aug": _AUG8,
    "12-aug": _AUG12,
    "16-aug": _AUG16,
    # AugCSE Table 9 "n-2-Aug": the same sets without the two LM-based rewrites (runnable offline).
    "4-1-aug": _without_lm(_AUG4),
    "8-2-aug": _without_lm(_AUG8),
    "12-2-aug": _without_lm(_AUG12),
    "16-2-aug": _without_lm(_AUG16),
    "sda": ["PunctuationInsertion", "ModalVerbs", "DoubleNegation"],
    # every registered augmentation that needs no model weights, in registry order (a test keeps it so)
    "all-rule-based": [
        "CityNamesTransformation", "GeoNamesTransformation", "ColorTransformation", "ContractionExpansions",
        "DiscourseMarkerSubstitution", "GenderSwap", "NumericToWord", "RandomDeletion", "RandomCrop",
        "RandomSwap", "RandomWordAugmentation", "WordRepetition", "PunctuationInsertion", "ModalVerbs",
        "DoubleNegation", "Negation", "SwitchCase", "SentenceAuxiliaryNegationRemoval",
        "SentenceSubjectObjectSwitch", "Summarization", "SentenceReordering", "TenseTransformation",
        "YodaPerturbation", "SentenceAdjectivesAntonymsSwitch", "AntonymSubstitute", "ReplaceHypernyms",
        "ReplaceHyponyms", "SynonymSubstitution",
    ],
}


def expand(spec: str | Sequence[str], canonical: Callable[[str], str] = str) -> list[str]:
    """A set name or a comma list (mixing sets and names, sets in any case) as member names, each once.

    ``canonical`` spells a name that is not a set (the library passes its registry look-up, which also
    refuses unknown names); by default a name is kept as written.
    """
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    sets = {k.lower(): v for k, v in SETS.items()}
    names: list[str] = []
    for item in filter(None, items):
        expanded = sets.get(item.lower())
        for name in expanded if expanded is not None else [canonical(item)]:
            if name not in names:
                names.append(name)
    if not names:
        raise ValueError(f"no augmentation named in {spec!r}")
    return names
