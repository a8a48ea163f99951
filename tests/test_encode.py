"""``augcse encode``: output row i is input line i; empty and blank-line inputs are refused before writing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from augcse.cli import main


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
    from augcse.cli import main

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

    from augcse.encode import load_model
    from augcse.modules import build_sentence_transformer

    # all-MiniLM-L6-v2 is published with 256 tokens; its tokenizer says 512
    rebuilt = load_model(str(minilm_path), pooler="cls")
    assert rebuilt.max_seq_length == 256 and type(rebuilt[-1]).__name__ == "Normalize"
    with caplog.at_level(logging.INFO, logger="augcse.modules"):
        build_sentence_transformer(str(minilm_path), "cls", max_seq_length=None, keep_after_pooling=False)
    assert "rebuilt with pooler cls without its Normalize after pooling" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="augcse.modules"):
        plain = build_sentence_transformer(str(tiny_model_dir), "avg", max_seq_length=None)
    assert plain.max_seq_length == plain.tokenizer.model_max_length == 512  # a plain encoder: its tokenizer's
    assert "without its" not in caplog.text and len(plain) == 2  # nothing to drop, nothing added


def test_published_maximum_of_a_hub_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A Hub name: its sentence_bert_config.json when the repository has one, else None (any Hub answer)."""
    import huggingface_hub
    from huggingface_hub.utils import EntryNotFoundError

    from augcse.modules import published_max_seq_length

    (tmp_path / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", lambda repo, name: str(tmp_path / name))
    assert published_max_seq_length("someone/st-model") == 128
    for error in (EntryNotFoundError("no such file"), OSError("offline"), ValueError("not a repo id")):
        def fail(repo, name, error=error):
            raise error
        monkeypatch.setattr(huggingface_hub, "hf_hub_download", fail)
        assert published_max_seq_length("bert-base-uncased") is None
