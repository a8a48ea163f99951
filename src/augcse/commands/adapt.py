"""``augcse adapt TEXTS``: adapt a sentence model to unlabelled texts and keep a candidate chosen without labels.

Every input is checked first (one line, exit 2); then :func:`augcse.training.run.run` trains the base recipe
``adapt`` (with the ``--method`` override set and the user's ``key=value`` overrides) to the largest budget,
:class:`augcse.training.snapshots.Snapshots` keeping the weights at each budget; :func:`augcse.training.adapt.select`
scores every (budget, α) candidate on held-out texts and writes ``final/`` and ``adapt.json``;
:func:`augcse.report.adapt.write_report` writes the report. The verdict line is printed last.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from augcse.commands.main import begin_work
from augcse.commands.train import IntermixedParser


def _numbers(kind: type, what: str):
    def parse(text: str):
        try:
            return [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what}: {text!r} is not a comma-separated list of numbers") from None
    return parse


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from augcse.training.adapt import METHODS, READERS

    parser = subparsers.add_parser("adapt", help="adapt a model to your unlabelled texts; keep a candidate chosen "
                                                 "without labels", description=__doc__.splitlines()[0])
    parser.__class__ = IntermixedParser
    parser.add_argument("texts", help=f"your texts: {', '.join(READERS)} (one text per line in .txt)")
    parser.add_argument("overrides", nargs="*", help="recipe overrides key=value, e.g. name=tickets seed=1")
    parser.add_argument("--column", default="text", help="the text column (CSV/TSV/Parquet) or key (JSON-lines)")
    parser.add_argument("--sample", help="labelled CSV (text,label): scored for every candidate and reported, "
                                         "never used to choose unless --choose-by-sample")
    parser.add_argument("--sample-task", help="a registered labelled task (e.g. SNIPS) scored like --sample, "
                                              "for the built-in data sets")
    parser.add_argument("--sample-fast", action="store_true", help="score the sample in the task's fast mode "
                                                                   "(fewer few-shot splits): for large sets on a CPU")
    parser.add_argument("--choose-by-sample", action="store_true", help="choose by the sample's score instead")
    parser.add_argument("--method", default="simcse", help=f"one of {', '.join(METHODS)} (default simcse)")
    parser.add_argument("--budgets", type=_numbers(int, "--budgets"), default=[16, 64, 128],
                        help="training steps at which candidates are kept (default 16,64,128: the design study's)")
    parser.add_argument("--alphas", type=_numbers(float, "--alphas"), default=[0.25, 0.5, 1],
                        help="interpolation weights toward the adapted model (the starting model is always a "
                             "candidate; default 0.25,0.5,1: the design study's)")
    parser.add_argument("--held-out", type=int, default=256, help="texts kept out of training for the criteria")
    parser.add_argument("--clusters", type=int, default=10, help="K of the K-means stability criterion")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA)")
    parser.add_argument("--resume", action="store_true", help="continue an unfinished run (or redo the choice of "
                                                              "a finished one)")
    parser.add_argument("--overwrite", action="store_true", help="empty the run folder first")
    parser.set_defaults(func=_run_cli)


def _check_sample(path: str) -> None:
    sample = Path(path)
    if not sample.is_file():
        raise ValueError(f"--sample {path}: no such file")
    try:
        with open(sample, encoding="utf-8", newline="") as f:
            columns = csv.DictReader(f).fieldnames or []
    except UnicodeDecodeError:
        from augcse.core.textfile import why_not_utf8

        raise ValueError(f"--sample {path}: {why_not_utf8(path)}") from None
    if not {"text", "label"} <= set(columns):
        raise ValueError(f"--sample {path}: needs the columns text,label (has: {', '.join(columns) or 'none'})")


def _run_cli(args: argparse.Namespace) -> int:
    from augcse.training.adapt import METHODS, read_texts
    from augcse.training.budgets import check_budgets
    from augcse.training.recipes.config import load_recipe, parse_override

    if args.method not in METHODS:
        raise ValueError(f"--method {args.method}: unknown; one of {', '.join(METHODS)}")
    budgets = check_budgets(args.budgets)
    if not args.alphas or any(not 0 <= a <= 1 for a in args.alphas):
        raise ValueError(f"--alphas {args.alphas}: each must be between 0 and 1")
    if args.held_out < 16 or args.clusters < 2:
        raise ValueError("--held-out must be at least 16 and --clusters at least 2")
    if args.sample_fast and not (args.sample or args.sample_task):
        raise ValueError("--sample-fast needs --sample FILE or --sample-task NAME")
    if args.choose_by_sample and not (args.sample or args.sample_task):
        raise ValueError("--choose-by-sample needs --sample FILE or --sample-task NAME")
    if args.sample and args.sample_task:
        raise ValueError("give either --sample FILE or --sample-task NAME, not both")
    if args.sample_task:
        from augcse.evaluation.tasks import resolve_tasks

        try:
            resolve_tasks(args.sample_task)
        except (KeyError, ValueError) as exc:
            raise ValueError(f"--sample-task {args.sample_task}: {str(exc).strip(chr(34) + chr(39))}") from None
    if args.sample:
        _check_sample(args.sample)
    for text in args.overrides:
        parse_override(text)
    texts = read_texts(args.texts, args.column, minimum=args.held_out + 32)
    if args.clusters >= args.held_out:
        raise ValueError(f"--clusters {args.clusters}: must be fewer than the {args.held_out} held-out texts")
    probe = load_recipe(None, "adapt", [f"name=adapt-{Path(args.texts).stem}", *args.overrides])
    from augcse.training.adapt import write_split

    train_file, held = write_split(texts, Path(probe.output_dir) / ".adapt-texts", args.held_out, probe.seed)
    overrides = [f"name=adapt-{Path(args.texts).stem}", *METHODS[args.method], f"data.corpus={train_file.resolve()}",
                 f"training.max_steps={max(budgets)}", *args.overrides]
    recipe = load_recipe(None, "adapt", overrides, check_output=True)
    from augcse.report.adapt import write_report
    from augcse.training.adapt import select
    from augcse.training.snapshots import Snapshots
    from augcse.training.run import RunError, run
    from augcse.training.rundir import FINISHED
    from augcse.assets.resolve import data_dir as resolve_data_dir

    begin_work()
    finished = (recipe.run_dir / FINISHED).is_file() and args.resume
    if not finished:
        try:
            result = run(recipe, args.data_dir, resume=args.resume, overwrite=args.overwrite,
                         callbacks=[Snapshots(budgets, recipe.run_dir)])
        except RunError as exc:
            print(f"augcse adapt: error: {exc}", file=sys.stderr)
            return 1
        if result.get("stopped"):
            return 130
        print("training done; choosing among the candidates without labels (final/ becomes the one kept)", flush=True)
    task = f"clustering:{Path(args.sample).resolve()}" if args.sample else args.sample_task
    record = select(recipe.run_dir, held, budgets, args.alphas, task, resolve_data_dir(args.data_dir),
                    args.choose_by_sample, args.clusters, recipe.eval.batch_size, args.sample_fast)
    md, _ = write_report(record, recipe.run_dir)
    print(f"\n{record['verdict']}\nreport: {md}; model: {recipe.run_dir / 'final'}", flush=True)
    return 0
