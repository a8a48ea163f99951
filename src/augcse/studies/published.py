"""The papers' published scores as data (``data/published.csv``), the figures a reproduction is held to.

One row per model and method as the papers print them: the seven STS tasks and their average, SentEval
transfer, VaSCL's short-text clustering (six sets and their average) and 5-, 10- and 20-shot intent
accuracy (``SNIPS`` is 10-shot, the headline; ``SNIPS/5shot`` another setting) where the paper gives them,
and how the figure was reported: a single run, the maximum over seeds, or a mean (with its
standard deviation in ``*_sd``). docs/COVERAGE.md lists which of them ``augcse reproduce`` runs.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from importlib import resources

STS_TASKS = ("STS12", "STS13", "STS14", "STS15", "STS16", "STSBenchmark", "SICKRelatedness")
TRANSFER_TASKS = ("MR", "CR", "SUBJ", "MPQA", "SST2", "TREC", "MRPC")
CLUSTERING_TASKS = ("AgNews", "SearchSnippets", "StackOverflow", "Biomedical", "Tweet", "GoogleNews-TS")  # VaSCL T2
INTENT_TASKS = ("SNIPS", "BANKING77", "CLINC150", "HWU64")  # VaSCL T3: the headline is 10-shot
INTENT_SHOTS = tuple(f"{task}/{shots}shot" for shots in (5, 20) for task in INTENT_TASKS)  # the other settings
SCORE_COLUMNS = (*STS_TASKS, "sts_avg", *TRANSFER_TASKS, "transfer_avg", *CLUSTERING_TASKS, "clustering_avg",
                 *INTENT_TASKS, *INTENT_SHOTS)


class Reported(str, Enum):
    """How a paper turned its runs into the printed figure."""

    SINGLE = "single"  # one run (or unstated)
    MAX = "max"  # the best of several seeds
    MEAN = "mean"  # the mean over seeds or runs


@dataclass(frozen=True)
class Published:
    id: str
    paper: str
    table: str
    backbone: str
    method: str
    reported: Reported
    scores: dict[str, float] = field(default_factory=dict)  # task or average -> figure (×100)
    sd: dict[str, float] = field(default_factory=dict)  # task or average -> standard deviation, where printed
    source: str = ""
    note: str = ""


def _parse(row: dict[str, str]) -> Published:
    scores = {key: float(row[key]) for key in SCORE_COLUMNS if row[key]}
    sd = {key: float(row[f"{key}_sd"]) for key in SCORE_COLUMNS if row.get(f"{key}_sd")}
    return Published(row["id"], row["paper"], row["table"], row["backbone"], row["method"], Reported(row["reported"]),
                     scores, sd, row["source"], row["note"])


@cache
def published_table() -> dict[str, Published]:
    """Every published row, by id (``paper/model-variant``)."""
    with resources.files("augcse").joinpath("data/published.csv").open(encoding="utf-8") as handle:
        rows = [_parse(row) for row in csv.DictReader(handle)]
    return {row.id: row for row in rows}


def published(row_id: str) -> Published:
    table = published_table()
    if row_id not in table:
        raise KeyError(f"no published row {row_id!r}; known: {', '.join(table)}")
    return table[row_id]
