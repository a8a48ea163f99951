"""``augcse report RUN_DIR`` and ``augcse compare RUN… [--baseline RUN]``."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser("report", help="write report.md and report.html for a run directory")
    report.add_argument("run_dir", help="a training run directory (recipe.yaml, log.jsonl, eval.json)")
    report.set_defaults(func=_report)

    compare = subparsers.add_parser("compare", help="runs side by side: per-task scores, mean ± std over seeds")
    compare.add_argument("runs", nargs="+", help="run directories")
    compare.add_argument("--baseline", default=None, help="run directory whose group the deltas are taken against")
    compare.add_argument("--stage", default="after", help="which eval.json stage to compare (default: after)")
    compare.add_argument("--out", default=None, help="folder for compare.md and compare.html (default: print Markdown)")
    compare.set_defaults(func=_compare)


def _report(args: argparse.Namespace) -> int:
    from augcse.report.run_report import write_report

    md, page = write_report(args.run_dir)
    print(f"wrote {md}\nwrote {page}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from augcse.report.compare import compare

    doc = compare(args.runs, args.baseline, args.stage)
    if args.out:
        md, page = doc.write(Path(args.out), "compare")
        print(f"wrote {md}\nwrote {page}")
    else:
        print(doc.to_markdown(Path.cwd()))
    return 0
