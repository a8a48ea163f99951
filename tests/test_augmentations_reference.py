"""docs/AUGMENTATIONS.md is what ``python -m augcse.text.augment.reference`` generates from the registry."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from augcse.text import augment
from augcse.text.augment import reference

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "AUGMENTATIONS.md"


@pytest.fixture(autouse=True)
def _from_the_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rates come from the measured record under docs/records/, which the generator reads from the root."""
    monkeypatch.chdir(ROOT)


def test_augmentations_md_is_up_to_date() -> None:
    assert DOC.is_file(), f"docs/AUGMENTATIONS.md is missing; run: {reference.COMMAND}"
    assert DOC.read_text(encoding="utf-8") == reference.reference(), \
        f"docs/AUGMENTATIONS.md is out of date; run: {reference.COMMAND}"


def test_every_registered_augmentation_and_set_has_a_row() -> None:
    text = reference.reference()
    for name, cls in augment.REGISTRY.items():
        assert f"| {name} | {cls.meaning} |" in text
    for name in augment.SETS:
        assert f"| {name} | {', '.join(augment.SETS[name])} |" in text
    assert "<!-- generated" not in text


def test_the_hand_written_tables_name_only_registered_augmentations() -> None:
    """The prose's per-augmentation tables (first column ``augmentation``) cannot keep a removed or renamed one."""
    named, in_table = set(), False
    for line in reference.TEMPLATE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if not cells:
            in_table = False
        elif cells[0] == "augmentation":
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            named.update(re.sub(r"\s*\(paper\)$", "", part.strip()) for part in cells[0].split(" / "))
    assert len(named) >= 20  # the "behaviour against NL-Augmenter" table names most of them
    assert named <= set(augment.REGISTRY), sorted(named - set(augment.REGISTRY))
