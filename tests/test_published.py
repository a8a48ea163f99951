"""The published-numbers table against the papers' own text, and its internal consistency."""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest

from augcse.studies.published import (CLUSTERING_TASKS, INTENT_TASKS, STS_TASKS, TRANSFER_TASKS, Reported, published,
                              published_table)

SHOTS = {shots: tuple(f"{task}/{shots}shot" for task in INTENT_TASKS) for shots in (5, 20)}

NUMBER = re.compile(r"\d+(?:\.\d+)?")  # read as numbers: VaSCL prints some sd as 2 or 1.5

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
    "cards/simcse-roberta-large-ours": "Case-Augmented",
    "simcse/roberta-base": "AugCSE",
    "augcse/bert-base-avg-embeddings": "AugCSE",
    "augcse/bert-base-cls-embedding": "AugCSE",
    "augcse/bert-base-whitening": "AugCSE",
    "augcse/roberta-base-whitening": "AugCSE",
    "augcse/diffcse-bert-base": "AugCSE",
    "augcse/diffcse-roberta-base": "AugCSE",
    "augcse/simcse-mlm-bert-base": "AugCSE",
    "augcse/simcse-mlm-roberta-base": "AugCSE",
    "sda/ct-bert-base": "SDA",
    "cards/switch-case-only-roberta-large": "Case-Augmented",
    "cards/retrieval-only-roberta-large": "Case-Augmented",
    "vascl/simcse-roberta-large": "Virtual Augmentation",
    "vascl/roberta-distilroberta-mean-pooling": "Virtual Augmentation",
    "vascl/roberta-large-mean-pooling": "Virtual Augmentation",
    **{f"vascl/{row}-clustering": "Virtual Augmentation" for row in (
        "roberta-distilroberta-mean-pooling", "simcse-distilroberta", "distilroberta", "roberta-base-mean-pooling",
        "simcse-roberta-base", "roberta-base", "roberta-large-mean-pooling", "simcse-roberta-large", "roberta-large")},
    **{f"vascl/{row}-intent": "Virtual Augmentation" for row in (
        "roberta-base-mean-pooling", "simcse-roberta-base", "roberta-base")},
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
    """Every figure of the row (each table's tasks, averages and sd) occurs on one line of the paper."""
    row = published(row_id)
    lines = _lines_of(papers, CHECKED[row_id])
    for columns, average in ((STS_TASKS, "sts_avg"), (TRANSFER_TASKS, "transfer_avg"),
                             (CLUSTERING_TASKS, "clustering_avg"), (INTENT_TASKS, None), (SHOTS[5], None),
                             (SHOTS[20], None)):
        keys = (*columns, average) if average else columns
        wanted = Counter(f"{row.scores[k]:.2f}" for k in keys if k in row.scores)
        wanted.update(f"{row.sd[k]:.2f}" for k in keys if k in row.sd)
        if not wanted:
            continue
        found = [line for line in lines if not wanted - Counter(f"{float(x):.2f}" for x in NUMBER.findall(line))]
        assert found, f"{row_id}: {dict(wanted)} not on any one line of the {CHECKED[row_id]} paper"


@pytest.mark.parametrize(("columns", "average"), [(STS_TASKS, "sts_avg"), (TRANSFER_TASKS, "transfer_avg"),
                                                  (CLUSTERING_TASKS, "clustering_avg")])
def test_printed_average_is_the_mean_of_its_tasks(columns, average):
    """Where a paper prints every task and their average, the average is their mean to the papers' rounding,
    except for the rows whose printed average disagrees with their own tasks (said in their note)."""
    off, checked = set(), 0
    for row in published_table().values():
        if all(t in row.scores for t in columns) and average in row.scores:
            checked += 1
            mean = sum(row.scores[t] for t in columns) / len(columns)
            if abs(mean - row.scores[average]) > 0.01:
                off.add(row.id)
    assert checked >= 7
    assert off == {"sts_avg": {"sda/ensemble-roberta-base"}, "transfer_avg": {"augcse/bert-base-avg-embeddings"}}.get(
        average, set())
    assert all("not the mean" in published(row_id).note for row_id in off)


def test_every_row_says_how_it_was_reported():
    table = published_table()
    assert len(table) == 67  # every figure the five papers print that a row is held to, and the rest of their tables
    assert table["augcse/bert-base"].reported is Reported.MAX
    assert table["augcse/bert-base-mean"].sd == {"sts_avg": 0.63, "transfer_avg": 0.29}
    with pytest.raises(KeyError, match="no published row"):
        published("simcse/bert-large")
