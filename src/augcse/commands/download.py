"""``augcse download``: the command line of :mod:`augcse.assets.download`.

What to fetch is named by group (``sts``, ``transfer``… ``all``) or by task and suite names, whose
records (:class:`augcse.evaluation.tasks.TaskRecord`) list the files and so the sources. The data and
cache folders are checked before any download: a file, or a folder that cannot be written, is one line.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from augcse.commands.main import begin_work
from augcse.assets.download import MIRROR_ENV, DownloadError, Group, Source, install, source_for, sources


def select_sources(names: list[str]) -> list[Source]:
    """The sources of groups (``sts``, ``transfer``… ``all``) and, for any other name, of the tasks and
    suites it names: the sources that install the files their records list (ValueError for a name
    that is neither, or a task whose files no source installs)."""
    groups = {g.value for g in Group}
    wanted = groups if "all" in names else groups & set(names)
    chosen = [s for s in sources() if s.group.value in wanted]
    tasks = [n for n in names if n not in groups and n != "all"]
    if tasks:
        from augcse.evaluation.tasks import get_task, resolve_tasks  # imports numpy: not for --help

        for name in resolve_tasks(tasks):
            for path in get_task(name).record.files:
                source = source_for(path)
                if source is None:
                    raise ValueError(f"{name}: no source downloads {path}; name a task or group "
                                     f"({', '.join(sorted(groups))}, all)")
                chosen += [source] if source not in chosen else []
    return chosen


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    groups = [g.value for g in Group] + ["all"]
    parser = subparsers.add_parser(
        "download", help="download evaluation data and wiki1m from their official sources into the data directory",
        description="Download from the official sources, verify recorded sha256, unpack into the data directory.")
    parser.add_argument("what", nargs="*", default=["all"], metavar="WHAT",
                        help=f"any of {', '.join(groups)} (default: all), or task and suite names (e.g. STS12, "
                             "MR): the sources of the files their records list")
    parser.add_argument("--data-dir", help="the data directory to fill (default: $AUGCSE_DATA)")
    parser.add_argument("--cache-dir",
                        help="where downloads are kept while in progress (default: <data dir>/.downloads)")
    parser.add_argument("--mirror", default=os.environ.get(MIRROR_ENV),
                        help=f"fetch MIRROR/host/path instead of each official URL (default: ${MIRROR_ENV})")
    parser.add_argument("--retries", type=int, default=2, help="downloads again after a checksum failure (default: 2)")
    parser.add_argument("--accept-changed", action="store_true",
                        help="install files that have no recorded sha256, or that differ from it where the source's "
                             "releases are known to differ (SentEval's STS-B and SICK); refused otherwise")
    parser.set_defaults(func=_download_cli)


def writable_folder(path: Path, option: str) -> Path:
    """``path``, created if missing and proven writable; ValueError naming it and the fix otherwise.

    Checked before any download, so a wrong folder costs no network time.
    """
    if path.exists() and not path.is_dir():
        raise ValueError(f"{option} {path} is a file, not a folder; give a folder to download into")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise ValueError(f"{option} {path} cannot be written ({exc.strerror or exc}); give a folder you can "
                         "write to") from None
    return path


def _download_cli(args: argparse.Namespace) -> int:
    target = args.data_dir or os.environ.get("AUGCSE_DATA")
    if not target:
        raise ValueError("name the data directory to fill: --data-dir DIR or $AUGCSE_DATA")
    if args.retries < 0:
        raise ValueError("--retries must be 0 or more")
    chosen = select_sources(args.what)
    data_dir = writable_folder(Path(target), "--data-dir" if args.data_dir else "$AUGCSE_DATA")
    cache_dir = writable_folder(Path(args.cache_dir) if args.cache_dir else data_dir / ".downloads", "--cache-dir")
    begin_work()
    try:
        for source in chosen:
            install(source, data_dir, cache_dir, args.mirror, args.retries, accept_changed=args.accept_changed)
    except DownloadError as exc:
        print(f"augcse download: error: {exc}", file=sys.stderr)
        return 1
    return 0
