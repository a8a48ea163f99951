"""``augcse train``: the command line of :mod:`augcse.training.run` (argparse only; nothing heavy is imported here)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from augcse.commands.main import begin_work
from augcse.training.recipes.config import builtin_recipes, load_recipe, parse_override


class IntermixedParser(argparse.ArgumentParser):
    """Options and ``key=value`` overrides in any order (``augcse train r.yaml --overwrite name=x``)."""

    _inside = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if self._inside:  # parse_known_intermixed_args calls back into this method
            return super().parse_known_args(args, namespace)
        self._inside = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train from a recipe (YAML file or --recipe NAME)",
                                   description="Train from a recipe; key=value arguments override recipe keys "
                                               "(before or after the options).")
    parser.__class__ = IntermixedParser  # the sub-parser class is the parent's; only train intermixes
    parser.add_argument("recipe_file", nargs="?", help="recipe YAML file")
    parser.add_argument("--recipe", help=f"built-in recipe name ({', '.join(builtin_recipes())})")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. training.learning_rate=1e-5 name=myrun")
    parser.add_argument("--data-dir", help="data directory (default: $AUGCSE_DATA, else the embedded defaults)")
    parser.add_argument("--resume", action="store_true",
                        help="continue an unfinished run from its newest complete checkpoint (same recipe only)")
    parser.add_argument("--auto-resume", action="store_true",
                        help="--resume when the run has a complete checkpoint, start when it has none: one command "
                             "line for the first start and every restart (torchrun --max-restarts, SLURM requeue)")
    parser.add_argument("--overwrite", action="store_true",
                        help="empty the run folder first: replaces a finished or unfinished run of the same name")
    parser.set_defaults(func=_run_cli)


def _is_override(text: str, recipe_named: bool) -> bool:
    """Whether the first positional argument is an override rather than a recipe file.

    ``key=value`` is one; so is anything beside ``--recipe NAME``, and a dotted word that is no file and no
    YAML name (``training.learning_rate`` without its ``=value``), so that it is reported as a bad override.
    """
    if "=" in text or recipe_named:
        return True
    return not Path(text).exists() and not text.endswith((".yaml", ".yml")) and "." in text


def _check_recipe_arguments(source: str | None, name: str | None) -> None:
    """The two ways to name a recipe, refused in one line when they clash or when a file is a built-in's name."""
    if source is None or "=" in source:
        return
    if name is not None and (Path(source).exists() or source.endswith((".yaml", ".yml"))):
        raise ValueError(f"give either a recipe file ({source}) or --recipe {name}, not both")
    if name is None and not Path(source).exists() and source in builtin_recipes():
        raise ValueError(f"recipe file {source} does not exist; for the built-in recipe, write --recipe {source}")


def _run_cli(args: argparse.Namespace) -> int:
    if args.auto_resume and (args.resume or args.overwrite):
        raise ValueError(f"--auto-resume resumes or starts by itself; drop {'--resume' if args.resume else '--overwrite'}")
    _check_recipe_arguments(args.recipe_file, args.recipe)
    overrides = list(args.overrides)
    source = args.recipe_file
    if source is not None and _is_override(source, args.recipe is not None):
        overrides.insert(0, source)
        source = None
    if source is None and args.recipe is None and overrides:
        for text in overrides:  # a bad override is named before the missing recipe
            parse_override(text)
    recipe = load_recipe(source, args.recipe, overrides, check_output=True)  # the output before torch loads
    from augcse.training.run import RunError, run  # after the recipe is checked: a refusal imports nothing of training

    begin_work()

    try:
        result = run(recipe, args.data_dir, resume="auto" if args.auto_resume else args.resume,
                     overwrite=args.overwrite)
    except RunError as exc:
        print(f"augcse train: error: {exc}", file=sys.stderr)
        return 1
    return 130 if result.get("stopped") else 0
