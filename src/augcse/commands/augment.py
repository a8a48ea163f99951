"""``augcse augment``: list, preview, or build a cached augmented corpus.

The module imports the augmentation registry, which loads no spaCy, torch or model (spaCy comes with
the first parse), so ``augcse augment --help`` answers at once; every argument and ``--param`` is
checked before the corpus is read or a model is loaded.
"""

from __future__ import annotations

import argparse
import errno
import json
import sys
from pathlib import Path
from typing import Any

from augcse.commands.main import begin_work
from augcse.core.folder_lock import folder_lock
from augcse.text import augment
from augcse.text.augment.cache import CacheConflict, format_stats, load_stats
from augcse.text.augment.parse import parse

DEFAULT_AUGS = "all-rule-based"
EXAMPLES = """examples:
  augcse augment --list
  augcse augment --preview "He travelled widely in Europe."
  augcse augment --corpus wiki.txt --augs 8-2-aug --out cache/wiki --n-process 2 --param RandomSwap.p=0.2
"""


def add_commands(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "augment", help="augment a corpus once and cache it (or --list / --preview)",
        description="Apply text augmentations to a corpus (one sentence per line) and store the result as a "
                    "sharded, resumable Arrow cache with per-augmentation statistics; or list the "
                    "augmentations, or preview them on one sentence.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, help="text file, one sentence per line (blank lines skipped)")
    p.add_argument("--encoding", default="utf-8", help="the corpus file's text encoding (default: %(default)s)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N non-empty lines")
    p.add_argument("--augs", default=DEFAULT_AUGS,
                   help="comma list of augmentation and/or set names, any case (default: %(default)s)")
    p.add_argument("--param", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="parameter of a selected augmentation, e.g. SwitchCase.p=0.1 (repeatable; VALUE is "
                        "read as JSON, else as a string)")
    p.add_argument("--out", type=Path, help="cache folder (a build with the same inputs resumes there)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed; each sentence's output depends only on (seed, augmentation, sentence)")
    p.add_argument("--n-process", type=int, default=1, help="worker processes building shards (default: 1)")
    p.add_argument("--shard-size", type=int, default=5000,
                   help="sentences per shard, the unit of resuming (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace a cache built from other inputs in --out")
    p.add_argument("--allow-errors", action="store_true",
                   help="keep sentences on which an augmentation raised (a missing resource such as WordNet "
                        "included) unchanged, instead of stopping; they are counted in stats.json")
    p.add_argument("--preview", metavar="SENTENCE", help="print what each augmentation does to SENTENCE")
    p.add_argument("--list", action="store_true", help="list augmentations, meaning labels, needs, and sets")
    p.set_defaults(func=run)


def parse_params(items: list[str]) -> dict[str, dict[str, Any]]:
    """``["RandomSwap.p=0.2"]`` -> ``{"RandomSwap": {"p": 0.2}}`` (values read as JSON, else kept as text)."""
    params: dict[str, dict[str, Any]] = {}
    for item in items:
        target, eq, value = item.partition("=")
        name, dot, key = target.partition(".")
        if not (name and key and dot and eq):
            raise ValueError(f"--param {item!r}: expected NAME.KEY=VALUE, e.g. RandomSwap.p=0.2")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        params.setdefault(name, {})[key] = parsed
    return params


def read_corpus(path: Path, limit: int | None, encoding: str = "utf-8") -> list[str]:
    """The non-empty lines of ``path`` (stripped), at most ``limit``; refuses a file with none."""
    from augcse.core.textfile import read_lines

    if not path.is_file() and not path.is_dir():
        raise FileNotFoundError(f"--corpus {path}: no such file")
    lines = []
    for line in read_lines(path, encoding):
        line = line.strip()
        if line:
            lines.append(line)
            if limit is not None and len(lines) >= limit:
                break
    if not lines:
        raise ValueError(f"--corpus {path}: no non-empty lines to augment")
    return lines


def check_args(args: argparse.Namespace) -> None:
    """Refuse impossible option values before anything is loaded."""
    for option, value in (("--limit", args.limit), ("--n-process", args.n_process),
                          ("--shard-size", args.shard_size)):
        if value is not None and value < 1:
            raise ValueError(f"{option} {value}: must be a positive integer")
    if args.list or args.preview is not None:
        return
    if args.corpus is None or args.out is None:
        raise ValueError("give --corpus and --out (or --list / --preview)")
    from augcse.core.outputs import claim_folder
    from augcse.core.textfile import check_encoding

    check_encoding(args.encoding)
    if args.corpus.is_dir():
        raise ValueError(f"--corpus {args.corpus}: is a folder; give a text file, one sentence per line")
    claim_folder(args.out, "--out")


def run(args: argparse.Namespace) -> int:
    check_args(args)
    params = parse_params(args.param)
    if args.list:
        print(f"{'name':34} {'meaning':18} needs")
        for name, cls in augment.REGISTRY.items():
            print(f"{name:34} {cls.meaning:18} {', '.join(cls.needs) or '-'}")
        print("\nsets:")
        for name, members in augment.SETS.items():
            print(f"  {name}: {', '.join(members)}")
        return 0
    if args.preview is not None:
        names = augment.resolve_names(list(augment.REGISTRY) if args.augs == DEFAULT_AUGS else args.augs)
        return preview(args.preview, names, augment.validate_params(params, names), args.seed)
    names = augment.resolve_names(args.augs)
    params = augment.validate_params(params, names)
    sentences = read_corpus(args.corpus, args.limit, args.encoding)
    begin_work()
    try:
        with folder_lock(args.out, "--out"):  # a second augment into the same folder is refused, as train's is
            augment.build_cache(sentences, names, args.out, seed=args.seed, shard_size=args.shard_size,
                                n_process=args.n_process, params=params, overwrite=args.overwrite,
                                allow_errors=args.allow_errors)
    except CacheConflict as exc:
        raise ValueError(f"--out {args.out} holds a cache built from other inputs (key {exc.key[:12]}); "
                         "choose another --out or pass --overwrite to replace it") from exc
    except augment.AugmentationError as exc:
        raise ValueError(f"{exc} (the offline sets, e.g. 8-2-aug or all-rule-based, need no model)") from exc
    except OSError as exc:
        from augcse.core.outputs import free_bytes, mib, write_failure

        if write_failure(exc) is None or isinstance(exc, PermissionError) or exc.errno == errno.EROFS:
            raise  # not a matter of space: the boundary's line (augcse.commands.main) names the path
        print(f"augcse augment: error: could not write the cache in {args.out} ({write_failure(exc)}); "
              f"{mib(free_bytes(args.out))} free; free space and rerun the same command: finished shards are kept",
              file=sys.stderr)
        return 1
    print(format_stats(load_stats(args.out)))
    errors = {n: s["errors"] for n, s in load_stats(args.out).items() if s["errors"]}
    if errors:
        print(f"sentences kept unchanged because the augmentation raised: {errors} (see {args.out}/stats.json)")
    print(f"cache: {args.out} ({len(sentences)} sentences, {len(names)} augmentations)")
    return 0


def preview(sentence: str, names: list[str], params: dict[str, dict[str, Any]], seed: int) -> int:
    """One line per augmentation; explicit --augs includes model-based ones, which may report an error."""
    doc = parse([sentence])
    print(f"{'original':34} {sentence}")
    for name in names:
        aug = augment.get(name, **params.get(name, {}))
        try:
            out = aug.apply([sentence], seed, doc)[0]
        except Exception as exc:  # noqa: BLE001 - preview shows every augmentation, failing or not
            out = f"[unavailable: {exc}]"[:300]
        mark = "!" if out.startswith("[unavailable") else " " if out == sentence else "*"
        print(f"{name:33}{mark} {out}")
    return 0
