"""``augcse cluster``: every wrong input is one line and exit 2, before any model loads (a matrix)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from augcse.commands.cluster import SET_BY_COMMAND
from augcse.commands.main import main


class Loaded(Exception):
    """Raised if the command got as far as its work (a model load) for an input it should have refused."""


@pytest.fixture()
def texts(data_dir: Path, tmp_path: Path) -> Path:
    """200 StackOverflow titles with their labels (text,label)."""
    with open(data_dir / "clustering/stackoverflow.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:200]
    path = tmp_path / "so.csv"
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture()
def nothing_loads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import augcse.commands.cluster as command
    from sentence_transformers import SentenceTransformer

    def refuse(*args, **kwargs):
        raise Loaded

    monkeypatch.setattr(command, "begin_work", refuse)
    monkeypatch.setattr(SentenceTransformer, "__init__", refuse)
    monkeypatch.chdir(tmp_path)


def _exit_code(argv: list[str]) -> int:
    """The exit status, whether the command returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# extra arguments -> what the line must say
REFUSALS = {
    "K of 1": (["--clusters", "1"], "--clusters 1: must be at least 2"),
    "K of 0": (["--clusters", "0"], "--clusters 0: must be at least 2"),
    "K above the texts": (["--clusters", "201"], "--clusters 201: more clusters than the 200 non-empty texts"),
    "K not a number": (["--clusters", "ten"], "argument --clusters: invalid int value: 'ten'"),
    "K missing": ([], "the following arguments are required: --clusters"),
    "unknown option": (["--clusters", "4", "--cluster-count", "4"], "unrecognized arguments: --cluster-count"),
    "missing column": (["--clusters", "4", "--column", "body"], "no column 'body'"),
    "unknown override key": (["--clusters", "4", "training.learning_rat=1e-5"], "training.learning_rat"),
    "unknown loss parameter": (["--clusters", "4", "loss.params.temprature=0.5"], "loss.params.temprature"),
    "bad override value": (["--clusters", "4", "loss.params.temperature=-1"], "loss.params.temperature"),
    "override without a value": (["--clusters", "4", "training.max_steps"], "training.max_steps"),
    "the loss section by override": (["--clusters", "4", "loss.params={}"], "sets loss.params.clusters itself"),
    "the data section by override": (["--clusters", "4", "data={}"], "sets data.corpus itself"),
    "too few texts for a batch": (["--clusters", "4", "training.per_device_train_batch_size=256"],
                                  "200 non-empty texts; cluster needs at least 256, one training batch"),
    "resume and overwrite": (["--clusters", "4", "--resume", "--overwrite"], "contradict each other"),
    "resume of nothing": (["--clusters", "4", "--resume"], "holds no run yet"),
    "data dir missing": (["--clusters", "4", "--data-dir", "nowhere"], "--data-dir nowhere: does not exist"),
    "data dir a file": (["--clusters", "4", "--data-dir", "so.csv"], "is a file, not a folder"),
}
# every key the command sets, given as an override: refused, naming the key and what to give instead
REFUSALS.update({f"{key} by override": (["--clusters", "4", f"{key}=x"], f"sets {key} itself; {instead}")
                 for key, instead in SET_BY_COMMAND.items()})


@pytest.mark.parametrize("extra, message", REFUSALS.values(), ids=REFUSALS.keys())
def test_refusals_are_one_line_before_any_model_loads(texts, nothing_loads, capsys, extra, message):
    assert _exit_code(["cluster", str(texts), *extra]) == 2
    assert message in _one_line(capsys)
    assert not (texts.parent / "runs" / "cluster-so").exists()
    assert not (texts.parent / "runs" / ".cluster-texts").exists()  # nothing written beside the runs either


# a texts file's name and content -> what the line must say
FILES = {
    "missing": ("missing.csv", None, "texts file missing.csv: does not exist"),
    "a folder": ("folder.csv", "folder", "texts file folder.csv: is a folder, not a file"),
    "empty": ("empty.csv", "", "texts file empty.csv: is empty"),
    "empty text file": ("empty.txt", "", "texts file empty.txt: is empty"),
    "blank lines only": ("blank.txt", "\n \n\n", "0 non-empty texts; cluster needs at least 64"),
    "too few lines": ("few.txt", "\n".join(f"text {i}" for i in range(40)), "40 non-empty texts; cluster needs at "
                                                                             "least 64, one training batch"),
    "header only": ("header.csv", "text,label\n", "0 non-empty texts"),
    "unknown suffix": ("texts.xlsx", "x", "unknown kind of file .xlsx"),
    "not JSON": ("bad.jsonl", "{not json\n", "line 1 is not JSON"),
    "not UTF-8": ("latin.txt", b"caf\xe9\n", "not UTF-8"),
    "a device": ("/dev/null", None, "texts file /dev/null: is a character device, not a file"),
}


@pytest.mark.parametrize("name, content, message", FILES.values(), ids=FILES.keys())
def test_a_wrong_texts_file_is_named(tmp_path, nothing_loads, capsys, name, content, message):
    if content == "folder":
        (tmp_path / name).mkdir()
    elif isinstance(content, bytes):
        (tmp_path / name).write_bytes(content)
    elif content is not None:
        (tmp_path / name).write_text(content)
    assert main(["cluster", name, "--clusters", "4"]) == 2
    assert message in _one_line(capsys)


def test_a_finished_run_is_not_replaced_silently(texts, nothing_loads, capsys):
    """A folder holding a finished run of that name is refused before anything loads (--overwrite replaces it)."""
    run = texts.parent / "runs" / "cluster-so"
    run.mkdir(parents=True)
    (run / ".augcse-run").write_text("an augcse run folder\n")
    (run / "summary.json").write_text("{}")
    assert main(["cluster", str(texts), "--clusters", "4"]) == 2
    assert "holds a finished run" in _one_line(capsys)
    with pytest.raises(Loaded):  # --overwrite gets past every check, to the work
        main(["cluster", str(texts), "--clusters", "4", "--overwrite"])


def test_resume_of_a_finished_run_with_other_texts_is_refused(texts, nothing_loads, capsys):
    """--resume on a finished run redoes its outputs only for the texts (and model, K, seed) it was trained on."""
    run = texts.parent / "runs" / "cluster-so"
    run.mkdir(parents=True)
    (run / ".augcse-run").write_text("an augcse run folder\n")
    (run / "summary.json").write_text("{}")
    (run / "recipe.yaml").write_text("data:\n  corpus: /elsewhere/texts.txt\n")
    assert main(["cluster", str(texts), "--clusters", "4", "--resume"]) == 2
    assert "was trained on other texts, model, K or seed (/elsewhere/texts.txt)" in _one_line(capsys)
