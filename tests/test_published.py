"""The published-numbers table against the papers' own text, and its internal consistency."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest

from augcse.published import STS_TASKS, TRANSFER_TASKS, Reported, published, published_table

NUMBER = re.compile(r"\d+\.\d\d\b")

# A few rows checked against the text of the paper that prints them (papers without their SimCSE
# source: its rows are checked where AugCSE quotes them).
CHECKED = {
    "augcse/bert-base": "AugCSE",
    "augcse/bert-base-mean": "AugCSE",
    "simcse/bert-base": "AugCSE",
    "sda/pi-bert-base": "SDA",
    "sda/mv-roberta-base": "SDA",
    "sda/negation-only-roberta-base": "SDA",
    "vascl/roberta-base": "Virtual Augmentation",
    "cards/roberta-base": "Case-Augmented",
}


@pytest.fixture(scope="module")
def papers(data_dir: Path) -> dict[str, list[str]]:
    """The papers' text by file, from ``$AUGCSE_PAPERS`` or ``<data dir>/../papers``."""
    folder = Path(os.environ.get("AUGCSE_PAPERS") or data_dir.parent / "papers")
    if not folder.is_dir():
        pytest.fail(f"the papers' text is needed: set AUGCSE_PAPERS (tried {folder})")
    return {path.name: path.read_text(encoding="utf-8", errors="replace").splitlines()
            for path in sorted(folder.glob("*.txt"))}


def _lines_of(papers: dict[str, list[str]], title: str) -> list[str]:
    lines = [line for text in papers.values() if any(title in head for head in text[:40]) for line in text]
    assert lines, f"no paper titled {title!r} among {list(papers)}"
    return lines


@pytest.mark.parametrize("row_id", sorted(CHECKED))
def test_row_is_printed_in_its_paper(row_id, papers):
    """Every figure of the row (STS and transfer, averages and sd) occurs on one line of the paper."""
    row = published(row_id)
    lines = _lines_of(papers, CHECKED[row_id])
    for columns, average in ((STS_TASKS, "sts_avg"), (TRANSFER_TASKS, "transfer_avg")):
        wanted = Counter(f"{row.scores[k]:.2f}" for k in (*columns, average) if k in row.scores)
        wanted.update([f"{row.sd[average]:.2f}"] if average in row.sd else [])
        if not wanted:
            continue
        found = [line for line in lines if not wanted - Counter(NUMBER.findall(line))]
        assert found, f"{row_id}: {dict(wanted)} not on any one line of the {CHECKED[row_id]} paper"


def test_sts_average_is_the_mean_of_seven():
    """Where all seven tasks are printed, the average is their mean to the papers' rounding, except for
    the one row whose printed average disagrees with its own tasks (said in its note)."""
    off = set()
    for row in published_table().values():
        if all(t in row.scores for t in STS_TASKS):
            mean = sum(row.scores[t] for t in STS_TASKS) / 7
            if abs(mean - row.scores["sts_avg"]) > 0.01:
                off.add(row.id)
    assert off == {"sda/ensemble-roberta-base"}
    assert "not the mean" in published("sda/ensemble-roberta-base").note


def test_every_row_says_how_it_was_reported():
    table = published_table()
    assert len(table) == 36  # every row of METHODS.md §6
    assert table["augcse/bert-base"].reported is Reported.MAX
    assert table["augcse/bert-base-mean"].sd == {"sts_avg": 0.63, "transfer_avg": 0.29}
    with pytest.raises(KeyError, match="no published row"):
        published("simcse/bert-large")
