"""Every command block of the README and the how-to pages runs as written, so an example that stops working fails.

Each ```bash block runs in a fresh folder holding the files the docs assume a user has (``my_recipe.yaml``,
``tickets.csv``, ``sample.csv``, ``tickets.yaml``, ``wiki.txt``, ``sentences.txt``, ``data`` as the data
directory) and the runs a block reads without training them (``runs/quickstart``, ``runs/simcse-s1`` …). The
shell of a new user: no ``$AUGCSE_DATA`` unless the block sets it. ``augcse`` commands run in-process through
``augcse.commands.main``; the model name ``sentence-transformers/all-MiniLM-L6-v2`` resolves to one tiny random
model built from its real config and tokenizer. What differs from the page is listed here and nowhere else:

- :data:`PLACEHOLDERS`: the words standing for the reader's own values;
- :data:`TINY`: the overrides appended to every ``augcse train`` (two steps of eight texts), and
  :data:`TINY_EVAL` where the command sets no evaluation of its own;
- :data:`SMALL_TASKS`: an ``augcse eval`` of a suite (``sts`` unless named) scores one small task of each kind
  in it, as ``--tasks``, in the tasks' ``--fast`` mode: the suites' full data takes minutes even for a tiny
  model on a shared CPU;
- :data:`NOT_RUN`: commands that need the network, a GPU or another program, each with its reason and a check;
- :data:`ADAPT_TINY`: an ``augcse adapt`` scores candidates after one and two steps of eight texts on 16 held-out
  texts (its ``--budgets`` replaced);
- :data:`CLUSTER_TINY`: an ``augcse cluster`` trains two steps of eight texts, checking its rule at each;
- ``augcse reproduce`` without ``--dry-run`` (a paper's table: GPU-hours and Hub models) runs its dry run;
- the study grid of TRAINING.md is written from its YAML block with :data:`GRID_TINY`'s replacements.
"""

from __future__ import annotations

import csv
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
import yaml

from conftest import build_tiny_bert

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["README.md", "docs/TRAINING.md", "docs/EVALUATION.md", "docs/DATA.md"]
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TINY = ["training.max_steps=2", "training.per_device_train_batch_size=8", "data.limit=16"]
TINY_EVAL = ["eval.before=STSBenchmark-dev-original", "eval.after=STSBenchmark-dev-original"]
SMALL_TASKS = {"sts": "STSBenchmark", "all": "STSBenchmark,TREC,Tweet,SNIPS,Geometry", "transfer": "TREC"}
ADAPT_TINY = ["--budgets", "1,2", "--held-out", "16", "--clusters", "2", "training.per_device_train_batch_size=8"]
CLUSTER_TINY = ["training.max_steps=2", "training.per_device_train_batch_size=8", "training.save_steps=1"]
GRID_TINY = {"seeds: [1, 2, 3]": "seeds: [1]", "budgets: [16, 64]": "budgets: [1]",
             "training.max_steps=256": "training.max_steps=2, training.per_device_train_batch_size=8"}
# runs the docs read as if a reader had trained them: name -> the train command's arguments (besides TINY)
GIVEN_RUNS = {
    "quickstart": ["--recipe", "quickstart"],
    "tickets": ["--recipe", "adapt-tweet", "data.corpus=tickets.csv", "data.column=body", "name=tickets",
                "eval.before=clustering:sample.csv", "eval.after=clustering:sample.csv"],
    "my_recipe": ["my_recipe.yaml", "keep_checkpoints=true"],  # then stopped after step 1: see interrupt()
    **{f"{group}-s{seed}": ["my_recipe.yaml", f"name={group}-s{seed}", f"seed={seed}",
                            f"training.learning_rate={rate}"]
       for group, rate, seeds in (("simcse", 3e-5, (1, 2)), ("sda", 1e-4, (1,)), ("a", 3e-5, (1, 2)), ("b", 1e-4, (1,)))
       for seed in seeds},
}


def placeholders(data: Path) -> dict[str, str]:
    """The words of the pages that stand for the reader's own values."""
    return {"DIR": str(data), "MODEL": MINILM, "NAME": "quickstart", "<name>": "quickstart"}


class NotRun:
    """A command the test does not run: why, and a check that the reason holds here."""

    def __init__(self, reason: str, holds: Callable[[list[str]], bool]) -> None:
        self.reason, self.holds = reason, holds


NOT_RUN: dict[tuple[str, ...], NotRun] = {
    ("python3", "-m", "venv"): NotRun("creates the environment the test runs in", lambda argv: True),
    (".",): NotRun("activates that environment", lambda argv: argv[1].endswith("bin/activate")),
    ("pip", "install"): NotRun("installs from the package index (network)", lambda argv: True),
    ("python", "-m", "pytest"): NotRun("the test suite itself", lambda argv: True),
    ("augcse", "download"): NotRun("fetches from the official sources (network); the test data directory stands "
                                   "for what it fetches", lambda argv: os.environ.get("HF_HUB_OFFLINE") == "1"),
    ("torchrun",): NotRun("several processes of a Hub model (bert-base); tests/test_distributed.py runs torchrun "
                          "with two CPU processes on the tiny model",
                          lambda argv: "torchrun" in (ROOT / "tests/test_distributed.py").read_text()),
    ("chromium",): NotRun("a browser taking screenshots, not augcse", lambda argv: "--screenshot" in " ".join(argv)),
}


def blocks(page: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", (ROOT / page).read_text(encoding="utf-8"), re.S)


def commands(block: str) -> list[list[str]]:
    """The block's commands as argument lists: continuation lines joined, comments dropped, ``&&`` split."""
    out = []
    for line in block.replace("\\\n", "").splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            out.append(words[:cut])
            words = words[cut + 1:]
    return out


def split_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """A command's leading ``NAME=value`` words (its environment) and the command."""
    at = next(i for i, word in enumerate(argv) if not re.fullmatch(r"[A-Z_]+=.*", word))
    return dict(word.partition("=")[::2] for word in argv[:at]), argv[at:]


def launched(argv: list[str]) -> list[str]:
    """The command a launcher runs: ``srun`` (SLURM) starts it as written, ``python -m augcse`` is ``augcse``."""
    argv = argv[1:] if argv[:1] == ["srun"] else argv
    return ["augcse", *argv[3:]] if argv[:3] == ["python", "-m", "augcse"] else argv


def not_run(argv: list[str]) -> NotRun | None:
    return next((rule for prefix, rule in NOT_RUN.items() if tuple(argv[:len(prefix)]) == prefix), None)


def trained_name(argv: list[str], folder: Path) -> str | None:
    """The run an ``augcse train`` or ``augcse adapt`` command writes (its ``name=``, else its recipe's name)."""
    if argv[:1] not in (["train"], ["adapt"]):
        return None
    names = [a.partition("=")[2] for a in argv if a.startswith("name=")]
    if names:
        return names[-1]
    if argv[0] == "adapt":
        return None
    if "--recipe" in argv:
        return argv[argv.index("--recipe") + 1]
    recipe = next(a for a in argv[1:] if a.endswith(".yaml"))
    return yaml.safe_load((folder / recipe).read_text())["name"]


def as_run(argv: list[str]) -> list[str]:
    """An ``augcse`` command as the test runs it: tiny budgets, a suite by one small task per kind, dry runs."""
    argv = list(argv)
    if argv[0] == "train":
        argv += TINY + [o for o in TINY_EVAL if not any(a.startswith(o.partition("=")[0]) for a in argv)]
    if argv[0] == "eval" and "--tasks" not in argv and "--list" not in argv:
        at = argv.index("--suite") if "--suite" in argv else len(argv)
        argv[at:at + 2] = ["--tasks", SMALL_TASKS[argv[at + 1] if at < len(argv) else "sts"]]
        argv += [] if "--fast" in argv else ["--fast"]
    if argv[0] == "reproduce" and "--dry-run" not in argv:
        argv.append("--dry-run")
    if argv[0] == "adapt":
        argv = [a for i, a in enumerate(argv) if a != "--budgets" and (i == 0 or argv[i - 1] != "--budgets")]
        argv += ADAPT_TINY
    if argv[0] == "cluster":
        argv += CLUSTER_TINY
    return argv


def write_user_files(folder: Path, data: Path, page_grid: str) -> None:
    """The files the docs assume a reader has."""
    lines = (data / "corpus/wiki1m_for_simcse.first11914.txt").read_text(encoding="utf-8").splitlines()
    (folder / "wiki.txt").write_text("\n".join(lines[:40]) + "\n", encoding="utf-8")
    (folder / "sentences.txt").write_text("\n".join(lines[40:45]) + "\n", encoding="utf-8")
    with open(data / "clustering/tweet.csv", newline="", encoding="utf-8") as f:
        tweets = list(csv.DictReader(f))
    labels = sorted({row["label"] for row in tweets}, key=lambda lab: -sum(r["label"] == lab for r in tweets))[:4]
    sample = [row for lab in labels for row in [r for r in tweets if r["label"] == lab][:8]]
    with open(folder / "sample.csv", "w", newline="", encoding="utf-8") as f:
        csv.DictWriter(f, ["text", "label"]).writeheader()
        csv.DictWriter(f, ["text", "label"]).writerows(sample)
    with open(folder / "tickets.csv", "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["id", "body"], *[[i, row["text"]] for i, row in enumerate(tweets[100:164])]])
    (folder / "my_recipe.yaml").write_text(yaml.safe_dump({
        "name": "my_recipe", "seed": 42,
        "model": {"backbone": MINILM, "pooler": "avg", "max_seq_length": 32},
        "data": {"corpus": "wiki.txt", "limit": 16}, "loss": {"name": "simcse"},
        "training": {"per_device_train_batch_size": 8, "max_steps": 2, "logging_steps": 1, "save_steps": 1},
        "eval": {"dev": None, "before": None, "after": "STSBenchmark-original"},
    }))
    for old, new in GRID_TINY.items():
        assert old in page_grid, f"TRAINING.md's grid no longer holds {old!r}: update GRID_TINY"
        page_grid = page_grid.replace(old, new)
    (folder / "tickets.yaml").write_text(page_grid, encoding="utf-8")
    (folder / "data").symlink_to(data.resolve())


@pytest.fixture(scope="module")
def tiny_minilm(minilm_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2's modules (mean pooling, Normalize) over the tiny BERT."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling

    backbone = build_tiny_bert(minilm_path, tmp_path_factory.mktemp("tiny-backbone"))
    transformer = Transformer(str(backbone), max_seq_length=32)
    out = tmp_path_factory.mktemp("tiny-minilm")
    SentenceTransformer(modules=[transformer, Pooling(transformer.get_embedding_dimension(), "mean"),
                                 Normalize()]).save(str(out))
    return out


@pytest.fixture()
def as_minilm(tiny_minilm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model name resolves to the tiny model, as the packaged copy would."""
    from augcse.assets import resolve

    monkeypatch.setitem(resolve.PACKAGED_MODELS, MINILM, resolve.PackagedModel("os", "-", lambda _: str(tiny_minilm)))


def in_folder(folder: Path, argv: list[str], env: dict[str, str]) -> int:
    """One ``augcse`` command in-process, in ``folder``, with ``env`` set."""
    from augcse.commands.main import main

    saved, cwd = dict(os.environ), os.getcwd()
    os.environ.update(env)
    os.chdir(folder)
    try:
        return main(argv)
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module")
def template(data_dir: Path, tiny_minilm: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reader's files and the runs the docs read without training them."""
    from augcse.assets import resolve

    grid = re.search(r"```yaml\n(# tickets\.yaml\n.*?)```", (ROOT / "docs/TRAINING.md").read_text(), re.S)
    folder = tmp_path_factory.mktemp("reader")
    write_user_files(folder, data_dir, grid.group(1))
    saved = resolve.PACKAGED_MODELS[MINILM]
    resolve.PACKAGED_MODELS[MINILM] = resolve.PackagedModel("os", "-", lambda _: str(tiny_minilm))
    try:
        for argv in GIVEN_RUNS.values():
            assert in_folder(folder, as_run(["train", *argv]), {"AUGCSE_DATA": ""}) == 0, argv
    finally:
        resolve.PACKAGED_MODELS[MINILM] = saved
    interrupt(folder / "runs/my_recipe")
    return folder


def interrupt(run: Path) -> None:
    """A run as a stop after its first checkpoint leaves it (what ``--resume`` continues)."""
    for name in ("summary.json", "final", "checkpoint-2"):
        shutil.rmtree(run / name) if (run / name).is_dir() else (run / name).unlink()


def block_cases() -> list:
    return [pytest.param(page, n, id=f"{page}#{n}") for page in PAGES for n in range(len(blocks(page)))]


@pytest.mark.parametrize(("page", "index"), block_cases())
def test_block_runs_as_written(page: str, index: int, template: Path, data_dir: Path, as_minilm: None,
                               tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = tmp_path / "reader"
    words = placeholders(data_dir)
    lines = [split_env([re.sub(r"\bDIR\b|\bMODEL\b|\bNAME\b|<name>", lambda m: words[m.group(0)], w)
                        for w in argv]) for argv in commands(blocks(page)[index])]
    trained = {trained_name(argv[1:], template) for _, argv in lines
               if argv[0] == "augcse" and not {"--resume", "--overwrite"} & set(argv)}
    shutil.copytree(template, folder, symlinks=True,
                    ignore=lambda d, names: [n for n in names if d.endswith("runs") and n in trained])
    exported = {"AUGCSE_DATA": ""}  # a new user's shell: no data directory unless the block sets one
    failed = []
    for prefix, argv in lines:
        env = {**exported, **prefix}
        argv = launched(argv)
        rule = not_run(argv)
        if rule is not None:
            assert rule.holds(argv), f"{shlex.join(argv)}: not run because it {rule.reason}, which no longer holds"
            continue
        if argv[0] == "export":
            exported.update(dict(a.partition("=")[::2] for a in argv[1:]))
            continue
        if argv[0] == "python" and argv[1] == "-c":
            done = subprocess.run([sys.executable, *argv[1:]], cwd=folder, env={**os.environ, **env},
                                  capture_output=True, text=True)
            code, said = done.returncode, done.stderr
        else:
            assert argv[0] == "augcse", f"{shlex.join(argv)}: neither run by the test nor listed in NOT_RUN"
            expanded = [m for a in argv[1:] for m in (sorted(glob.glob(a, root_dir=folder)) or [a]
                                                       if "*" in a else [a])]
            code = in_folder(folder, as_run(expanded), env)
            said = capsys.readouterr().err
        if code != 0:
            failed.append(f"{shlex.join(argv)} -> exit {code}: {said.strip().splitlines()[-1:]}")
    assert not failed, "\n".join(failed)


def test_every_rule_is_used() -> None:
    """A rule no command needs any more is removed, not left to excuse a later one."""
    argvs = [split_env(argv)[1] for page in PAGES for block in blocks(page) for argv in commands(block)]
    unused = [prefix for prefix in NOT_RUN if not any(tuple(a[:len(prefix)]) == prefix for a in argvs)]
    assert not unused
    assert any(a[:2] == ["augcse", "reproduce"] and "--dry-run" not in a for a in argvs)
    from augcse.evaluation.tasks import SUITES, load_builtin_tasks

    load_builtin_tasks()
    for suite, tasks in SMALL_TASKS.items():
        assert set(tasks.split(",")) <= set(SUITES[suite]), suite
