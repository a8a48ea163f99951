"""``augcse cluster TEXTS --clusters K``: adapt a sentence model to your texts so they group by topic, and cluster them.

Every input is checked first (one line, exit 2, before any model loads). Then the starting model embeds the texts
and K-means gives the centroids SCCL starts from (:func:`augcse.training.cluster.prepare_start`);
:func:`augcse.training.run.run` trains the built-in recipe ``cluster`` on the same texts (transductive), its
stopping rule checked at every checkpoint (:class:`augcse.training.cluster.ClusterWatch`);
:func:`augcse.training.cluster.write_results` assigns every text with the kept model and
:func:`augcse.report.cluster.write_report` writes the report. The verdict line is printed last. No label is read.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from augcse.commands.main import begin_work
from augcse.commands.train import IntermixedParser


class OneLineParser(IntermixedParser):
    """A wrong option is one line (argparse's usage block would come first otherwise)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}; see {self.prog} --help\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        namespace, extras = super().parse_known_args(args, namespace)
        if extras and not self._inside:  # refused here: the top-level parser would print its usage first
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return namespace, extras


def arguments(kinds: str) -> dict[str, dict[str, Any]]:
    """The command's arguments, each with its ``add_argument`` options (``kinds``: the texts files it reads)."""
    return {
        "texts": {"help": f"your texts: {kinds} (one text per line in .txt)"},
        "overrides": {"nargs": "*", "help": "recipe overrides key=value, e.g. name=tickets seed=1"},
        "--clusters": {"type": int, "required": True, "help": "K, the number of clusters (at least 2)"},
        "--column": {"default": "text", "help": "the text column (CSV/TSV/Parquet) or key (JSON-lines)"},
        "--peers": {"action": "store_true", "help": "also cluster with K-means, UMAP + K-means and BERTopic's "
                                                    "UMAP + HDBSCAN, described in the report (needs the cluster "
                                                    "extra: pip install 'augcse[cluster]')"},
        "--data-dir": {"help": "data directory (default: $AUGCSE_DATA)"},
        "--resume": {"action": "store_true", "help": "continue an unfinished run (or redo the outputs of a "
                                                     "finished one)"},
        "--overwrite": {"action": "store_true", "help": "empty the run folder first"},
    }


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from augcse.training.adapt import READERS

    parser = subparsers.add_parser("cluster", help="adapt a model to your texts so they group by topic, and "
                                                   "cluster them", description=__doc__.splitlines()[0])
    parser.__class__ = OneLineParser
    for name, options in arguments(", ".join(READERS)).items():
        parser.add_argument(name, **options)
    parser.set_defaults(func=_run_cli)


# the recipe keys the command sets itself, and what to give instead (an override of one is refused)
SET_BY_COMMAND = {
    "data.corpus": "the command trains on TEXTS",
    "loss.name": "the command trains SCCL, whose soft assignment its stopping rule reads",
    "loss.params.clusters": "give --clusters",
    "loss.params.centroids": "the command starts them by K-means of the starting model's embeddings",
}


def check_peer_packages() -> None:
    """``--peers`` needs umap-learn and hdbscan: refused in one line when either is missing."""
    import importlib.util

    missing = [name for name in ("umap", "hdbscan") if importlib.util.find_spec(name) is None]
    if missing:
        raise ValueError(f"--peers needs the {' and '.join(missing)} package(s): pip install 'augcse[cluster]', or "
                         "drop --peers")


def read_cluster_texts(path: str, column: str) -> tuple[Path, list[str], int]:
    """The texts file checked and read: (its path, the non-empty texts in input order, how many were empty)."""
    from augcse.training.adapt import read_rows

    file, rows = read_rows(path, column, if_empty="give one text per line (or a column of texts)")
    texts = [t for t in rows if t]
    return file, texts, len(rows) - len(texts)


def check_counts(file: Path, texts: list[str], clusters: int, batch: int) -> None:
    """K against the texts, and enough texts for one training batch (SCCL's target needs a batch's clusters)."""
    if len(texts) < batch:
        raise ValueError(f"texts file {file}: {len(texts)} non-empty texts; cluster needs at least {batch}, one "
                         f"training batch (training.per_device_train_batch_size={batch}): SCCL sharpens each batch's "
                         "assignments by that batch's cluster sizes, and a run trains on whole batches")
    if clusters > len(texts):
        raise ValueError(f"--clusters {clusters}: more clusters than the {len(texts)} non-empty texts of {file}; "
                         "give fewer clusters")


def _run_cli(args: argparse.Namespace) -> int:
    from augcse.core.paths import expect_folder
    from augcse.training.recipes.config import load_recipe, refuse_reserved

    if args.clusters < 2:
        raise ValueError(f"--clusters {args.clusters}: must be at least 2 (one cluster groups nothing)")
    if args.resume and args.overwrite:
        raise ValueError("--resume and --overwrite contradict each other; pass one")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        raise ValueError("augcse cluster runs in one process (its stopping rule is checked by one); run it without "
                         "torchrun")
    refuse_reserved(args.overrides, SET_BY_COMMAND, "augcse cluster")
    if args.data_dir:
        expect_folder(args.data_dir, "--data-dir")
    if args.peers:
        check_peer_packages()
    file, texts, empty = read_cluster_texts(args.texts, args.column)
    base = [f"name=cluster-{file.stem}", f"loss.params.clusters={args.clusters}"]
    probe = load_recipe(None, "cluster", [*base, *args.overrides], check_output=True)
    check_counts(file, texts, args.clusters, int(probe.training.get("per_device_train_batch_size", 64)))

    from augcse.training.cluster import texts_digest, write_texts

    folder = Path(probe.output_dir) / ".cluster-texts" / texts_digest(texts, probe.model.backbone, args.clusters,
                                                                     probe.seed)
    corpus = folder / "texts.txt"  # written once every check has passed
    centroids = folder / "start" / "centroids.npy"  # written before the first run trains; a resume finds it
    overrides = [*base, f"data.corpus={corpus.resolve()}", *args.overrides,
                 f"loss.params.centroids={centroids.resolve()}"]
    recipe = load_recipe(None, "cluster", overrides if centroids.is_file() else overrides[:-1], check_output=True)
    finished = _check_run_folder(recipe, args.resume, args.overwrite)
    begin_work()
    write_texts(texts, folder)
    return _work(args, recipe, overrides, texts, file, empty, folder / "start", finished)


def _check_run_folder(recipe, resume: bool, overwrite: bool) -> bool:
    """The run folder's refusals (a finished or unfinished run, a foreign folder) before any model loads; whether
    it holds a finished run that ``--resume`` redoes the outputs of."""
    from augcse.training.rundir import FINISHED, RunFolder, refuse_foreign

    if resume and (recipe.run_dir / FINISHED).is_file():
        _same_texts(recipe)
        return True
    if overwrite:
        refuse_foreign(recipe.run_dir)  # emptied by the run itself
        return False
    folder = RunFolder(recipe.run_dir)
    folder.claim(recipe.to_dict(), resume=resume)
    folder.release()
    return False


def _same_texts(recipe) -> None:
    """A finished run redoes its outputs only for the texts, model, K and seed it was trained with."""
    import yaml

    from augcse.core import yamlfile
    from augcse.training.rundir import RECIPE

    try:
        stored = yamlfile.load((recipe.run_dir / RECIPE).read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        stored = {}
    trained_on = (stored.get("data") or {}).get("corpus") if isinstance(stored, dict) else None
    if trained_on != recipe.data.corpus:
        raise ValueError(f"--resume: {recipe.run_dir} was trained on other texts, model, K or seed ({trained_on}); "
                         "give the same ones, or another name= for a new run")


def _work(args: argparse.Namespace, recipe, overrides: list[str], texts: list[str], file: Path, empty: int,
          start: Path, finished: bool) -> int:
    import numpy as np

    from augcse.core.folder_lock import folder_lock
    from augcse.report.cluster import write_report
    from augcse.training.build import build_model
    from augcse.assets.download import sha256_file
    from augcse.training.cluster import Inputs, prepare_start, write_results
    from augcse.training.recipes.config import load_recipe

    if not (start / "centroids.npy").is_file():
        prepare_start(build_model(recipe), texts, args.clusters, recipe.seed, start, recipe.eval.batch_size)
    recipe = load_recipe(None, "cluster", overrides)
    code = 0 if finished else _train(args, recipe, texts, np.load(start / "embeddings.npy", allow_pickle=False))
    if code:
        return code
    inputs = Inputs(str(file.resolve()), sha256_file(file), args.column, len(texts), empty, args.clusters)
    with folder_lock(recipe.run_dir, "name="):  # a second command on this run waits its turn, refused in one line
        record = write_results(recipe.run_dir, texts, inputs, recipe, start, peers=args.peers)
        md, _ = write_report(record, texts, recipe.run_dir)
    print(f"\n{record['verdict']}\nclusters: {recipe.run_dir / 'clusters.csv'}; report: {md}; model: "
          f"{recipe.run_dir / 'final'}", flush=True)
    return 0


def _train(args: argparse.Namespace, recipe, texts: list[str], start_embeddings) -> int:
    """Train with the stopping rule watching: 0 when done, 130 when stopped by Ctrl-C, 1 on a fault (its line)."""
    from augcse.training.cluster import ClusterWatch
    from augcse.training.run import RunError, run

    watch = ClusterWatch(texts, start_embeddings, recipe.loss.params, recipe.run_dir, recipe.seed,
                         recipe.eval.batch_size)
    try:
        stopped = bool(run(recipe, args.data_dir, resume=args.resume, overwrite=args.overwrite,
                           callbacks=[watch]).get("stopped"))
    except RunError as exc:
        print(f"augcse cluster: error: {exc}", file=sys.stderr)
        return 1
    if not stopped:
        print("training done; assigning every text with the kept model", flush=True)
    return 130 if stopped else 0
