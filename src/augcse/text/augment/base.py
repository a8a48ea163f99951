"""The Augmentation contract, the registry and the named sets.

An augmentation is a small class: metadata (``name``, ``meaning``, ``needs``, ``source``), default
parameters, and ``rewrite(text, rng, doc)`` for one sentence. The base class turns that into a
batch ``apply`` whose randomness comes from (seed, name, sentence text) only, so results do not depend
on batch order, process count or any global random state.

The registry is complete wherever this module is used: Python imports the package ``augcse.text.augment``
before any of its modules, and the package imports every family.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import random
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Literal, Sequence

from pydantic import create_model

from augcse.text.augment.parse import parse
from augcse.core.augmentation_sets import SETS, expand

if TYPE_CHECKING:  # annotations only: importing spaCy costs about 1 s
    from spacy.tokens import Doc

from augcse.core.schema import NonNegativeInt, PositiveInt, Probability, Section, validate


class Meaning(str, Enum):
    """AugCSE Table 3 labels."""

    PRESERVING = "preserving"
    POSSIBLY = "possibly-altering"
    ALTERING = "altering"


# Most rules are reimplementations of NL-Augmenter transformations, as AugCSE used them.
NL_AUGMENTER = "NL-Augmenter (Dhole et al. 2021) via AugCSE App. A.2"


class AugmentationError(RuntimeError):
    """An augmentation cannot run here (for example its model is not available)."""


def _wordnet_missing() -> str | None:
    from augcse.assets.resolve import AssetError, wordnet

    try:
        wordnet()
    except AssetError as exc:
        return str(exc)
    return None


# why an entry of an augmentation's ``needs`` is not available here (None when it is), asked before the rule runs:
# a rule that finds nothing to change in a sentence never reaches its lexicon, and would report it "unchanged"
NEED_CHECKS: dict[str, Callable[[], str | None]] = {"wordnet": _wordnet_missing}

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
        self.params: dict[str, Any] = validate(parameters_of(type(self)), params,
                                               subject=f"{self.name} parameter").model_dump()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.params.items())})"

    @property
    def needs_parse(self) -> bool:
        return "parse" in self.needs

    def rewrite(self, text: str, rng: random.Random, doc: Doc | None) -> str | None:
        """Rewrite one sentence; return None (or the input) where the rule does not apply."""
        raise NotImplementedError

    def missing_need(self) -> str | None:
        """Why one of :attr:`needs` is not available here (:data:`NEED_CHECKS`), or None."""
        return next((why for need in self.needs if need in NEED_CHECKS and (why := NEED_CHECKS[need]())), None)

    def apply(self, batch: Sequence[str], seed: int = 0, docs: Sequence[Doc] | None = None) -> list[str]:
        """Rewrite every sentence of ``batch``; unchanged where the rule does not apply. A need that is not
        available (:data:`NEED_CHECKS`) raises :class:`AugmentationError` naming it and how to get it."""
        if missing := self.missing_need():
            raise AugmentationError(missing)
        batch = list(batch)
        if self.needs_parse and docs is None:
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
        if missing := self.missing_need():  # every sentence kept, each counted as an error naming what is missing
            return batch, {i: f"AugmentationError: {missing}" for i in range(len(batch))}
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


# The types of the parameters several augmentations share, by name (rates in [0, 1], counts from 1); any
# other parameter has its default's type, and one listed in ``choices`` is one of them.
SHARED_PARAMETERS: dict[str, Any] = {
    "p": Probability, "dup_rate": Probability, "aug_min": NonNegativeInt, "aug_max": PositiveInt,
    "top_k": PositiveInt, "batch_size": PositiveInt, "candidates": PositiveInt,
}


@functools.cache
def parameters_of(cls: type[Augmentation]) -> type[Section]:
    """An augmentation's parameters as a schema section, from its ``defaults`` and ``choices``."""
    fields: dict[str, Any] = {}
    for key, default in cls.defaults.items():
        if key in cls.choices:
            hint: Any = Literal[tuple(cls.choices[key])]
        elif key in SHARED_PARAMETERS:
            hint = SHARED_PARAMETERS[key]
        elif default is None:
            hint = str | None
        else:
            hint = type(default)
        fields[key] = (hint, default)
    return create_model(f"{cls.__name__}Parameters", __base__=Section, **fields)


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """' (did you mean X?)' for the closest of ``known`` (case-insensitive), or ''."""
    known = list(known)
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return f" (did you mean {lowered[close[0]]}?)" if close else ""


def canonical_name(name: str) -> str:
    """The registered spelling of an augmentation name, looked up case-insensitively."""
    if name in REGISTRY:
        return name
    by_lower = {n.lower(): n for n in REGISTRY}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    raise ValueError(f"unknown augmentation {name!r}{did_you_mean(name, list(REGISTRY) + list(SETS))}; "
                     "`augcse augment --list` shows the names and sets")


def clean_output(original: str, rewritten: str | None) -> str:
    """Never return an empty or whitespace-only string: fall back to the original."""
    if rewritten is None:
        return original
    return rewritten if rewritten.strip() else original


def get(name: str, **params: Any) -> Augmentation:
    """Instantiate a registered augmentation by name."""
    return REGISTRY[canonical_name(name)](**params)


# --------------------------------------------------------------------------- named sets
# The sets are plain data in augcse.core.augmentation_sets (the losses read them too); SETS is re-exported here.

def rule_based() -> list[str]:
    """Every registered augmentation that needs no model weights."""
    return [n for n, cls in REGISTRY.items() if not any(x.startswith("model:") for x in cls.needs)]


def resolve_names(spec: str | Sequence[str]) -> list[str]:
    """Expand a set name or a comma list (mixing sets and names, any case) into augmentation names."""
    return expand(spec, canonical_name)


def validate_params(params: dict[str, dict[str, Any]], names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Check every ``{augmentation: {key: value}}`` against the selected ``names``; return it keyed canonically.

    An unknown augmentation, one not selected, an unknown key or a bad value is refused with one line,
    before anything is loaded (instantiating an augmentation loads no model).
    """
    checked: dict[str, dict[str, Any]] = {}
    for given, values in params.items():
        name = canonical_name(given)
        if name not in names:
            raise ValueError(f"parameter for {name}, which is not among the selected augmentations "
                             f"({', '.join(names)}); add it to the selection or drop the parameter")
        REGISTRY[name](**values)
        checked.setdefault(name, {}).update(values)
    return checked
