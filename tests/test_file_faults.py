"""Files that cannot be read as they are, and an output cut short: one line naming the file, never a codec or
csv error that names none, a "no such file" for a file that is there, or a truncated result left behind."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

import numpy as np
import pytest

from augcse.commands.main import main

LATIN1 = "text,label\nun café,boisson\nune pomme,fruit\n".encode("latin-1")  # the é is byte 0xe9 on line 2
HUGE = 200_000  # characters in one cell: over the csv module's 128 KiB field limit


def _error(capsys: pytest.CaptureFixture) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_a_binary_recipe_file_is_named_as_not_utf8_text(tmp_path, capsys) -> None:
    recipe = tmp_path / "r.yaml"
    recipe.write_bytes(b"name: x\n\x89PNG\r\n\x1a\n\x00\x00")
    assert main(["train", str(recipe)]) == 2
    assert _error(capsys) == [f"augcse train: error: recipe {recipe} is not UTF-8 text (byte b'\\x89' on line 2); "
                              "it holds NUL bytes (2 in its first 18 bytes): a binary file, not text"]


def test_a_latin1_clustering_file_is_named_as_not_utf8_text(tmp_path, capsys) -> None:
    path = tmp_path / "latin.csv"
    path.write_bytes(LATIN1)
    assert main(["eval", str(tmp_path / "no-model"), "--tasks", f"clustering:{path}"]) == 2
    assert _error(capsys) == [f"augcse eval: error: clustering:{path} is not UTF-8 text (byte b'\\xe9' on line 2); "
                              "it is not UTF-8 text: convert it (e.g. iconv -f latin1 -t utf-8 for latin-1)"]


def test_a_latin1_intent_or_clustering_data_file_is_named(tmp_path) -> None:
    from augcse.evaluation.clustering import read_labelled_csv

    (tmp_path / "intent").mkdir()
    (tmp_path / "intent" / "test.csv").write_bytes(LATIN1)
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'intent' / 'test.csv'} is not UTF-8 text \(byte"):
        read_labelled_csv("intent/test.csv", tmp_path)


def test_a_clustering_cell_over_the_csv_limit_names_the_file_and_line(tmp_path, capsys) -> None:
    path = tmp_path / "huge.csv"
    path.write_text(f"text,label\na cat,pets\n{'x' * HUGE},pets\na car,cars\n")
    assert main(["eval", str(tmp_path / "no-model"), "--tasks", f"clustering:{path}"]) == 2
    err = _error(capsys)
    assert len(err) == 1 and err[0].startswith(f"augcse eval: error: clustering:{path} line 3: field larger than "
                                               "field limit"), err


def test_a_corpus_cell_over_the_csv_limit_is_skipped_and_counted(tmp_path) -> None:
    from augcse.text.corpus import read_corpus

    path = tmp_path / "corpus.csv"
    path.write_text(f"text\nthe first sentence\n\"{'word ' * (HUGE // 5)}\"\nthe last sentence\n")
    sentences, stats = read_corpus(path, max_chars=None)
    assert sentences == ["the first sentence", "the last sentence"]
    assert stats.read == 3 and dict(stats.skipped) == {"too_long": 1}


@pytest.fixture()
def unreadable_weights(tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the tiny model whose weights file its user may not read (root reads anything: the refusal is
    made by the open that checks it)."""
    import augcse.models.load

    copy = tmp_path / "model"
    shutil.copytree(tiny_model_dir, copy)
    weights = copy / "model.safetensors"

    def refusing_open(path, *args, **kwargs):
        if Path(path) == weights:
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(augcse.models.load, "open", refusing_open, raising=False)
    return weights


def test_an_unreadable_weights_file_is_named_as_unreadable(unreadable_weights, tmp_path, capsys) -> None:
    model = unreadable_weights.parent
    expected = (f"{unreadable_weights}: the weights cannot be read (Permission denied); make the file readable "
                "(chmod a+r) for the user running augcse, or copy the model")
    text = tmp_path / "in.txt"
    text.write_text("one.\n")
    assert main(["encode", str(model), str(text), "--out", str(tmp_path / "e.npy")]) == 2
    assert _error(capsys) == [f"augcse encode: error: {expected}"]
    assert not (tmp_path / "e.npy").exists()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a sentence of the corpus\n" * 20)
    assert main(["train", "--recipe", "quickstart", f"model.backbone={model}", f"data.corpus={corpus}",
                 f"output_dir={tmp_path / 'runs'}", "eval.dev=null", "eval.before=null", "eval.after=null"]) == 2
    assert _error(capsys) == [f"augcse train: error: recipe key 'model.backbone': {expected}"]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("error", "reason"), [
    (OSError(errno.ENOSPC, "No space left on device"), "No space left on device"),
    (OSError("38400 requested and 15328 written"), "a write was cut short: the disk is probably full"),  # numpy's
])
def test_encode_on_a_full_disk_keeps_the_previous_file_and_leaves_no_partial_one(error, reason, tiny_model_dir,
                                                                                 tmp_path, monkeypatch, capsys) -> None:
    text = tmp_path / "in.txt"
    text.write_text("one.\ntwo.\n")
    out = tmp_path / "out" / "e.npy"
    out.parent.mkdir()
    out.write_bytes(b"the embeddings of an earlier run")
    real_save = np.save

    def disk_full(file, array, *args, **kwargs):
        real_save(file, array[:1])  # part of it written, then the disk is full
        raise error

    monkeypatch.setattr(np, "save", disk_full)
    assert main(["encode", str(tiny_model_dir), str(text), "--out", str(out)]) == 1
    err = [line for line in _error(capsys) if not line.startswith("Loading weights")]  # the loader's progress bar
    assert len(err) == 1 and err[0].startswith(f"augcse encode: error: could not write {out} ({reason})"), err
    assert list(out.parent.iterdir()) == [out] and out.read_bytes() == b"the embeddings of an earlier run"
    monkeypatch.setattr(np, "save", real_save)
    assert main(["encode", str(tiny_model_dir), str(text), "--out", str(out)]) == 0
    assert np.load(out).shape == (2, 32) and list(out.parent.iterdir()) == [out]


def test_a_folder_named_as_the_corpus_is_called_a_folder(tmp_path, capsys) -> None:
    folder = tmp_path / "texts"
    folder.mkdir()
    assert main(["train", "--recipe", "quickstart", f"data.corpus={folder}", f"output_dir={tmp_path / 'runs'}"]) == 2
    assert _error(capsys) == [f"augcse train: error: recipe key 'data.corpus': {folder} is a folder; give the corpus "
                              "file in it (one sentence per line, or a CSV/JSON-lines/Parquet file)"]
