"""The Augmentation contract, the registry and the named sets.

An augmentation is a small class: metadata (``name``, ``meaning``, ``needs``, ``source``), default
parameters, and ``rewrite(text, rng, doc)`` for one sentence. The base class turns that into a
batch ``apply`` whose randomness comes from (seed, name, sentence text) only, so results do not depend
on batch order, process count or any global random state.
"""

from __future__ import annotations

import hashlib
import random
from enum import Enum
from typing import Any, ClassVar, Sequence

from spacy.tokens import Doc


class Meaning(str, Enum):
    """AugCSE Table 3 labels."""

    PRESERVING = "preserving"
    POSSIBLY = "possibly-altering"
    ALTERING = "altering"


# Most rules are reimplementations of NL-Augmenter transformations, as AugCSE used them.
NL_AUGMENTER = "NL-Augmenter (Dhole et al. 2021) via AugCSE App. A.2"


class AugmentationError(RuntimeError):
    """An augmentation cannot run here (for example its model is not available)."""


REGISTRY: dict[str, type["Augmentation"]] = {}


def register(cls: type["Augmentation"]) -> type["Augmentation"]:
    """Class decorator: add ``cls`` to :data:`REGISTRY` under ``cls.name``."""
    if cls.name in REGISTRY:
        raise ValueError(f"augmentation {cls.name!r} registered twice")
    Meaning(cls.meaning)  # validates the label
    REGISTRY[cls.name] = cls
    return cls


def rng_for(seed: int, name: str, text: str) -> random.Random:
    """A random generator that depends only on (seed, augmentation name, sentence text)."""
    digest = hashlib.blake2b(f"{seed}\x1f{name}\x1f{text}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "little"))


class Augmentation:
    """Base class. Subclasses set the class attributes and implement :meth:`rewrite`."""

    name: ClassVar[str]
    meaning: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()
    source: ClassVar[str] = ""
    rule: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}
    choices: ClassVar[dict[str, tuple[Any, ...]]] = {}

    def __init__(self, **params: Any) -> None:
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise ValueError(f"{self.name}: unknown parameter(s) {sorted(unknown)}; known: {sorted(self.defaults)}")
        self.params: dict[str, Any] = {**self.defaults, **params}
        for key, allowed in self.choices.items():
            if self.params[key] not in allowed:
                raise ValueError(f"{self.name}: {key}={self.params[key]!r} is not one of {allowed}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.params.items())})"

    @property
    def needs_parse(self) -> bool:
        return "parse" in self.needs

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        """Rewrite one sentence; return None (or the input) where the rule does not apply."""
        raise NotImplementedError

    def apply(self, batch: Sequence[str], seed: int = 0, docs: Sequence[Doc] | None = None) -> list[str]:
        """Rewrite every sentence of ``batch``; unchanged where the rule does not apply."""
        batch = list(batch)
        if self.needs_parse and docs is None:
            from augcse.augment.parse import parse

            docs = parse(batch)
        out = []
        for i, text in enumerate(batch):
            doc = docs[i] if docs is not None else None
            out.append(clean_output(text, self.rewrite(text, rng_for(seed, self.name, text), doc)))
        return out

    def apply_safe(
        self, batch: Sequence[str], seed: int = 0, docs: Sequence[Doc] | None = None
    ) -> tuple[list[str], dict[int, str]]:
        """Like :meth:`apply`, but a sentence on which the rule raises is kept unchanged.

        Returns the outputs and ``{index: error message}`` for the sentences that raised. Errors that
        concern the augmentation as a whole (:class:`AugmentationError`) still propagate.
        """
        batch = list(batch)
        try:
            return self.apply(batch, seed, docs), {}
        except AugmentationError:
            raise
        except Exception:  # noqa: BLE001 - fall back to one sentence at a time to isolate the culprit
            pass
        out, errors = [], {}
        for i, text in enumerate(batch):
            try:
                out.append(self.apply([text], seed, [docs[i]] if docs is not None else None)[0])
            except AugmentationError:
                raise
            except Exception as exc:  # noqa: BLE001
                out.append(text)
                errors[i] = f"{type(exc).__name__}: {exc}"
        return out, errors


def clean_output(original: str, rewritten: str | None) -> str:
    """Never return an empty or whitespace-only string: fall back to the original."""
    if rewritten is None:
        return original
    return rewritten if rewritten.strip() else original


def get(name: str, **params: Any) -> Augmentation:
    """Instantiate a registered augmentation by name."""
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown augmentation {name!r}; `augcse augment --list` shows the names") from None
    return cls(**params)


# --------------------------------------------------------------------------- named sets
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
}


def rule_based() -> list[str]:
    """Every registered augmentation that needs no model weights."""
    return [n for n, cls in REGISTRY.items() if not any(x.startswith("model:") for x in cls.needs)]


def resolve_names(spec: str | Sequence[str]) -> list[str]:
    """Expand a set name or a comma list (mixing sets and names) into augmentation names."""
    items = [s.strip() for s in spec.split(",")] if isinstance(spec, str) else list(spec)
    names: list[str] = []
    for item in filter(None, items):
        expanded = SETS.get(item) or SETS.get(item.lower())
        for name in expanded if expanded is not None else [item]:
            if name not in REGISTRY:
                raise ValueError(f"unknown augmentation or set {name!r}; sets: {', '.join(SETS)}")
            if name not in names:
                names.append(name)
    return names
