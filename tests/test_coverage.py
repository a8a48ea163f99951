"""docs/COVERAGE.md names every table and figure of the four papers whose text is in the data directory's
``papers`` folder (SimCSE's is not: its rows are those the others quote), and says of a trained row whose
corpus augcse cannot make that it needs the file."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from augcse.studies import coverage

TITLES = {"AugCSE": "AugCSE", "SDA": "SDA: Simple Discrete", "VaSCL": "Virtual Augmentation",
          "CARDS": "Case-Augmented"}
NAMED = re.compile(r"\b(Table|Figure|Fig\.)\s?(\d+)")


def listed(paper: str) -> set[tuple[str, int]]:
    """(``Table`` or ``Figure``, number) for every item COVERAGE lists for ``paper`` ("4, 5", "6–9", "Fig. 3, 4")."""
    out = set()
    for name, table, *_ in coverage.lines():
        if name != paper:
            continue
        kind = "Figure" if table.startswith("Fig.") else "Table"
        for part in re.findall(r"\d+(?:–\d+)?", table):
            first, _, last = part.partition("–")
            out |= {(kind, n) for n in range(int(first), int(last or first) + 1)}
    return out


def named(text: str) -> set[tuple[str, int]]:
    return {("Table" if kind == "Table" else "Figure", int(number)) for kind, number in NAMED.findall(text)}


@pytest.fixture(scope="module")
def texts(data_dir: Path) -> dict[str, str]:
    folder = Path(os.environ.get("AUGCSE_PAPERS") or data_dir.parent / "papers")
    if not folder.is_dir():
        pytest.fail(f"the papers' text is needed: set AUGCSE_PAPERS (tried {folder})")
    files = [path.read_text(encoding="utf-8", errors="replace") for path in sorted(folder.glob("*.txt"))]
    return {paper: next(text for text in files if title in text[:3000]) for paper, title in TITLES.items()}


@pytest.mark.parametrize("paper", sorted(TITLES))
def test_every_table_and_figure_of_the_paper_is_on_coverage(paper, texts):
    missing = named(texts[paper]) - listed(paper)
    assert not missing, f"{paper}: not on docs/COVERAGE.md: {sorted(missing)}"


def test_the_parsing_finds_a_missing_item():
    assert named("see Table 2 and Fig. 5; Figure 3") == {("Table", 2), ("Figure", 5), ("Figure", 3)}
    assert ("Table", 7) in listed("AugCSE") and ("Figure", 6) in listed("AugCSE")
    assert ("Table", 99) not in listed("AugCSE")


def test_a_row_whose_corpus_augcse_cannot_make_says_so():
    declutr = coverage.covered()["augcse/declutr-roberta-base"]
    assert all("no augcse command fetches or makes its corpus corpus/openwebtext-declutr.txt" in c for c in declutr)
    assert all("(trained)" in c for c in coverage.covered()["sda/consert-bert-base"])  # sts_corpus makes it
