"""Every setting an ``augcse reproduce`` row trains with, and where it comes from (``data/paper_settings.yaml``).

Each effective key of a row's resolved recipe carries one status:

- **paper**: the paper states it (``{paper: VALUE, source: WHERE}``);
- **code**: the paper is silent and the authors' released code or README sets it (``{code: VALUE, source: FILE}``);
- **open**: neither says; the value taken and why (``{open: VALUE, reason: …}``);
- **deviation**: the paper or the code says one thing and the row does another (``{paper|code: VALUE,
  source: …, ours: VALUE, reason: …}``), with a reason that survives a reading of the authors' code.

Only keys that name outputs, cadence, workers or memory (never what is trained or evaluated) are exempt, each
with its reason (``exempt``). :func:`check` holds a row's resolved recipe to the table and :func:`unrecorded`
lists the effective keys that have no status (``tests/test_paper_settings.py`` fails on either);
``augcse reproduce --dry-run`` prints the four kinds apart.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml
from augcse.core import yamlfile

MISSING = object()  # a key the resolved recipe does not have
_INDEX = re.compile(r"^(?P<key>[^\[]+)((?:\[\d+\])*)$")
KINDS = ("paper", "code", "open", "deviation")
TRAINED_PROFILE = "trained"  # applied first to every trained row


@dataclass(frozen=True)
class Setting:
    """One key of one row: what the paper (or the authors' code) says, and ours where we differ or choose."""

    key: str
    basis: str | None  # "paper", "code", or None for a setting neither states
    value: Any = None  # what the basis says
    source: str = ""
    ours: Any = MISSING  # MISSING: ours is the basis's value
    reason: str = ""

    @property
    def kind(self) -> str:
        """One of :data:`KINDS`."""
        if self.basis is None:
            return "open"
        return "deviation" if self.ours is not MISSING else self.basis

    @property
    def expected(self) -> Any:
        """The value the row's resolved recipe must hold."""
        return self.value if self.ours is MISSING else self.ours

    @property
    def deviates(self) -> bool:
        """Whether the row takes a value no one states (open) or differs from what is stated."""
        return self.kind in ("open", "deviation")

    def describe(self) -> str:
        if self.kind == "open":
            return f"{self.key} = {show(self.ours)}: {self.reason}"
        said = "the paper's" if self.basis == "paper" else "the authors' code's"
        if self.kind == "deviation":
            return f"{self.key} = {show(self.ours)} instead of {said} {show(self.value)} ({self.source}): {self.reason}"
        return f"{self.key} = {show(self.value)} ({self.source})"


@dataclass(frozen=True)
class Finding:
    """A resolved value that is not what the table records for it."""

    row: str
    setting: Setting
    actual: Any

    def __str__(self) -> str:
        what = {"paper": "the paper's", "code": "the authors' code's", "open": "the chosen",
                "deviation": "ours (a recorded deviation)"}[self.setting.kind]
        return (f"{self.row}: {self.setting.key} is {show(self.actual)}, not {what} {show(self.setting.expected)}"
                f" ({self.setting.source or self.setting.reason})")


def show(value: Any) -> str:
    """A value as the YAML table writes it (``1.0e-05``, ``true``, ``[a, b]``)."""
    return "missing" if value is MISSING else yaml.safe_dump(value, default_flow_style=True, width=10_000).strip() \
        .removesuffix("...").strip()


def _setting(key: str, spec: dict[str, Any], where: str) -> Setting:
    unknown = set(spec) - {"paper", "code", "open", "source", "ours", "reason"}
    if unknown:
        raise ValueError(f"paper_settings.yaml {where}/{key}: unknown fields {sorted(unknown)}")
    bases = [field for field in ("paper", "code", "open") if field in spec]
    if len(bases) != 1:
        raise ValueError(f"paper_settings.yaml {where}/{key}: give exactly one of paper, code or open")
    if bases == ["open"]:
        if not spec.get("reason") or {"source", "ours"} & set(spec):
            raise ValueError(f"paper_settings.yaml {where}/{key}: an open setting needs open and reason only")
        return Setting(key, None, None, "", spec["open"], spec["reason"])
    basis = bases[0]
    if not spec.get("source"):
        raise ValueError(f"paper_settings.yaml {where}/{key}: a {basis} setting needs its source")
    if ("ours" in spec) != bool(spec.get("reason")):
        raise ValueError(f"paper_settings.yaml {where}/{key}: a deviation needs ours and reason")
    return Setting(key, basis, spec[basis], spec["source"], spec.get("ours", MISSING), spec.get("reason", ""))


@cache
def _table() -> dict[str, Any]:
    text = resources.files("augcse").joinpath("data/paper_settings.yaml").read_text(encoding="utf-8")
    return yamlfile.load(text)


def settings(paper: str, row: str, trained: bool | None = None) -> list[Setting]:
    """The row's settings: the ``trained`` profile (for a trained row), its profiles in order, then its own
    keys (later ones win). ``trained`` None: a row is trained unless it states ``evaluate.*`` keys."""
    table = _table()
    spec = (table["papers"].get(paper) or {}).get(row)
    if spec is None:
        raise KeyError(f"paper_settings.yaml has no row {paper}/{row}")
    merged: dict[str, dict[str, Any]] = {}
    own = {key: value for key, value in spec.items() if key != "use"}
    if trained is None:
        trained = not any(key.startswith("evaluate.") for key in own)
    for profile in ([TRAINED_PROFILE] if trained else []) + list(spec.get("use", ())):
        merged.update(table["profiles"].get(profile, {}) if profile == TRAINED_PROFILE else table["profiles"][profile])
    merged.update(own)
    # a key set to null is not a setting of this row (a loss without the parameter an earlier profile states)
    return [_setting(key, value, f"{paper}/{row}") for key, value in merged.items() if value is not None]


def exempt() -> dict[str, str]:
    """Key patterns (``fnmatch``; ``[*]`` any list index) that never change what is trained, with the reason."""
    return dict(_table()["exempt"])


def is_exempt(key: str) -> bool:
    plain = re.sub(r"\[\d+\]", "[*]", key)
    return any(fnmatch.fnmatchcase(plain, pattern.replace("[*]", "[[]*[]]")) for pattern in exempt())


def lookup(values: dict[str, Any], key: str) -> Any:
    """``values`` at a dotted key with list indices (``data.views[0].p``); MISSING where absent."""
    node: Any = values
    for part in key.split("."):
        match = _INDEX.match(part)
        if match is None or not isinstance(node, dict) or match["key"] not in node:
            return MISSING
        node = node[match["key"]]
        for index in map(int, re.findall(r"\[(\d+)\]", part)):
            if not isinstance(node, list) or index >= len(node):
                return MISSING
            node = node[index]
    return node


def leaf_keys(values: Any, prefix: str = "") -> list[str]:
    """Every leaf of a resolved recipe as a dotted key: a list of mappings (the views) is indexed item by
    item; any other list, an empty mapping and a scalar are one value."""
    if isinstance(values, dict) and values and not prefix.endswith("learning_rate_mapping"):
        return [k for name, value in values.items() for k in leaf_keys(value, f"{prefix}.{name}" if prefix else name)]
    if isinstance(values, list) and values and all(isinstance(item, dict) for item in values):
        return [k for index, item in enumerate(values) for k in leaf_keys(item, f"{prefix}[{index}]")]
    return [prefix]


def unrecorded(paper: str, row: str, values: dict[str, Any]) -> list[str]:
    """The effective keys of the row's resolved values that carry no status and are not exempt."""
    recorded = {setting.key for setting in settings(paper, row)}
    return [key for key in leaf_keys(values) if key not in recorded and not is_exempt(key)]


def _same(actual: Any, expected: Any) -> bool:
    if actual is MISSING:
        return expected is None  # a key the recipe leaves out is unset
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)) and not isinstance(actual, bool):
        return not isinstance(expected, bool) and abs(float(actual) - float(expected)) <= 1e-12 * max(1.0, abs(expected))
    return actual == expected


def check(paper: str, row: str, values: dict[str, Any]) -> list[Finding]:
    """Every setting of the row whose resolved value (``values``: see :func:`augcse.studies.reproduce.resolved`)
    is not the one the table records."""
    findings = []
    for setting in settings(paper, row):
        actual = lookup(values, setting.key)
        if not _same(actual, setting.expected):
            findings.append(Finding(f"{paper}/{row}", setting, actual))
    return findings


def deviations(paper: str, row: str) -> list[Setting]:
    """The row's deviations and the settings neither its paper nor the authors' code states."""
    return [setting for setting in settings(paper, row) if setting.deviates]
