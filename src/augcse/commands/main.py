"""``augcse`` command line: each sub-command lives with the code it drives.

:data:`COMMANDS` maps a sub-command to the module that implements it and a one-line summary. Only the
module of the sub-command named on the command line is imported, so ``augcse --version`` and
``augcse --help`` answer without loading torch, spaCy or transformers, and ``augcse SUBCOMMAND --help``
loads only that sub-command's module. A module exposes ``add_commands(subparsers)``, which adds its
sub-parsers (importing nothing heavy at module level) and sets ``func(args) -> int`` on each.

:func:`main` is the one error boundary of every command (docs/FAULTS.md, "One error boundary"): a refusal
(``ValueError``, :class:`~augcse.assets.resolve.AssetError`) is one line and exit 2; an error of the world (a
file that cannot be read or written, a full or read-only disk, memory, undecodable text, a csv cell over the
limit) is one line naming the path or the setting to change, exit 2 when it came before the command's work
began and 1 during it; Ctrl-C is one line and exit 130. A command marks where its work begins with
:func:`begin_work`, once its arguments and inputs are checked and before it loads a model or writes. Anything
else is a programming error and keeps its traceback; ``augcse --debug`` (or ``AUGCSE_DEBUG=1``) prints the
traceback of every error above its line.
"""

from __future__ import annotations

import argparse
import csv
import errno
import importlib
import io
import logging
import os
import shlex
import sys
import traceback
from collections.abc import Sequence
from pathlib import PurePath
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
    "adapt": Command("augcse.commands.adapt", "adapt a model to your unlabelled texts; keep a candidate chosen without labels"),
    "cluster": Command("augcse.commands.cluster", "adapt a model to your texts so they group by topic (SCCL), and cluster them"),
    "whiten": Command("augcse.commands.whiten", "fit BERT-whitening on a corpus and save the whitened model (no training)"),
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
    parser.add_argument("--debug", action="store_true",
                        help=f"print the full traceback above an error's one line (or set {DEBUG_ENV}=1)")
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
    _state.working = False
    try:
        return int(args.func(args) or 0)
    except (ValueError, OSError, MemoryError, RuntimeError, csv.Error, KeyboardInterrupt) as exc:
        fault = describe(exc, args, _state.working, argv)
        if fault is None:  # a programming error (a RuntimeError of no kind above): its traceback, as before
            raise
        line, code = fault
        if args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            traceback.print_exception(exc, file=sys.stderr)
        print(line, file=sys.stderr, flush=True)
        return code


DEBUG_ENV = "AUGCSE_DEBUG"
INTERRUPTED = 130  # what a shell reports for a process stopped by SIGINT


class _State:
    working = False  # set by begin_work(): a fault from then on is one of the work (exit 1), not a refusal (2)


_state = _State()


def begin_work() -> None:
    """Mark that the running command has checked its inputs and starts its work (loading, training, writing):
    an error of the world from now on exits 1 (a fault during work) rather than 2 (an input refused)."""
    _state.working = True


# what to lower when memory runs out, per command (filled with the command's arguments)
MEMORY = {
    "train": "lower training.per_device_train_batch_size, or cache gradients with a smaller "
             "loss.params.mini_batch_size (e.g. loss.params.mini_batch_size=16)",
    "study": "lower training.per_device_train_batch_size in the grid's overrides, or set loss.params.mini_batch_size "
             "(gradient caching)",
    "reproduce": "pass training.per_device_train_batch_size=N or loss.params.mini_batch_size=N (gradient caching) "
                 "as overrides; --dry-run --gpu-memory GIB names the mini-batch that fits",
    "eval": "lower --batch-size (now {batch_size})",
    "encode": "lower --batch-size (now {batch_size})",
    "augment": "lower --n-process (now {n_process}) or --shard-size (now {shard_size})",
}
# the option naming where a command writes, for a line about a full or read-only disk
OUTPUT = {"train": "output_dir=", "eval": "--save-to", "encode": "--out", "augment": "--out", "report": "run folder",
          "compare": "--out", "study": "--output", "reproduce": "--output", "download": "--data-dir"}
# what the next command does after Ctrl-C
RERUN = {
    "train": "run the same command again (a run stopped before its first checkpoint starts over; with "
             "--resume or --auto-resume one with a checkpoint continues from it)",
    "augment": "run the same command again: the finished shards are kept and the cache is completed",
    "adapt": "run the same command again with --resume: it continues the training from its last checkpoint, or "
             "once training is done chooses among the candidates again",
    "study": "run the same command again: finished runs are kept and the interrupted one continues",
    "reproduce": "run the same command again: finished runs are kept and the interrupted one continues",
    "eval": "nothing was written (--save-to replaces eval.json at the end): run the same command again",
    "encode": "nothing was written (--out is renamed into place at the end): run the same command again",
}


def rerun_train(argv: Sequence[str]) -> str:
    """The command that continues an interrupted ``train`` wherever the interrupt landed: before the first
    checkpoint, during training or in the final evaluation (where the same command would be refused)."""
    kept = [a for a in argv if a not in ("--resume", "--auto-resume", "--overwrite")]
    return ("run the same command again with --auto-resume (it continues from the last complete checkpoint, or "
            f"starts over when there is none): augcse {shlex.join([*kept, '--auto-resume'])}")


def describe(exc: BaseException, args: argparse.Namespace, working: bool,
             argv: Sequence[str] = ()) -> tuple[str, int] | None:
    """The one line and exit code for ``exc`` raised by ``augcse args.command``; None for a programming error.

    ``working``: whether the command had begun its work (:func:`begin_work`), which makes an error of the world
    a fault (exit 1) rather than a refusal of the input (exit 2).
    """
    prefix = f"augcse {args.command}"
    if isinstance(exc, KeyboardInterrupt):
        if args.command == "train" and argv:
            return f"{prefix}: interrupted; {rerun_train(argv)}", INTERRUPTED
        return f"{prefix}: interrupted; {RERUN.get(args.command, 'run the same command again')}", \
            INTERRUPTED
    from augcse.assets.resolve import AssetError

    if isinstance(exc, AssetError) or (isinstance(exc, ValueError) and not isinstance(exc, UnicodeDecodeError)):
        return f"{prefix}: error: {exc}", 2  # a refusal, in its own words, as always
    reason = _world_error(exc, args)
    if reason is not None:
        return f"{prefix}: error: {reason}", 1 if working else 2
    if isinstance(exc, FileNotFoundError):  # raised by augcse with its own message ("--corpus x: no such file")
        return f"{prefix}: error: {exc}", 2
    return None


def _world_error(exc: BaseException, args: argparse.Namespace) -> str | None:
    """The line's text for an error of the world (a file, a disk, memory, text); None for anything else."""
    from augcse.core.outputs import write_failure

    if _out_of_memory(exc):
        hint = MEMORY.get(args.command, "free memory or use a machine with more")
        return f"out of memory ({_first_line(exc)}); {hint.format(**vars(args))}"
    if isinstance(exc, UnicodeDecodeError):
        byte = exc.object[exc.start:exc.start + 1]
        where = _path_in_traceback(exc) or "a text input"
        fix = "pass --encoding (e.g. --encoding latin-1) or convert it" if hasattr(args, "encoding") else \
            "save it as UTF-8"
        return f"{where}: byte {byte!r} at offset {exc.start} is not {exc.encoding} text; {fix}"
    if isinstance(exc, csv.Error):
        where = _path_in_traceback(exc) or "a csv input"
        line = _csv_line(exc)
        return f"{where}{f' line {line}' if line else ''}: {exc}; fix the row (a cell that long is not text)"
    if not isinstance(exc, (OSError, RuntimeError)):
        return None
    if isinstance(exc, FileNotFoundError):
        return (f"{exc.filename}: no such file or folder (moved or removed while augcse ran?); check the path and "
                "run again") if exc.filename else None
    path = (getattr(exc, "filename", None) if isinstance(exc, OSError) else None) or _path_in_traceback(exc)
    where = f"{path}: " if path else ""
    output = OUTPUT.get(args.command, "output")
    number, failure = getattr(exc, "errno", None), write_failure(exc)
    if number == errno.ENOSPC or (number is None and failure and ("full" in failure or "space" in failure)):
        return f"{where}could not write ({failure}); free space on that disk or choose another {output}"
    if number == errno.EROFS:
        return f"{where}cannot write there (read-only file system); choose a writable {output}"
    if isinstance(exc, PermissionError):
        return (f"{where}permission denied; make it readable (and its folder writable) for the user running "
                "augcse, or choose another path")
    if isinstance(exc, OSError) and (path or exc.strerror):
        return f"{where}{exc.strerror or exc}"
    if failure:
        return f"{where}could not write ({failure}); choose another {output}"
    return None


def _out_of_memory(exc: BaseException) -> bool:
    """MemoryError, torch's OutOfMemoryError (CUDA), or the CPU allocator's RuntimeError."""
    if isinstance(exc, MemoryError) or any(c.__name__ == "OutOfMemoryError" for c in type(exc).__mro__):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and ("can't allocate memory" in text or "out of memory" in text)


def _first_line(exc: BaseException, width: int = 120) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if len(text) <= width else text[:width - 1] + "…"


def _frames(exc: BaseException) -> list:
    """The traceback's frames, innermost first."""
    frames, tb = [], exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    return frames[::-1]


def _path_in_traceback(exc: BaseException) -> str | None:
    """The file being read or written where ``exc`` was raised: an open file's name, else a path, held by the
    innermost frame that holds one (Python's decode and csv errors name none)."""
    for frame in _frames(exc):
        values = list(frame.f_locals.values())
        for value in values:
            if isinstance(value, io.IOBase) and isinstance(getattr(value, "name", None), str):
                return value.name
        for value in values:
            if isinstance(value, PurePath):
                return str(value)
    return None


def _csv_line(exc: BaseException) -> int | None:
    """The line a csv reader was on when ``exc`` was raised."""
    reader = type(csv.reader([]))
    for frame in _frames(exc):
        for value in frame.f_locals.values():
            if isinstance(value, reader):
                return value.line_num
    return None


def _refuse_unknown_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """An unknown sub-command: one line with the closest names (argparse's own message lists them all)."""
    name = next((arg for arg in argv if not arg.startswith("-")), None)
    if name is not None:
        parser.error(f"unknown command {name!r}{suggest(name, COMMANDS)}; commands: {', '.join(COMMANDS)}")


if __name__ == "__main__":
    sys.exit(main())
