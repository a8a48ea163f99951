"""``augcse adapt`` checks every flag, override, file and size before anything loads: each wrong input is one line
naming the flag or the user's file, exit 2, no model loaded and no run folder left; a resumed run is held to the
texts it started with."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from augcse.commands.main import main
from augcse.training.adapt_inputs import SET_BY_ADAPT, SOURCE, TEXTS, TRAIN_TEXTS

ROWS = 300  # enough for the default 256 held out and one batch of 32


class ModelLoaded(BaseException):
    """Raised by a model constructor: no refusal may get that far (not an Exception: nothing catches it)."""


@pytest.fixture(autouse=True)
def no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    from sentence_transformers import SentenceTransformer

    def refuse(*args, **kwargs):
        raise ModelLoaded

    monkeypatch.setattr(SentenceTransformer, "__init__", refuse)


@pytest.fixture(scope="module")
def folder(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tweets.csv (300 texts), and labelled samples that are wrong in one way each."""
    with open(data_dir / "clustering/tweet.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:ROWS]
    out = tmp_path_factory.mktemp("inputs")
    with open(out / "tweets.csv", "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["text", "label"])
        writer.writeheader()
        writer.writerows({"text": r["text"], "label": r["label"]} for r in rows)
    (out / "no-rows.csv").write_text("text,label\n")
    (out / "one-label.csv").write_text("text,label\n" + "".join(f"text {i},same\n" for i in range(20)))
    (out / "empty.csv").write_text("")
    (out / "no-label.csv").write_text("text,tag\na,b\n")
    (out / "a-folder.csv").mkdir()
    return out


def refused(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """The one line of a refusal (exit 2)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("augcse adapt: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return err[0]


BAD_FLAGS = [
    (["--alphas", "0"], "--alphas 0: '0' is not a weight above 0 and at most 1"),
    (["--alphas", "0,0.5,1"], "--alphas 0,0.5,1: '0' is not a weight above 0"),
    (["--alphas", "1.5"], "'1.5' is not a weight above 0 and at most 1"),
    (["--alphas=-0.5"], "'-0.5' is not a weight above 0"),
    (["--alphas", "nan"], "'nan' is not a weight"),
    (["--alphas", "half"], "'half' is not a weight"),
    (["--alphas", ","], "--alphas: give at least one weight"),
    (["--alphas", "0.5,0.5"], "0.5 is given twice"),
    (["--budgets", ","], "--budgets: give at least one step count"),
    (["--budgets", ""], "--budgets: give at least one step count"),  # given empty: not the default
    (["--column", ""], "tweets.csv: no column ''"),
    (["--budgets", "0"], "'0' is not a positive whole number of steps"),
    (["--budgets", "2.5"], "'2.5' is not a positive whole number of steps"),
    (["--budgets", "4,4"], "4 is given twice"),
    (["--held-out", "8"], "--held-out 8: give a whole number of at least 16"),
    (["--held-out", "many"], "--held-out many: give a whole number"),
    (["--held-out", "290"], f"--held-out 290: tweets.csv has {ROWS} texts, which leaves 10 to train on, fewer than "
                            "one batch of 32"),
    (["--held-out", "1000"], "leaves 0 to train on"),
    (["--clusters", "1"], "--clusters 1: give a whole number of at least 2"),
    (["--clusters", "64", "--held-out", "64"], "--clusters 64: must be fewer than the 64 held-out texts"),
    (["--method", "simcsee"], "--method simcsee: unknown (did you mean 'simcse'"),
    (["--sample-task", "NOPE"], "--sample-task NOPE: unknown task"),
    (["--sample-task", "clustering"], "--sample-task clustering: names 8 tasks; name one registered task"),
    (["--sample-fast"], "--sample-fast needs --sample FILE or --sample-task NAME"),
    (["--choose-by-sample"], "--choose-by-sample needs --sample FILE or --sample-task NAME"),
    (["--sample", "one-label.csv", "--sample-task", "SNIPS"], "give either --sample FILE or --sample-task NAME"),
    (["--sample", "nowhere.csv"], "--sample nowhere.csv: does not exist"),
    (["--sample", "a-folder.csv"], "--sample a-folder.csv: is a folder, not a file"),
    (["--sample", "empty.csv"], "--sample empty.csv: is empty"),
    (["--sample", "no-rows.csv"], "--sample no-rows.csv: needs at least 2 distinct labels to score a clustering, "
                                  "found no rows"),
    (["--sample", "one-label.csv"], "--sample one-label.csv: needs at least 2 distinct labels to score a clustering, "
                                    "found only 'same'"),
    (["--sample", "no-label.csv"], "--sample no-label.csv: needs the columns text,label"),
    (["--column", "body"], "tweets.csv: no column 'body' (columns: text, label); name the text column with --column"),
    (["loss.nme=simcse"], "loss.nme"),
    *[([f"{key}=7"], f"override {key}=7: adapt sets {key} itself; {hint}") for key, hint in SET_BY_ADAPT.items()],
]


@pytest.mark.parametrize("extra, message", BAD_FLAGS, ids=[" ".join(a) for a, _ in BAD_FLAGS])
def test_every_wrong_flag_is_one_line_before_anything_loads(folder, monkeypatch, capsys, extra, message):
    monkeypatch.chdir(folder)
    line = refused(["adapt", "tweets.csv", *extra], capsys)
    assert message in line
    assert not (folder / "runs").exists()  # nothing written, not even an empty run folder


FOLDER = object()  # make a folder of that name
TEXTS_FILES = [  # (name, content, what the line says); every line names the user's file
    ("texts.xlsx", "x", "unknown kind of file .xlsx; give one of .csv, .tsv, .jsonl, .parquet, .txt"),
    ("missing.csv", None, "texts file missing.csv: does not exist"),
    ("folder.csv", FOLDER, "texts file folder.csv: is a folder, not a file"),
    ("/dev/null", None, "texts file /dev/null: is a character device, not a file"),
    ("empty.csv", "", "empty.csv: is empty; give a file whose first line names its columns"),
    ("few.txt", "one\ntwo\n", "--held-out 256: few.txt has 2 texts"),
    ("bad.jsonl", "{not json\n", "bad.jsonl: line 1 is not JSON"),
    ("latin.txt", b"caf\xe9\n", "latin.txt is not UTF-8 text"),
    ("latin.jsonl", b'{"text": "caf\xe9"}\n', "latin.jsonl is not UTF-8 text"),
    ("latin.csv", b"text\ncaf\xe9\n", "latin.csv: not UTF-8 text"),
    ("same.txt", "the same line again\n" * 400, "same.txt: only 1 distinct lines"),
]


MAKE = {bytes: Path.write_bytes, str: Path.write_text, type(None): lambda path, _: None,
        type(FOLDER): lambda path, _: path.mkdir()}


@pytest.mark.parametrize("name, content, message", TEXTS_FILES, ids=[t[0] for t in TEXTS_FILES])
def test_a_wrong_texts_file_is_named_as_the_user_gave_it(tmp_path, monkeypatch, capsys, name, content, message):
    monkeypatch.chdir(tmp_path)
    MAKE[type(content)](tmp_path / name, content)
    line = refused(["adapt", name], capsys)
    assert message in line and name in line
    assert "--encoding" not in line and TRAIN_TEXTS not in line and ".adapt-texts" not in line  # no flag adapt lacks,
    assert not (tmp_path / "runs").exists()                                                # no internal copy


def test_a_corpus_check_after_the_claim_names_the_users_file(folder, tmp_path, monkeypatch, capsys):
    """An override that leaves no text to train on is found when the copy is read, still before a model loads:
    the line names the user's file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tweets.csv").write_bytes((folder / "tweets.csv").read_bytes())
    line = refused(["adapt", "tweets.csv", "data.min_words=1000"], capsys)
    assert "tweets.csv (as copied to runs/adapt-tweets/texts/train.txt)" in line and "has no usable" in line
    assert str(tmp_path) not in line


@pytest.mark.parametrize("change, message", [
    ("file", "--resume: tweets.csv is not the texts file this run started with"),
    ("column", "--resume: this run split its texts with other settings (column body → text)"),
    ("held_out", "--resume: this run split its texts with other settings (held_out 64 → 256)"),
])
def test_a_resume_on_other_texts_is_refused(folder, tmp_path, monkeypatch, capsys, change, message):
    """The run folder's record of its texts (written when the run started) against the texts given now."""
    from augcse.training.adapt_inputs import file_record

    monkeypatch.chdir(tmp_path)
    (tmp_path / "tweets.csv").write_bytes((folder / "tweets.csv").read_bytes())
    source = {**file_record("tweets.csv"), "column": "text", "held_out": 256, "seed": 42}
    source.update({"file": {"sha256": "0" * 64}, "column": {"column": "body"}, "held_out": {"held_out": 64}}[change])
    (tmp_path / "runs" / "adapt-tweets" / TEXTS).mkdir(parents=True)
    (tmp_path / "runs" / "adapt-tweets" / TEXTS / SOURCE).write_text(json.dumps(source))
    assert message in refused(["adapt", "tweets.csv", "--resume"], capsys)
    assert sorted(p.name for p in (tmp_path / "runs" / "adapt-tweets").rglob("*")) == [SOURCE, TEXTS]  # untouched


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_a_txt_file_is_one_text_a_line_whatever_its_line_ends(tmp_path, end):
    """As the corpus reader splits it: a file of old Mac line ends (CR only) is not one long text."""
    from augcse.training.adapt import read_texts

    texts = [f"text number {i}" for i in range(40)]
    path = tmp_path / "texts.txt"
    path.write_bytes((end.join(texts) + end).encode())
    assert read_texts(path) == texts


def test_an_interrupt_outside_training_says_to_resume(folder, monkeypatch, capsys):
    """Ctrl-C while the candidates are scored (or before training starts): the same command again would be refused
    (the run folder holds a run), so the line says --resume."""
    import augcse.commands.adapt as command

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "check", interrupted)
    monkeypatch.chdir(folder)
    assert main(["adapt", "tweets.csv"]) == 130
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("augcse adapt: interrupted; run the same command again with --resume")
