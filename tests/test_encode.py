"""``augcse encode``: output row i is input line i; empty and blank-line inputs are refused before writing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from augcse.commands.main import main


def test_blank_lines_are_refused_by_number(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = tmp_path / "in.txt"
    text.write_text("one sentence.\n\nanother one.\n   \nlast.\n")
    assert main(["encode", "no-such-model", str(text), "--out", str(tmp_path / "e.npy")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2 blank line(s) (line 2, 4)" in err[0]
    assert not list(tmp_path.glob("*.npy"))


def test_empty_input_is_refused_before_anything_is_written(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    text = tmp_path / "empty.txt"
    text.write_text("")
    assert main(["encode", "no-such-model", str(text), "--out", str(tmp_path / "e.npy")]) == 2
    assert "is empty" in capsys.readouterr().err
    assert not list(tmp_path.glob("*.npy"))


def test_rows_match_lines_and_the_real_file_name_is_printed(tiny_model_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    text = tmp_path / "in.txt"
    text.write_text("a cat sits.\nthe dog runs.\na bird sings.\n")
    assert main(["encode", str(tiny_model_dir), str(text), "--out", str(tmp_path / "m")]) == 0
    written = tmp_path / "m.npy"
    assert f"to {written}" in capsys.readouterr().out
    assert np.load(written).shape == (3, 32)


def test_a_run_folder_is_pointed_to_its_final_model(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``augcse eval runs/NAME`` (not ``runs/NAME/final``) is one line naming the folder to give."""
    from augcse.commands.main import main

    run = tmp_path / "runs" / "quickstart"
    (run / "final").mkdir(parents=True)
    (run / "recipe.yaml").write_text("name: quickstart\n")
    assert main(["eval", str(run), "--tasks", "STSBenchmark"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"give {run / 'final'}" in err[0]
    assert main(["encode", str(tmp_path), str(run / "recipe.yaml"), "--out", str(tmp_path / "e.npy")]) == 2
    assert "holds no model" in capsys.readouterr().err and not (tmp_path / "e.npy").exists()


def test_another_pooler_keeps_the_published_token_maximum(minilm_path: Path, tiny_model_dir: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Rebuilding a sentence-transformers model with a named pooler keeps its own maximum (not the tokenizer's)
    and its modules after pooling (Normalize); dropping them is said."""
    import logging

    from augcse.commands.encode import load_model
    from augcse.models.poolers import build_sentence_transformer

    # all-MiniLM-L6-v2 is published with 256 tokens; its tokenizer says 512
    rebuilt = load_model(str(minilm_path), pooler="cls")
    assert rebuilt.max_seq_length == 256 and type(rebuilt[-1]).__name__ == "Normalize"
    with caplog.at_level(logging.INFO, logger="augcse.models.poolers"):
        build_sentence_transformer(str(minilm_path), "cls", max_seq_length=None, keep_after_pooling=False)
    assert "rebuilt with pooler cls without its Normalize after pooling" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="augcse.models.poolers"):
        plain = build_sentence_transformer(str(tiny_model_dir), "avg", max_seq_length=None)
    assert plain.max_seq_length == plain.tokenizer.model_max_length == 512  # a plain encoder: its tokenizer's
    assert "without its" not in caplog.text and len(plain) == 2  # nothing to drop, nothing added


def test_published_maximum_of_a_hub_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A Hub name: its sentence_bert_config.json when the repository has one, else None (any Hub answer)."""
    import huggingface_hub
    from huggingface_hub.utils import EntryNotFoundError

    from augcse.models.poolers import published_max_seq_length

    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda repo, name: str(tmp_path / name))
    assert published_max_seq_length("someone/st-model") == 128
    for error in (EntryNotFoundError("no such file"), OSError("offline"), ValueError("not a repo id")):
        def fail(repo, name, error=error):
            raise error
        monkeypatch.setattr(huggingface_hub, "hf_hub_download", fail)
        assert published_max_seq_length("bert-base-uncased") is None


def test_faults_of_the_input_and_the_output_are_one_line_before_the_model_loads(
        tmp_path: Path, read_only_dir: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    import augcse.commands.encode

    monkeypatch.setattr(augcse.commands.encode, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    text = tmp_path / "in.txt"
    text.write_text("one.\ntwo.\n")
    (tmp_path / "taken").mkdir()
    latin = tmp_path / "latin.txt"
    latin.write_bytes("plain line\nLe café\n".encode("latin-1"))
    cases = [
        ([str(tmp_path), "--out", str(tmp_path / "e.npy")], f"{tmp_path} is a folder; give a text file"),
        ([str(text), "--out", str(read_only_dir / "e.npy")],
         f"--out {read_only_dir}: cannot write there (Read-only file system); choose a writable folder"),
        ([str(text), "--out", str(tmp_path / "taken")],
         f"--out {tmp_path / 'taken'}: is a folder; give a file name, e.g. {tmp_path / 'taken' / 'embeddings.npy'}"),
        ([str(latin), "--out", str(tmp_path / "e.npy")],
         f"{latin} line 2: byte b'\\xe9' at column 7 is not utf-8; convert the file, or pass --encoding "
         "(e.g. --encoding latin-1)"),
        ([str(text), "--out", str(tmp_path / "e.npy"), "--encoding", "klingon"], "--encoding klingon: unknown encoding"),
    ]
    for args, message in cases:
        assert main(["encode", "some-model", *args]) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"augcse encode: error: {message}"] or (len(err) == 1 and message in err[0]), (args, err)
    assert not list(tmp_path.glob("*.npy")) and not (tmp_path / "taken.npy").exists()


def test_a_latin1_file_is_read_with_its_encoding(tiny_model_dir: Path, tmp_path: Path) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes("plain line\nLe café\n".encode("latin-1"))
    assert main(["encode", str(tiny_model_dir), str(latin), "--out", str(tmp_path / "e"), "--encoding",
                 "latin-1"]) == 0
    assert np.load(tmp_path / "e.npy").shape == (2, 32)


def truncated_copy(model_dir: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "truncated"
    shutil.copytree(model_dir, copy)
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100_000])
    return copy


def test_a_truncated_weights_file_is_one_line_for_encode_eval_and_train(tiny_model_dir: Path, tmp_path: Path,
                                                                         data_dir: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    from conftest import tiny_cls_recipe

    broken = truncated_copy(tiny_model_dir, tmp_path)
    text = tmp_path / "in.txt"
    text.write_text("one.\ntwo.\n")
    expected = (f"{broken}: a weights file could not be read (Error while deserializing header: incomplete "
                "metadata, file not fully covered); it is damaged or incomplete (an interrupted copy or download?): "
                "copy or download the model again")
    assert main(["encode", str(broken), str(text), "--out", str(tmp_path / "e.npy")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"augcse encode: error: {expected}"]
    assert main(["eval", str(broken), "--tasks", "STSBenchmark-dev-original", "--fast"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"augcse eval: error: {expected}"]
    recipe = tiny_cls_recipe(tmp_path, broken, data_dir, "broken", {"dev": None, "before": None, "after": None},
                             {"max_steps": 1})
    assert main(["train", str(recipe)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"augcse train: error: recipe key 'model.backbone': {expected}"]
    assert not (tmp_path / "runs" / "broken").exists()


def test_eval_save_to_is_checked_before_the_model_loads(tmp_path: Path, read_only_dir: Path,
                                                        capsys: pytest.CaptureFixture,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    import augcse.models.load

    monkeypatch.setattr(augcse.models.load, "load_model", lambda *a, **k: pytest.fail("the model was loaded"))
    run = tmp_path / "run"
    run.mkdir()
    (run / "eval.json").write_text("[1, 2")
    for folder, message in [
        (read_only_dir, f"--save-to {read_only_dir}: cannot write there (Read-only file system)"),
        (run, f"--save-to: {run / 'eval.json'} is not valid JSON"),
        (tmp_path / "missing", "is not a directory; give a training run folder"),
    ]:
        assert main(["eval", "some-model", "--tasks", "STSBenchmark-dev-original", "--save-to", str(folder)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err


def test_compare_out_naming_a_file_or_a_read_only_folder_is_one_line(tmp_path: Path, read_only_dir: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    assert main(["compare", str(tmp_path), "--out", str(taken)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"augcse compare: error: --out {taken}: is a file; --out names a folder for compare.md, compare.html and "
        f"the chart (e.g. --out {tmp_path / 'comparison'})"]
    assert taken.read_text() == "mine"
    assert main(["compare", str(tmp_path), "--out", str(read_only_dir / "cmp")]) == 2
    assert "cannot write there (Read-only file system)" in capsys.readouterr().err
