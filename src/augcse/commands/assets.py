"""``augcse assets``: list every asset and where it resolves from (or why not)."""

from __future__ import annotations

import argparse


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "assets", help="list every model, pipeline and data file and where it resolves from",
        description="List every model, spaCy pipeline, WordNet and data file augcse uses, and where each "
                    "resolves from here (packaged copy, data directory, embedded default, download cache).")
    parser.add_argument("--data-dir", default=None, help="data directory (default: $AUGCSE_DATA)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from augcse.assets.resolve import asset_table, data_dir

    data_dir(args.data_dir)  # a named data directory that does not exist: one line, exit 2
    rows = asset_table(args.data_dir)
    width = max(len(name) for _, name, _ in rows)
    for kind, name, where in rows:
        print(f"{kind:<8} {name:<{width}}  {where}")
    return 0
