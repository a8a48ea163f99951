"""``augcse study``: the command line of :mod:`augcse.studies.study`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from augcse.assets.resolve import data_dir
from augcse.commands.main import begin_work
from augcse.core.outputs import check_writable, refuse_links, write_text_atomically
from augcse.studies.runs import check_inputs, run_all
from augcse.studies.study import build_document, describe, load_grid

# what the command writes in the study folder (beside its runs' folders): no link may stand in their place
WRITTEN = ("study.md", "study.html", "study.json", "curves.png", ".table")

SUMMARY = "run a grid file (sets × rows × seeds, budgets); resumable; table and curves"
DESCRIPTION = ("Run every run of a grid file (YAML: sets, rows, seeds, budgets, starting model), skipping finished "
               "runs and resuming an interrupted one; then the table (mean ± sd over seeds, Δ vs the starting "
               "model) as study.md, study.html, study.json and curve plots.")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("study", help=SUMMARY, description=DESCRIPTION)
    parser.add_argument("grid", help="grid file (YAML), e.g. src/augcse/data/studies/adapt-curves.yaml")
    parser.add_argument("--output", default="runs/study", help="output folder (default: runs/study)")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA)")
    parser.add_argument("--dry-run", action="store_true", help="list the runs and their state; run nothing")
    parser.add_argument("--table-only", action="store_true",
                        help="write the table and curves of the runs finished so far (the others listed as not "
                             "finished); run nothing")
    parser.set_defaults(func=_study_cli)


def _study_cli(args: argparse.Namespace) -> int:
    data_dir(args.data_dir)  # a --data-dir that is not there is refused, dry run or not
    if not args.dry_run:  # before the grid's recipes are checked: that loads sentence-transformers
        check_writable(args.output, "--output")
    grid = load_grid(args.grid)
    by_set = grid.plan(Path(args.output))
    if args.dry_run:
        print(describe(grid, by_set))
        return 0
    folder = Path(args.output) / grid.name
    if not args.dry_run:
        refuse_links(folder, "--output: the study folder")
    if args.table_only:
        if not folder.is_dir():
            raise ValueError(f"{folder} holds no run of this grid yet; run it first, or give its --output")
    else:
        runs = [run for runs in by_set.values() for run in runs]
        check_inputs(runs, args.data_dir)  # every corpus, model and task file the unfinished runs name is here
        begin_work()
        code = run_all(runs, folder, args.data_dir)
        if code:
            return code
    doc, figures = build_document(grid, by_set, folder)
    print(doc.to_markdown(folder))
    md, page = doc.write(folder, "study")
    write_text_atomically(folder / "study.json", json.dumps({"title": grid.title, "seeds": list(grid.seeds),
                                                            "budgets": list(grid.budgets), "sets": figures},
                                                           indent=2))
    print(f"wrote {md}\nwrote {page}\nwrote {folder / 'study.json'}")
    return 0
