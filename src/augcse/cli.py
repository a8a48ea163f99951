"""``augcse`` command line: each sub-command lives with the code it drives.

A module listed in :data:`COMMAND_MODULES` exposes ``add_commands(subparsers)``, which adds its
sub-parsers and sets ``func(args) -> int`` on each. No command logic lives here.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from augcse import __version__
from augcse.assets import AssetError

COMMAND_MODULES = (
    "augcse.train",
    "augcse.evaluation.cli",
    "augcse.encode",
    "augcse.augment.cli",
    "augcse.report.cli",
    "augcse.assets_cli",
    "augcse.reproduce",
    "augcse.download",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="augcse", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"augcse {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # an optional command module not present in this build
                continue
            raise
        module.add_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except (AssetError, ValueError, FileNotFoundError) as exc:
        print(f"augcse {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
