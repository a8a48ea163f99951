""""Did you mean" hints for names a user types (recipe keys, tasks, losses, augmentations)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def suggest(name: str, choices: Iterable[str]) -> str:
    """A hint such as ``" (did you mean 'RandomSwap'?)"``, or ``""`` when nothing is close.

    Matching ignores case, hyphens and underscores, so ``randomswap`` finds ``RandomSwap`` and
    ``sts-b`` finds ``STSB``. The result is meant to be appended to an error line.
    """
    choices = list(choices)
    folded = {_fold(choice): choice for choice in choices}
    key = _fold(name)
    if key in folded:
        return f" (did you mean {folded[key]!r}?)"
    # a name cut short ("STSB" for "STSBenchmark") first, then spelling mistakes
    starts = [c for c in folded if len(key) >= 3 and c.startswith(key)][:3]
    close = starts or difflib.get_close_matches(key, list(folded), n=3, cutoff=0.6)
    if not close:
        return ""
    names = " or ".join(repr(folded[match]) for match in close)
    return f" (did you mean {names}?)"


def _fold(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")
