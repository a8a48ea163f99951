"""The papers' stated settings for every ``augcse reproduce`` row (``data/paper_settings.yaml``), as data.

Each row lists what its paper states (with the section), each deliberate deviation with its reason and
each setting the paper leaves open with the value chosen. :func:`check` holds a row's resolved recipe to
that list: a value that differs without a recorded reason is a finding, so changing a recipe value a
paper states is caught (``tests/test_paper_settings.py``); ``augcse reproduce --dry-run`` prints the
deviations and open settings per row.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import yaml
from augcse.core import yamlfile

MISSING = object()  # a key the resolved recipe does not have
_INDEX = re.compile(r"^(?P<key>[^\[]+)((?:\[\d+\])*)$")


@dataclass(frozen=True)
class Setting:
    """One hyper-parameter of one row: what the paper states (if it does), and ours where we differ."""

    key: str
    paper: Any = None
    source: str = ""
    stated: bool = True
    ours: Any = MISSING  # MISSING: ours is the paper's value
    reason: str = ""

    @property
    def expected(self) -> Any:
        """The value the row's resolved recipe must hold."""
        return self.paper if self.ours is MISSING else self.ours

    @property
    def deviates(self) -> bool:
        return not self.stated or self.ours is not MISSING

    def describe(self) -> str:
        if not self.stated:
            return f"{self.key} = {show(self.ours)}: not stated by the paper; {self.reason}"
        return (f"{self.key} = {show(self.ours)} instead of {show(self.paper)} ({self.source}): {self.reason}"
                if self.ours is not MISSING else f"{self.key} = {show(self.paper)} ({self.source})")


@dataclass(frozen=True)
class Finding:
    """A resolved value that is not what the table records for it."""

    row: str
    setting: Setting
    actual: Any

    def __str__(self) -> str:
        what = "ours (a recorded deviation)" if self.setting.deviates else "the paper's"
        return (f"{self.row}: {self.setting.key} is {show(self.actual)}, not {what} {show(self.setting.expected)}"
                f" ({self.setting.source or self.setting.reason})")


def show(value: Any) -> str:
    """A value as the YAML table writes it (``1.0e-05``, ``true``, ``[a, b]``)."""
    return "missing" if value is MISSING else yaml.safe_dump(value, default_flow_style=True, width=10_000).strip() \
        .removesuffix("...").strip()


def _setting(key: str, spec: dict[str, Any], where: str) -> Setting:
    unknown = set(spec) - {"paper", "source", "stated", "ours", "reason"}
    if unknown:
        raise ValueError(f"paper_settings.yaml {where}/{key}: unknown fields {sorted(unknown)}")
    stated = bool(spec.get("stated", True))
    setting = Setting(key, spec.get("paper"), spec.get("source", ""), stated, spec.get("ours", MISSING),
                      spec.get("reason", ""))
    if stated and ("paper" not in spec or not setting.source):
        raise ValueError(f"paper_settings.yaml {where}/{key}: a stated setting needs paper and source")
    if (not stated or "ours" in spec) and ("ours" not in spec or not setting.reason):
        raise ValueError(f"paper_settings.yaml {where}/{key}: a deviation or open setting needs ours and reason")
    return setting


@cache
def _table() -> dict[str, Any]:
    text = resources.files("augcse").joinpath("data/paper_settings.yaml").read_text(encoding="utf-8")
    return yamlfile.load(text)


def settings(paper: str, row: str) -> list[Setting]:
    """The row's settings: its profiles in order, then its own keys (later ones win)."""
    table = _table()
    spec = (table["papers"].get(paper) or {}).get(row)
    if spec is None:
        raise KeyError(f"paper_settings.yaml has no row {paper}/{row}")
    merged: dict[str, dict[str, Any]] = {}
    for profile in spec.get("use", ()):
        merged.update(table["profiles"][profile])
    merged.update({key: value for key, value in spec.items() if key != "use"})
    return [_setting(key, value, f"{paper}/{row}") for key, value in merged.items()]


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
    """The row's deliberate deviations and the settings its paper leaves open."""
    return [setting for setting in settings(paper, row) if setting.deviates]
