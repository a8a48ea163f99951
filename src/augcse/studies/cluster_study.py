"""``python -m augcse.studies.cluster_study GRID --output docs/studies/NAME``: how ``augcse cluster`` does on labelled
topic and intent sets, one JSON record per set × seed.

For each set of the grid the texts and labels are read, a fixed seeded sample of at most ``n`` rows is drawn
(the same sample for every seed), and only the text column is written to the CSV the command reads. The
command runs through its own entry (:func:`augcse.commands.main.main`, the CLI's code path) with ``seed=S`` and
K = the number of labels in the sample. The labels are read by :func:`score_run` only, after the command has
finished: the K-means, UMAP + K-means and BERTopic pipelines (:mod:`augcse.evaluation.topic_pipelines`) on the
starting and the kept embeddings, the command's own ``clusters.csv``, and its assignment at each check of the
stopping rule (the best of them in hindsight beside the one the rule stopped at). The starting model's scores
are the same for every seed of a set: computed once, kept in ``start/<set>.json``. A set × seed whose record
exists is skipped, so an interrupted study goes on where it stopped. After every record the page ``study.md``
is written again from the records (:func:`page`).
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# where each set's texts and labels are (under the data directory); the only sets a grid may name
SOURCES = {
    "tweet": "clustering/tweet.csv",
    "searchsnippets": "clustering/searchsnippets.csv",
    "stackoverflow": "clustering/stackoverflow.csv",
    "biomedical": "clustering/biomedical.csv",
    "banking77": "intent/banking77/test.csv",
    "clinc150": "intent/clinc150/test.csv",
    "hwu64": "intent/hwu64/test.csv",
    "snips": "intent/snips/test.csv",
}
GRID_KEYS = {"name": str, "sets": list, "seeds": list, "n": int, "sample_seed": int, "overrides": list}
KMEANS_SEEDS = (0, 1, 2)  # K-means is cheap: the mean of three
UMAP_SEEDS = (0,)  # one UMAP fit per embedding set for UMAP + K-means and BERTopic (the cost of a score on 2 busy cores)
RECORDS = "records"
START = "start"
PAGE = "study.md"


@dataclass(frozen=True)
class Grid:
    """A study's plan: which sets, seeds, the sample size, and the recipe overrides every run gets."""

    name: str
    sets: list[str]
    seeds: list[int]
    n: int
    sample_seed: int
    overrides: list[str]


def load_grid(path: str | Path) -> Grid:
    """The grid file, every key checked (one line naming the file and the key when one is wrong)."""
    import yaml

    from augcse.core import textfile, yamlfile
    from augcse.core.paths import expect_file

    file = expect_file(path, "grid file")
    try:
        data = yamlfile.load(textfile.read_text(file, f"grid file {file}"))
    except yaml.YAMLError as exc:
        raise ValueError(f"grid file {file}: not YAML ({yamlfile.describe(exc)})") from None
    if not isinstance(data, dict) or set(data) != set(GRID_KEYS):
        raise ValueError(f"grid file {file}: needs exactly the keys {', '.join(GRID_KEYS)}")
    for key, kind in GRID_KEYS.items():
        if not isinstance(data[key], kind):
            raise ValueError(f"grid file {file}: {key} must be a {kind.__name__}")
    unknown = [s for s in data["sets"] if s not in SOURCES]
    if unknown:
        raise ValueError(f"grid file {file}: unknown set {unknown[0]!r}; choose from {', '.join(SOURCES)}")
    if data["n"] < 64:
        raise ValueError(f"grid file {file}: n must be at least 64 (one training batch)")
    return Grid(**data)


# --------------------------------------------------------------------------- the command's side (no labels)

@dataclass(frozen=True)
class Sample:
    texts: list[str]
    labels: list[str]

    @property
    def clusters(self) -> int:
        return len(set(self.labels))


def read_sample(data_dir: Path, name: str, n: int, seed: int) -> Sample:
    """The set's non-empty rows, a seeded sample of at most ``n`` of them, in file order."""
    with open(data_dir / SOURCES[name], encoding="utf-8", newline="") as f:
        rows = [(r["text"].strip(), str(r["label"])) for r in csv.DictReader(f) if (r["text"] or "").strip()]
    keep = sorted(random.Random(seed).sample(range(len(rows)), n)) if len(rows) > n else range(len(rows))
    return Sample([rows[i][0] for i in keep], [rows[i][1] for i in keep])


def write_texts_csv(texts: Sequence[str], path: Path) -> Path:
    """The texts alone, one column ``text``: the file the command reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text"])
        writer.writerows([t] for t in texts)
    return path


def run_command(texts_csv: Path, clusters: int, seed: int, run_name: str, work: Path, data_dir: Path,
                overrides: Sequence[str]) -> tuple[Path, float]:
    """``augcse cluster`` on the texts file, as a user runs it (its own process: a study sits below the commands
    and never imports them): its run folder and wall seconds."""
    import subprocess
    import sys

    argv = ["cluster", str(texts_csv), "--clusters", str(clusters), f"output_dir={work}", f"name={run_name}",
            f"seed={seed}", *overrides, "--data-dir", str(data_dir), "--overwrite"]
    began = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", "augcse", *argv], check=False).returncode
    if code != 0:
        raise RuntimeError(f"augcse cluster exited {code} on {texts_csv} (augcse {' '.join(argv)})")
    return work / run_name, time.perf_counter() - began


# --------------------------------------------------------------------------- the scorer's side (labels)

def pipeline_scores(embeddings: np.ndarray, labels: Sequence[str], clusters: int) -> dict[str, dict[str, float]]:
    """Each peer pipeline's Hungarian accuracy and NMI (mean over its seeds) on ``embeddings``."""
    from augcse.evaluation.topic_pipelines import run_pipelines, scores

    labellings = {**run_pipelines(embeddings, clusters, ["kmeans"], KMEANS_SEEDS),
                  **run_pipelines(embeddings, clusters, ["umap+kmeans", "bertopic"], UMAP_SEEDS)}
    return scores(labellings, labels)


def start_scores(folder: Path, name: str, embeddings: np.ndarray, sample: Sample) -> dict[str, Any]:
    """The starting model's pipeline scores on a set, computed once and kept in ``start/<set>.json``."""
    path = folder / START / f"{name}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    began = time.perf_counter()
    found = {"pipelines": pipeline_scores(embeddings, sample.labels, sample.clusters)}
    found["seconds"] = round(time.perf_counter() - began, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    return found


def check_scores(run_dir: Path, labels: Sequence[str], seed: int) -> list[dict[str, Any]]:
    """The accuracy of the command's assignment at step 0 and at every check (from its trace)."""
    from augcse.evaluation.topic_pipelines import hungarian_accuracy
    from augcse.training.cluster import read_trace, sample_indices

    trace = read_trace(run_dir)
    checked = [labels[i] for i in sample_indices(len(labels), seed)]
    steps = [(0, trace["start"]), *((c["step"], c["assignments"]) for c in trace["checks"])]
    return [{"step": step, "accuracy": hungarian_accuracy(checked, a)} for step, a in steps if a]


def score_run(run_dir: Path, sample: Sample, seed: int, batch_size: int = 128) -> dict[str, Any]:
    """Everything scored against the labels once the command has finished: the kept model's pipelines, the
    command's own clusters, and each check's assignment."""
    from sentence_transformers import SentenceTransformer

    from augcse.evaluation.topic_pipelines import hungarian_accuracy

    record = json.loads((run_dir / "cluster.json").read_text(encoding="utf-8"))
    with open(run_dir / "clusters.csv", encoding="utf-8", newline="") as f:
        own = [int(r["cluster"]) for r in csv.DictReader(f)]
    kept = SentenceTransformer(str(run_dir / "final"), device="cpu").encode(
        sample.texts, batch_size=batch_size, convert_to_numpy=True, show_progress_bar=False)
    checks = check_scores(run_dir, sample.labels, seed)
    best = max(checks, key=lambda c: c["accuracy"])
    return {"kept": {"pipelines": pipeline_scores(kept, sample.labels, sample.clusters)},
            "own": {"accuracy": hungarian_accuracy(sample.labels, own)},
            "checks": checks, "best_check": best,
            "command": {k: record[k] for k in ("steps", "max_steps", "stopping_reason", "kept", "sizes_after")},
            "start_folder": record["start"]["folder"]}


# --------------------------------------------------------------------------- the runner

def cpu_model() -> str:
    """``lscpu``'s model name ("unknown" without lscpu)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                "unknown")


def git_state(grid_file: str | Path | None = None) -> dict[str, Any]:
    """The commit the code ran at, whether the tree held uncommitted changes (and which, under src/), and the last
    commit of the grid file (the one that froze its settings) with whether the file differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(__file__).parent).stdout.strip()

    changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines()]  # repo-relative
    state = {"commit": git("rev-parse", "HEAD"), "dirty": bool(changed),
             "dirty_src": sorted(p for p in changed if p.startswith("src/"))}
    if grid_file is not None:
        grid = str(Path(grid_file).resolve())
        state["grid_commit"] = git("log", "-1", "--format=%H", "--", grid)
        state["grid_changed"] = bool(git("status", "--porcelain", "--", grid))
    return state


def record_path(folder: Path, name: str, seed: int) -> Path:
    return folder / RECORDS / f"{name}-s{seed}.json"


def run_one(grid: Grid, name: str, seed: int, folder: Path, work: Path, data_dir: Path,
            git: dict[str, Any]) -> dict[str, Any]:
    """One set × seed: the sample, the command on its texts, then the scores; the record written (``git``: the
    code's commit when the study began, which is the code this process runs)."""
    import torch

    sample = read_sample(data_dir, name, grid.n, grid.sample_seed)
    texts_csv = write_texts_csv(sample.texts, work / "texts" / f"{name}.csv")
    run_dir, command_s = run_command(texts_csv, sample.clusters, seed, f"{name}-s{seed}", work, data_dir,
                                     grid.overrides)
    began = time.perf_counter()
    scored = score_run(run_dir, sample, seed)
    start_embeddings = np.load(Path(scored.pop("start_folder")) / "embeddings.npy", allow_pickle=False)
    start = start_scores(folder, name, start_embeddings, sample)
    record = {"set": name, "seed": seed, "clusters": sample.clusters, "texts": len(sample.texts),
              "source": SOURCES[name], "grid": grid.__dict__, "start": start["pipelines"], **scored,
              "seconds": {"command": round(command_s, 1), "scoring": round(time.perf_counter() - began, 1),
                          "start_scoring": start["seconds"]},
              "git": git, "cpu": cpu_model(), "torch_threads": torch.get_num_threads()}
    path = record_path(folder, name, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return record


def run_study(grid: Grid, folder: Path, work: Path, data_dir: Path, only: Sequence[str] = (),
              grid_file: str | Path | None = None) -> list[Path]:
    """Every set × seed of the grid without a record yet (seed by seed, so each seed covers every set first;
    ``only``: these sets of the grid, for a second process beside the first); the records written."""
    written, git = [], git_state(grid_file)
    for seed in grid.seeds:
        for name in (s for s in grid.sets if not only or s in only):
            if record_path(folder, name, seed).is_file():
                print(f"{name} seed {seed}: recorded, skipped", flush=True)
                continue
            record = run_one(grid, name, seed, folder, work, data_dir, git)
            written.append(record_path(folder, name, seed))
            (folder / PAGE).write_text(page(folder), encoding="utf-8")
            print(f"{name} seed {seed}: kept K-means {100 * record['kept']['pipelines']['kmeans']['accuracy']:.1f} "
                  f"(start {100 * record['start']['kmeans']['accuracy']:.1f}), {record['seconds']}", flush=True)
    return written


# --------------------------------------------------------------------------- the tables

PIPELINE_NAMES = {"kmeans": "K-means", "umap+kmeans": "UMAP+K-means", "bertopic": "BERTopic"}
STUDY_LABELS = {"cluster-design": "design", "cluster-heldout": "held out",  # docs/studies/ folder: label
                "cluster-full": "full size"}
TARGET_SD = 1.0  # kept K-means at least the start minus this many seed sds, on every set
TARGET_GAIN = 5.0  # mean K-means gain over the sets, in accuracy points


def load_records(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """A study's records by set, in the order of its grid's sets as they ran, seeds in order."""
    by_set: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((folder / RECORDS).glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        by_set.setdefault(record["set"], []).append(record)
    order = {s: i for i, s in enumerate(SOURCES)}
    return {s: sorted(by_set[s], key=lambda r: r["seed"]) for s in sorted(by_set, key=order.__getitem__)}


def _points(value: float) -> float:
    return 100 * value


def _mean_sd(values: Sequence[float]) -> tuple[float, float | None]:
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else None)


def _signed(value: float) -> str:
    return f"{value:+.1f}".replace("-", "−")


def set_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One set's figures over its seeds (accuracy points)."""
    kept = {p: _mean_sd([_points(r["kept"]["pipelines"][p]["accuracy"]) for r in records]) for p in PIPELINE_NAMES}
    start = {p: _points(records[0]["start"][p]["accuracy"]) for p in PIPELINE_NAMES}
    gains = [_points(r["kept"]["pipelines"]["kmeans"]["accuracy"] - r["start"]["kmeans"]["accuracy"]) for r in records]
    return {"clusters": records[0]["clusters"], "texts": records[0]["texts"], "seeds": len(records),
            "start": start, "kept": kept, "gain": _mean_sd(gains),
            "bertopic_gain": kept["bertopic"][0] - start["bertopic"],
            "own": _mean_sd([_points(r["own"]["accuracy"]) for r in records]),
            "best": _mean_sd([_points(r["best_check"]["accuracy"]) for r in records]),
            "best_steps": [r["best_check"]["step"] for r in records],
            "stopped": [r["command"]["steps"] for r in records],
            "stopped_at": _mean_sd([_points(next(c["accuracy"] for c in reversed(r["checks"])
                                                 if c["step"] <= r["command"]["steps"])) for r in records])}


def _cell(mean_sd: tuple[float, float | None]) -> str:
    mean, sd = mean_sd
    return f"{mean:.1f}" + (f" ± {sd:.1f}" if sd is not None else "")


def summary_table(studies: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """Per set: K, N, start → kept under each pipeline, the command's own clusters, the K-means gain ± sd over
    seeds, the best check in hindsight beside the check the rule stopped at; then each study's means and the
    targets with ✓/✗."""
    from augcse.core.document import markdown_table

    header = ["study", "set", "K", "N", "seeds", *(f"{n} start → kept" for n in PIPELINE_NAMES.values()),
              "own clusters", "K-means gain", "rule's stop: step, accuracy", "best check: step, accuracy"]
    rows, lines = [], []
    for label, by_set in studies.items():
        summaries = {name: set_summary(records) for name, records in by_set.items()}
        for name, s in summaries.items():
            rows.append([label, name, str(s["clusters"]), str(s["texts"]), str(s["seeds"]),
                         *(f"{s['start'][p]:.1f} → {_cell(s['kept'][p])}" for p in PIPELINE_NAMES),
                         _cell(s["own"]), f"{_signed(s['gain'][0])}" + (f" ± {s['gain'][1]:.1f}" if s["gain"][1]
                                                                         is not None else ""),
                         f"{'/'.join(map(str, s['stopped']))}: {_cell(s['stopped_at'])}",
                         f"{'/'.join(map(str, s['best_steps']))}: {_cell(s['best'])}"])
        if summaries:
            lines += targets(label, summaries)
    table = markdown_table(header, rows, [False, False] + [True] * (len(header) - 2))
    return [*table, "", *lines] if lines else table


def targets(label: str, summaries: dict[str, dict[str, Any]]) -> list[str]:
    """The study's three targets, each met (✓) or not (✗) with by how much."""
    mean_gain = statistics.fmean(s["gain"][0] for s in summaries.values())
    mean_bertopic = statistics.fmean(s["bertopic_gain"] for s in summaries.values())
    short = {n: s["gain"][0] + TARGET_SD * (s["gain"][1] or 0.0) for n, s in summaries.items()}
    below = {n: v for n, v in short.items() if v < 0}
    mark = {True: "✓", False: "✗"}
    return [f"- {label}, {len(summaries)} set(s): mean K-means gain {_signed(mean_gain)} points.",
            f"  - {mark[not below]} kept K-means ≥ start − 1 seed sd on every set"
            + (f": short on {', '.join(f'{n} by {-v:.1f}' for n, v in below.items())}" if below else ""),
            f"  - {mark[mean_gain >= TARGET_GAIN]} mean K-means gain ≥ +{TARGET_GAIN:.0f}"
            + (f": {TARGET_GAIN - mean_gain:.1f} points short" if mean_gain < TARGET_GAIN else ""),
            f"  - {mark[mean_bertopic > 0]} better than the start under BERTopic on the mean "
            f"({_signed(mean_bertopic)} points)"]


def _dirty(git: dict[str, Any]) -> str:
    """How far the tree was from its commit (the files are in the record)."""
    return f"{len(git['dirty_src'])} files under src/" if git["dirty_src"] else ("outside src/" if git["dirty"] else "no")


def page(folder: Path) -> str:
    """A study's ``study.md``: its grid, its table and each run's settings and seconds, from its records."""
    from augcse.core.document import markdown_table

    by_set = load_records(folder)
    first = next((r for records in by_set.values() for r in records), None)
    title = f"# The augcse cluster study: {folder.name}\n\n"
    if first is None:
        return title + "No record yet.\n"
    grid = first["grid"]
    intro = (f"Generated by `python -m augcse.studies.cluster_study` from `{folder.as_posix()}/{RECORDS}/`. Each set is "
             f"a seeded sample (seed {grid['sample_seed']}) of at most {grid['n']} texts, the same for every seed; "
             f"the command ran with `{' '.join(grid['overrides']) or 'the recipe as it is'}`. Accuracy in points "
             f"(Hungarian matching); K-means is the mean of {len(KMEANS_SEEDS)} seeds, UMAP+K-means and BERTopic "
             f"of {len(UMAP_SEEDS)}.\n\n")
    runs = markdown_table(["set", "seed", "steps", "stopping reason", "command (s)", "scoring (s)", "commit", "dirty",
                           "grid's commit"],
                          [[r["set"], str(r["seed"]), str(r["command"]["steps"]), r["command"]["stopping_reason"],
                            f"{r['seconds']['command']:.0f}", f"{r['seconds']['scoring']:.0f}", r["git"]["commit"][:10],
                            _dirty(r["git"]), r["git"].get("grid_commit", "")[:10] or "—"]
                           for records in by_set.values() for r in records],
                          [False, True, True, False, True, True, False, False, False])
    return (title + intro + "\n".join(summary_table({STUDY_LABELS.get(folder.name, folder.name): by_set})) + "\n\n"
            + f"## Runs\n\nCPU: {first['cpu']}.\n\n" + "\n".join(runs) + "\n")


def docs_block(_: str | None = None, root: Path = Path("docs/studies")) -> list[str]:
    """The table of ``docs/CLUSTERING.md``'s study section: the design and held-out studies' records."""
    studies = {label: load_records(root / name) for name, label in STUDY_LABELS.items()}
    found = {label: by_set for label, by_set in studies.items() if by_set}
    return summary_table(found) if found else ["No study record yet."]


def _size(by_set: dict[str, list[dict[str, Any]]]) -> str:
    """A study's size in words: texts a set, its cap of steps, and its seeds."""
    records = [r for records in by_set.values() for r in records]
    grid = records[0]["grid"]
    cap = next((o.partition("=")[2] for o in grid["overrides"] if o.startswith("training.max_steps=")), None)
    seeds = sorted({len(records) for records in by_set.values()})
    return (f"{grid['n']:,} texts a set, " + (f"at most {cap} steps" if cap else "the recipe's own settings")
            + f", {'–'.join(map(str, seeds))} seed{'s' if seeds[-1] > 1 else ''}")


def headline(_: str | None = None, root: Path = Path("docs/studies")) -> list[str]:
    """The README's line of the study: each study's mean K-means gain, at its size, against the +5 aimed at."""
    studies = {label: load_records(root / name) for name, label in STUDY_LABELS.items()}
    found = {label: by_set for label, by_set in studies.items() if by_set}
    if not found:
        return ["No study record yet."]
    gains = [f"{_signed(statistics.fmean(set_summary(records)['gain'][0] for records in by_set.values()))} on the "
             f"{len(by_set)} {label} sets ({_size(by_set)})" for label, by_set in found.items()]
    return [f"Mean K-means accuracy gain {', '.join(gains)}, against the +{TARGET_GAIN:.0f} aimed at."]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m augcse.studies.cluster_study", description=__doc__.splitlines()[0])
    parser.add_argument("grid", help="the study's grid file (YAML: name, sets, seeds, n, sample_seed, overrides)")
    parser.add_argument("--output", required=True, help="the study's folder (records/, start/, study.md)")
    parser.add_argument("--work", default="runs/cluster-study", help="where the runs and the texts files go")
    parser.add_argument("--data-dir", default=None, help="data directory (default: $AUGCSE_DATA)")
    parser.add_argument("--only", nargs="+", default=[], help="run only these sets of the grid (a second process "
                                                                 "beside the first, say)")
    parser.add_argument("--page-only", action="store_true", help="only write study.md from the records")
    args = parser.parse_args(argv)
    import os

    from augcse.core.paths import expect_folder

    try:
        grid = load_grid(args.grid)
        data_dir = expect_folder(args.data_dir or os.environ.get("AUGCSE_DATA", ""), "data directory (--data-dir or "
                                                                                      "$AUGCSE_DATA)")
        missing = [s for s in grid.sets if not (data_dir / SOURCES[s]).is_file()]
        if missing:
            raise ValueError(f"data directory {data_dir}: no {SOURCES[missing[0]]}; run augcse assets download")
        outside = [s for s in args.only if s not in grid.sets]
        if outside:
            raise ValueError(f"--only {outside[0]}: not a set of grid file {args.grid} ({', '.join(grid.sets)})")
    except ValueError as exc:
        print(f"{parser.prog}: error: {exc}", file=sys.stderr)
        return 2
    folder = Path(args.output)
    if not args.page_only:
        run_study(grid, folder, Path(args.work) / grid.name, data_dir, args.only, args.grid)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / PAGE).write_text(page(folder), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
