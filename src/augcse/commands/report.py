"""``augcse report RUN_DIR`` and ``augcse compare RUN… [--baseline RUN]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from augcse.commands.main import begin_work
from augcse.core.outputs import claim_folder

STAGES = ("after", "before")
# what compare writes in --out: no link may stand in their place
COMPARE_WRITTEN = ("compare.md", "compare.html", "compare")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    report = subparsers.add_parser(
        "report", help="write report.md and report.html telling one training run",
        description="Write RUN_DIR/report.md and RUN_DIR/report.html: the data actually used, steps, kept "
                    "model and time (summary.json), scores before/after, training curves of every logged "
                    "value, figures and the recipe. A folder without recipe.yaml is refused.")
    report.add_argument("run_dir", help="a training run directory (the one holding recipe.yaml, not final/)")
    report.set_defaults(func=_report)

    compare = subparsers.add_parser(
        "compare", help="compare runs: per-task mean ± sd over seeds, plots, significance",
        description="Group runs whose recipes differ only by seed, show each task's mean ± sd per group, "
                    "the recipe keys that differ between groups and, against --baseline, the difference "
                    "with a t-test p-value over seeds (paired when the seeds match, else Welch). Runs "
                    "with the same recipe and seed are refused as repeats.")
    compare.add_argument("runs", nargs="+", help="run directories, or folders whose sub-folders are runs")
    compare.add_argument("--baseline", default=None, help="run directory whose group the differences are taken against")
    compare.add_argument("--stage", default="after", choices=STAGES, help="which eval.json stage to compare (default: after)")
    compare.add_argument("--out", default=None,
                         help="folder for compare.md, compare.html and the bar chart (default: print Markdown, no chart)")
    compare.set_defaults(func=_compare)


def _report(args: argparse.Namespace) -> int:
    if Path(args.run_dir).is_dir():  # the report goes into the run folder: proven writable, with no link in it,
        claim_folder(args.run_dir, "run folder")  # before matplotlib loads
    from augcse.report.run_report import write_report

    begin_work()
    md, page = write_report(args.run_dir)
    print(f"wrote {md}\nwrote {page}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    out = Path(args.out) if args.out else None
    if out is not None:  # a file there, or a folder that cannot be written, is refused before any run is read
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out}: is a file; --out names a folder for compare.md, compare.html and the "
                             f"chart (e.g. --out {out.parent / 'comparison'})")
        claim_folder(out, "--out")
    from augcse.report.compare import compare  # numpy and matplotlib: after the output is proven writable

    begin_work()
    doc = compare(args.runs, args.baseline, args.stage, figures=out / "compare" if out else None)
    if out:
        md, page = doc.write(out, "compare")
        print(f"wrote {md}\nwrote {page}")
    else:
        print(doc.to_markdown(Path.cwd()))
    return 0
