"""``augcse reproduce``: the command line of :mod:`augcse.studies.reproduce`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from augcse.assets.resolve import data_dir
from augcse.commands.main import begin_work
from augcse.core.outputs import claim_folder
from augcse.studies.reproduce import DEFAULT_SEEDS, build_document, describe_plan, papers, plan, plan_json, select_rows
from augcse.studies.runs import check_inputs, run_all


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seeds takes comma-separated integers, got {text!r}") from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"--seeds needs distinct integers, got {text!r}")
    return seeds


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"--nproc takes a positive integer, got {text!r}")
    return int(text)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--gpu-memory takes a positive number of GiB, got {text!r}")
    return value


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "reproduce", help="train and evaluate a paper's table over seeds; ours beside the published figures",
        description="Reproduce a paper's table: each row's recipe over seeds, evaluated with the paper's protocol, "
                    "compared with the published figures. key=value arguments override every run's recipe.")
    parser.add_argument("paper", choices=sorted(papers()), help="which paper")
    parser.add_argument("overrides", nargs="*", help="recipe overrides for every run, e.g. model.backbone=DIR")
    parser.add_argument("--rows", help="comma-separated row names (default: all rows of the paper)")
    parser.add_argument("--seeds", type=_seeds, default=list(DEFAULT_SEEDS),
                        help=f"comma-separated seeds (default: {','.join(map(str, DEFAULT_SEEDS))})")
    parser.add_argument("--output", default="runs/reproduce", help="output folder (default: runs/reproduce)")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA)")
    parser.add_argument("--tasks", help="evaluate on these tasks instead of the paper's protocol (e.g. STSBenchmark)")
    parser.add_argument("--nproc", type=_positive, default=1, help="processes (GPUs) per run, through torchrun")
    parser.add_argument("--dry-run", action="store_true",
                        help="list the runs, published figures, settings that differ from the paper and GPU-hours")
    parser.add_argument("--json", action="store_true", help="with --dry-run: the plan as JSON, for tools")
    parser.add_argument("--gpu-memory", type=_positive_float, metavar="GIB",
                        help="with --dry-run: the GPU's memory; rows whose estimate exceeds it get the "
                             "gradient-caching mini-batch that fits (loss.params.mini_batch_size)")
    parser.add_argument("--checkpoints", action="store_true",
                        help="evaluate the paper's released checkpoints with their published pooler instead")
    parser.add_argument("--checkpoint", action="append", default=[], metavar="NAME=PATH",
                        help="a local folder for a released checkpoint named NAME (offline copies)")
    parser.set_defaults(func=_reproduce_cli)


# what the command writes in the paper's folder (beside its runs' folders): no link may stand in their place
WRITTEN = ("reproduce.md", "reproduce.html", ".table")


def _reproduce_cli(args: argparse.Namespace) -> int:
    paper = papers()[args.paper]
    if args.gpu_memory and not args.dry_run:
        raise ValueError("--gpu-memory goes with --dry-run (it checks the plan against a GPU's memory)")
    if args.json and not args.dry_run:
        raise ValueError("--json goes with --dry-run (a reproduction writes reproduce.md and reproduce.html)")
    data_dir(args.data_dir)  # a --data-dir that is not there is refused, dry run or not
    output = Path(args.output) / ("checkpoints" if args.checkpoints else "")
    if not args.dry_run:
        # before the recipes are checked (that loads sentence-transformers); the paper's folder holds no link
        claim_folder(output / paper.name, "--output")
    if args.tasks:
        from augcse.evaluation.tasks import resolve_tasks

        resolve_tasks(args.tasks)  # an unknown task is refused before any run starts
    rows = select_rows(paper, [r for r in (args.rows or "").split(",") if r] or None, args.checkpoints)
    mapping: dict[str, str] = {}
    for item in args.checkpoint:
        name, sep, path = item.partition("=")
        if not sep or not Path(path).is_dir():
            raise ValueError(f"--checkpoint {item!r} must be NAME=FOLDER with an existing folder")
        mapping[name] = path
    known = {row.evaluate.model for row in rows if row.evaluate}
    if set(mapping) - known:
        raise ValueError(f"--checkpoint names {sorted(set(mapping) - known)} are not models of these rows: {sorted(known)}")
    runs = plan(paper, rows, args.seeds, output, list(args.overrides), args.tasks, mapping)
    if args.dry_run:
        text = (json.dumps(plan_json(paper, runs, args.nproc, args.gpu_memory, args.data_dir), indent=2) if args.json
                else describe_plan(paper, runs, args.nproc, args.gpu_memory, args.data_dir))
        print(text)
        return 0
    check_inputs(runs, args.data_dir)  # every corpus, model and task file the unfinished runs name is here
    begin_work()
    code = run_all(runs, output / paper.name, args.data_dir, args.nproc)
    if code:
        return code
    doc = build_document(paper, runs)
    print(doc.to_markdown(output / paper.name))
    md, page = doc.write(output / paper.name, "reproduce")
    print(f"wrote {md}\nwrote {page}")
    return 0
