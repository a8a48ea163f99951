"""docs/REPRODUCING.md's generated blocks: the dry run of every paper as the page shows it.

The plan (rows, runs and GPU-hours per paper), one row's settings as ``--dry-run`` prints them and the
released checkpoints come from the same functions as ``augcse reproduce PAPER --dry-run``, so the page cannot
drift from the command (``python -m augcse.commands.docs --check`` fails when it does). GPU-hours are priced
on each corpus's documented line count (``data/reproduce.yaml``, ``corpora``), never on the files of the
machine that writes the page; a corpus with no known count is priced on an assumed 10^6 lines and the
figure says it is an estimate.
"""

from __future__ import annotations

import re
from pathlib import Path

from augcse.core.document import markdown_table
from augcse.studies.published import published
from augcse.studies.reproduce import (DEFAULT_SEEDS, Paper, Run, describe_settings, documented_lines, gpu_hours,
                                      papers, plan, select_rows, throughput)

OUTPUT = Path("runs/reproduce")  # the command's default --output


def _runs(paper: Paper, rows: list[str] | None = None, seeds: tuple[int, ...] = DEFAULT_SEEDS) -> list[Run]:
    return plan(paper, select_rows(paper, rows, False), list(seeds), OUTPUT, [])


def _tables(paper: Paper) -> str:
    """The tables a paper's rows are held to, by the paper that prints them (``augcse T4, T5; simcse T5``)."""
    by_paper: dict[str, set[str]] = {}
    for row in paper.rows:
        for ref in map(published, row.published):
            by_paper.setdefault(ref.paper, set()).update(re.findall(r"\d+", ref.table) or [ref.table])
    order = sorted(by_paper, key=lambda name: (name != paper.name, name))
    return "; ".join(f"{name} T{', T'.join(sorted(by_paper[name], key=int))}" for name in order)


def paper_plan(paper: Paper) -> dict[str, object]:
    """Rows, runs and GPU-hours of the paper's default plan; the estimated share and the corpora behind it."""
    runs = _runs(paper)
    priced = {id(run): documented_lines(run.recipe.data.corpus) for run in runs if run.trained}
    hours = {id(run): gpu_hours(run, 1, priced[id(run)].priced if run.trained else None) for run in runs}
    assumed = [run for run in runs if run.trained and priced[id(run)].priced_on == "assumed"]
    return {"trained": [row.name for row in paper.rows if row.trained],
            "evaluated": [row.name for row in paper.rows if not row.trained],
            "runs": len(runs), "gpu_hours": sum(hours.values()),
            "estimated_hours": sum(hours[id(run)] for run in assumed),
            "assumed_corpora": sorted({run.recipe.data.corpus for run in assumed})}


def plan_table(_: str | None = None) -> list[str]:
    """Per paper: the tables, the trained and the evaluated rows, the runs and their GPU-hours."""
    spec = throughput()
    body = []
    for name, paper in papers().items():
        figures = paper_plan(paper)
        hours = f"{figures['gpu_hours']:.1f}"
        if figures["estimated_hours"]:
            hours += (f" (of which {figures['estimated_hours']:.1f} an estimate: "
                      f"{', '.join(figures['assumed_corpora'])} has no known line count)")
        body.append([f"{name} ({_tables(paper)})", ", ".join(figures["trained"]),
                     ", ".join(figures["evaluated"]) or "—", str(figures["runs"]), hours])
    seeds = ", ".join(map(str, DEFAULT_SEEDS))
    counts = ", ".join(f"{corpus}: {known['lines']:,}" for corpus, known in spec.corpora.items())
    return [f"Trained rows run once per seed ({seeds}), evaluated rows once; GPU-hours at "
            f"{spec.sentences_per_second:g} sentences/s per GPU (documented, not measured: see below) over each "
            f"corpus's documented line count ({counts}).",
            "", *markdown_table(["paper (tables held to)", "trained rows", "evaluated rows (no training)", "runs",
                                 "GPU-hours"], body, [False, False, False, True, True])]


def row_settings_excerpt(arg: str | None) -> list[str]:
    """``PAPER_ROW``: the row's settings exactly as ``augcse reproduce PAPER --dry-run`` prints them."""
    name, _, row = (arg or "").partition("_")
    if name not in papers():
        raise SystemExit(f"reproduce-settings: give PAPER_ROW (e.g. cards_roberta-large), got {arg!r}")
    paper = papers()[name]
    runs = _runs(paper, [row], (1,))
    return ["```", f"augcse reproduce {name} --dry-run --seeds 1 --rows {row}", "...",
            "Settings per row (data/paper_settings.yaml), every effective key in one of four kinds:",
            *describe_settings(paper, runs), "...", "```"]


def checkpoints(_: str | None = None) -> list[str]:
    """The released checkpoints ``--checkpoints`` evaluates, per paper, with the figure each is held to."""
    out = []
    for name, paper in papers().items():
        for row in paper.checkpoints:
            refs = "; ".join(f"{ref.id} sts_avg {ref.scores['sts_avg']:.2f}" for ref in map(published, row.published)
                             if "sts_avg" in ref.scores)
            out.append(f"- `augcse reproduce {name} --checkpoints --rows {row.name}`: `{row.evaluate.model}` "
                       f"through `{row.evaluate.pooler}`, held to {refs}")
    return out


def memory_excerpt(arg: str | None) -> list[str]:
    """``PAPER_ROW--ROW_GIB``: each row's first run as the dry run lists it with ``--gpu-memory GIB`` (its
    GPU-hours priced on the documented line count), e.g. ``vascl_roberta-base--roberta-large_40``."""
    from augcse.studies.reproduce import run_status

    parts = (arg or "").split("_")
    if len(parts) != 3 or parts[0] not in papers() or not parts[2].isdigit():
        raise SystemExit(f"reproduce-memory: give PAPER_ROW--ROW_GIB (e.g. vascl_roberta-base--roberta-large_40), "
                         f"got {arg!r}")
    name, rows, budget = parts[0], parts[1].split("--"), float(parts[2])
    runs = _runs(papers()[name], rows, (1,))
    out = ["```", f"augcse reproduce {name} --dry-run --gpu-memory {budget:g} --rows {','.join(rows)}"]
    for run in runs:
        hours = gpu_hours(run, 1, documented_lines(run.recipe.data.corpus).priced)
        out.append(f"  {run.run_dir}  {run_status(run, 'to run', hours, budget)}  …")
    return [*out, "```"]
