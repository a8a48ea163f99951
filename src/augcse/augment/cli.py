"""``augcse augment``: list, preview, or build a cached augmented corpus."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("augment", help="augment a corpus once and cache it (or --list / --preview)",
                              description=__doc__)
    p.add_argument("--corpus", type=Path, help="text file, one sentence per line")
    p.add_argument("--limit", type=int, default=None, help="use only the first N non-empty lines")
    p.add_argument("--augs", default="all-rule-based", help="comma list of augmentation and/or set names")
    p.add_argument("--param", action="append", default=[], metavar="NAME.KEY=VALUE",
                   help="augmentation parameter, e.g. SwitchCase.p=0.1 (repeatable; VALUE parsed as JSON)")
    p.add_argument("--out", type=Path, help="cache folder")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--n-process", type=int, default=1)
    p.add_argument("--shard-size", type=int, default=5000)
    p.add_argument("--overwrite", action="store_true", help="replace a cache built from other inputs")
    p.add_argument("--preview", metavar="SENTENCE", help="print what each augmentation does to SENTENCE")
    p.add_argument("--list", action="store_true", help="list augmentations, meaning labels, needs, and sets")
    p.set_defaults(func=run)


def parse_params(items: list[str]) -> dict[str, dict[str, Any]]:
    params: dict[str, dict[str, Any]] = {}
    for item in items:
        target, _, value = item.partition("=")
        name, _, key = target.partition(".")
        if not (name and key and _):
            raise ValueError(f"--param {item!r}: expected NAME.KEY=VALUE")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        params.setdefault(name, {})[key] = parsed
    return params


def read_corpus(path: Path, limit: int | None) -> list[str]:
    lines = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if line:
                lines.append(line)
                if limit is not None and len(lines) >= limit:
                    break
    return lines


def run(args: argparse.Namespace) -> int:
    from augcse import augment
    from augcse.augment.cache import format_stats, load_stats

    if args.list:
        print(f"{'name':34} {'meaning':18} needs")
        for name, cls in augment.REGISTRY.items():
            print(f"{name:34} {cls.meaning:18} {', '.join(cls.needs) or '-'}")
        print("\nsets:")
        for name, members in augment.SETS.items():
            print(f"  {name}: {', '.join(members)}")
        return 0
    names = augment.resolve_names(args.augs)
    params = parse_params(args.param)
    if args.preview is not None:
        return preview(args.preview, args.augs, params, args.seed)
    if args.corpus is None or args.out is None:
        raise ValueError("give --corpus and --out (or --list / --preview)")
    sentences = read_corpus(args.corpus, args.limit)
    try:
        augment.build_cache(sentences, names, args.out, seed=args.seed, shard_size=args.shard_size,
                            n_process=args.n_process, params=params, overwrite=args.overwrite)
    except augment.AugmentationError as exc:
        raise ValueError(f"{exc} (the offline sets, e.g. 8-2-aug or all-rule-based, need no model)") from exc
    print(format_stats(load_stats(args.out)))
    errors = {n: s["errors"] for n, s in load_stats(args.out).items() if s["errors"]}
    if errors:
        print(f"sentences kept unchanged because the augmentation raised: {errors} (see {args.out}/stats.json)")
    print(f"cache: {args.out} ({len(sentences)} sentences, {len(names)} augmentations)")
    return 0


def preview(sentence: str, augs: str, params: dict[str, dict[str, Any]], seed: int) -> int:
    """One line per augmentation; explicit --augs includes model-based ones, which may report an error."""
    from augcse import augment
    from augcse.augment.parse import parse

    names = augment.resolve_names(augs if augs != "all-rule-based" else list(augment.REGISTRY))
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
