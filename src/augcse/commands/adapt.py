"""``augcse adapt TEXTS``: adapt a sentence model to unlabelled texts and keep a candidate chosen without labels.

Every input is checked first (one line, exit 2), before any model loads or anything is written
(:mod:`augcse.training.adapt_inputs`); then :func:`augcse.training.run.run` trains the base recipe ``adapt``
(with the ``--method`` override set and the user's ``key=value`` overrides) to the largest budget on the run
folder's copy of the texts (``texts/``, written once the run folder is claimed),
:class:`augcse.training.snapshots.Snapshots` keeping the weights at each budget; :func:`augcse.training.adapt.select`
scores every (budget, α) candidate on held-out texts and writes ``final/`` and ``adapt.json`` (with every input as
given and as used); :func:`augcse.report.adapt.write_report` writes the report. The verdict line is printed last.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from augcse.commands.main import begin_work
from augcse.commands.train import IntermixedParser


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from augcse.training.adapt import METHODS, READERS
    from augcse.training.adapt_inputs import DEFAULTS

    parser = subparsers.add_parser("adapt", help="adapt a model to your unlabelled texts; keep a candidate chosen "
                                                 "without labels", description=__doc__.splitlines()[0])
    parser.__class__ = IntermixedParser
    parser.add_argument("texts", help=f"your texts: {', '.join(READERS)} (one text per line in .txt)")
    parser.add_argument("overrides", nargs="*", help="recipe overrides key=value, e.g. name=tickets seed=1")
    parser.add_argument("--column", help="the text column (CSV/TSV/Parquet) or key (JSON-lines); default "
                                         f"{DEFAULTS['column']}")
    parser.add_argument("--sample", help="labelled CSV (text,label): scored for every candidate and reported, "
                                         "never used to choose unless --choose-by-sample")
    parser.add_argument("--sample-task", help="a registered labelled task (e.g. SNIPS) scored like --sample, "
                                              "for the built-in data sets")
    parser.add_argument("--sample-fast", action="store_true", help="score the sample in the task's fast mode "
                                                                   "(fewer few-shot splits): for large sets on a CPU")
    parser.add_argument("--choose-by-sample", action="store_true", help="choose by the sample's score instead")
    parser.add_argument("--method", help=f"one of {', '.join(METHODS)} (default {DEFAULTS['method']})")
    parser.add_argument("--budgets", help="training steps at which candidates are kept (default "
                                          f"{DEFAULTS['budgets']}: the design study's)")
    parser.add_argument("--alphas", help="interpolation weights toward the adapted model, each above 0 and at most 1 "
                                         "(the starting model is always a candidate; default "
                                         f"{DEFAULTS['alphas']}: the design study's)")
    parser.add_argument("--held-out", help=f"texts kept out of training for the criteria (default "
                                           f"{DEFAULTS['held_out']})")
    parser.add_argument("--clusters", help=f"K of the K-means stability criterion (default {DEFAULTS['clusters']})")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA)")
    parser.add_argument("--resume", action="store_true", help="continue an unfinished run (or redo the choice of "
                                                              "a finished one) on the same texts")
    parser.add_argument("--overwrite", action="store_true", help="empty the run folder first")
    parser.set_defaults(func=_run_cli)


@dataclass(frozen=True)
class Checked:
    """Everything adapt runs with, each value checked: the recipe, the texts and the flags as used."""

    recipe: Any
    texts: Any  # augcse.training.adapt_inputs.Texts
    budgets: tuple[int, ...]
    alphas: tuple[float, ...]
    clusters: int
    task: str | None  # the labelled sample's task, when one is scored
    record: dict[str, Any]  # every input as given and as used, for adapt.json


def _flags(args: argparse.Namespace) -> dict[str, Any]:
    """The flags that need no file, parsed and checked, and their combinations."""
    from augcse.training.adapt import METHODS
    from augcse.training.adapt_inputs import (DEFAULTS, MIN_HELD_OUT, check_method, check_overrides, parse_alphas,
                                              parse_budgets, parse_count)

    def value(key: str) -> str:  # as given, or the default when the flag was not passed (an empty value is given)
        given = getattr(args, key)
        return DEFAULTS[key] if given is None else given

    flags = {"method": check_method(value("method"), list(METHODS)),
             "budgets": parse_budgets(value("budgets")),
             "alphas": parse_alphas(value("alphas")),
             "held_out": parse_count(value("held_out"), "--held-out", MIN_HELD_OUT),
             "clusters": parse_count(value("clusters"), "--clusters", 2)}
    for flag, on in (("--sample-fast", args.sample_fast), ("--choose-by-sample", args.choose_by_sample)):
        if on and not (args.sample or args.sample_task):
            raise ValueError(f"{flag} needs --sample FILE or --sample-task NAME")
    if args.sample and args.sample_task:
        raise ValueError("give either --sample FILE or --sample-task NAME, not both")
    check_overrides(args.overrides)
    return flags


def _sample(args: argparse.Namespace) -> tuple[str | None, dict[str, Any]]:
    """The task scoring the labelled sample (None without one) and its record."""
    from augcse.training.adapt_inputs import check_sample, check_sample_task, file_record, given_and_used

    if args.sample:
        return check_sample(args.sample), {"sample": file_record(args.sample)}
    if args.sample_task:
        task = check_sample_task(args.sample_task)
        return task, {"sample_task": given_and_used(args.sample_task, task)}
    return None, {}


def _texts(args: argparse.Namespace, flags: dict[str, Any], probe: Any) -> tuple[Any, int]:
    """The texts read, split and checked against the flags and the recipe's batch; how many were read."""
    from augcse.core.sanity import check_distinct
    from augcse.training.adapt import read_texts, split_texts
    from augcse.training.adapt_inputs import DEFAULTS, Texts, check_sizes, file_record

    column = DEFAULTS["column"] if args.column is None else args.column
    texts = read_texts(args.texts, column, minimum=1)
    batch = int(probe.training.get("per_device_train_batch_size", 32))
    check_sizes(args.texts, len(texts), flags["held_out"], flags["clusters"], batch)
    train, held = split_texts(texts, flags["held_out"], probe.seed)
    check_distinct(args.texts, train, batch)
    used_column = None if Path(args.texts).suffix.lower() == ".txt" else column
    source = {**file_record(args.texts), "column": used_column, "held_out": flags["held_out"], "seed": probe.seed}
    return Texts(source, train, held), len(texts)


def check(args: argparse.Namespace) -> Checked:
    """Every flag, override, file and size checked, nothing written and nothing loaded; one line when wrong."""
    from augcse.training.adapt import METHODS
    from augcse.training.adapt_inputs import TEXTS, TRAIN_TEXTS, inputs_record, source_mismatch
    from augcse.training.recipes.config import load_recipe

    flags = _flags(args)
    task, sample_record = _sample(args)
    base = [f"name=adapt-{Path(args.texts).stem}", *METHODS[flags["method"]]]
    probe = load_recipe(None, "adapt", [*base, *args.overrides])
    texts, read = _texts(args, flags, probe)
    if args.resume and (why := source_mismatch(probe.run_dir, texts.source)):
        raise ValueError(why)
    copy = (probe.run_dir / TEXTS / TRAIN_TEXTS).resolve()
    recipe = load_recipe(None, "adapt", [*base, f"data.corpus={copy}", f"training.max_steps={max(flags['budgets'])}",
                                         *args.overrides], check_output=True)
    given = {flag: getattr(args, flag) for flag in ("column", *flags)}
    record = inputs_record(texts, read, given, {"column": texts.source["column"], **flags}, sample_record)
    return Checked(recipe, texts, flags["budgets"], flags["alphas"], flags["clusters"], task, record)


def _as_given(line: str, copy: Path, texts: str) -> str:
    """``line`` with the run folder's copy of the texts (named either way) called by the user's file name."""
    named = "|".join(re.escape(str(path)) for path in (copy.resolve(), copy))
    return re.sub(named, lambda _: f"{texts} (as copied to {copy})", line)


def _as_adapt(line: str, run_dir: Path) -> str:
    """A fault's line continues the run with ``augcse train`` on its stored recipe, which would end without the
    choice among the candidates: an adapt run continues with the user's own ``augcse adapt`` command instead."""
    from augcse.training.recovery import continue_command
    from augcse.training.rundir import RECIPE

    command = continue_command(sys.argv, run_dir).removesuffix(" --resume")
    return line.replace(f"augcse train {run_dir / RECIPE}", command) if command.startswith("augcse adapt") else line


def _run_cli(args: argparse.Namespace) -> int:
    from augcse.assets.resolve import data_dir as resolve_data_dir
    from augcse.core.folder_lock import folder_lock
    from augcse.report.adapt import write_report
    from augcse.training.adapt import select
    from augcse.training.adapt_inputs import TEXTS, TRAIN_TEXTS, prepare_texts
    from augcse.training.rundir import FINISHED
    from augcse.training.run import RunError, run
    from augcse.training.snapshots import Snapshots

    checked = check(args)
    recipe = checked.recipe
    begin_work()
    if not ((recipe.run_dir / FINISHED).is_file() and args.resume):
        try:
            result = run(recipe, args.data_dir, resume=args.resume, overwrite=args.overwrite,
                         callbacks=[Snapshots(checked.budgets, recipe.run_dir)],
                         prepare=lambda checkpoint: prepare_texts(recipe.run_dir, checked.texts, checkpoint))
        except RunError as exc:
            print(f"augcse adapt: error: {_as_adapt(str(exc), recipe.run_dir)}", file=sys.stderr)
            return 1
        except ValueError as exc:  # the corpus checks read the copy: their line names the user's file instead
            raise ValueError(_as_given(str(exc), recipe.run_dir / TEXTS / TRAIN_TEXTS, args.texts)) from None
        if result.get("stopped"):
            return 130
        print("training done; choosing among the candidates without labels (final/ becomes the one kept)", flush=True)
    with folder_lock(recipe.run_dir, "name="):
        record = select(recipe.run_dir, checked.texts.held, checked.budgets, checked.alphas, checked.task,
                        resolve_data_dir(args.data_dir), args.choose_by_sample, checked.clusters,
                        recipe.eval.batch_size, args.sample_fast, checked.record)
        md, _ = write_report(record, recipe.run_dir)
    print(f"\n{record['verdict']}\nreport: {md}; model: {recipe.run_dir / 'final'}", flush=True)
    return 0
