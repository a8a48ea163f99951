""""Did you mean" hints for names a user types (recipe keys, tasks, losses, augmentations), and the one rule for
a name that becomes a folder (a run, a study, a grid's set and row): letters, digits and ``._+-``, starting with a
letter or digit, never ``..`` — so no name of dots only, and no slash, reaches outside the folder it is put in."""

from __future__ import annotations

import difflib
import re
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


FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
FOLDER_NAME_RULE = "letters, digits, '.', '_', '-', '+', starting with a letter or digit; no '/' or '..'"


def is_folder_name(name: object) -> bool:
    """Whether ``name`` may name a folder augcse creates under another (see the module docstring)."""
    return isinstance(name, str) and FOLDER_NAME.fullmatch(name) is not None and ".." not in name


def check_folder_name(name: object, what: str, why: str) -> None:
    """ValueError (one line) unless ``name`` is a folder name; ``what`` says whose name, ``why`` what it names."""
    if not is_folder_name(name):
        raise ValueError(f"{what} {name!r} must be a folder name ({FOLDER_NAME_RULE}): {why}")


def _fold(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")
