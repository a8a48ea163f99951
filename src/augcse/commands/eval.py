"""``augcse eval MODEL``: the papers' evaluations on any sentence-transformers folder or name."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from augcse.commands.main import begin_work
from augcse.core.names import suggest
from augcse.core.outputs import write_text_atomically

STAGES = ("before", "after")  # the stages of a run's eval.json (augcse report and compare read them)
# secondary metrics printed beside the main score and saved by --save-to as "task/metric"
DETAIL_METRICS = ("mean", "wmean", "nmi", "5shot", "10shot", "20shot", "alignment")


def _details(scores: dict[str, float]) -> dict[str, float]:
    """The :data:`DETAIL_METRICS` one task reports."""
    return {k: float(v) for k, v in scores.items() if k in DETAIL_METRICS}


def details(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """``{"task/metric": value}`` for the :data:`DETAIL_METRICS` each task reports."""
    return {f"{task}/{k}": v for task, scores in results.items() for k, v in _details(scores).items()}


def _table(results: dict[str, dict[str, float]], scores: dict[str, float]) -> str:
    width = max(len(name) for name in scores) + 2
    lines = [f"{'task'.ljust(width)}{'score':>8}  details", "-" * (width + 40)]
    for name, value in scores.items():
        extra = "  ".join(f"{k} {v:.2f}" for k, v in _details(results.get(name, {})).items())
        lines.append(f"{name.ljust(width)}{value:8.2f}  {extra}")
    return "\n".join(lines)


def check_save_to(run_dir: str | Path) -> None:
    """Before the model loads: ``--save-to`` is a run folder that can be written, and its eval.json is readable."""
    from augcse.core.outputs import claim_folder

    folder = Path(run_dir)
    if not folder.is_dir():
        raise ValueError(f"--save-to {run_dir} is not a directory; give a training run folder")
    claim_folder(folder, "--save-to")  # writable, and no link in it (eval.json is never written through one)
    _read_eval(folder / "eval.json")


def _read_eval(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"--save-to: {path} is not valid JSON ({err}); fix or remove it first") from None
    if not isinstance(saved, dict):
        raise ValueError(f"--save-to: {path} is not a JSON object of stages; fix or remove it first")
    return saved


def _phases(results: dict[str, dict[str, float]], timings: dict[str, float]) -> str:
    """Where the time went: reading, the shared encoding (with a --backend's export), the scoring, and
    each suite's own task time (CPU-bound; summed over processes when they score side by side)."""
    from augcse.evaluation.tasks import get_task

    by_suite: dict[str, float] = {}
    for name, scores in results.items():
        suite = (get_task(name).suites or ("other",))[0]
        by_suite[suite] = by_suite.get(suite, 0.0) + scores["seconds"]
    on = f" on {timings['processes']:.0f} processes" if timings["processes"] > 1 else ""
    return ", ".join([f"loading {timings['loading']:.0f} s", f"encoding {timings['encoding']:.0f} s",
                      f"scoring {timings['scoring']:.0f} s{on}"]) + \
        " (task time: " + ", ".join(f"{suite} {t:.0f} s" for suite, t in by_suite.items()) + ")"


def save_scores(run_dir: str | Path, scores: dict[str, float], stage: str = "after",
                versions: dict[str, Any] | None = None) -> Path:
    """Merge ``scores`` into ``RUN_DIR/eval.json`` under ``stage``, so ``augcse report``/``compare`` show them.

    Scores already there for other tasks are kept and suite averages are recomputed over all the
    stage's tasks; ``versions`` (:func:`augcse.evaluation.versions.versions`) replaces the stage's
    versions, keeping the data files already listed when the model is the same one, and the precision each task
    already there was scored in. The file is replaced atomically, so an interrupted write never leaves a
    half-written ``eval.json``.
    """
    from augcse.evaluation.suite import with_suite_averages
    from augcse.evaluation.tasks import TASKS
    from augcse.evaluation.versions import VERSIONS_KEY, precision_record

    path = Path(run_dir) / "eval.json"
    if not path.parent.is_dir():
        raise FileNotFoundError(f"--save-to: no run directory {path.parent}; give the folder that holds eval.json")
    saved = _read_eval(path)
    earlier = [name for name in saved.get(stage, {}) if name in TASKS]
    saved[stage] = with_suite_averages({**saved.get(stage, {}), **scores})
    if versions is not None:
        before = saved.get(VERSIONS_KEY, {}).get(stage, {})
        if before.get("model") == versions["model"]:
            versions = {**versions, "data": {**before.get("data", {}), **versions["data"]}}
        if "precision" in versions:  # each task keeps the precision it was scored in
            scored = [name for name in scores if name in TASKS]
            versions = {**versions, **precision_record(before, earlier, scored, versions["precision"])}
        saved.setdefault(VERSIONS_KEY, {})[stage] = versions
    write_text_atomically(path, json.dumps(saved, indent=2))
    return path


def task_listing() -> str:
    """``augcse eval --list``: the suites, then one line per task from its record."""
    from augcse.evaluation.tasks import SUITES, TASKS, load_builtin_tasks

    load_builtin_tasks()
    lines = [f"{suite}: {', '.join(names)}" for suite, names in SUITES.items()]
    width = max(map(len, TASKS)) + 2
    lines += ["", f"{'task'.ljust(width)}{'type':12}{'split':7}{'main':12}{'selection':15}files"]
    for task in TASKS.values():
        r = task.record
        lines.append(f"{r.name.ljust(width)}{r.type:12}{r.split:7}{r.main_metric:12}{r.selection_metric or '-':15}"
                     f"{len(r.files)}")
    return "\n".join(lines)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    from augcse.evaluation.backends import add_backend_argument  # imports nothing heavy

    parser = subparsers.add_parser(
        "eval", help="evaluate a model (STS, transfer, clustering, intent…)",
        description="Evaluate a sentence-transformers model on registered tasks and suites (default: the STS "
                    "suite), encoding each distinct sentence once; --list shows the tasks and suites.")
    parser.add_argument("model", nargs="?", help="sentence-transformers folder (e.g. runs/NAME/final) or model name")
    parser.add_argument("--pooler", default=None, metavar="NAME",
                        help="rebuild the model as its encoder with this pooler (cls, cls_before_pooler, avg, "
                             "avg_first_last, avg_emb_last, avg_top2), e.g. for a plain Hugging Face checkpoint; "
                             "default: a sentence-transformers folder's own pooling")
    parser.add_argument("--tasks", default=None, help="comma-separated task and suite names (default: sts)")
    parser.add_argument("--suite", default=None, help="a suite name (sts, transfer, clustering, intent, all…)")
    parser.add_argument("--original", action="store_true", help="STS: the untokenised official files")
    parser.add_argument("--fast", action="store_true", help="the tasks' fast mode (fewer folds/seeds)")
    parser.add_argument("--data-dir", default=None, help="data directory (default: $AUGCSE_DATA)")
    parser.add_argument("--batch-size", type=int, default=128, help="sentences per encoding batch (default: 128)")
    parser.add_argument("--threads", type=int, default=None,
                        help="threads for encoding, and processes scoring the classifier and K-means tasks side "
                             "by side, one thread each (default: all cores; 1 can be faster on a machine shared "
                             "with other jobs)")
    add_backend_argument(parser)
    parser.add_argument("--bf16", action="store_true",
                        help="encode under bfloat16 autocast (GPUs, CPUs with AMX/AVX512-BF16; cosine to float32 "
                             "> 0.9999 but scores move); --backend torch only")
    parser.add_argument("--json", action="store_true", help="end with one JSON line: task → score")
    parser.add_argument("--list", action="store_true", help="list tasks and suites and exit")
    parser.add_argument("--save-to", metavar="RUN_DIR", default=None,
                        help="merge the scores into RUN_DIR/eval.json (for augcse report / compare)")
    parser.add_argument("--stage", default="after", help=f"eval.json stage for --save-to: {' or '.join(STAGES)} "
                                                         "(default: after)")
    parser.set_defaults(func=_run_cli)


def _check_arguments(args: argparse.Namespace) -> None:
    """The options that can be wrong on their own, refused in one line before anything loads."""
    if args.threads is not None and args.threads < 1:
        raise ValueError(f"--threads {args.threads}: must be a positive integer (1 suits a shared machine)")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size {args.batch_size}: must be a positive integer")
    if args.stage not in STAGES:
        raise ValueError(f"--stage {args.stage}: must be {' or '.join(STAGES)}")


def _check_data(names: list[str], root, spec: str) -> None:
    """Every task's files are here (data directory, embedded set or cache), or one line before the model loads:
    which tasks lack them, how to get them, and the tasks that run without a data directory."""
    from augcse.assets.resolve import has_data
    from augcse.evaluation.tasks import TASKS, get_task, load_builtin_tasks

    missing = [name for name in names if not all(has_data(f, root) for f in get_task(name).record.files)]
    if not missing:
        return
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    if root is None:
        load_builtin_tasks()
        embedded = sorted(n for n, task in TASKS.items()
                          if ":" not in n and all(has_data(f, None) for f in task.record.files))  # built-in only
        example = "STSBenchmark-original" if "STSBenchmark-original" in embedded else embedded[0]
        raise ValueError(f"{shown} need a data directory (--data-dir DIR or $AUGCSE_DATA; augcse download "
                         f"{spec.replace(',', ' ')} --data-dir DIR fetches it); without one, these tasks run: "
                         f"{', '.join(embedded)} (e.g. --tasks {example})")
    raise ValueError(f"{shown}: files missing from the data directory {root}; fetch them with augcse download "
                     f"{spec.replace(',', ' ')} --data-dir {root}")


def _run_cli(args: argparse.Namespace) -> int:
    from augcse.evaluation.tasks import resolve_tasks, variant_of  # not for --help
    from augcse.evaluation.versions import VERSIONS_KEY, versions

    _check_arguments(args)

    if args.list:
        print(task_listing())
        return 0
    if args.model is None:
        raise ValueError("give a MODEL (a folder such as runs/NAME/final, or a model name), or --list")
    if args.save_to:
        check_save_to(args.save_to)  # before torch: a folder that cannot be written costs no loading
    from augcse.assets.resolve import data_dir as resolve_data_dir

    spec = ",".join(x for x in (args.tasks, args.suite) if x) or "sts"
    names = resolve_tasks(spec)
    if args.original:
        names = list(dict.fromkeys(variant_of(n, "original") for n in names))
    root = resolve_data_dir(args.data_dir)
    _check_data(names, root, spec)
    import torch

    from augcse.models.load import load_model
    from augcse.evaluation.suite import main_scores, run_tasks

    if args.pooler is not None:
        from augcse.models.poolers import POOLERS

        if args.pooler not in POOLERS:
            raise ValueError(f"unknown pooler {args.pooler!r}{suggest(args.pooler, POOLERS)}; "
                             f"choose one of {', '.join(POOLERS)}")
    from augcse.evaluation.backends import check_backend, use_backend
    from augcse.evaluation.encoding import bf16_warning
    from augcse.evaluation.workers import available_cores

    check_backend(args.backend)
    if args.bf16 and args.backend != "torch":
        raise ValueError(f"--bf16 autocasts PyTorch and --backend {args.backend} runs float32; drop one of them")
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.save_to and args.stage == VERSIONS_KEY:
        raise ValueError(f"--stage {VERSIONS_KEY}: eval.json keeps the versions under that key; name another stage")
    begin_work()
    model = load_model(args.model, pooler=args.pooler)
    if args.bf16 and (warning := bf16_warning(model.device)):
        print(warning, file=sys.stderr)
    start = time.perf_counter()
    use_backend(model, args.backend, threads=args.threads)
    precision = torch.autocast(model.device.type, dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()
    # on a GPU the classifiers run there, one after another; on a CPU one process per core
    workers = (args.threads or available_cores()) if model.device.type == "cpu" else 1
    timings: dict[str, float] = {}
    with precision:
        results = run_tasks(model, names, root, fast=args.fast, batch_size=args.batch_size, workers=workers,
                            timings=timings)
    scores = main_scores(results)
    seconds = time.perf_counter() - start
    timings["encoding"] = seconds - timings["loading"] - timings["scoring"]  # with the backend's export
    print(_table(results, scores))
    print(f"({len(names)} tasks in {seconds:.0f} s: {_phases(results, timings)})")
    if args.save_to:
        record = {**versions(args.model, names, root), "precision": "bf16" if args.bf16 else "float32"}
        saved = save_scores(args.save_to, {**scores, **details(results)}, args.stage, record)
        print(f"scores merged into {saved} ({args.stage})")
    if args.json:
        print(json.dumps(scores))
    return 0
