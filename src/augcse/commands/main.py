"""``augcse`` command line: each sub-command lives with the code it drives.

:data:`COMMANDS` maps a sub-command to the module that implements it and a one-line summary. Only the
module of the sub-command named on the command line is imported, so ``augcse --version`` and
``augcse --help`` answer without loading torch, spaCy or transformers, and ``augcse SUBCOMMAND --help``
loads only that sub-command's module. A module exposes ``add_commands(subparsers)``, which adds its
sub-parsers (importing nothing heavy at module level) and sets ``func(args) -> int`` on each.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from typing import NamedTuple

from augcse import __version__
from augcse.core.names import suggest


DESCRIPTION = "Unsupervised contrastive sentence embeddings (SimCSE, AugCSE, SDA, VaSCL, CARDS) on sentence-transformers."


class Command(NamedTuple):
    module: str
    summary: str


COMMANDS: dict[str, Command] = {
    "train": Command("augcse.commands.train", "train from a recipe (YAML file or --recipe NAME)"),
    "eval": Command("augcse.commands.eval", "evaluate a model (STS, transfer, clustering, intent…)"),
    "encode": Command("augcse.commands.encode", "embed sentences (one per line) with a model folder or name"),
    "augment": Command("augcse.commands.augment", "augment a corpus once and cache it (or --list / --preview)"),
    "report": Command("augcse.commands.report", "write report.md and report.html telling one training run"),
    "compare": Command("augcse.commands.report", "compare runs: per-task mean ± sd over seeds, plots, significance"),
    "assets": Command("augcse.commands.assets", "list every model, pipeline and data file and where it resolves from"),
    "reproduce": Command("augcse.commands.reproduce", "reproduce a paper's table: runs × seeds, evaluation, ours beside published"),
    "study": Command("augcse.commands.study", "run a grid file of runs × seeds, resumable; mean ± sd, Δ vs start, curves"),
    "download": Command("augcse.commands.download", "download evaluation data and wiki1m from their official sources"),
}


def requested_command(argv: Sequence[str]) -> str | None:
    """The first argument that is not an option, when it names a sub-command."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; the sub-parsers of ``command``'s module are real, the others are summaries only."""
    parser = argparse.ArgumentParser(prog="augcse", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"augcse {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                       help="one of these (augcse COMMAND --help shows its options):")
    module = COMMANDS[command].module if command is not None else None
    for name, entry in COMMANDS.items():
        if entry.module != module:
            subparsers.add_parser(name, help=entry.summary, description=entry.summary)
    if module is not None:
        importlib.import_module(module).add_commands(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = requested_command(argv)
    parser = build_parser(command)
    if command is None:
        _refuse_unknown_command(parser, argv)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from augcse.assets.resolve import AssetError

    try:
        return int(args.func(args) or 0)
    except (AssetError, ValueError, FileNotFoundError) as exc:
        print(f"augcse {args.command}: error: {exc}", file=sys.stderr)
        return 2


def _refuse_unknown_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """An unknown sub-command: one line with the closest names (argparse's own message lists them all)."""
    name = next((arg for arg in argv if not arg.startswith("-")), None)
    if name is not None:
        parser.error(f"unknown command {name!r}{suggest(name, COMMANDS)}; commands: {', '.join(COMMANDS)}")


if __name__ == "__main__":
    sys.exit(main())
